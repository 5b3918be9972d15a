package contention

import (
	"bufio"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"net"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/dbhost/dbhost/internal/engine"
	"github.com/dbhost/dbhost/internal/engine/mysql"
	"github.com/dbhost/dbhost/internal/engine/postgres"
	"github.com/dbhost/dbhost/internal/host"
)

// Where query counts come from.
const (
	pgStatementsSource = "pg_stat_statements: sum(calls) (statements, all databases)"
	pgXactSource       = "pg_stat_database: sum(xact_commit + xact_rollback) (transactions)"
	mysqlSource        = "SHOW GLOBAL STATUS: Questions (statements sent by clients)"
	redisSource        = "INFO stats: total_commands_processed"
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

// openQueries connects to an instance and picks its query counter.
func openQueries(ctx context.Context, h *host.Host, in *engine.Instance, opts engine.Options) *querySource {
	if opts.Timeout <= 0 {
		opts.Timeout = 3 * time.Second
	}
	q := &querySource{own: map[int]bool{}, ownQueries: 1}
	var err error
	switch in.Engine {
	case engine.Postgres:
		err = openPostgres(ctx, h, in, opts, q)
	case engine.MySQL:
		err = openMySQL(ctx, h, in, opts, q)
	case engine.Redis:
		err = openRedis(ctx, h, in, opts, q)
	default:
		err = fmt.Errorf("dbhost does not read query counts from %s", in.Flavor)
	}
	if err != nil {
		q.err = err
		if errors.Is(err, host.ErrNotLive) {
			q.err = errors.New("query counts need the live system")
		}
	}
	return q
}

const plainXact = `SELECT sum(xact_commit + xact_rollback) FROM pg_stat_database`

// pgCounter runs one query returning one number.
type pgCounter struct {
	conn    *pgconn.PgConn
	sql     string
	timeout time.Duration
}

func (p *pgCounter) read(ctx context.Context) (uint64, error) {
	ctx, cancel := context.WithTimeout(ctx, p.timeout)
	defer cancel()
	return pgNumber(ctx, p.conn, p.sql)
}

func (p *pgCounter) close() { p.conn.Close(context.Background()) }

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

// openPostgres counts statements with pg_stat_statements when the
// extension is installed in the database dbhost connects to and loaded,
// else transactions from pg_stat_database.
func openPostgres(ctx context.Context, h *host.Host, in *engine.Instance, opts engine.Options, q *querySource) error {
	conn, via, err := postgres.Connect(ctx, h, in, opts)
	if err != nil {
		return err
	}
	q.via = via
	q.own[int(conn.PID())] = true
	// A session's counts reach pg_stat_database when it flushes them: at
	// most once a second while busy, after 10 s once idle (PostgreSQL 15+).
	// dbhost's own reading is flushed at once, so each interval holds
	// exactly one of them.
	xact := plainXact
	if v, _ := engine.VersionParts(conn.ParameterStatus("server_version")); len(v) > 0 && v[0] >= 15 {
		xact = `SELECT pg_stat_force_next_flush(); ` + xact
	}
	c := &pgCounter{conn: conn, timeout: opts.Timeout, sql: xact}
	q.source, q.transactions = pgXactSource, true
	cctx, cancel := context.WithTimeout(ctx, opts.Timeout)
	defer cancel()
	n, err := pgNumber(cctx, conn, `SELECT count(*) FROM pg_extension WHERE extname = 'pg_stat_statements'`)
	if err == nil && n > 0 {
		const stmts = `SELECT sum(calls) FROM pg_stat_statements`
		if _, err := pgNumber(cctx, conn, stmts); err == nil {
			c.sql, q.source, q.transactions = stmts, pgStatementsSource, false
		} else {
			q.note = "pg_stat_statements is installed but cannot be read (" + err.Error() + "); counting transactions"
		}
	}
	_, err = pgNumber(cctx, conn, c.sql)
	if err != nil && c.sql == xact && xact != plainXact {
		// pg_stat_force_next_flush refused (a role without the right):
		// dbhost's own reading then lands in this interval or a later one.
		c.sql = plainXact
		q.note = "dbhost's own reading may be counted in a later interval (pg_stat_force_next_flush: " + err.Error() + ")"
		_, err = pgNumber(cctx, conn, c.sql)
	}
	if err != nil {
		conn.Close(context.Background())
		return fmt.Errorf("%s: %w", q.source, err)
	}
	q.c = c
	return nil
}

// mysqlCounter reads Questions.
type mysqlCounter struct {
	db      *sql.DB
	timeout time.Duration
}

func (m *mysqlCounter) read(ctx context.Context) (uint64, error) {
	ctx, cancel := context.WithTimeout(ctx, m.timeout)
	defer cancel()
	var name string
	var v uint64
	err := m.db.QueryRowContext(ctx, "SHOW GLOBAL STATUS LIKE 'Questions'").Scan(&name, &v)
	return v, err
}

func (m *mysqlCounter) close() { m.db.Close() }

func openMySQL(ctx context.Context, h *host.Host, in *engine.Instance, opts engine.Options, q *querySource) error {
	db, via, err := mysql.Open(ctx, h, in, opts)
	if err != nil {
		return err
	}
	q.via, q.source = via, mysqlSource
	m := &mysqlCounter{db: db, timeout: opts.Timeout}
	if _, err := m.read(ctx); err != nil {
		db.Close()
		return fmt.Errorf("reading Questions: %w", err)
	}
	// The thread serving dbhost, where performance_schema can say which
	// OS thread it is (MySQL 8; MariaDB with performance_schema on).
	cctx, cancel := context.WithTimeout(ctx, opts.Timeout)
	defer cancel()
	var tid sql.NullInt64
	if db.QueryRowContext(cctx, "SELECT THREAD_OS_ID FROM performance_schema.threads WHERE PROCESSLIST_ID = CONNECTION_ID()").Scan(&tid) == nil && tid.Valid {
		q.own[int(tid.Int64)] = true
	}
	q.c = m
	return nil
}

// redisCounter sends INFO stats without credentials: dbhost never sends a
// password to Redis.
type redisCounter struct {
	conn    net.Conn
	r       *bufio.Reader
	timeout time.Duration
}

func (c *redisCounter) read(ctx context.Context) (uint64, error) {
	deadline := time.Now().Add(c.timeout)
	if d, ok := ctx.Deadline(); ok && d.Before(deadline) {
		deadline = d
	}
	c.conn.SetDeadline(deadline)
	if _, err := io.WriteString(c.conn, "*2\r\n$4\r\nINFO\r\n$5\r\nstats\r\n"); err != nil {
		return 0, err
	}
	line, err := c.r.ReadString('\n')
	if err != nil {
		return 0, err
	}
	line = strings.TrimRight(line, "\r\n")
	if strings.HasPrefix(line, "-") {
		return 0, errors.New(line[1:])
	}
	n, err := strconv.Atoi(strings.TrimPrefix(line, "$"))
	if !strings.HasPrefix(line, "$") || err != nil || n < 0 || n > 1<<20 {
		return 0, fmt.Errorf("unexpected reply %q", line)
	}
	buf := make([]byte, n+2)
	if _, err := io.ReadFull(c.r, buf); err != nil {
		return 0, err
	}
	for _, ln := range strings.Split(string(buf[:n]), "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(ln), "total_commands_processed:"); ok {
			return strconv.ParseUint(v, 10, 64)
		}
	}
	return 0, errors.New("INFO stats has no total_commands_processed")
}

