package mysql

import (
	"database/sql"
	"net"
	"strconv"
	"time"

	"github.com/go-sql-driver/mysql"

	"github.com/dbhost/dbhost/internal/engine"
)

// EndpointConfig is the driver configuration for an endpoint's database db
// ("" none), dialling within timeout. The driver's logger is silenced: its
// messages would reach the terminal unescaped.
func EndpointConfig(ep engine.Endpoint, db string, timeout time.Duration) *mysql.Config {
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
	cfg.Logger = &mysql.NopLogger{}
	return cfg
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
