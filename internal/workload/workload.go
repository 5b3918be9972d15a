// Package workload drives database benchmarks for `dbhost experiment`: the
// tools the published measurements used (pgbench, sysbench's OLTP scripts)
// and a built-in driver that replays a SQL script with separate reader and
// writer thread groups, the way a production mix is reproduced.
//
// Every driver yields the same Result: per-second throughput, the total over
// the measured window only (a warm-up runs first and is not counted), and
// latency percentiles computed from per-transaction data, never from an
// average. A run whose output does not prove that work was done — zero
// transactions, an aborted client, a FATAL message, a non-zero exit, a
// missing summary — is an error, never a Result; transient failures the
// tools themselves tolerate (serialization failures, deadlocks) are counted
// in Errors and never as successes.
//
// Use:
//
//	t := workload.Target{Engine: engine.Postgres, Host: "/var/run/postgresql", Port: 5432, User: "postgres", DB: "bench"}
//	s := workload.Spec{Kind: workload.PGBench, Clients: 8, Duration: time.Minute, Warmup: 10 * time.Second, Scale: 50}
//	if err := workload.Prepare(ctx, t, s); err != nil { ... }  // pgbench -i -s 50
//	r, err := workload.Run(ctx, t, s)                           // r.OpsPerSec, r.Latency.P99, r.PerSecond
//
// Warm-up: pgbench and sysbench run the same workload for Spec.Warmup as a
// separate, unmeasured process immediately before the measured one (its
// output is validated too); sysbench 1.0 has no --warmup-time, and its
// --report-checkpoints reset is not used so that both tools behave alike. The
// SQL driver keeps its connections and starts counting when the warm-up ends.
//
// Secrets: Target.Password reaches the tools only through the environment
// (PGPASSWORD, MYSQL_PWD), never a command line; it is scrubbed from every
// Output and error text and never printed by Target's String method.
package workload

import (
	"context"
	"errors"
	"fmt"
	"os/user"
	"path/filepath"
	"runtime"
	"strings"
	"time"

	"github.com/dbhost/dbhost/internal/engine"
	"github.com/dbhost/dbhost/internal/textio"
)

// Kind names a workload driver.
type Kind string

// The drivers.
const (
	// PGBench runs pgbench: its built-in TPC-B-like script, -S select-only,
	// or a custom script file. PostgreSQL only.
	PGBench Kind = "pgbench"
	// Sysbench runs a sysbench OLTP Lua script (oltp_read_write,
	// oltp_read_only, oltp_write_only, ...) with --db-driver=mysql or pgsql.
	Sysbench Kind = "sysbench"
	// SQL runs a SQL script (see ParseScript for its format) with dbhost's
	// own driver: reader and writer goroutine groups, each worker on its
	// own connection.
	SQL Kind = "sql"
)

// DefaultDB is the database used when Target.DB is empty. Prepare creates
// it when it is missing, so benchmark tables never land in an
// application's database by accident.
const DefaultDB = engine.DefaultDB

// Target says where the database is and how to log in: PostgreSQL or MySQL
// (MariaDB, Percona). It must have been located (engine.Locate): the
// workload connects only to a server discovered on this host.
type Target = engine.Endpoint

