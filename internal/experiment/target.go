package experiment

import (
	"context"
	"fmt"
	"net/url"
	"path"
	"strconv"
	"strings"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/dbhost/dbhost/internal/change"
	"github.com/dbhost/dbhost/internal/engine"
	enginemysql "github.com/dbhost/dbhost/internal/engine/mysql"
	"github.com/dbhost/dbhost/internal/engine/postgres"
	"github.com/dbhost/dbhost/internal/host"
	"github.com/dbhost/dbhost/internal/journal"
	"github.com/dbhost/dbhost/internal/knob"
	"github.com/dbhost/dbhost/internal/pgcluster"
	"github.com/dbhost/dbhost/internal/workload"
)

// server is what the experiment learned about its database.
type server struct {
	wt      workload.Target
	kt      knob.Target
	cluster *pgcluster.Cluster // the throwaway cluster, if any
	where   string
	// ping checks that the server accepts connections.
	ping func(ctx context.Context) error
}

// serverInfo is read from a running server.
type serverInfo struct {
	version       string
	major         int
	dataDir       string
	pidFile       string
	sharedBuffers uint64
	sharedMemory  uint64
}

const probeTimeout = 10 * time.Second

// pgProbe reads the version, data directory and shared memory sizes of a
// located server.
func pgProbe(ctx context.Context, t workload.Target) (serverInfo, error) {
	var si serverInfo
	db := t.DB
	if db == "" {
		db = "postgres"
	}
	ctx, cancel := context.WithTimeout(ctx, probeTimeout)
	defer cancel()
	conn, err := postgres.ConnectEndpoint(ctx, t, db, probeTimeout)
	if err != nil {
		return si, err
	}
	defer conn.Close(context.Background())
	c := conn.PgConn()
	q := `SELECT current_setting('server_version'), current_setting('server_version_num'), current_setting('data_directory'),
		(SELECT setting::bigint * current_setting('block_size')::bigint FROM pg_settings WHERE name = 'shared_buffers')::text,
		COALESCE((SELECT setting FROM pg_settings WHERE name = 'shared_memory_size'), '')`
	res, err := c.Exec(ctx, q).ReadAll()
	if err != nil {
		return si, fmt.Errorf("%s: %w (dbhost needs a superuser, or a role with pg_read_all_settings)", t, err)
	}
	if len(res) == 0 || len(res[0].Rows) != 1 || len(res[0].Rows[0]) != 5 {
		return si, fmt.Errorf("%s: unexpected answer to the settings query", t)
	}
	row := res[0].Rows[0]
	si.version = string(row[0])
	num, _ := strconv.Atoi(string(row[1]))
	si.major = num / 10000
	si.dataDir = string(row[2])
	si.sharedBuffers, _ = strconv.ParseUint(string(row[3]), 10, 64)
	if mb, err := strconv.ParseUint(string(row[4]), 10, 64); err == nil { // shared_memory_size is in MB
		si.sharedMemory = mb << 20
	}
	if si.dataDir != "" {
		si.pidFile = path.Join(si.dataDir, "postmaster.pid")
	}
	return si, nil
}

// mysqlProbe reads the version and data directory of a located server.
func mysqlProbe(ctx context.Context, t workload.Target) (serverInfo, error) {
	var si serverInfo
	db, err := enginemysql.OpenEndpoint(t, "", probeTimeout)
	if err != nil {
		return si, err
	}
	defer db.Close()
	ctx, cancel := context.WithTimeout(ctx, probeTimeout)
	defer cancel()
	if err := db.QueryRowContext(ctx, "SELECT @@version, @@datadir, @@pid_file").Scan(&si.version, &si.dataDir, &si.pidFile); err != nil {
		return si, fmt.Errorf("connect to %s: %w", t, err)
	}
	si.major, _ = strconv.Atoi(strings.SplitN(si.version, ".", 2)[0])
	si.dataDir = strings.TrimSuffix(si.dataDir, "/")
	if si.pidFile != "" && !strings.HasPrefix(si.pidFile, "/") {
		si.pidFile = path.Join(si.dataDir, si.pidFile)
	}
	return si, nil
}

