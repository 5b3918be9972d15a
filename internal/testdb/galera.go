package testdb

import (
	"context"
	"database/sql"
	"strings"
	"time"

	"github.com/go-sql-driver/mysql"
)

// galeraSynced asks a Galera node over its socket, as root (socket
// authentication), whether it is Synced in a Primary component and ready.
func galeraSynced(socket string) bool {
	cfg := mysql.NewConfig()
	cfg.Net, cfg.Addr, cfg.User = "unix", socket, "root"
	cfg.Timeout = time.Second
	cfg.Logger = &mysql.NopLogger{}
	conn, err := mysql.NewConnector(cfg)
	if err != nil {
		return false
	}
	db := sql.OpenDB(conn)
	defer db.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	rows, err := db.QueryContext(ctx, "SHOW GLOBAL STATUS WHERE Variable_name IN ('wsrep_cluster_status', 'wsrep_local_state_comment', 'wsrep_ready')")
	if err != nil {
		return false
	}
	defer rows.Close()
	st := map[string]string{}
	for rows.Next() {
		var k, v string
		if rows.Scan(&k, &v) != nil {
			return false
		}
		st[strings.ToLower(k)] = v
	}
	return st["wsrep_cluster_status"] == "Primary" && st["wsrep_local_state_comment"] == "Synced" && st["wsrep_ready"] == "ON"
}