// Spec describes one workload. Zero fields take the defaults in parentheses.
type Spec struct {
	Kind Kind `json:"kind"`
	// WorkDir is where the tool's private temporary directory (logs,
	// copied scripts) is made; empty: the system's temporary directory.
	// A caller that may be killed gives a directory it cleans up itself.
	WorkDir string `json:"-"`
	// Duration is the measured time (whole seconds for pgbench and
	// sysbench; rounded up). Required.
	Duration time.Duration `json:"duration"`
	// Warmup runs the same workload, unmeasured, before Duration (0: none).
	Warmup time.Duration `json:"warmup,omitempty"`

	// Clients is pgbench -c, sysbench --threads (1). The SQL driver uses
	// Readers and Writers instead.
	Clients int `json:"clients,omitempty"`
	// Jobs is pgbench -j, the client threads (min(Clients, CPUs)).
	Jobs int `json:"jobs,omitempty"`

	// Scale is pgbench -i -s (1): 100 000 accounts, about 16 MB, per unit.
	// With a custom script it is also passed to the run as :scale.
	Scale int `json:"scale,omitempty"`
	// SelectOnly runs pgbench's built-in select-only script (-S) instead
	// of the TPC-B-like one.
	SelectOnly bool `json:"select_only,omitempty"`

	// Tables and TableSize size sysbench's sbtest tables (1, 10000).
	Tables    int `json:"tables,omitempty"`
	TableSize int `json:"table_size,omitempty"`

	// Script is, for pgbench, a custom script file run instead of the
	// built-in ones (-f); for sysbench, the test: oltp_read_write,
	// oltp_read_only, oltp_write_only (or another script in sysbench's
	// directory, or a .lua file path); for SQL, the script file (required).
	Script string `json:"script,omitempty"`

	// Readers and Writers are the SQL driver's thread groups: each worker
	// runs the script's reader or writer section in a loop on its own
	// connection.
	Readers int `json:"readers,omitempty"`
	Writers int `json:"writers,omitempty"`

	// Args are extra arguments for pgbench or sysbench (e.g. "-M",
	// "prepared"), placed before the connection arguments. They appear in
	// Result.Command: never put a secret here.
	Args []string `json:"args,omitempty"`
	// Bin is the tool's path (default: the newest PostgreSQL's pgbench,
	// else pgbench or sysbench from PATH).
	Bin string `json:"bin,omitempty"`
	// LogSampling is pgbench's --sampling-rate for its per-transaction
	// log, the source of the percentiles (0: automatic — every transaction,
	// or, when a warm-up showed that would log more than a million, the
	// fraction that logs about a million).
	LogSampling float64 `json:"log_sampling,omitempty"`

	// Progress, if set, is called for each interval as the run goes,
	// warm-up intervals included (Second.Warmup). It must return quickly.
	Progress func(Second) `json:"-"`
}

// Result is a validated measurement. Everything but WarmupOpsPerSec
// describes the measured window only.
type Result struct {
	Kind    Kind     `json:"kind"`
	Command []string `json:"command,omitempty"` // the measured tool invocation (no secrets)
	// Duration is the measured time the rate is based on.
	Duration time.Duration `json:"duration"`
	// Ops counts successful transactions: pgbench script runs, sysbench
	// events, SQL driver passes over a reader or writer section.
	Ops int64 `json:"ops"`
	// OpsPerSec is Ops over Duration (pgbench: its own tps figure, which
	// excludes connection time).
	OpsPerSec float64 `json:"ops_per_sec"`
	// Queries counts statements where the driver knows them (sysbench,
	// SQL), else 0.
	Queries int64 `json:"queries,omitempty"`
	// Errors counts failed transactions the workload tolerated and went on
	// from: pgbench serialization/deadlock failures and skipped
	// transactions, sysbench ignored errors and reconnects, SQL driver
	// serialization failures, deadlocks and lock wait timeouts. None of
	// them is in Ops.
	Errors int64 `json:"errors"`
	// Latency is the per-transaction latency of successful transactions:
	// pgbench's per-transaction log (Sampling of them), sysbench's
	// histogram (its buckets are ~1.7 % wide), the SQL driver's own
	// histogram (within 0.4 %).
	Latency   Latency  `json:"latency"`
	PerSecond []Second `json:"per_second"`
	// Groups has one entry per thread group of the SQL driver (reader,
	// writer); empty for the other drivers.
	Groups []Group `json:"groups,omitempty"`
	// Sampling is the fraction of transactions whose latency was logged
	// (pgbench --sampling-rate), 1 otherwise.
	Sampling float64 `json:"sampling"`
	// WarmupOpsPerSec is the unmeasured warm-up's throughput (0 without
	// one).
	WarmupOpsPerSec float64 `json:"warmup_ops_per_sec,omitempty"`
	// Output is the end of the measured run's output, for the report.
	Output string `json:"output,omitempty"`
}

