package knob_test

import (
	"path/filepath"
	"testing"

	"github.com/dbhost/dbhost/internal/change"
	"github.com/dbhost/dbhost/internal/knob"
	"github.com/dbhost/dbhost/internal/testdb"
)

// changeConfig is what an experiment's changer knows: the change layer's
// kinds and knob's.
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
