package experiment

import (
	"context"
	"fmt"
	"io"
	"maps"

	"github.com/dbhost/dbhost/internal/change"
	"github.com/dbhost/dbhost/internal/host"
	"github.com/dbhost/dbhost/internal/knob"
	"github.com/dbhost/dbhost/internal/pgcluster"
	"github.com/dbhost/dbhost/internal/results"
)

// Recovered says what Recover did.
type Recovered struct {
	// Undone lists the journaled changes that were restored, newest first.
	Undone []string `json:"undone"`
	// Interrupted lists the experiments marked interrupted.
	Interrupted []string `json:"interrupted"`
}

// Recover restores what an experiment killed hard (kill -9, power loss)
// left behind: every journaled kernel and database setting goes back, a
// throwaway cluster is stopped and removed, and experiments still marked
// running in the store are marked interrupted. It refuses while an
// experiment is running. store may be nil.
func Recover(ctx context.Context, journalFile string, store *results.Store, log io.Writer) (*Recovered, error) {
	if journalFile == "" {
		journalFile = DefaultJournal
	}
	unlock, err := lockRun(journalFile)
	if err != nil {
		return nil, err
	}
	defer unlock()
	changes, err := pendingChanges(journalFile)
	if err != nil {
		return nil, err
	}
	rec := &Recovered{}
	for i := len(changes) - 1; i >= 0; i-- {
		c := changes[i]
		what := c.What
		if c.Kind == "" {
			what = fmt.Sprintf("%s back to %q (was set to %q)", c.Path, c.Old, c.New)
		}
		rec.Undone = append(rec.Undone, what)
		if log != nil {
			fmt.Fprintln(log, "undo:", what)
		}
	}
	if err := change.Recover(journalFile, changeConfig(nil)); err != nil {
		return rec, fmt.Errorf("recover %s: %w (what could not be undone stays in the journal; fix the cause and run recover again)", journalFile, err)
	}
	if store != nil {
		ids, err := store.MarkInterrupted(ctx, "killed; restored by 'dbhost experiment recover'")
		if err != nil {
			return rec, err
		}
		rec.Interrupted = ids
	}
	return rec, nil
}

// changeConfig is how an experiment's journal is opened and recovered: the
// change kinds on h (nil: the live system), with the knob applier's and the
// throwaway cluster's own.
func changeConfig(h *host.Host) change.Config {
	more := knob.Kinds()
	maps.Copy(more, pgcluster.Kinds())
	return change.Config{Host: h, More: more}
}