// Latency summarises per-transaction latencies.
type Latency struct {
	Count int64         `json:"count"` // latencies the figures are based on
	Min   time.Duration `json:"min"`
	Mean  time.Duration `json:"mean"`
	P50   time.Duration `json:"p50"`
	P95   time.Duration `json:"p95"`
	P99   time.Duration `json:"p99"`
	Max   time.Duration `json:"max"`
}

// Second is one progress interval: usually a second (pgbench's can be a
// little longer on a busy machine). The tools do not report the end of a
// run that falls short of a full interval; that last interval is derived
// from their summaries, so the series always adds up to the totals.
type Second struct {
	// At is the end of the interval, from the start of the measured run
	// (or of the warm-up, when Warmup is set).
	At     time.Duration `json:"at"`
	Ops    float64       `json:"ops"`    // successful transactions per second
	Errors float64       `json:"errors"` // failed transactions per second
	Warmup bool          `json:"warmup,omitempty"`
}

// Group is one SQL driver thread group's share of a Result.
type Group struct {
	Name      string  `json:"name"` // "reader" or "writer"
	Workers   int     `json:"workers"`
	Ops       int64   `json:"ops"`
	OpsPerSec float64 `json:"ops_per_sec"`
	Errors    int64   `json:"errors"`
	Latency   Latency `json:"latency"`
}

// Prepare creates what the workload needs: the database when missing, then
// pgbench -i -s Scale, sysbench cleanup + prepare, or the SQL script's
// setup section. It replaces earlier benchmark tables of the same names.
func Prepare(ctx context.Context, t Target, s Spec) error {
	s, err := s.normalize(t)
	if err != nil {
		return err
	}
	if err := t.Check(ctx, connectTimeout); err != nil {
		return err
	}
	if err := ensureDatabase(ctx, t); err != nil {
		return err
	}
	switch s.Kind {
	case PGBench:
		return pgbenchPrepare(ctx, t, s)
	case Sysbench:
		return sysbenchPrepare(ctx, t, s)
	default:
		return sqlPrepare(ctx, t, s)
	}
}

// Run runs the warm-up, then the measured workload, and returns the
// validated result. Cancelling ctx stops the run (the tools' whole process
// groups are killed) and returns an error.
func Run(ctx context.Context, t Target, s Spec) (*Result, error) {
	s, err := s.normalize(t)
	if err != nil {
		return nil, err
	}
	// pgbench and sysbench connect by themselves: the server that listens
	// where they go is checked just before they start.
	if err := t.Check(ctx, connectTimeout); err != nil {
		return nil, err
	}
	var r *Result
	switch s.Kind {
	case PGBench:
		r, err = pgbenchRun(ctx, t, s)
	case Sysbench:
		r, err = sysbenchRun(ctx, t, s)
	default:
		r, err = sqlRun(ctx, t, s)
	}
	if err != nil {
		if ctx.Err() != nil && !errors.Is(err, ctx.Err()) {
			err = fmt.Errorf("%w (%v)", ctx.Err(), err)
		}
		return nil, scrubErr(err, t.Password)
	}
	r.Kind = s.Kind
	r.Output = scrub(r.Output, t.Password)
	if err := r.check(); err != nil {
		return nil, fmt.Errorf("%s: %w", s.Kind, err)
	}
	return r, nil
}

// check is the validation every driver's result passes.
func (r *Result) check() error {
	switch {
	case r.Ops <= 0:
		return errors.New("no successful transaction in the measured window")
	case !(r.OpsPerSec > 0) || r.Duration <= 0:
		return fmt.Errorf("no throughput (%.3g/s over %s)", r.OpsPerSec, r.Duration)
	case len(r.PerSecond) == 0:
		return errors.New("no per-second progress was reported")
	case r.Latency.Count == 0:
		return errors.New("no latency was recorded")
	case !(r.Latency.P50 <= r.Latency.P95 && r.Latency.P95 <= r.Latency.P99):
		return fmt.Errorf("latency percentiles out of order (p50 %s, p95 %s, p99 %s)", r.Latency.P50, r.Latency.P95, r.Latency.P99)
	}
	return nil
}

