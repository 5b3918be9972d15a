package testdb

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"

	"golang.org/x/sys/unix"

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

// HostLockHolder reports whether process pid holds the host lock, as
// /proc/locks says: a test that hands the lock over to a dbhost process
// knows when the process has it (other tests may have it first).
func HostLockHolder(pid int) (bool, error) {
	var st unix.Stat_t
	if err := unix.Stat(filepath.Join(journal.LockDir, journal.HostLock+".lock"), &st); err != nil {
		return false, err
	}
	b, err := os.ReadFile("/proc/locks")
	if err != nil {
		return false, err
	}
	// "1: FLOCK  ADVISORY  WRITE 2112 00:19:1234 0 EOF" (device in hex,
	// inode); a waiter's line has "->" after the number.
	file := fmt.Sprintf("%02x:%02x:%d", unix.Major(st.Dev), unix.Minor(st.Dev), st.Ino)
	for _, l := range strings.Split(string(b), "\n") {
		f := strings.Fields(l)
		if len(f) >= 6 && f[1] == "FLOCK" && f[3] == "WRITE" && f[4] == strconv.Itoa(pid) && f[5] == file {
			return true, nil
		}
	}
	return false, nil
}
