package cli

import (
	"sync"
	"testing"

	"github.com/dbhost/dbhost/internal/journal"
	"github.com/dbhost/dbhost/internal/testdb"
)

// lentLocks are the host locks tests lend to the commands they run in
// this process (runCLI), by test.
var lentLocks sync.Map // *testing.T -> func() (func(), error)

// lendingJournal is testdb.JournalLending whose hold runCLI lends to the
// commands the test runs: they take the host lock without waiting on the
// test, and no other test changes the host in between.
func lendingJournal(t *testing.T, kinds ...journal.Kinds) *testdb.HostJournal {
	t.Helper()
	hj := testdb.JournalLending(t, kinds...)
	lentLocks.Store(t, hj.HostLock)
	t.Cleanup(func() { lentLocks.Delete(t) })
	return hj
}

// lent gives env the host lock t lends, if it lends one.
func lent(t *testing.T, env Env) Env {
	if f, ok := lentLocks.Load(t); ok {
		env.HostLock = f.(func() (func(), error))
	}
	return env
}
