package knob

import (
	"context"
	"encoding/json"
	"maps"
	"slices"
	"sync"

	"github.com/dbhost/dbhost/internal/change"
	"github.com/dbhost/dbhost/internal/engine"
	"github.com/dbhost/dbhost/internal/engine/postgres"
	"github.com/dbhost/dbhost/internal/journal"
)

// Kinds binds the change layer's restart to this process's own restart
// where an Applier registered one (Target.Restart); whoever opens or
// recovers an experiment's journal passes them in (change.Config.More).
// Everything else an Applier changes is a change kind.
func Kinds() journal.Kinds {
	base := change.Kinds(change.Config{})[change.KindRestart]
	return journal.Kinds{
		change.KindRestart: func(d json.RawMessage) error { return undoRestart(base, d) },
	}
}

// inprocRestart is how this process restarts a server whose restart the
// journal holds: the caller's restart (Target.Restart keeps track of the
// process it starts), run only while the server waits for one — a second
// undo, after a recovery in another process restarted the server, must
// not restart it again.
type inprocRestart struct {
	restart func(context.Context) error
	pending func(context.Context) (bool, error)
}

// restarts are the in-process restarts, keyed by the journaled restarter
// (journaledRestart.key); they live only in memory.
var restarts = struct {
	sync.Mutex
	m map[string]inprocRestart
}{m: map[string]inprocRestart{}}

// journaledRestart is the data of a change.KindRestart entry.
type journaledRestart struct {
	Unit string   `json:"unit,omitempty"`
	Argv []string `json:"argv,omitempty"`
	User string   `json:"user,omitempty"`
}

func (r journaledRestart) key() string {
	b, _ := json.Marshal(r)
	return string(b)
}

func registerRestart(r journaledRestart, ir inprocRestart) {
	restarts.Lock()
	defer restarts.Unlock()
	restarts.m[r.key()] = ir
}

// undoRestart restarts with this process's restart when one is registered
// for the entry, else as the change layer does.
func undoRestart(base journal.Undo, data json.RawMessage) error {
	var r journaledRestart
	if err := json.Unmarshal(data, &r); err != nil {
		return err
	}
	restarts.Lock()
	ir, ok := restarts.m[r.key()]
	restarts.Unlock()
	if !ok {
		return base(data)
	}
	ctx, cancel := context.WithTimeout(context.Background(), change.RestartLimit)
	defer cancel()
	if pending, err := ir.pending(ctx); err == nil && !pending {
		return nil
	}
	return ir.restart(ctx)
}

// restarter is how a new process (a recovery) restarts the target's
// server, and that as the journal keeps it: its systemd unit
// (Target.RestartUnit), else its control command as its owner
// (Target.RestartArgv).
func (a *Applier) restarter() (change.Restarter, journaledRestart) {
	if a.t.RestartUnit != "" {
		return change.Unit{Name: a.t.RestartUnit, Allowed: true}, journaledRestart{Unit: a.t.RestartUnit}
	}
	return change.UserCommand{Argv: a.t.RestartArgv, User: a.t.RestartUser}, journaledRestart{Argv: a.t.RestartArgv, User: a.t.RestartUser}
}

// pendingRestart says the target's server waits for a restart to use a
// parameter this Applier changed (PostgreSQL's pending_restart; other
// parameters may wait for one that dbhost did not ask for); other engines
// do not say, so they always restart.
func (a *Applier) pendingRestart(ctx context.Context) (bool, error) {
	if a.t.Engine != engine.Postgres || a.t.PG == nil {
		return true, nil
	}
	a.mu.Lock()
	params := slices.Sorted(maps.Keys(a.restartParams))
	a.mu.Unlock()
	// Located afresh: the server may have been restarted by another
	// process, whose old postmaster this one may not have reaped yet.
	ep, err := engine.Locate(ctx, a.h, *a.t.PG)
	if err != nil {
		return true, err
	}
	c, err := postgres.ConnectEndpoint(ctx, ep, "postgres", pgConnectTimeout)
	if err != nil {
		return true, err
	}
	defer c.Close(context.Background())
	var pending bool
	err = c.QueryRow(ctx, "SELECT coalesce(bool_or(pending_restart), false) FROM pg_settings WHERE lower(name) = ANY($1)", params).Scan(&pending)
	return pending, err
}
