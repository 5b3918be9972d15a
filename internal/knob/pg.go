package knob

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/dbhost/dbhost/internal/engine"
	"github.com/dbhost/dbhost/internal/engine/postgres"
	"github.com/dbhost/dbhost/internal/host"
)

// KindPGAutoconf is the journal kind of a PostgreSQL parameter change: the
// data directory's postgresql.auto.conf as it was before ALTER SYSTEM.
const KindPGAutoconf = "pg.autoconf"

const (
	pgConnectTimeout = 10 * time.Second
	// pgReloadWait bounds the wait for a reload to reach new sessions:
	// pg_reload_conf only signals the postmaster.
	pgReloadWait = 15 * time.Second
)

var pgServerComms = []string{"postgres", "postmaster"}

// pgAutoconf is the journal data of KindPGAutoconf: all an undo needs, in
// a new process, without a connection.
type pgAutoconf struct {
	DataDir string    `json:"data_dir"`
	File    fileState `json:"file"`
	// PostmasterPID is the server's PID when the change was made (for
	// people reading the journal; the undo reads postmaster.pid again).
	PostmasterPID int `json:"postmaster_pid,omitempty"`
	// Restart says a parameter that takes effect only at server start was
	// changed: the undo restarts the server, not only reloads it.
	Restart     bool     `json:"restart"`
	RestartArgv []string `json:"restart_argv,omitempty"`
	RestartUser string   `json:"restart_user,omitempty"`
}

// pgConnect opens a new session on the target's located server, as the
// target's user (a superuser).
func (a *Applier) pgConnect(ctx context.Context) (*pgx.Conn, error) {
	t, err := a.endpoint(ctx, engine.Postgres)
	if err != nil {
		return nil, err
	}
	db := t.DB
	if db == "" {
		db = "postgres"
	}
	return postgres.ConnectEndpoint(ctx, t, db, pgConnectTimeout)
}

// pgDataDir checks that the connection reaches the server of the target's
// data directory, on this host, and returns that directory as the server
// names it.
func (a *Applier) pgDataDir(ctx context.Context, c *pgx.Conn) (string, error) {
	var dir string
	if err := c.QueryRow(ctx, "SHOW data_directory").Scan(&dir); err != nil {
		return "", fmt.Errorf("reading data_directory (a superuser is needed): %w", err)
	}
	if a.t.DataDir != "" && !samePath(a.t.DataDir, dir) {
		return "", fmt.Errorf("the connection reaches the server of %s, not of %s", dir, a.t.DataDir)
	}
	if _, err := os.Stat(filepath.Join(dir, "postgresql.auto.conf")); err != nil {
		return "", fmt.Errorf("the server's %s/postgresql.auto.conf is not readable here (%s): parameters are changed only on a server of this host, whose configuration can be journaled",
			dir, host.Explain(err))
	}
	return dir, nil
}

func samePath(a, b string) bool {
	ra, err1 := filepath.EvalSymlinks(a)
	rb, err2 := filepath.EvalSymlinks(b)
	if err1 != nil || err2 != nil {
		return filepath.Clean(a) == filepath.Clean(b)
	}
	return ra == rb
}

// planPG looks every parameter up in pg_settings and checks its value;
// restart says one of them changes a parameter read only at start.
func (a *Applier) planPG(ctx context.Context, items []*item) (restart bool, err error) {
	c, err := a.pgConnect(ctx)
	if err != nil {
		return false, fmt.Errorf("%s: %w", items[0].Name, err)
	}
	defer c.Close(context.Background())
	if _, err := a.pgDataDir(ctx, c); err != nil {
		return false, err
	}
	var errs []error
	for _, it := range items {
		p, err := lookupPG(ctx, c, strings.TrimPrefix(it.Name, "pg."))
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", it.Name, err))
			continue
		}
		if err := p.check(it.Value, a.t.Restart != nil); err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", it.Name, err))
			continue
		}
		it.pg = p
		if p.needsRestart() && p.changes() {
			restart = true
		}
	}
	return restart, errors.Join(errs...)
}

func lookupPG(ctx context.Context, c *pgx.Conn, name string) (*pgParam, error) {
	p := &pgParam{name: name}
	// Names are stored as spelled (DateStyle) and matched without case.
	err := c.QueryRow(ctx, `SELECT name, vartype, coalesce(unit, ''), context, source, coalesce(min_val, ''), coalesce(max_val, ''),
		coalesce(enumvals, '{}'::text[]), setting, pending_restart FROM pg_settings WHERE lower(name) = $1`, name).
		Scan(&p.name, &p.vartype, &p.unit, &p.context, &p.source, &p.min, &p.max, &p.enum, &p.setting, &p.pending)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, errors.New("no such parameter on this server")
	}
	return p, err
}

