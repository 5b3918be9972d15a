package mysql

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/go-sql-driver/mysql"

	"github.com/dbhost/dbhost/internal/engine"
	"github.com/dbhost/dbhost/internal/host"
	"github.com/dbhost/dbhost/internal/textio"
)

// OpenSettings: a dynamic variable changes with SET GLOBAL; the option
// file fix renders into the server's included directory keeps it across
// restarts (MariaDB has no SET PERSIST). A variable that is not dynamic
// is only written to that file.
func (detector) OpenSettings(ctx context.Context, h *host.Host, in *engine.Instance, opts engine.Options) (engine.SettingsConn, error) {
	db, _, err := Open(ctx, h, in, opts)
	if err != nil {
		return nil, err
	}
	return &settingsConn{db: db}, nil
}

type settingsConn struct {
	db       *sql.DB
	warnings string // of the last SET GLOBAL
}

// Warnings are the server's warnings of the last SET GLOBAL: a value it
// clamped says so only there.
func (s *settingsConn) Warnings() string { return s.warnings }

func (s *settingsConn) Close()            { s.db.Close() }
func (s *settingsConn) SavesItself() bool { return false }

func (s *settingsConn) Method(restart bool) string {
	if restart {
		return "the option file in its included directory; takes effect at the next restart"
	}
	return "SET GLOBAL, kept by the option file in its included directory"
}

// Unchanged: a restart setting changes only in the file; a dynamic one
// that already has the value needs no SET.
func (s *settingsConn) Unchanged(st engine.SettingState, value string, restart bool) bool {
	return restart || SameValue(st.Value, value)
}

var (
	varName = textio.LazyRegexp(`^[a-z_][a-z0-9_]*$`)
	number  = textio.LazyRegexp(`^-?[0-9]+(\.[0-9]+)?$`)
	keyword = textio.LazyRegexp(`^(?i:on|off|true|false)$`)
	// plain: a value quoted as a string needs no escape in any sql_mode
	// (backslash escapes depend on NO_BACKSLASH_ESCAPES).
	plain = textio.LazyRegexp(`^[A-Za-z0-9_.,:/@+=-]*$`)
)

// erUnknownSystemVariable is the server's error for a name that is no
// variable (an option read only at start, like symbolic_links).
const erUnknownSystemVariable = 1193

func (s *settingsConn) Get(ctx context.Context, key string) (engine.SettingState, error) {
	if !varName.MatchString(key) {
		return engine.SettingState{}, fmt.Errorf("%q is not a variable name", key)
	}
	var v sql.NullString
	err := s.db.QueryRowContext(ctx, "SELECT @@GLOBAL."+key).Scan(&v)
	var me *mysql.MySQLError
	if errors.As(err, &me) && me.Number == erUnknownSystemVariable {
		return engine.SettingState{OptionOnly: true}, nil
	}
	if err != nil {
		return engine.SettingState{}, err
	}
	return engine.SettingState{Value: v.String}, nil
}

// Literal renders a value for SET GLOBAL, which takes no placeholder for
// a keyword and wants numbers unquoted.
func Literal(v string) (string, error) {
	switch {
	case number.MatchString(v), keyword.MatchString(v):
		return v, nil
	case plain.MatchString(v):
		return "'" + v + "'", nil
	}
	return "", fmt.Errorf("refusing value %q", v)
}

func (s *settingsConn) set(ctx context.Context, key, value string) error {
	if !varName.MatchString(key) {
		return fmt.Errorf("%q is not a variable name", key)
	}
	lit, err := Literal(value)
	if err != nil {
		return err
	}
	// One session: SHOW WARNINGS reads the statement before it.
	c, err := s.db.Conn(ctx)
	if err != nil {
		return err
	}
	defer c.Close()
	if _, err = c.ExecContext(ctx, "SET GLOBAL "+key+" = "+lit); err != nil {
		return err
	}
	s.warnings = ""
	rows, err := c.QueryContext(ctx, "SHOW WARNINGS")
	if err != nil {
		return nil
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var level, msg string
		var code int
		if rows.Scan(&level, &code, &msg) == nil {
			out = append(out, msg)
		}
	}
	s.warnings = strings.Join(out, "; ")
	return nil
}

func (s *settingsConn) Change(ctx context.Context, key, value string, restart bool) error {
	if restart {
		return nil
	}
	return s.set(ctx, key, value)
}

func (s *settingsConn) Restore(ctx context.Context, key string, before engine.SettingState, restart bool) error {
	if restart || before.OptionOnly {
		return nil
	}
	return s.set(ctx, key, before.Value)
}

func (s *settingsConn) Applied(ctx context.Context, key, value string, restart bool) (bool, bool, error) {
	cur, err := s.Get(ctx, key)
	if err != nil || cur.OptionOnly {
		return cur.OptionOnly, false, err
	}
	same := SameValue(cur.Value, value)
	return same, restart && !same, nil
}

// SameValue compares a variable as the server shows it with a value as an
// option file or SET takes it: ON is 1, sizes have suffixes.
func SameValue(got, want string) bool {
	if strings.EqualFold(got, want) {
		return true
	}
	norm := func(v string) string {
		switch strings.ToUpper(v) {
		case "ON", "TRUE":
			return "1"
		case "OFF", "FALSE":
			return "0"
		}
		if n, ok := sizeValue(v); ok {
			return strconv.FormatUint(n, 10)
		}
		return v
	}
	return norm(got) == norm(want)
}

func sizeValue(v string) (uint64, bool) {
	mult := uint64(1)
	if v != "" {
		switch strings.ToUpper(v[len(v)-1:]) {
		case "K":
			mult = 1 << 10
		case "M":
			mult = 1 << 20
		case "G":
			mult = 1 << 30
		case "T":
			mult = 1 << 40
		}
		if mult > 1 {
			v = v[:len(v)-1]
		}
	}
	n, err := strconv.ParseUint(v, 10, 64)
	return n * mult, err == nil
}