// pgTarget reads a PostgreSQL connection string (libpq key=value or URL;
// PG* variables and ~/.pgpass apply, as with psql).
func pgTarget(dsn, benchDB string) (workload.Target, error) {
	cfg, err := pgconn.ParseConfig(dsn)
	if err != nil {
		return workload.Target{}, fmt.Errorf("--pg: %w", err)
	}
	t := workload.Target{Engine: engine.Postgres, Host: cfg.Host, Port: int(cfg.Port), User: cfg.User, Password: cfg.Password, DB: benchDB}
	if t.DB == "" && namesDB(dsn) {
		t.DB = cfg.Database
	}
	return t, nil
}

// namesDB reports whether a connection string names its database (else
// the benchmark gets its own, workload.DefaultDB).
func namesDB(dsn string) bool {
	if u, err := url.Parse(dsn); err == nil && (u.Scheme == "postgres" || u.Scheme == "postgresql") {
		return strings.Trim(u.Path, "/") != "" || u.Query().Get("dbname") != ""
	}
	for _, f := range strings.Fields(dsn) {
		if strings.HasPrefix(f, "dbname=") && len(f) > len("dbname=") {
			return true
		}
	}
	return false
}

// mysqlTarget reads a go-sql-driver DSN: user:password@unix(/path/mysqld.sock)/db
// or user:password@tcp(host:3306)/db.
func mysqlTarget(dsn, benchDB string) (workload.Target, error) {
	cfg, err := mysql.ParseDSN(dsn)
	if err != nil {
		return workload.Target{}, fmt.Errorf("--mysql: %w", err)
	}
	t := workload.Target{Engine: engine.MySQL, User: cfg.User, Password: cfg.Passwd, DB: benchDB}
	if t.DB == "" {
		t.DB = cfg.DBName
	}
	switch cfg.Net {
	case "unix":
		t.Host = cfg.Addr
	default:
		h, p, ok := strings.Cut(cfg.Addr, ":")
		t.Host = h
		if ok {
			t.Port, _ = strconv.Atoi(p)
		}
	}
	if t.User == "" {
		t.User = "root"
	}
	return t, nil
}

// userServer prepares a --pg or --mysql target: how to connect, its data
// directory, and how to restart it when allowed.
func userServer(ctx context.Context, h *host.Host, p *Plan, f *Facts) (*server, error) {
	var s *server
	var si serverInfo
	var err error
	if p.Target.PG != "" {
		s, si, err = pgUserServer(ctx, h, p, f)
	} else {
		s, si, err = mysqlUserServer(ctx, h, p, f)
	}
	if err != nil {
		return nil, err
	}
	f.Version, f.Major = si.version, si.major
	s.wt.OSUser = p.Target.OSUser
	s.where = fmt.Sprintf("%s %s (data directory %s)", s.wt, si.version, si.dataDir)
	s.kt = knobTarget(s.wt, si.dataDir)
	if p.Target.AllowRestart {
		unit, why := serviceUnit(h, si.pidFile)
		if unit == "" {
			return nil, fmt.Errorf("--allow-restart: dbhost does not know how to restart this server: %s", why)
		}
		s.kt.RestartUnit = unit
		s.kt.Restart = func(ctx context.Context) error { return restartUnit(ctx, unit, s.ping) }
		s.where += ", restarted with systemctl restart " + unit
	}
	return s, nil
}

// pgUserServer locates the --pg server among those discovered on this
// host, connects to it and reads what it reports.
func pgUserServer(ctx context.Context, h *host.Host, p *Plan, f *Facts) (*server, serverInfo, error) {
	wt, err := pgTarget(p.Target.PG, p.Workload.DB)
	if err != nil {
		return nil, serverInfo{}, err
	}
	if wt, err = engine.Locate(ctx, h, wt); err != nil {
		return nil, serverInfo{}, fmt.Errorf("--pg: %w", err)
	}
	probe := wt
	probe.DB = ""
	if t, e := pgconn.ParseConfig(p.Target.PG); e == nil {
		probe.DB = t.Database
	}
	si, err := pgProbe(ctx, probe)
	if err != nil {
		return nil, si, err
	}
	f.Engine, f.SharedBuffers, f.SharedMemory = string(engine.Postgres), si.sharedBuffers, si.sharedMemory
	return &server{wt: wt, ping: func(ctx context.Context) error { _, err := pgProbe(ctx, probe); return err }}, si, nil
}

