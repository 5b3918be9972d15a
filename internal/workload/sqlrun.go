package workload

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	gomysql "github.com/go-sql-driver/mysql"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/dbhost/dbhost/internal/engine"
	"github.com/dbhost/dbhost/internal/engine/mysql"
	"github.com/dbhost/dbhost/internal/engine/postgres"
)

// The SQL driver: readers and writers each loop over their section on their
// own connection; a pass's latency goes into the worker's histogram when it
// ends inside the measured window, and a clock samples the shared counters
// at every second for the series.

const connectTimeout = 10 * time.Second

// session is one connection of the SQL driver.
type session interface {
	// prepare parses and plans q now, so that a syntax error or a missing
	// table shows before anything is measured.
	prepare(ctx context.Context, q string) error
	// query runs q and reads every row it returns; it says how many.
	query(ctx context.Context, q string, args []any) (int64, error)
	close()
}

// connect opens one session to database db (MySQL: "" for none).
func connect(ctx context.Context, t Target, db string) (session, error) {
	if t.Engine == engine.MySQL {
		d, err := mysqlDB(t, db)
		if err != nil {
			return nil, err
		}
		c, err := d.Conn(ctx)
		if err != nil {
			d.Close()
			return nil, fmt.Errorf("connect to %s: %w", t, err)
		}
		return &mysqlSession{db: d, c: c, stmts: map[string]*sql.Stmt{}}, nil
	}
	c, err := postgres.ConnectEndpoint(ctx, t, db, connectTimeout)
	if err != nil {
		return nil, err
	}
	return &pgSession{c: c}, nil
}

func mysqlDB(t Target, db string) (*sql.DB, error) {
	cfg, err := mysql.EndpointConfig(t, db, connectTimeout)
	if err != nil {
		return nil, err
	}
	return mysql.OpenConfig(cfg)
}

// pgSession uses pgx directly: statements prepared under their own text
// are then used by Query, with one round trip per statement.
type pgSession struct{ c *pgx.Conn }

func (s *pgSession) prepare(ctx context.Context, q string) error {
	_, err := s.c.Prepare(ctx, q, q)
	return err
}

func (s *pgSession) query(ctx context.Context, q string, args []any) (int64, error) {
	rows, err := s.c.Query(ctx, q, args...)
	if err != nil {
		return 0, err
	}
	var n int64
	for rows.Next() {
		n++
	}
	rows.Close()
	return n, rows.Err()
}

func (s *pgSession) close() { s.c.Close(context.Background()) }

// mysqlSession holds one connection of a database/sql pool and its server
// side prepared statements.
type mysqlSession struct {
	db    *sql.DB
	c     *sql.Conn
	stmts map[string]*sql.Stmt
}

func (s *mysqlSession) prepare(ctx context.Context, q string) error {
	st, err := s.c.PrepareContext(ctx, q)
	var me *gomysql.MySQLError
	if errors.As(err, &me) && me.Number == 1295 {
		return nil // not preparable (some transaction control): run as text
	}
	if err != nil {
		return err
	}
	s.stmts[q] = st
	return nil
}

func (s *mysqlSession) query(ctx context.Context, q string, args []any) (int64, error) {
	var rows *sql.Rows
	var err error
	if st := s.stmts[q]; st != nil {
		rows, err = st.QueryContext(ctx, args...)
	} else {
		rows, err = s.c.QueryContext(ctx, q, args...)
	}
	if err != nil {
		return 0, err
	}
	var n int64
	for rows.Next() {
		n++
	}
	err = rows.Err()
	if cerr := rows.Close(); err == nil {
		err = cerr
	}
	return n, err
}

func (s *mysqlSession) close() {
	for _, st := range s.stmts {
		st.Close()
	}
	s.c.Close()
	s.db.Close()
}

// ensureDatabase creates t's database when it is missing. When dbhost
// cannot log in itself (peer authentication as another system user), it
// leaves the check to the tool, which names a missing database clearly.
func ensureDatabase(ctx context.Context, t Target) error {
	ctx, cancel := context.WithTimeout(ctx, 2*connectTimeout)
	defer cancel()
	name := t.Database()
	var exists, create string
	var err error
	var s session
	if t.Engine == engine.MySQL {
		s, err = connect(ctx, t, "")
		exists = "SELECT 1 FROM information_schema.SCHEMATA WHERE SCHEMA_NAME = ?"
		create = "CREATE DATABASE `" + strings.ReplaceAll(name, "`", "``") + "`"
	} else {
		s, err = connect(ctx, t, "postgres")
		exists = "SELECT 1 FROM pg_database WHERE datname = $1"
		create = `CREATE DATABASE "` + strings.ReplaceAll(name, `"`, `""`) + `"`
	}
	if err != nil {
		if t.OSUser != "" && ctx.Err() == nil {
			return nil
		}
		return err
	}
	defer s.close()
	n, err := s.query(ctx, exists, []any{name})
	if err != nil || n > 0 {
		return err
	}
	if _, err := s.query(ctx, create, nil); err != nil {
		return fmt.Errorf("create database %s: %w", name, err)
	}
	return nil
}