// check validates a value against the parameter and the target.
func (p *pgParam) check(value string, canRestart bool) error {
	switch p.context {
	case "internal":
		return errors.New("a read-only parameter (fixed when the server was built or the cluster created)")
	case "postmaster":
		if !canRestart {
			return errors.New("takes effect only after a server restart, and this server may not be restarted")
		}
	}
	switch p.source {
	case "command line":
		return errors.New("set on the server's command line, which overrides ALTER SYSTEM: a change would not take effect")
	case "database", "user", "database user":
		return fmt.Errorf("set per %s (ALTER %s ... SET), which overrides ALTER SYSTEM in those sessions", p.source, strings.ToUpper(strings.Fields(p.source)[0]))
	}
	w, err := p.normalize(value)
	if err != nil {
		return err
	}
	p.want = w
	return nil
}

// checkAutoconf refuses to journal a postgresql.auto.conf that holds a
// password (a primary_conninfo written by pg_basebackup -R does): the
// journal must never hold a secret.
func checkAutoconf(content string) error {
	for i, ln := range strings.Split(content, "\n") {
		name, value, ok := strings.Cut(ln, "=")
		if !ok || strings.HasPrefix(strings.TrimSpace(ln), "#") {
			continue
		}
		lv := strings.ToLower(value)
		if strings.Contains(lv, "password") || strings.Contains(lv, "passphrase") {
			return fmt.Errorf("postgresql.auto.conf line %d (%s) holds a password: dbhost does not copy secrets into its journal, so it does not change this server's parameters",
				i+1, strings.TrimSpace(name))
		}
	}
	return nil
}

// applyPG journals postgresql.auto.conf, then runs ALTER SYSTEM for every
// parameter.
func (a *Applier) applyPG(ctx context.Context, items []*item, restart bool) error {
	c, err := a.pgConnect(ctx)
	if err != nil {
		return err
	}
	defer c.Close(context.Background())
	dir, err := a.pgDataDir(ctx, c)
	if err != nil {
		return err
	}
	fs, err := readFileState(filepath.Join(dir, "postgresql.auto.conf"))
	if err != nil {
		return fmt.Errorf("reading postgresql.auto.conf: %w", err)
	}
	if err := checkAutoconf(fs.Content); err != nil {
		return err
	}
	h := a.h
	data := pgAutoconf{DataDir: dir, File: fs, RestartArgv: a.t.RestartArgv, RestartUser: a.t.RestartUser,
		PostmasterPID: serverProcess(h, readPIDFile(h, filepath.Join(dir, "postmaster.pid")), dir, pgServerComms...)}
	names := make([]string, len(items))
	for i, it := range items {
		names[i] = it.Name
		if it.pg.needsRestart() && it.pg.changes() {
			data.Restart = true
		}
	}
	if err := a.c.Journal().Record(KindPGAutoconf, "PostgreSQL "+dir+": "+strings.Join(names, ", "), data); err != nil {
		return fmt.Errorf("journaling postgresql.auto.conf: %w", err)
	}
	for _, it := range items {
		p := it.pg
		q := "ALTER SYSTEM SET " + pgx.Identifier(strings.Split(p.name, ".")).Sanitize() + " = " + pgValueList(p.name, it.Value)
		if _, err := c.Exec(ctx, q); err != nil {
			return fmt.Errorf("%s: the server refused %q: %w", it.Name, it.Value, err)
		}
	}
	return nil
}

func (a *Applier) reloadPG(ctx context.Context) error {
	c, err := a.pgConnect(ctx)
	if err != nil {
		return err
	}
	defer c.Close(context.Background())
	var ok bool
	if err := c.QueryRow(ctx, "SELECT pg_reload_conf()").Scan(&ok); err != nil || !ok {
		return fmt.Errorf("pg_reload_conf: %v", err)
	}
	return nil
}

