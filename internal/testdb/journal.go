package testdb

import (
	"maps"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/dbhost/dbhost/internal/journal"
)

// journalDir keeps test journals out of t.TempDir (removed when the test
// ends) so that a run killed hard leaves its journal for the next run.
const journalDir = "/var/tmp"

// Journal prepares a test that changes kernel knobs: it skips under -short,
// needs root (see Need), takes the host lock exclusively (no recording or
// other test sees the changed knobs) and returns a journal through which
// the test makes its changes. Every change is restored when the test ends
// (a failed restore fails the test), on Ctrl-C or SIGTERM, and — when the
// run is killed hard — by the next run of the same test, which finds the
// journal it left in journalDir.
//
// kinds are the undos of what the test records besides kernel values
// written with Set (change.Kinds, a test's own).
//
// The restore runs as a cleanup, after the test function returns and
// before the cleanups registered earlier; servers started after Journal
// are stopped before it.
func Journal(t testing.TB, kinds ...journal.Kinds) *journal.Journal {
	t.Helper()
	if testing.Short() {
		t.Skip("integration test: changes kernel settings")
	}
	Need(t, "root (changes kernel settings)", os.Geteuid() == 0)
	unlock, err := journal.Lock(journal.HostLock)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(unlock) // registered first, so it runs last
	j, err := journal.Open(journalFile(t.Name()), mergeKinds(kinds))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(j.RestoreOnSignal())
	t.Cleanup(func() {
		if err := j.Restore(); err != nil {
			t.Errorf("restore: %v", err)
		}
	})
	return j
}

// journalFile names a test's journal after the test, so that each test
// recovers only what it left behind.
func journalFile(test string) string {
	name := strings.Map(func(r rune) rune {
		if r == '/' || r == os.PathSeparator || r == ' ' {
			return '_'
		}
		return r
	}, test)
	return filepath.Join(journalDir, "dbhost-test-"+name+".journal")
}

func mergeKinds(kinds []journal.Kinds) journal.Kinds {
	all := journal.Kinds{}
	for _, k := range kinds {
		maps.Copy(all, k)
	}
	return all
}