func (c *redisCounter) close() { c.conn.Close() }

// openRedis connects to the instance's Unix socket, else a loopback port.
func openRedis(ctx context.Context, h *host.Host, in *engine.Instance, opts engine.Options, q *querySource) error {
	switch {
	case opts.NoConnect:
		return errors.New("live connection not attempted (--no-connect)")
	case !h.System():
		return host.ErrNotLive
	case in.Redis != nil && in.Redis.AuthConfigured:
		return errors.New("the server requires a password and dbhost never sends one to Redis")
	}
	var addrs []string
	for _, l := range in.Listen {
		if l.Proto == "unix" {
			addrs = append(addrs, "unix:"+l.Addr)
		}
	}
	for _, l := range in.Listen {
		switch {
		case l.Proto == "unix":
		case l.Wildcard() && l.Proto == "tcp":
			addrs = append(addrs, fmt.Sprintf("tcp:127.0.0.1:%d", l.Port))
		case l.Wildcard():
			addrs = append(addrs, fmt.Sprintf("tcp:[::1]:%d", l.Port))
		case l.Loopback():
			addrs = append(addrs, "tcp:"+net.JoinHostPort(l.Addr, strconv.Itoa(l.Port)))
		}
	}
	if len(addrs) == 0 {
		// The listening sockets need root to be seen: fall back to what
		// the configuration says.
		if u := in.SettingValue("unixsocket"); strings.HasPrefix(u, "/") {
			addrs = append(addrs, "unix:"+u)
		}
		if in.Port > 0 {
			addrs = append(addrs, fmt.Sprintf("tcp:127.0.0.1:%d", in.Port))
		}
	}
	if len(addrs) == 0 {
		return errors.New("no local listening socket seen or configured for this server")
	}
	var tried []string
	for _, a := range addrs {
		network, addr, _ := strings.Cut(a, ":")
		d := net.Dialer{Timeout: opts.Timeout}
		conn, err := d.DialContext(ctx, network, addr)
		if err != nil {
			tried = append(tried, fmt.Sprintf("%s: %v", a, err))
			continue
		}
		c := &redisCounter{conn: conn, r: bufio.NewReader(conn), timeout: opts.Timeout}
		if _, err := c.read(ctx); err != nil {
			conn.Close()
			tried = append(tried, fmt.Sprintf("%s: %v", a, err))
			continue
		}
		q.c, q.via, q.source = c, a, redisSource
		return nil
	}
	return errors.New(strings.Join(tried, "; "))
}
