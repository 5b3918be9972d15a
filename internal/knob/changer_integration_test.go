package knob_test

import (
	"path/filepath"
	"testing"

	"github.com/dbhost/dbhost/internal/change"
	"github.com/dbhost/dbhost/internal/knob"
	"github.com/dbhost/dbhost/internal/testdb"
)

// changeConfig is what an experiment's changer knows: the change layer's
// kinds, the restart bound to this process's own (knob.Kinds).
func changeConfig() change.Config { return change.Config{More: knob.Kinds()} }

// hostChanger is a changer for a test that changes the host: testdb.Journal
// takes the host lock (and is a safety net); the changer's journal is
// restored when the test ends, before the lock is let go.
func hostChanger(t *testing.T) *change.Changer {
	t.Helper()
	testdb.Journal(t, knob.Kinds())
	c, _ := tempChanger(t)
	return c
}

// tempChanger is a changer whose journal is in the test's directory:
// database knobs of a private server need no host lock.
func tempChanger(t *testing.T) (*change.Changer, string) {
	t.Helper()
	file := filepath.Join(t.TempDir(), "experiment.journal")
	c, err := change.Open(file, changeConfig())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := c.Restore(); err != nil {
			t.Errorf("restore: %v", err)
		}
	})
	return c, file
}

// onlyChangeKinds fails the test when the changer's journal holds a kind
// that is not one of the change layer's.
func onlyChangeKinds(t *testing.T, c *change.Changer, want ...string) {
	t.Helper()
	kinds := map[string]bool{change.KindKernel: true, change.KindSysfs: true, change.KindFile: true, change.KindSetting: true,
		change.KindRlimit: true, change.KindRestart: true, change.KindWorkDir: true}
	seen := map[string]bool{}
	for _, ch := range c.Journal().Changes() {
		if !kinds[ch.Kind] {
			t.Errorf("journal entry %q has kind %q, not a change kind", ch.What, ch.Kind)
		}
		seen[ch.Kind] = true
	}
	for _, k := range want {
		if !seen[k] {
			t.Errorf("no journal entry of kind %q", k)
		}
	}
}
