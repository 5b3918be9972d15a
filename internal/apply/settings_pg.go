package apply

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/dbhost/dbhost/internal/engine"
	"github.com/dbhost/dbhost/internal/engine/postgres"
	"github.com/dbhost/dbhost/internal/host"
)

// pgServer changes settings with ALTER SYSTEM, which PostgreSQL keeps in
// its own postgresql.auto.conf (read after every other file, so it wins),
// and pg_reload_conf().
type pgServer struct {
	conn *pgconn.PgConn
}

func connectPG(ctx context.Context, h *host.Host, in *engine.Instance, opts engine.Options) (server, error) {
	c, _, err := postgres.Connect(ctx, h, in, opts)
	if err != nil {
		return nil, err
	}
	return &pgServer{conn: c}, nil
}

func (s *pgServer) close() { s.conn.Close(context.Background()) }

// pgName: a GUC name as ALTER SYSTEM takes it unquoted (extensions' names
// have a dot).
var pgName = regexp.MustCompile(`^[a-z_][a-z0-9_]*(\.[a-z_][a-z0-9_]*)?$`)

// autoConf is where ALTER SYSTEM writes, relative to the data directory.
const autoConf = "postgresql.auto.conf"

func (s *pgServer) query(ctx context.Context, sql string, args ...string) ([][]string, error) {
	params := make([][]byte, len(args))
	for i, a := range args {
		params[i] = []byte(a)
	}
	res := s.conn.ExecParams(ctx, sql, params, nil, nil, nil).Read()
	if res.Err != nil {
		return nil, pgErr(res.Err)
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

func pgErr(err error) error {
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		return errors.New(pe.Message)
	}
	return err
}

func (s *pgServer) get(ctx context.Context, key string) (savedSetting, error) {
	if !pgName.MatchString(key) {
		return savedSetting{}, fmt.Errorf("%q is not a setting name", key)
	}
	rows, err := s.query(ctx, `SELECT current_setting(name), context, pending_restart, source FROM pg_settings WHERE name = $1`, key)
	if err != nil {
		return savedSetting{}, err
	}
	if len(rows) != 1 {
		return savedSetting{}, fmt.Errorf("the server has no setting %s", key)
	}
	st := savedSetting{Value: rows[0][0], Restart: rows[0][1] == "postmaster", Pending: rows[0][2] == "t"}
	switch rows[0][3] {
	case "command line", "environment variable":
		// Read after every file: ALTER SYSTEM would change nothing.
		st.Overridden = "it is set on the server's " + rows[0][3] + ", which wins over ALTER SYSTEM: change it there"
	}
	// pg_file_settings reads the files as the server would now; it needs
	// superuser or pg_read_all_settings, as ALTER SYSTEM needs superuser.
	rows, err = s.query(ctx, `SELECT setting FROM pg_file_settings
		WHERE name = $1 AND sourcefile = current_setting('data_directory') || '/`+autoConf+`'
		ORDER BY seqno DESC LIMIT 1`, key)
	if err != nil {
		return savedSetting{}, fmt.Errorf("reading %s: %w", autoConf, err)
	}
	if len(rows) == 1 {
		v := rows[0][0]
		st.Saved = &v
	}
	return st, nil
}

func (s *pgServer) change(ctx context.Context, sp SettingPlan) error {
	v := sp.New
	return s.save(ctx, sp.Key, &v)
}

func (s *pgServer) restore(ctx context.Context, u settingUndo) error {
	return s.save(ctx, u.Key, u.Saved)
}

// save runs ALTER SYSTEM, which takes no parameters: the name is checked
// and the value quoted as a literal.
func (s *pgServer) save(ctx context.Context, key string, value *string) error {
	if !pgName.MatchString(key) {
		return fmt.Errorf("%q is not a setting name", key)
	}
	sql := "ALTER SYSTEM RESET " + key
	if value != nil {
		if strings.ContainsAny(*value, "\x00\n\r") {
			return fmt.Errorf("refusing value %q", *value)
		}
		sql = "ALTER SYSTEM SET " + key + " = '" + strings.ReplaceAll(*value, "'", "''") + "'"
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
			return pgErr(err)
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

// applied: the value in effect comes from postgresql.auto.conf, or a
// restart is pending for it.
func (s *pgServer) applied(ctx context.Context, sp SettingPlan) (bool, bool, error) {
	key := sp.Key
	rows, err := s.query(ctx, `SELECT coalesce(sourcefile, ''), pending_restart FROM pg_settings WHERE name = $1`, key)
	if err != nil {
		return false, false, err
	}
	if len(rows) != 1 {
		return false, false, fmt.Errorf("the server has no setting %s", key)
	}
	return strings.HasSuffix(rows[0][0], "/"+autoConf), rows[0][1] == "t", nil
}
