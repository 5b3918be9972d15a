package testdb

import (
	"os"
	"sync"
	"testing"

	"github.com/dbhost/dbhost/internal/journal"
)

// HostJournal is a Journal whose test also runs dbhost commands that take
// the host lock themselves (`fix --apply`, `--rollback`, `--recover`):
// Unlocked hands the lock over to such a command and takes it back. While
// it is handed over, another test may take the lock; every test restores
// what it changed before it releases the lock, so the host is as this test
// left it when the lock comes back.
type HostJournal struct {
	*journal.Journal
	t       testing.TB
	mu      sync.Mutex
	release func() // nil while handed over
}

// JournalHandover is Journal (skips under -short, needs root, takes the
// host lock, restores every change when the test ends, on Ctrl-C and after
// a hard kill) for a test that runs lock-taking dbhost commands; kinds as
// for Journal.
func JournalHandover(t testing.TB, kinds ...journal.Kinds) *HostJournal {
	t.Helper()
	if testing.Short() {
		t.Skip("integration test: changes kernel settings")
	}
	Need(t, "root (changes kernel settings)", os.Geteuid() == 0)
	h := &HostJournal{t: t}
	if err := h.lock(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { // registered first, so it runs last
		h.mu.Lock()
		defer h.mu.Unlock()
		if h.release != nil {
			h.release()
			h.release = nil
		}
	})
	j, err := journal.Open(journalFile(t.Name()), mergeKinds(kinds))
	if err != nil {
		t.Fatal(err)
	}
	h.Journal = j
	t.Cleanup(j.RestoreOnSignal())
	t.Cleanup(func() {
		if err := j.Restore(); err != nil {
			t.Errorf("restore: %v", err)
		}
	})
	return h
}

func (h *HostJournal) lock() error {
	release, err := journal.Lock(journal.HostLock)
	if err != nil {
		return err
	}
	h.mu.Lock()
	h.release = release
	h.mu.Unlock()
	return nil
}

// Unlocked runs f without the host lock and takes the lock back after it,
// also when f fails the test.
func (h *HostJournal) Unlocked(f func()) {
	h.t.Helper()
	h.mu.Lock()
	if h.release != nil {
		h.release()
		h.release = nil
	}
	h.mu.Unlock()
	defer func() {
		if err := h.lock(); err != nil {
			h.t.Errorf("taking the host lock back: %v", err)
		}
	}()
	f()
}
