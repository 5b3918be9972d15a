package main

import (
	"strconv"

	"github.com/dbhost/dbhost/internal/testdb"
)

// Limits judged by need: each scenario leaves one server short of what its
// own configuration needs, while the flat 64000 rule would have judged the
// same limits otherwise.

func init() {
	register(Scenario{
		Name: "limits-pg-files-short",
		Note: "private PostgreSQL with max_files_per_process 4000 started under prlimit --nofile=1024:1024 (it lowers its file cache to fit and starts); temporary file /etc/systemd/system/mariadb.service.d/99-dbhost-test.conf (LimitNOFILE=2048, LimitNPROC=128: below MariaDB's 4162 descriptors and 215 tasks)",
		Setup: func(r *Run) error {
			r.Postgres(testdb.Options{Nofile: 1024, Settings: map[string]string{"max_files_per_process": "4000"}})
			return tempFile(r, "/etc/systemd/system/mariadb.service.d/99-dbhost-test.conf", "[Service]\nLimitNOFILE=2048\nLimitNPROC=128\n")
		},
	})
	register(Scenario{
		Name: "limits-pg-nproc-short",
		Note: "private PostgreSQL with max_connections 100 (131 tasks at its connection limit) whose process limit was lowered to 100 after it started (runuser -u postgres -- prlimit --pid PID --nproc=100:100)",
		Setup: func(r *Run) error {
			s := r.Postgres(testdb.Options{Settings: map[string]string{"max_connections": "100"}})
			return r.Command("runuser", "-u", "postgres", "--", "prlimit", "--pid", strconv.Itoa(s.PID), "--nproc=100:100")
		},
	})
}
