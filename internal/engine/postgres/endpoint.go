package postgres

import (
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/dbhost/dbhost/internal/engine"
)

// ConnConfig is the driver configuration for an endpoint's database db
// ("" : the endpoint's). libpq's environment (PGSSLMODE, PGPASSFILE, ...)
// applies as it does to psql. The password is set on the configuration, so
// it never sits in a string that could be printed.
func ConnConfig(ep engine.Endpoint, db string, timeout time.Duration) (*pgx.ConnConfig, error) {
	if db == "" {
		db = ep.Database()
	}
	kv := []string{"port=" + strconv.Itoa(ep.PortOrDefault()), "user=" + quote(ep.User), "dbname=" + quote(db),
		"connect_timeout=" + strconv.Itoa(max(int(timeout/time.Second), 1)), "application_name=dbhost"}
	if ep.Host != "" {
		kv = append(kv, "host="+quote(ep.Host))
	}
	cfg, err := pgx.ParseConfig(strings.Join(kv, " "))
	if err != nil {
		return nil, err
	}
	if ep.Password != "" {
		cfg.Password = ep.Password
	}
	return cfg, nil
}

// quote quotes a libpq keyword value.
func quote(s string) string {
	return "'" + strings.NewReplacer(`\`, `\\`, `'`, `\'`).Replace(s) + "'"
}
