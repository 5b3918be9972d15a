package mysql

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/dbhost/dbhost/internal/engine"
	"github.com/dbhost/dbhost/internal/host"
)

// Open connects to a discovered instance over its Unix socket with the
// credentials the live settings read uses (--mysql DSN, else ~/.my.cnf,
// else socket authentication as the invoking user), and checks that the
// server answering is this instance. via says how, without a password.
// The pool holds one connection; the caller closes it. It is for commands
// that watch a server over time; it is never recorded in a snapshot.
func Open(ctx context.Context, h *host.Host, in *engine.Instance, opts engine.Options) (db *sql.DB, via string, err error) {
	switch {
	case in == nil || in.Engine != engine.MySQL:
		return nil, "", errors.New("not a MySQL/MariaDB instance")
	case opts.NoConnect:
		return nil, "", errors.New("live connection not attempted (--no-connect)")
	case !h.System():
		return nil, "", host.ErrNotLive
	}
	if opts.Timeout <= 0 {
		opts.Timeout = defaultTimeout
	}
	x := &inspection{ctx: ctx, h: h, in: in, opts: opts}
	socket := x.socket()
	if socket == "" {
		return nil, "", errors.New("no Unix socket found for this server")
	}
	x.socketUsed = socket
	cfg, via, err := connConfig(h, in, socket, opts)
	if err != nil {
		return nil, "", err
	}
	db, err = OpenConfig(cfg)
	if err != nil {
		return nil, "", err
	}
	c, cancel := context.WithTimeout(ctx, opts.Timeout)
	defer cancel()
	d := liveData{Variables: map[string]string{}}
	var datadir, lport sql.NullString
	if err := db.QueryRowContext(c, "SELECT @@datadir, @@port").Scan(&datadir, &lport); err != nil {
		db.Close()
		return nil, "", fmt.Errorf("connect %s: %w", via, err)
	}
	d.Variables["datadir"], d.Variables["port"] = datadir.String, lport.String
	if why := x.otherServer(&d); why != "" {
		db.Close()
		return nil, "", errors.New(why)
	}
	return db, via, nil
}
