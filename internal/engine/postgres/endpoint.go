package postgres

import (
	"context"
	"fmt"
	"net"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/dbhost/dbhost/internal/engine"
)

// ConnConfig is the driver configuration for a located endpoint's
// database db ("" : the endpoint's). Every address the driver tries goes
// through the endpoint's checked dial (engine.Endpoint.Dial). libpq's
// environment (PGSSLMODE, PGPASSFILE, ...) applies as it does to psql. The
// password is set on the configuration, so it never sits in a string that
// could be printed.
func ConnConfig(ep engine.Endpoint, db string, timeout time.Duration) (*pgx.ConnConfig, error) {
	if !ep.Located() {
		return nil, fmt.Errorf("%s: %w", ep, engine.ErrNotLocated)
	}
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
	cfg.DialFunc = func(ctx context.Context, network, addr string) (net.Conn, error) {
		return ep.Dial(ctx, network, addr, timeout)
	}
	return cfg, nil
}

// ConnectEndpoint opens a session on a located endpoint's database db (""
// : the endpoint's) and checks that the backend answering is a child of
// the located postmaster. It is the one way dbhost's commands that were
// given a server (experiment, knob, workload) open a session on it.
func ConnectEndpoint(ctx context.Context, ep engine.Endpoint, db string, timeout time.Duration) (*pgx.Conn, error) {
	cfg, err := ConnConfig(ep, db, timeout)
	if err != nil {
		return nil, err
	}
	c, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("connect to %s: %w", ep, err)
	}
	if err := checkBackend(ep.HostModel(), ep.Instance(), c.PgConn()); err != nil {
		c.Close(context.Background())
		return nil, fmt.Errorf("%s: %w", ep, err)
	}
	return c, nil
}

// quote quotes a libpq keyword value.
func quote(s string) string {
	return "'" + strings.NewReplacer(`\`, `\\`, `'`, `\'`).Replace(s) + "'"
}
