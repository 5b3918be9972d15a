// Package mysql finds running MySQL, MariaDB and Percona servers (also as
// Galera / Percona XtraDB Cluster nodes) and reads their option files in the
// server's search order and, over the local socket, their live variables.
package mysql

import (
	_ "github.com/go-sql-driver/mysql" // live variables (kept in go.mod until used)
)
