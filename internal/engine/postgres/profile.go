package postgres

import (
	"context"
	"errors"
	"fmt"
	"path"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/dbhost/dbhost/internal/conftext"
	"github.com/dbhost/dbhost/internal/engine"
	"github.com/dbhost/dbhost/internal/host"
)

func (detector) Name() string              { return "postgres" }
func (detector) Aliases() []string         { return []string{"postgresql", "pg"} }
func (detector) ServiceAccounts() []string { return []string{"postgres"} }
func (detector) RootRisk() string          { return "" }
func (detector) BindAdvice(*engine.Instance) string {
	return "Set listen_addresses = 'localhost,<private address>' in postgresql.conf and restart PostgreSQL."
}

// Units: Debian runs cluster 15/main as postgresql@15-main.service, PGDG
// RPMs ship postgresql-15.service.
func (detector) Units(in *engine.Instance) []string {
	var out []string
	if in.Postgres != nil && in.Postgres.Cluster != "" {
		out = append(out, "postgresql@"+strings.Replace(in.Postgres.Cluster, "/", "-", 1)+".service")
	}
	if m := in.Major(); m > 0 {
		out = append(out, "postgresql-"+strconv.Itoa(m)+".service")
	}
	return append(out, "postgresql.service")
}

// UnitStarts: a Debian cluster's templated unit, or a unit naming the data
// directory.
func (detector) UnitStarts(in *engine.Instance, unit string, mentions func(string) bool) (bool, bool) {
	if in.Postgres != nil && in.Postgres.Cluster != "" && strings.HasPrefix(unit, "postgresql@") {
		return true, true
	}
	return mentions(in.DataDir), true
}

// Backlog: PostgreSQL 16 listens with 2 x max_connections, earlier
// versions with min(2 x MaxBackends, 10000).
func (detector) Backlog(in *engine.Instance) engine.Need {
	mc, ok := in.Uint("max_connections", 100)
	ev := []engine.Input{in.UintInput("max_connections", ok, mc)}
	if in.Major() >= 16 {
		return engine.Need{N: 2 * mc, Why: fmt.Sprintf("PostgreSQL %s listens with 2 x max_connections = %d", in.Version, 2*mc), Inputs: ev}
	}
	av, ok1 := in.Uint("autovacuum_max_workers", 3)
	wp, ok2 := in.Uint("max_worker_processes", 8)
	ws, ok3 := in.Uint("max_wal_senders", 10)
	mb := mc + av + 1 + wp + ws
	if in.Major() > 0 && in.Major() < 12 {
		mb -= ws // max_wal_senders joined MaxBackends in PostgreSQL 12
	}
	ev = append(ev, in.UintInput("autovacuum_max_workers", ok1, av), in.UintInput("max_worker_processes", ok2, wp), in.UintInput("max_wal_senders", ok3, ws))
	b := min(2*mb, 10000)
	return engine.Need{N: b, Why: fmt.Sprintf("PostgreSQL %s listens with min(2 x MaxBackends, 10000) = %d (MaxBackends = max_connections + autovacuum_max_workers + 1 + max_worker_processes + max_wal_senders = %d)", in.Version, b, mb), Inputs: ev}
}

// Descriptors: at start the postmaster probes how many descriptors it can
// open, up to max_files_per_process (which counts those already open and
// the 10 it keeps for system() and dlopen), and every backend inherits
// that count: the soft limit per process should be max_files_per_process.
// Each connection and auxiliary process may hold that many at once.
func (d detector) Descriptors(in *engine.Instance) engine.Need {
	mf, ok := in.Uint("max_files_per_process", 1000)
	procs := d.Tasks(in)
	return engine.Need{N: mf, Processes: procs.N,
		Why:     fmt.Sprintf("PostgreSQL keeps at most %s files open per process (including the 10 it reserves)", engine.UintTerm("max_files_per_process", ok, mf)),
		Inputs:  []engine.Input{in.UintInput("max_files_per_process", ok, mf)},
		Short:   "Below it PostgreSQL does not fail: it lowers what it keeps open to fit and closes and reopens files more often.",
		AtStart: "PostgreSQL probes the limit once, when the postmaster starts (set_max_safe_fds), and its backends inherit the result: a raised limit is used after the next restart"}
}

func (detector) Tasks(in *engine.Instance) engine.Need {
	mc, ok := in.Uint("max_connections", 100)
	av, _ := in.Uint("autovacuum_max_workers", 3)
	wp, _ := in.Uint("max_worker_processes", 8)
	ws, _ := in.Uint("max_wal_senders", 10)
	n := mc + av + wp + ws + 10
	return engine.Need{N: n, Why: fmt.Sprintf("one process per connection plus auxiliary processes: max_connections + autovacuum_max_workers + max_worker_processes + max_wal_senders + about 10 = %d", n), Inputs: []engine.Input{in.UintInput("max_connections", ok, mc)}}
}

func (detector) KeepaliveOverride(in *engine.Instance) string {
	if v := in.SettingValue("tcp_keepalives_idle"); v != "" && v != "0" {
		return fmt.Sprintf("%s sets tcp_keepalives_idle %s on its client sockets", in.Name(), v)
	}
	return ""
}

func (detector) ReadAhead(*engine.Instance) engine.ReadAhead {
	return engine.ReadAhead{KB: engine.DefaultReadAheadKB, Why: "PostgreSQL reads 8 KB pages, mostly at random for index lookups; read-ahead above the kernel's 128 KB default fills the page cache with neighbouring data nobody asked for, evicting hot pages and spending device bandwidth"}
}

