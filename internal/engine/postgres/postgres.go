// Package postgres finds running PostgreSQL servers and reads their
// configuration (postgresql.conf with its includes and postgresql.auto.conf)
// and, over a local connection, their live settings.
package postgres

import (
	_ "github.com/jackc/pgx/v5" // live settings (kept in go.mod until used)
)
