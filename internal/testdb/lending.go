package testdb

import (
	"os"
	"os/exec"
	"testing"

	"github.com/dbhost/dbhost/internal/journal"
)

// HostJournal is a Journal whose test also runs dbhost commands that take
// the host lock themselves (`fix --apply`, `--rollback`, `--recover`,
// experiments). The test holds the lock from start to end and lends it to
// those commands: in this process through HostLock (cli.Env.HostLock), to
// a command it starts through Pass. The lock is never free in between, so
// no other suite's test changes the host under this one.
type HostJournal struct {
	*journal.Journal
	held *journal.Held
}

// JournalLending is Journal (skips under -short, needs root, takes the
// host lock, restores every change when the test ends, on Ctrl-C and after
// a hard kill) for a test that runs lock-taking dbhost commands; kinds as
// for Journal.
func JournalLending(t testing.TB, kinds ...journal.Kinds) *HostJournal {
	t.Helper()
	if testing.Short() {
		t.Skip("integration test: changes kernel settings")
	}
	Need(t, "root (changes kernel settings)", os.Geteuid() == 0)
	held, err := journal.Hold(journal.HostLock)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(held.Release) // registered first, so it runs last
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
	return &HostJournal{Journal: j, held: held}
}

// HostLock is the host lock for a command run in this process
// (cli.Env.HostLock): the test holds it already, so taking it is a no-op.
func (h *HostJournal) HostLock() (func(), error) { return func() {}, nil }

// Pass lends the lock to cmd, a dbhost process the test starts (see
// journal.PassEnv); call it before cmd starts.
func (h *HostJournal) Pass(cmd *exec.Cmd) { h.held.Pass(cmd) }