func loadScript(t Target, s Spec) (*Script, error) {
	b, err := os.ReadFile(s.Script)
	if err != nil {
		return nil, err
	}
	sc, err := ParseScript(string(b), t.Engine)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", s.Script, err)
	}
	return sc, nil
}

func sqlPrepare(ctx context.Context, t Target, s Spec) error {
	sc, err := loadScript(t, s)
	if err != nil {
		return err
	}
	c, err := connect(ctx, t, t.Database())
	if err != nil {
		return err
	}
	defer c.close()
	for i, q := range sc.Setup {
		if _, err := c.query(ctx, q, nil); err != nil {
			return fmt.Errorf("setup statement %d (%s): %w", i+1, abbrev(q), err)
		}
	}
	return nil
}

func abbrev(q string) string {
	q = strings.Join(strings.Fields(q), " ")
	if len(q) > 60 {
		return q[:57] + "..."
	}
	return q
}

// transient reports whether err is a failure the workload goes on from (as
// pgbench and sysbench do): serialization failures and deadlocks, lock
// wait timeouts and changed records on MySQL. Anything else — a syntax
// error, a missing table, a lost connection — stops the run.
func transient(err error) bool {
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		return pe.Code == "40001" || pe.Code == "40P01"
	}
	var me *gomysql.MySQLError
	if errors.As(err, &me) {
		return me.Number == 1213 || me.Number == 1205 || me.Number == 1020
	}
	return false
}

// group is one thread group's shared counters.
type group struct {
	name    string
	stmts   []Statement
	workers int
	ops     atomic.Int64 // passes completed, warm-up included (for the clock)
	errs    atomic.Int64
}

// worker is one connection's loop and its measured-window tallies.
type worker struct {
	g       *group
	sess    session
	params  []Param
	rng     *rand.Rand
	hist    Histogram
	ops     int64 // in the measured window
	errs    int64
	queries int64
}

func sqlRun(ctx context.Context, t Target, s Spec) (*Result, error) {
	sc, err := loadScript(t, s)
	if err != nil {
		return nil, err
	}
	groups := []*group{{name: "reader", stmts: sc.Reader, workers: s.Readers}, {name: "writer", stmts: sc.Writer, workers: s.Writers}}
	for _, g := range groups {
		if g.workers > 0 && len(g.stmts) == 0 {
			return nil, fmt.Errorf("%s: %d %ss but no -- %s section", s.Script, g.workers, g.name, g.name)
		}
	}
	runCtx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)

	var workers []*worker
	defer func() {
		for _, w := range workers {
			if w.sess != nil {
				w.sess.close()
			}
		}
	}()
	seed := uint64(time.Now().UnixNano())
	for _, g := range groups {
		for range g.workers {
			w := &worker{g: g, params: sc.Params, rng: rand.New(rand.NewPCG(seed, uint64(len(workers))))}
			workers = append(workers, w)
			if err := w.open(runCtx, t); err != nil {
				return nil, err
			}
		}
	}

	start := time.Now()
	mStart := start.Add(s.Warmup)
	mEnd := mStart.Add(s.Duration)
	var wg sync.WaitGroup
	for _, w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := w.loop(runCtx, mStart, mEnd); err != nil {
				cancel(err)
			}
		}()
	}
	seconds, warm := clock(runCtx, groups, start, mStart, mEnd, s.Progress)
	wg.Wait()
	if err := context.Cause(runCtx); err != nil {
		return nil, err
	}

	r := &Result{Sampling: 1, Duration: mEnd.Sub(mStart), PerSecond: seconds, WarmupOpsPerSec: warm,
		Command: []string{"sql", s.Script, fmt.Sprintf("readers=%d", s.Readers), fmt.Sprintf("writers=%d", s.Writers)}}
	var all Histogram
	for _, g := range groups {
		if g.workers == 0 {
			continue
		}
		var h Histogram
		gr := Group{Name: g.name, Workers: g.workers}
		for _, w := range workers {
			if w.g == g {
				h.Merge(&w.hist)
				gr.Ops += w.ops
				gr.Errors += w.errs
				r.Queries += w.queries
			}
		}
		gr.OpsPerSec = float64(gr.Ops) / r.Duration.Seconds()
		gr.Latency = h.Latency()
		all.Merge(&h)
		r.Ops += gr.Ops
		r.Errors += gr.Errors
		r.Groups = append(r.Groups, gr)
	}
	r.OpsPerSec = float64(r.Ops) / r.Duration.Seconds()
	r.Latency = all.Latency()
	r.Output = summaryText(r)
	return r, nil
}

