package mysql

import (
	"context"
	"database/sql"
	"fmt"
	"net"
	"strconv"
	"time"

	"github.com/go-sql-driver/mysql"

	"github.com/dbhost/dbhost/internal/engine"
)

// EndpointConfig is the driver configuration for a located endpoint's
// database db ("" none), dialling within timeout through the endpoint's
// checked dial (engine.Endpoint.Dial). The driver's logger is silenced:
// its messages would reach the terminal unescaped.
func EndpointConfig(ep engine.Endpoint, db string, timeout time.Duration) (*mysql.Config, error) {
	if !ep.Located() {
		return nil, fmt.Errorf("%s: %w", ep, engine.ErrNotLocated)
	}
	cfg := mysql.NewConfig()
	cfg.User, cfg.Passwd, cfg.DBName = ep.User, ep.Password, db
	if ep.Socket() {
		cfg.Net, cfg.Addr = "unix", ep.Host
	} else {
		h := ep.Host
		if h == "" {
			h = "localhost"
		}
		cfg.Net, cfg.Addr = "tcp", net.JoinHostPort(h, strconv.Itoa(ep.PortOrDefault()))
	}
	cfg.Timeout = timeout
	cfg.AllowCleartextPasswords = false
	cfg.DialFunc = func(ctx context.Context, network, addr string) (net.Conn, error) {
		return ep.Dial(ctx, network, addr, timeout)
	}
	cfg.Logger = &mysql.NopLogger{}
	return cfg, nil
}

// OpenEndpoint opens a handle of one connection on a located endpoint's
// database db ("" none), every read and write bounded by timeout and
// arguments interpolated client-side.
func OpenEndpoint(ep engine.Endpoint, db string, timeout time.Duration) (*sql.DB, error) {
	cfg, err := EndpointConfig(ep, db, timeout)
	if err != nil {
		return nil, err
	}
	cfg.ReadTimeout, cfg.WriteTimeout = timeout, timeout
	cfg.InterpolateParams = true
	return OpenConfig(cfg)
}

// OpenConfig opens a handle of one connection at most: dbhost's sessions
// run one statement at a time and must not fan out.
func OpenConfig(cfg *mysql.Config) (*sql.DB, error) {
	c, err := mysql.NewConnector(cfg)
	if err != nil {
		return nil, err
	}
	db := sql.OpenDB(c)
	db.SetMaxOpenConns(1)
	db.SetMaxIdleConns(1)
	return db, nil
}