func (detector) PageSize(in *engine.Instance) (int64, string) {
	if v, ok := in.Setting("block_size"); ok {
		if n, err := strconv.ParseInt(v.Value, 10, 64); err == nil && n > 0 {
			return n, "block_size"
		}
	}
	return 8192, "PostgreSQL's 8 KB page"
}

// MainCache proposes a quarter of the limit for shared_buffers.
func (detector) MainCache(in *engine.Instance, limit uint64) engine.Cache {
	b, ok := Bytes(in, "shared_buffers")
	return engine.Cache{Bytes: b, Known: ok, Key: "shared_buffers", Proposal: fmt.Sprintf("%dMB", limit/4>>20)}
}

func (detector) THP(*engine.Instance, string) engine.THPAdvice { return engine.THPOffAdvice }

// Where query counts come from.
const (
	StatementsSource = "pg_stat_statements: sum(calls) (statements, all databases)"
	XactSource       = "pg_stat_database: sum(xact_commit + xact_rollback) (transactions)"
	plainXact        = `SELECT sum(xact_commit + xact_rollback) FROM pg_stat_database`
)

// OpenQueries counts statements with pg_stat_statements when the extension
// is installed in the database dbhost connects to and loaded, else
// transactions from pg_stat_database.
func (detector) OpenQueries(ctx context.Context, h *host.Host, in *engine.Instance, opts engine.Options) (*engine.QueryCounter, error) {
	conn, via, err := Connect(ctx, h, in, opts)
	if err != nil {
		return nil, err
	}
	q := &engine.QueryCounter{Via: via, Own: []int{int(conn.PID())}}
	// A session's counts reach pg_stat_database when it flushes them: at
	// most once a second while busy, after 10 s once idle (PostgreSQL 15+).
	// dbhost's own reading is flushed at once, so each interval holds
	// exactly one of them.
	xact := plainXact
	if v, _ := engine.VersionParts(conn.ParameterStatus("server_version")); len(v) > 0 && v[0] >= 15 {
		xact = `SELECT pg_stat_force_next_flush(); ` + xact
	}
	query := xact
	q.Source, q.Transactions = XactSource, true
	cctx, cancel := context.WithTimeout(ctx, opts.Timeout)
	defer cancel()
	n, err := pgNumber(cctx, conn, `SELECT count(*) FROM pg_extension WHERE extname = 'pg_stat_statements'`)
	if err == nil && n > 0 {
		const stmts = `SELECT sum(calls) FROM pg_stat_statements`
		if _, err := pgNumber(cctx, conn, stmts); err == nil {
			query, q.Source, q.Transactions = stmts, StatementsSource, false
		} else {
			q.Note = "pg_stat_statements is installed but cannot be read (" + err.Error() + "); counting transactions"
		}
	}
	_, err = pgNumber(cctx, conn, query)
	if err != nil && query == xact && xact != plainXact {
		// pg_stat_force_next_flush refused (a role without the right):
		// dbhost's own reading then lands in this interval or a later one.
		query = plainXact
		q.Note = "dbhost's own reading may be counted in a later interval (pg_stat_force_next_flush: " + err.Error() + ")"
		_, err = pgNumber(cctx, conn, query)
	}
	if err != nil {
		conn.Close(context.Background())
		return nil, fmt.Errorf("%s: %w", q.Source, err)
	}
	q.Read = func(ctx context.Context) (uint64, error) {
		ctx, cancel := context.WithTimeout(ctx, opts.Timeout)
		defer cancel()
		return pgNumber(ctx, conn, query)
	}
	q.Close = func() { conn.Close(context.Background()) }
	return q, nil
}

// pgNumber runs a query (one simple-protocol message, one implicit
// transaction) whose last statement returns one non-negative number (a
// sum, NULL for none).
func pgNumber(ctx context.Context, conn *pgconn.PgConn, query string) (uint64, error) {
	res, err := conn.Exec(ctx, query).ReadAll()
	if err == nil {
		for _, r := range res {
			if r.Err != nil {
				err = r.Err
				break
			}
		}
	}
	if err == nil && len(res) == 0 {
		err = errors.New("no answer")
	}
	if err != nil {
		var pe *pgconn.PgError
		if errors.As(err, &pe) {
			return 0, errors.New(pe.Message)
		}
		return 0, err
	}
	last := res[len(res)-1]
	if len(last.Rows) != 1 || len(last.Rows[0]) != 1 {
		return 0, errors.New("unexpected answer")
	}
	v := last.Rows[0][0]
	if v == nil {
		return 0, nil
	}
	// sum() of bigint is numeric: "123" (never a fraction here).
	n, err := strconv.ParseUint(strings.TrimSuffix(string(v), ".0"), 10, 64)
	if err != nil {
		return 0, fmt.Errorf("not a count: %q", v)
	}
	return n, nil
}

func (detector) MainConfig(in *engine.Instance) string {
	return engine.ConfigNamed(in, "postgresql.conf")
}

// ConfigSnippet: a file in the included directory (conf.d), else next to
// postgresql.conf with the include_if_exists line to add; settings apply
// on reload unless one needs a restart.
func (detector) ConfigSnippet(s engine.Snippet) (string, string) {
	var b strings.Builder
	dir := s.Dir
	if dir == "" && s.File != "" {
		dir = path.Dir(s.File)
		fmt.Fprintf(&b, "# Add at the end of %s: include_if_exists = '%s.conf'\n", conftext.Comment(s.File), s.Name)
	}
	if s.Restart {
		b.WriteString("# Some settings need a server restart; others apply with: SELECT pg_reload_conf();\n")
	} else {
		b.WriteString("# Apply with: SELECT pg_reload_conf();\n")
	}
	s.WriteEntries(&b, "\n", confLine)
	return path.Join(dir, s.Name+".conf"), b.String()
}

func (detector) DefaultPort() int { return 5432 }
