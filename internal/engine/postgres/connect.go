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
	return dial(ctx, h, in, sockDir, opts.PGDSN, timeout)
}

// dial tries each login in turn and returns the first connection to the
// instance, with how it connected (never the password). The backend that
// answers must be a child of the discovered postmaster.
func dial(ctx context.Context, h *host.Host, in *engine.Instance, sockDir, dsn string, timeout time.Duration) (*pgconn.PgConn, string, error) {
	logins, note, err := attempts(h, in, sockDir, dsn)
	if err != nil {
		return nil, "", err
	}
	var errs []string
	for _, a := range logins {
		cfg, err := a.config(h, in, sockDir, timeout)
		if err != nil {
			errs = append(errs, err.Error())
			continue
		}
		c, err := pgconn.ConnectConfig(ctx, cfg)
		if err != nil {
			var wrong *engine.WrongServerError
			if errors.As(err, &wrong) {
				// Another process holds an address of the string: no
				// other login is tried. Say also why the others failed.
				why := wrong.Reason
				if s := shortErr(err); !strings.Contains(why, s) {
					why = s + "; " + why
				}
				return nil, "", errors.New(note + why)
			}
			errs = append(errs, fmt.Sprintf("as user %s: %s", cfg.User, shortErr(err)))
			if ctx.Err() != nil {
				break
			}
			continue
		}
		if err := checkBackend(h, in, c); err != nil {
			c.Close(context.Background())
			return nil, "", err
		}
		where := fmt.Sprintf("unix socket %s port %d", sockDir, in.Port)
		if a.dsn != "" {
			where = fmt.Sprintf("--pg connection string (host %s port %d)", cfg.Host, cfg.Port)
		}
		how := ""
		if cfg.RequireAuth == "none" {
			how = ", no password (" + in.MayReceiveCredentials() + ")"
		}
		if note != "" {
			how += " (" + strings.TrimSuffix(note, "; ") + ")"
		}
		return c, fmt.Sprintf("%s as user %s%s", where, cfg.User, how), nil
	}
	return nil, "", errors.New(note + strings.Join(errs, "; "))
}

// checkBackend verifies that the backend serving the connection is a child
// of the discovered postmaster (its PID comes with the startup reply). In
// another PID namespace the PID is that namespace's, and the socket's
// owner was already checked.
func checkBackend(h *host.Host, in *engine.Instance, c *pgconn.PgConn) error {
	pid := int(c.PID())
	st, err := h.ProcStat(pid)
	if err == nil && st.PPID == in.PID {
		return nil
	}
	if s, err := h.Status(in.PID); err == nil && len(s.NSpids) > 1 {
		return nil
	}
	return &engine.WrongServerError{Reason: fmt.Sprintf("the backend (pid %d) is not a child of the discovered postmaster pid %d; not read", pid, in.PID)}
}
