package main

import (
	"github.com/dbhost/dbhost/internal/engine/mongo/mongotest"
	"github.com/dbhost/dbhost/internal/testdb"
)

// Memory sizing scenarios: private servers whose memory settings are
// judged against this host's RAM and the other databases on it (the
// machine's shared PostgreSQL, MariaDB and Redis are recorded too). No
// kernel setting changes; the servers stop after collection.

func init() {
	register(Scenario{
		Name: "size-shared",
		Note: "three private servers next to the shared ones: a PostgreSQL with testdb's small shared_buffers (32MB), a MariaDB with innodb_buffer_pool_size 20G (most of this 23.5 GiB host) and a Redis without maxmemory",
		Setup: func(r *Run) error {
			r.Postgres(testdb.Options{})
			r.MariaDB(testdb.Options{Settings: map[string]string{"innodb-buffer-pool-size": "20G"}})
			r.Redis(testdb.Options{})
			return nil
		},
	})
	register(Scenario{
		Name:  "size-pg-workmem",
		Note:  "a private PostgreSQL with work_mem 1GB and max_connections 500: 1.5 TB at pgtune's three operations per connection",
		Setup: postgresSetup(testdb.Options{Settings: map[string]string{"work_mem": "1GB", "max_connections": "500"}}),
	})
	register(Scenario{
		Name:  "size-pg-tuned",
		Note:  "a private PostgreSQL sized for this host: shared_buffers 5GB, effective_cache_size 16GB, work_mem 16MB",
		Setup: postgresSetup(testdb.Options{Settings: map[string]string{"shared_buffers": "5GB", "effective_cache_size": "16GB", "work_mem": "16MB"}}),
	})
	register(Scenario{
		Name: "size-mongo-cache",
		Note: "a mongod 6.0.10 with storage.wiredTiger.engineConfig.cacheSizeGB 20 on this 23.5 GiB host" + standInNote,
		Setup: func(r *Run) error {
			mongotest.Start(r.tb, mongotest.Options{Version: "6.0.10", Conf: func(dir string, port int) string {
				return mongoConf(dir, port, "  bindIp: 127.0.0.1\n", "  wiredTiger:\n    engineConfig:\n      cacheSizeGB: 20\n")
			}})
			return nil
		},
	})
}
