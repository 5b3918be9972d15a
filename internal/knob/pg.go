package knob

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/dbhost/dbhost/internal/change"
	"github.com/dbhost/dbhost/internal/engine"
	enginemysql "github.com/dbhost/dbhost/internal/engine/mysql"
	"github.com/dbhost/dbhost/internal/engine/postgres"
	"github.com/dbhost/dbhost/internal/host"
)

const (
	pgConnectTimeout = 10 * time.Second
	// pgReloadWait bounds the wait for a reload to reach new sessions:
	// pg_reload_conf only signals the postmaster.
	pgReloadWait = 15 * time.Second
)

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
	if err := a.checkRecoveryLogin(ctx, engine.Postgres); err != nil {
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
	if lv := strings.ToLower(p.setting); strings.Contains(lv, "password") || strings.Contains(lv, "passphrase") {
		return errors.New("its present value holds a password: dbhost does not copy secrets into its journal, so it does not change this parameter")
	}
	if listQuote[strings.ToLower(p.name)] && strings.Contains(value, ",") {
		return errors.New("a list whose elements the server quotes: set it in a configuration file, not with ALTER SYSTEM through dbhost")
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

// applyPG changes every parameter through the change layer (kind
// db-setting: ALTER SYSTEM and a reload on the engine profile's connection
// to the located server). When a parameter read only at start changes, a
// restart is journaled first, so that the undo restarts the server after
// the parameters are put back.
func (a *Applier) applyPG(ctx context.Context, items []*item) error {
	if err := a.checkPGAutoconf(ctx); err != nil {
		return err
	}
	conn, ref, err := a.settings(ctx, engine.Postgres)
	if err != nil {
		return err
	}
	defer conn.Close()
	if err := a.pgRestartOnUndo(items); err != nil {
		return err
	}
	for _, it := range items {
		p := it.pg
		sctx, cancel := context.WithTimeout(ctx, pgReloadWait)
		_, err := a.c.Setting(sctx, conn, ref, strings.ToLower(p.name), it.Value, p.needsRestart())
		cancel()
		if err != nil {
			return fmt.Errorf("%s: the server refused %q: %w", it.Name, it.Value, err)
		}
	}
	return nil
}

// checkPGAutoconf refuses a server whose postgresql.auto.conf holds a
// password (checkAutoconf).
func (a *Applier) checkPGAutoconf(ctx context.Context) error {
	c, err := a.pgConnect(ctx)
	if err != nil {
		return err
	}
	dir, err := a.pgDataDir(ctx, c)
	c.Close(context.Background())
	if err != nil {
		return err
	}
	b, err := a.h.ReadFile(filepath.Join(dir, "postgresql.auto.conf"))
	if err != nil {
		return fmt.Errorf("reading postgresql.auto.conf: %w", err)
	}
	return checkAutoconf(string(b))
}

// pgRestartOnUndo journals the restart an undo needs when a parameter
// read only at start changes, and notes those parameters for the
// in-process undo (pendingRestart).
func (a *Applier) pgRestartOnUndo(items []*item) error {
	if slices.ContainsFunc(items, func(it *item) bool { return it.pg.needsRestart() && it.pg.changes() }) {
		r, _ := a.restarter()
		if err := a.c.RestartOnUndo(r); err != nil {
			return fmt.Errorf("journaling the restart: %w", err)
		}
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	for _, it := range items {
		if it.pg.needsRestart() {
			if a.restartParams == nil {
				a.restartParams = map[string]bool{}
			}
			a.restartParams[strings.ToLower(it.pg.name)] = true
		}
	}
	return nil
}

// settings opens the engine profile's settings connection to the
// target's located server, logging in as the target does (the password
// goes only to that server: the profile's dial verifies it).
func (a *Applier) settings(ctx context.Context, e engine.Engine) (engine.SettingsConn, change.ServerRef, error) {
	ep, ref, err := a.located(ctx, e)
	if err != nil {
		return nil, ref, err
	}
	opts := a.c.Config().Engine
	opts.NoConnect = false
	if opts.Timeout <= 0 {
		opts.Timeout = pgConnectTimeout
	}
	if e == engine.Postgres {
		opts.PGDSN = pgDSN(ep)
	} else {
		cfg, err := enginemysql.EndpointConfig(ep, "", myTimeout)
		if err != nil {
			return nil, ref, err
		}
		opts.MySQLDSN = cfg.FormatDSN()
	}
	conn, err := engine.OpenSettings(ctx, a.h, ep.Instance(), opts)
	return conn, ref, err
}

// located is the target's endpoint and the server it reaches, as the
// change layer's journal names it.
func (a *Applier) located(ctx context.Context, e engine.Engine) (engine.Endpoint, change.ServerRef, error) {
	ep, err := a.endpoint(ctx, e)
	if err != nil {
		return ep, change.ServerRef{}, err
	}
	in := ep.Instance()
	if in == nil {
		return ep, change.ServerRef{}, engine.ErrNotLocated
	}
	return ep, change.ServerRef{Engine: string(in.Engine), Name: in.Name(), DataDir: in.DataDir, Port: in.Port,
		PID: in.PID, Start: change.StartTime(a.h, in.PID)}, nil
}

// checkRecoveryLogin makes sure the undo could log in without the
// password given now, as the change layer's undo does (Config.Dial): a
// change nobody can undo after a crash is not made.
func (a *Applier) checkRecoveryLogin(ctx context.Context, e engine.Engine) error {
	_, ref, err := a.located(ctx, e)
	if err != nil {
		return err
	}
	c, cancel := context.WithTimeout(ctx, myTimeout)
	defer cancel()
	conn, err := a.c.Config().Dial(c, ref)
	if err != nil {
		how := "peer or trust authentication, or root's ~/.pgpass"
		if e == engine.MySQL {
			how = "socket authentication, or [client] user and password in root's ~/.my.cnf"
		}
		return fmt.Errorf("%s: after a crash, `dbhost experiment recover` must log in to undo changes, without a password kept anywhere (%s), and that fails: %v", e, how, err)
	}
	conn.Close()
	return nil
}

// pgDSN is the endpoint as a connection string (keyword=value, values
// quoted).
func pgDSN(ep engine.Endpoint) string {
	q := strings.NewReplacer(`\`, `\\`, `'`, `\'`)
	db := ep.DB
	if db == "" {
		db = "postgres"
	}
	port := ep.Port
	if port == 0 {
		port = 5432
	}
	parts := []string{"host='" + q.Replace(ep.Host) + "'", "port=" + strconv.Itoa(port), "dbname='" + q.Replace(db) + "'"}
	if ep.User != "" {
		parts = append(parts, "user='"+q.Replace(ep.User)+"'")
	}
	if ep.Password != "" {
		parts = append(parts, "password='"+q.Replace(ep.Password)+"'")
	}
	return strings.Join(parts, " ")
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
