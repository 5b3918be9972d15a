package contention

import (
	"context"
	"errors"
	"time"

	"github.com/dbhost/dbhost/internal/engine"
	"github.com/dbhost/dbhost/internal/host"
)

// querySource is one instance's query counter over a connection kept open
// between samples.
type querySource struct {
	c counter
	// source names the counter; via how dbhost connected.
	source, via string
	// own is how many of dbhost's own statements each interval's count
	// holds (the reading query itself is counted once per interval).
	ownQueries int
	// own holds the PIDs/TIDs serving dbhost's connection: their switches
	// are dbhost's, not the workload's.
	own map[int]bool
	// err says why there is no counter.
	err error
	// note qualifies the source (pg_stat_statements present but unusable).
	note string
	// transactions: the counter counts transactions, each one or more
	// statements.
	transactions bool
}

// counter reads a cumulative query count.
type counter interface {
	read(ctx context.Context) (uint64, error)
	close()
}

func (q *querySource) read(ctx context.Context) (uint64, error) {
	if q.err != nil {
		return 0, q.err
	}
	return q.c.read(ctx)
}

func (q *querySource) close() {
	if q.c != nil {
		q.c.close()
	}
}

// openQueries connects to an instance and opens its profile's query
// counter.
func openQueries(ctx context.Context, h *host.Host, in *engine.Instance, opts engine.Options) *querySource {
	if opts.Timeout <= 0 {
		opts.Timeout = 3 * time.Second
	}
	q := &querySource{own: map[int]bool{}, ownQueries: 1}
	qc, err := in.Profile().OpenQueries(ctx, h, in, opts)
	if err != nil {
		q.err = err
		if errors.Is(err, host.ErrNotLive) {
			q.err = errors.New("query counts need the live system")
		}
		return q
	}
	q.c = profileCounter{qc}
	q.source, q.via, q.note, q.transactions = qc.Source, qc.Via, qc.Note, qc.Transactions
	for _, pid := range qc.Own {
		q.own[pid] = true
	}
	return q
}

// profileCounter reads an engine profile's counter.
type profileCounter struct{ qc *engine.QueryCounter }

func (p profileCounter) read(ctx context.Context) (uint64, error) { return p.qc.Read(ctx) }
func (p profileCounter) close()                                   { p.qc.Close() }
