package apply

import (
	"context"
	"database/sql"
	"fmt"
	"regexp"
	"strconv"
	"strings"

	"github.com/dbhost/dbhost/internal/engine"
	"github.com/dbhost/dbhost/internal/engine/mysql"
	"github.com/dbhost/dbhost/internal/host"
)

// mysqlServer changes a dynamic variable with SET GLOBAL; the option file
// apply writes into the server's included directory keeps it across
// restarts (MariaDB has no SET PERSIST). A variable that is not dynamic
// is only written to that file.
type mysqlServer struct {
	db *sql.DB
}

func connectMySQL(ctx context.Context, h *host.Host, in *engine.Instance, opts engine.Options) (server, error) {
	db, _, err := mysql.Open(ctx, h, in, opts)
	if err != nil {
		return nil, err
	}
	return &mysqlServer{db: db}, nil
}

func (s *mysqlServer) close() { s.db.Close() }

var (
	mysqlName = regexp.MustCompile(`^[a-z_][a-z0-9_]*$`)
	mysqlNum  = regexp.MustCompile(`^-?[0-9]+(\.[0-9]+)?$`)
	mysqlWord = regexp.MustCompile(`^(?i:on|off|true|false)$`)
	// mysqlSafe: a value quoted as a string needs no escape in any
	// sql_mode (backslash escapes depend on NO_BACKSLASH_ESCAPES).
	mysqlSafe = regexp.MustCompile(`^[A-Za-z0-9_.,:/@+=-]*$`)
)

func (s *mysqlServer) get(ctx context.Context, key string) (savedSetting, error) {
	if !mysqlName.MatchString(key) {
		return savedSetting{}, fmt.Errorf("%q is not a variable name", key)
	}
	var v sql.NullString
	if err := s.db.QueryRowContext(ctx, "SELECT @@GLOBAL."+key).Scan(&v); err != nil {
		return savedSetting{}, err
	}
	return savedSetting{Value: v.String}, nil
}

// literal renders a value for SET GLOBAL, which takes no placeholder for
// a keyword and wants numbers unquoted.
func literal(v string) (string, error) {
	switch {
	case mysqlNum.MatchString(v), mysqlWord.MatchString(v):
		return v, nil
	case mysqlSafe.MatchString(v):
		return "'" + v + "'", nil
	}
	return "", fmt.Errorf("refusing value %q", v)
}

func (s *mysqlServer) set(ctx context.Context, key, value string) error {
	if !mysqlName.MatchString(key) {
		return fmt.Errorf("%q is not a variable name", key)
	}
	lit, err := literal(value)
	if err != nil {
		return err
	}
	_, err = s.db.ExecContext(ctx, "SET GLOBAL "+key+" = "+lit)
	return err
}

func (s *mysqlServer) change(ctx context.Context, sp SettingPlan) error {
	if sp.Restart {
		return nil
	}
	return s.set(ctx, sp.Key, sp.New)
}

func (s *mysqlServer) restore(ctx context.Context, u settingUndo) error {
	return s.set(ctx, u.Key, u.Old)
}

func (s *mysqlServer) applied(ctx context.Context, sp SettingPlan) (bool, bool, error) {
	cur, err := s.get(ctx, sp.Key)
	if err != nil {
		return false, false, err
	}
	same := sameMySQLValue(cur.Value, sp.New)
	return same, sp.Restart && !same, nil
}

// sameMySQLValue compares a variable as the server shows it with a value
// as an option file or SET takes it: ON is 1, sizes have suffixes.
func sameMySQLValue(got, want string) bool {
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
		if n, ok := mysqlSize(v); ok {
			return strconv.FormatUint(n, 10)
		}
		return v
	}
	return norm(got) == norm(want)
}

func mysqlSize(v string) (uint64, bool) {
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