// readBackPG reads every parameter on new connections until all show the
// value asked for: a reload reaches new sessions shortly after
// pg_reload_conf returns. A pending restart fails at once.
func (a *Applier) readBackPG(ctx context.Context, items []*item) (map[string]string, error) {
	out := map[string]string{}
	deadline := time.Now().Add(pgReloadWait)
	for {
		left, err := a.readBackPGOnce(ctx, items, out)
		if err != nil || len(left) == 0 {
			return out, err
		}
		if time.Now().After(deadline) {
			var errs []error
			for _, it := range left {
				errs = append(errs, fmt.Errorf("%s: wanted %s (%s%s), the server runs with %s%s after %s",
					it.Name, it.Value, it.pg.want, it.pg.unit, it.pg.setting, it.pg.unit, reloadOrRestart(it)))
			}
			return out, errors.Join(errs...)
		}
		items = left
		select {
		case <-ctx.Done():
			return out, ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
}

func reloadOrRestart(it *item) string {
	if it.pg.needsRestart() {
		return "a restart"
	}
	return "a reload"
}

// readBackPGOnce reads the parameters on one new connection and returns
// the ones that do not show the wanted value yet.
func (a *Applier) readBackPGOnce(ctx context.Context, items []*item, out map[string]string) (left []*item, err error) {
	c, err := a.pgConnect(ctx)
	if err != nil {
		return nil, err
	}
	defer c.Close(context.Background())
	var errs []error
	for _, it := range items {
		p := it.pg
		var show string
		if err := c.QueryRow(ctx, `SELECT setting, pending_restart, current_setting(name) FROM pg_settings WHERE name = $1`, p.name).
			Scan(&p.setting, &p.pending, &show); err != nil {
			errs = append(errs, fmt.Errorf("%s: reading back: %w", it.Name, err))
			continue
		}
		switch {
		case p.pending:
			errs = append(errs, fmt.Errorf("%s: wanted %s, the server still runs with %s and waits for a restart (pending_restart)%s",
				it.Name, it.Value, show, fileError(ctx, c, p.name)))
		case p.same(p.want, p.setting) || autoTuned(ctx, c, p):
			out[it.Name] = show
		default:
			left = append(left, it)
		}
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return left, nil
}

// autoTuned accepts -1 for a parameter the server sizes itself when told
// -1 (wal_buffers, autovacuum_work_mem): the setting then shows the size
// chosen, and pg_file_settings says whether the file's -1 was applied.
func autoTuned(ctx context.Context, c *pgx.Conn, p *pgParam) bool {
	if p.want != "-1" || p.min != "-1" {
		return false
	}
	var applied bool
	err := c.QueryRow(ctx, `SELECT applied FROM pg_file_settings WHERE name = $1 AND error IS NULL
		AND sourcefile LIKE '%/postgresql.auto.conf' ORDER BY seqno DESC LIMIT 1`, p.name).Scan(&applied)
	return err == nil && applied
}

// fileError returns the configuration file error the server recorded for
// a parameter, if any.
func fileError(ctx context.Context, c *pgx.Conn, name string) string {
	var msg string
	if c.QueryRow(ctx, `SELECT error FROM pg_file_settings WHERE name = $1 AND error IS NOT NULL LIMIT 1`, name).Scan(&msg) == nil {
		return " (" + msg + ")"
	}
	return ""
}

// currentPG reads parameters as SHOW displays them.
func (a *Applier) currentPG(ctx context.Context, names []string) (map[string]string, error) {
	c, err := a.pgConnect(ctx)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", names[0], err)
	}
	defer c.Close(context.Background())
	out := map[string]string{}
	var errs []error
	for _, n := range names {
		var v *string
		if err := c.QueryRow(ctx, "SELECT current_setting($1, true)", strings.TrimPrefix(n, "pg.")).Scan(&v); err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", n, err))
			continue
		}
		if v == nil {
			errs = append(errs, fmt.Errorf("%s: no such parameter on this server", n))
			continue
		}
		out[n] = *v
	}
	return out, errors.Join(errs...)
}

// undoPGAutoconf puts postgresql.auto.conf back and makes the server use
// it again: a restart when a start-time parameter was changed and the
// server has not been started since the file was restored, else a SIGHUP
// to the postmaster. A server that is not running needs neither: it reads
// the file when it starts.
func undoPGAutoconf(raw json.RawMessage) error {
	var d pgAutoconf
	if err := json.Unmarshal(raw, &d); err != nil {
		return err
	}
	if !filepath.IsAbs(d.DataDir) || d.File.Path != filepath.Join(d.DataDir, "postgresql.auto.conf") {
		return fmt.Errorf("journal entry names %q in %q: not a data directory's postgresql.auto.conf", d.File.Path, d.DataDir)
	}
	if _, err := os.Stat(d.DataDir); errors.Is(err, os.ErrNotExist) {
		return nil // the cluster is gone: nothing to restore
	}
	srv := serverFiles{dataDir: d.DataDir, pidFile: filepath.Join(d.DataDir, "postmaster.pid"), comms: pgServerComms,
		restartArgv: d.RestartArgv, restartUser: d.RestartUser}
	return srv.restore(d.File, d.Restart)
}