// mysqlUserServer locates the --mysql server among those discovered on
// this host, connects to it and reads what it reports.
func mysqlUserServer(ctx context.Context, h *host.Host, p *Plan, f *Facts) (*server, serverInfo, error) {
	wt, err := mysqlTarget(p.Target.MySQL, p.Workload.DB)
	if err != nil {
		return nil, serverInfo{}, err
	}
	if wt, err = engine.Locate(ctx, h, wt); err != nil {
		return nil, serverInfo{}, fmt.Errorf("--mysql: %w", err)
	}
	si, err := mysqlProbe(ctx, wt)
	if err != nil {
		return nil, si, err
	}
	f.Engine = string(engine.MySQL)
	return &server{wt: wt, ping: func(ctx context.Context) error { _, err := mysqlProbe(ctx, wt); return err }}, si, nil
}

// knobTarget is where the knobs of a user's server are set.
func knobTarget(wt workload.Target, dataDir string) knob.Target {
	kt := knob.Target{Engine: wt.Engine, DataDir: dataDir}
	if wt.Engine == engine.Postgres {
		kt.PG = &wt
	} else {
		kt.MySQL = &wt
	}
	return kt
}

// serviceUnit finds the systemd service that runs the server whose pid
// file is given: the one way dbhost restarts a server it did not start.
func serviceUnit(h *host.Host, pidFile string) (unit, why string) {
	if pidFile == "" {
		return "", "the server does not report its pid file"
	}
	b, err := h.ReadFile(pidFile)
	if err != nil {
		return "", "cannot read " + pidFile + ": " + host.Explain(err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(strings.SplitN(string(b), "\n", 2)[0]))
	if err != nil || pid <= 0 {
		return "", pidFile + " holds no process ID"
	}
	cgs, err := h.Cgroups(pid)
	if err != nil {
		return "", fmt.Sprintf("cgroup of process %d: %s", pid, host.Explain(err))
	}
	for _, cg := range cgs {
		for _, part := range strings.Split(cg.Path, "/") {
			if strings.HasSuffix(part, ".service") {
				return part, ""
			}
		}
	}
	return "", fmt.Sprintf("process %d is not in a systemd service (started by hand or by a test)", pid)
}

// restartUnit restarts a systemd service and waits until the server
// answers; systemctl is found as the change layer finds it (by absolute
// path, a binary only root can change), never through PATH.
func restartUnit(ctx context.Context, unit string, ping func(context.Context) error) error {
	ctx, cancel := context.WithTimeout(ctx, change.RestartLimit)
	defer cancel()
	return change.Unit{Name: unit, Allowed: true, Ready: ping}.Run(ctx, change.Config{})
}

// embeddedServer creates the throwaway PostgreSQL cluster (journaled by
// pgcluster before anything is created, so that Restore and Recover
// remove it).
func embeddedServer(ctx context.Context, j *journal.Journal, p *Plan, f *Facts, maxClients int) (*server, error) {
	c, err := pgcluster.Create(ctx, j, pgcluster.Options{Dir: p.Target.Dir, SharedBuffers: uint64(p.Target.SharedBuffers),
		MaxClients: maxClients, Settings: p.Target.Settings})
	if err != nil {
		return nil, fmt.Errorf("throwaway PostgreSQL cluster: %w", err)
	}
	s := &server{cluster: c}
	h, err := host.Open("/")
	if err != nil {
		return s, err
	}
	if s.wt, err = engine.Locate(ctx, h, c.Target()); err != nil {
		return s, fmt.Errorf("throwaway PostgreSQL cluster: %w", err)
	}
	probe := s.wt
	probe.DB = "postgres"
	si, err := pgProbe(ctx, probe)
	if err != nil {
		return s, fmt.Errorf("throwaway PostgreSQL cluster: %w", err)
	}
	s.ping = func(ctx context.Context) error { _, err := pgProbe(ctx, probe); return err }
	f.Engine, f.Version, f.Major = string(engine.Postgres), si.version, si.major
	f.SharedBuffers, f.SharedMemory = si.sharedBuffers, si.sharedMemory
	if p.Workload.DB != "" {
		s.wt.DB = p.Workload.DB
	}
	wt := s.wt
	argv, user := c.RestartArgv()
	s.kt = knob.Target{Engine: engine.Postgres, DataDir: c.DataDir, PG: &wt, Restart: c.Restart, RestartArgv: argv, RestartUser: user}
	s.where = fmt.Sprintf("throwaway PostgreSQL %s in %s (port %d, shared_buffers %s)", si.version, c.Dir, c.Port, Size(si.sharedBuffers))
	for _, w := range c.Warnings {
		s.where += "; " + w
	}
	return s, nil
}
