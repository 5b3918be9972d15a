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
)

// Connect opens a connection to a discovered instance over its Unix socket,
// with the logins the live settings read tries (--pg connection string,
// PGUSER, postgres, the invoking user; passwords from ~/.pgpass). via says
// how it connected, without a password. The caller closes the connection.
// It is for commands that watch a server over time; it is never recorded
// in a snapshot.
func Connect(ctx context.Context, h *host.Host, in *engine.Instance, opts engine.Options) (conn *pgconn.PgConn, via string, err error) {
	switch {
	case in == nil || in.Engine != engine.Postgres:
		return nil, "", errors.New("not a PostgreSQL instance")
	case opts.NoConnect:
		return nil, "", errors.New("live connection not attempted (--no-connect)")
	case !h.System():
		return nil, "", host.ErrNotLive
	}
	sockDir, why := socketDir(h, in)
	if why != "" {
		return nil, "", errors.New(why)
	}
	timeout := opts.Timeout
	if timeout <= 0 {
		timeout = 3 * time.Second
	}
	return dial(ctx, h, sockDir, in.Port, opts.PGDSN, timeout)
}

// dial tries each login in turn and returns the first connection, with how
// it connected (never the password).
func dial(ctx context.Context, h *host.Host, sockDir string, port int, dsn string, timeout time.Duration) (*pgconn.PgConn, string, error) {
	var errs []string
	for _, a := range attempts(dsn) {
		cfg, err := a.config(h, sockDir, port, timeout)
		if err != nil {
			errs = append(errs, err.Error())
			continue
		}
		c, err := pgconn.ConnectConfig(ctx, cfg)
		if err != nil {
			errs = append(errs, fmt.Sprintf("as user %s: %s", cfg.User, shortErr(err)))
			if ctx.Err() != nil {
				break
			}
			continue
		}
		where := fmt.Sprintf("unix socket %s port %d", sockDir, port)
		if a.dsn != "" {
			where = "--pg connection string"
			if cfg.Host != "" {
				where += fmt.Sprintf(" (host %s port %d)", cfg.Host, cfg.Port)
			}
		}
		return c, fmt.Sprintf("%s as user %s", where, cfg.User), nil
	}
	return nil, "", errors.New(strings.Join(errs, "; "))
}