var sysbenchTest = textio.LazyRegexp(`^[a-z][a-z0-9_]*$`)

// normalize checks s against t and fills the defaults.
func (s Spec) normalize(t Target) (Spec, error) {
	if t.Engine != engine.Postgres && t.Engine != engine.MySQL {
		return s, fmt.Errorf("workload: engine %q not supported (postgres or mysql)", t.Engine)
	}
	if t.User == "" {
		return s, errors.New("workload: no database user")
	}
	if t.OSUser != "" && s.Kind != SQL {
		if _, err := user.Lookup(t.OSUser); err != nil {
			return s, fmt.Errorf("workload: system user %q: %w", t.OSUser, err)
		}
	}
	if s.Duration < time.Second {
		return s, fmt.Errorf("workload: duration %s too short (at least 1s)", s.Duration)
	}
	if s.Warmup < 0 {
		return s, fmt.Errorf("workload: negative warm-up %s", s.Warmup)
	}
	s.Clients = max(s.Clients, 1)
	if s.Jobs <= 0 {
		s.Jobs = min(s.Clients, runtime.NumCPU())
	}
	if s.Jobs > s.Clients {
		return s, fmt.Errorf("workload: %d jobs for %d clients (jobs must not exceed clients)", s.Jobs, s.Clients)
	}
	s.Scale = max(s.Scale, 1)
	s.Tables = max(s.Tables, 1)
	if s.TableSize <= 0 {
		s.TableSize = 10000
	}
	if s.LogSampling < 0 || s.LogSampling > 1 {
		return s, fmt.Errorf("workload: log sampling %g not in (0, 1]", s.LogSampling)
	}
	switch s.Kind {
	case PGBench:
		if t.Engine != engine.Postgres {
			return s, errors.New("workload: pgbench needs PostgreSQL")
		}
		if s.Script != "" && s.SelectOnly {
			return s, errors.New("workload: pgbench: a custom script and select-only exclude each other")
		}
	case Sysbench:
		switch {
		case s.Script == "":
			return s, errors.New("workload: sysbench needs a test (oltp_read_write, oltp_read_only, oltp_write_only or a .lua path)")
		case filepath.IsAbs(s.Script) && strings.HasSuffix(s.Script, ".lua"):
		case !sysbenchTest.MatchString(s.Script):
			return s, fmt.Errorf("workload: sysbench test %q: not a test name or an absolute .lua path", s.Script)
		}
	case SQL:
		if s.Script == "" {
			return s, errors.New("workload: the SQL driver needs a script file")
		}
		if s.Readers < 0 || s.Writers < 0 || s.Readers+s.Writers == 0 {
			return s, fmt.Errorf("workload: the SQL driver needs readers and/or writers (have %d, %d)", s.Readers, s.Writers)
		}
	default:
		return s, fmt.Errorf("workload: unknown kind %q (pgbench, sysbench, sql)", s.Kind)
	}
	return s, nil
}

// wholeSeconds rounds d up to whole seconds, as the tools take them.
func wholeSeconds(d time.Duration) int {
	return int((d + time.Second - 1) / time.Second)
}

// scrub removes the password from text shown to users. Very short
// passwords are left alone: replacing them would garble the text while
// protecting little.
func scrub(s, password string) string {
	if len(password) < 4 {
		return s
	}
	return strings.ReplaceAll(s, password, "********")
}

func scrubErr(err error, password string) error {
	if err == nil || len(password) < 4 || !strings.Contains(err.Error(), password) {
		return err
	}
	return errors.New(scrub(err.Error(), password))
}
