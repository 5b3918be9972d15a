package postgres

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/dbhost/dbhost/internal/engine"
	"github.com/dbhost/dbhost/internal/host"
	"github.com/dbhost/dbhost/internal/textio"
)

// OpenSettings: settings change with ALTER SYSTEM, which PostgreSQL keeps
// in its own postgresql.auto.conf (read after every other file, so it
// wins), and pg_reload_conf().
func (detector) OpenSettings(ctx context.Context, h *host.Host, in *engine.Instance, opts engine.Options) (engine.SettingsConn, error) {
	c, _, err := Connect(ctx, h, in, opts)
	if err != nil {
		return nil, err
	}
	return &settingsConn{conn: c}, nil
}

type settingsConn struct{ conn *pgconn.PgConn }

func (s *settingsConn) Close()            { s.conn.Close(context.Background()) }
func (s *settingsConn) SavesItself() bool { return true }

func (s *settingsConn) Method(restart bool) string {
	if restart {
		return "ALTER SYSTEM; takes effect at the next restart"
	}
	return "ALTER SYSTEM + pg_reload_conf()"
}

// Unchanged: ALTER SYSTEM already holds the value.
func (s *settingsConn) Unchanged(st engine.SettingState, value string, _ bool) bool {
	return st.Saved != nil && *st.Saved == value
}

// gucName: a setting's name as ALTER SYSTEM takes it unquoted
// (extensions' names have a dot).
var gucName = textio.LazyRegexp(`^[a-z_][a-z0-9_]*(\.[a-z_][a-z0-9_]*)?$`)

func (s *settingsConn) query(ctx context.Context, sql string, args ...string) ([][]string, error) {
	params := make([][]byte, len(args))
	for i, a := range args {
		params[i] = []byte(a)
	}
	res := s.conn.ExecParams(ctx, sql, params, nil, nil, nil).Read()
	if res.Err != nil {
		return nil, pgMessage(res.Err)
	}
	out := make([][]string, len(res.Rows))
	for i, r := range res.Rows {
		out[i] = make([]string, len(r))
		for k, v := range r {
			out[i][k] = string(v)
		}
	}
	return out, nil
}

func pgMessage(err error) error {
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		return errors.New(pe.Message)
	}
	return err
}

func (s *settingsConn) Get(ctx context.Context, key string) (engine.SettingState, error) {
	if !gucName.MatchString(key) {
		return engine.SettingState{}, fmt.Errorf("%q is not a setting name", key)
	}
	rows, err := s.query(ctx, `SELECT current_setting(name), context, source FROM pg_settings WHERE lower(name) = $1`, key)
	if err != nil {
		return engine.SettingState{}, err
	}
	if len(rows) != 1 {
		return engine.SettingState{}, fmt.Errorf("the server has no setting %s", key)
	}
	st := engine.SettingState{Value: rows[0][0], Restart: rows[0][1] == "postmaster"}
	switch rows[0][2] {
	case "command line", "environment variable":
		// Read after every file: ALTER SYSTEM would change nothing.
		st.Overridden = "it is set on the server's " + rows[0][2] + ", which wins over ALTER SYSTEM: change it there"
	}
	// pg_file_settings reads the files as the server would now; it needs
	// superuser or pg_read_all_settings, as ALTER SYSTEM needs superuser.
	rows, err = s.query(ctx, `SELECT setting FROM pg_file_settings
		WHERE name = $1 AND sourcefile = current_setting('data_directory') || '/`+AutoConf+`'
		ORDER BY seqno DESC LIMIT 1`, key)
	if err != nil {
		return engine.SettingState{}, fmt.Errorf("reading %s: %w", AutoConf, err)
	}
	if len(rows) == 1 {
		v := rows[0][0]
		st.Saved = &v
	}
	return st, nil
}

func (s *settingsConn) Change(ctx context.Context, key, value string, _ bool) error {
	return s.save(ctx, key, &value)
}

// Restore puts the previous ALTER SYSTEM entry back, or removes it; the
// file is then byte for byte as before (ALTER SYSTEM keeps the order).
func (s *settingsConn) Restore(ctx context.Context, key string, before engine.SettingState, _ bool) error {
	return s.save(ctx, key, before.Saved)
}

// save runs ALTER SYSTEM, which takes no parameters (the name is checked,
// the value quoted as a literal), and reloads, waiting until this session
// has re-read the files.
func (s *settingsConn) save(ctx context.Context, key string, value *string) error {
	if !gucName.MatchString(key) {
		return fmt.Errorf("%q is not a setting name", key)
	}
	sql := "ALTER SYSTEM RESET " + key
	if value != nil {
		if strings.ContainsAny(*value, "\x00\n\r") {
			return fmt.Errorf("refusing value %q", *value)
		}
		// An E'' literal escapes the same way whatever
		// standard_conforming_strings says.
		esc := strings.NewReplacer(`\`, `\\`, "'", `\'`).Replace(*value)
		sql = "ALTER SYSTEM SET " + key + " = E'" + esc + "'"
	}
	loaded := func() (string, error) {
		rows, err := s.query(ctx, "SELECT pg_conf_load_time()::text")
		if err != nil || len(rows) != 1 {
			return "", fmt.Errorf("pg_conf_load_time: %v", err)
		}
		return rows[0][0], nil
	}
	before, err := loaded()
	if err != nil {
		return err
	}
	for _, q := range []string{sql, "SELECT pg_reload_conf()"} {
		if _, err := s.conn.Exec(ctx, q).ReadAll(); err != nil {
			return pgMessage(err)
		}
	}
	// The reload reaches this session asynchronously; its load time
	// changes when it has re-read the files.
	for {
		now, err := loaded()
		if err != nil {
			return err
		}
		if now != before {
			return nil
		}
		select {
		case <-ctx.Done():
			return errors.New("the server did not reload its configuration")
		case <-time.After(10 * time.Millisecond):
		}
	}
}

// Applied: the value in effect comes from postgresql.auto.conf, or a
// restart is pending for it.
func (s *settingsConn) Applied(ctx context.Context, key, _ string, _ bool) (bool, bool, error) {
	rows, err := s.query(ctx, `SELECT coalesce(sourcefile, ''), pending_restart FROM pg_settings WHERE lower(name) = $1`, key)
	if err != nil {
		return false, false, err
	}
	if len(rows) != 1 {
		return false, false, fmt.Errorf("the server has no setting %s", key)
	}
	return strings.HasSuffix(rows[0][0], "/"+AutoConf), rows[0][1] == "t", nil
}