// open connects and prepares the group's statements: a syntax error or a
// missing table shows here, before any measurement.
func (w *worker) open(ctx context.Context, t Target) error {
	s, err := connect(ctx, t, t.Database())
	if err != nil {
		return err
	}
	w.sess = s
	for _, st := range w.g.stmts {
		if err := s.prepare(ctx, st.SQL); err != nil {
			return fmt.Errorf("%s statement %q: %w", w.g.name, abbrev(st.SQL), err)
		}
	}
	return nil
}

// loop runs passes until the measured window ends. Only a pass that ends
// inside the window is measured.
func (w *worker) loop(ctx context.Context, mStart, mEnd time.Time) error {
	vals := make(map[string]int64, len(w.params))
	args := make([]any, 0, 8)
	for ctx.Err() == nil && time.Now().Before(mEnd) {
		for _, p := range w.params {
			vals[p.Name] = p.Low + w.rng.Int64N(p.High-p.Low+1)
		}
		begin := time.Now()
		err := w.pass(ctx, vals, args)
		end := time.Now()
		in := !end.Before(mStart) && !end.After(mEnd)
		switch {
		case err == nil:
			w.g.ops.Add(1)
			if in {
				w.hist.Record(end.Sub(begin))
				w.ops++
				w.queries += int64(len(w.g.stmts))
			}
		case ctx.Err() != nil:
			return nil
		case transient(err):
			w.g.errs.Add(1)
			if in {
				w.errs++
			}
			// Leave the failed transaction; harmless outside one.
			w.sess.query(ctx, "ROLLBACK", nil)
		default:
			return fmt.Errorf("%s: %w", w.g.name, err)
		}
	}
	return nil
}

// pass runs the group's statements once.
func (w *worker) pass(ctx context.Context, vals map[string]int64, args []any) error {
	for _, st := range w.g.stmts {
		args = args[:0]
		for _, a := range st.Args {
			args = append(args, vals[a])
		}
		if _, err := w.sess.query(ctx, st.SQL, args); err != nil {
			return fmt.Errorf("%q: %w", abbrev(st.SQL), err)
		}
	}
	return nil
}

// clock samples the groups' counters at each second of the warm-up, at the
// start of measurement and at each second after it, and returns the
// measured series and the warm-up's throughput. It returns
// when the window ends or ctx is done.
func clock(ctx context.Context, groups []*group, start, mStart, mEnd time.Time, progress func(Second)) (seconds []Second, warm float64) {
	var marks []time.Time
	for t := start.Add(time.Second); t.Before(mStart); t = t.Add(time.Second) {
		marks = append(marks, t)
	}
	if mStart.After(start) {
		marks = append(marks, mStart)
	}
	for t := mStart.Add(time.Second); t.Before(mEnd); t = t.Add(time.Second) {
		marks = append(marks, t)
	}
	marks = append(marks, mEnd)
	total := func() (ops, errs int64) {
		for _, g := range groups {
			ops += g.ops.Load()
			errs += g.errs.Load()
		}
		return
	}
	prevT, prevOps, prevErrs := start, int64(0), int64(0)
	timer := time.NewTimer(0)
	defer timer.Stop()
	<-timer.C
	for _, m := range marks {
		timer.Reset(time.Until(m))
		select {
		case <-ctx.Done():
			return seconds, warm
		case <-timer.C:
		}
		ops, errs := total()
		span := m.Sub(prevT).Seconds()
		sec := Second{Ops: float64(ops-prevOps) / span, Errors: float64(errs-prevErrs) / span}
		if !m.After(mStart) {
			sec.At, sec.Warmup = m.Sub(start), true
			if m.Equal(mStart) {
				warm = float64(ops) / mStart.Sub(start).Seconds()
			}
		} else {
			sec.At = m.Sub(mStart)
			seconds = append(seconds, sec)
		}
		if progress != nil {
			progress(sec)
		}
		prevT, prevOps, prevErrs = m, ops, errs
	}
	return seconds, warm
}

// summaryText is the SQL driver's Output: what a tool would have printed.
func summaryText(r *Result) string {
	var b strings.Builder
	for _, s := range r.PerSecond {
		fmt.Fprintf(&b, "[ %5.1fs ] ops/s: %.1f err/s: %.1f\n", s.At.Seconds(), s.Ops, s.Errors)
	}
	for _, g := range r.Groups {
		fmt.Fprintf(&b, "%s x%d: %d ops (%.1f/s), %d errors, latency p50 %s p95 %s p99 %s max %s\n",
			g.Name, g.Workers, g.Ops, g.OpsPerSec, g.Errors, g.Latency.P50, g.Latency.P95, g.Latency.P99, g.Latency.Max)
	}
	return b.String()
}
