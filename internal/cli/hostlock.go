package cli

import (
	"context"
	"fmt"

	"github.com/dbhost/dbhost/internal/journal"
)

// lockHost takes the host lock for a command that changes the host (fix
// --apply, --rollback, --recover, experiment and experiment recover), so
// that no two of them interleave. While another holds it, it says so once
// on stderr and waits; Ctrl-C ends the wait with nothing changed. A test
// that holds the lock lends it through env.HostLock.
func lockHost(ctx context.Context, env Env, cmd string) (func(), error) {
	if env.HostLock != nil {
		return env.HostLock()
	}
	return journal.LockContext(ctx, journal.HostLock, func() {
		fmt.Fprintf(env.Stderr, "%s: waiting for the host lock: another dbhost command (fix --apply, --rollback, --recover or an experiment) is changing this host\n", cmd)
	})
}
