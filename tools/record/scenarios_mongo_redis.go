package main

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/dbhost/dbhost/internal/engine/mongo/mongotest"
	"github.com/dbhost/dbhost/internal/testdb"
)

// Redis and MongoDB fixtures. Each adds one private server next to the
// machine's shared ones; the shared Redis on 6379 is in every fixture too.
// MongoDB cannot be installed on this VM (no package), so the mongo-*
// fixtures run mongotest's stand-in: a real process named mongod, built to
// report the version the fixture is about, with a real mongod.conf, data
// directory and listening sockets, that speaks no MongoDB protocol.

const standInNote = " (mongod is dbhost's stand-in process from internal/engine/mongo/mongotest: MongoDB has no package for this VM; its version output, config file, data directory, storage.bson and sockets are real, it speaks no MongoDB protocol)"

func init() {
	register(Scenario{
		Name: "redis-private",
		Note: "a private Redis bound to 127.0.0.1 with a Unix socket, an included file, about 2 MB of keys, appendonly yes with appendfsync everysec, no password",
		Setup: func(r *Run) error {
			inc, err := redisInclude(r, "maxmemory 256mb\ntcp-backlog 128\n")
			if err != nil {
				return err
			}
			s := r.Redis(testdb.Options{Settings: map[string]string{"include": inc, "appendonly": "yes", "appendfsync": "everysec"}})
			return fillRedis(r, s)
		},
	})
	register(Scenario{
		Name: "redis-open",
		Note: "a private Redis bound to 0.0.0.0 with protected-mode no and no password (open to the network), appendonly yes with appendfsync no",
		Setup: func(r *Run) error {
			s := r.Redis(testdb.Options{Settings: map[string]string{"bind": "0.0.0.0", "protected-mode": "no", "appendonly": "yes", "appendfsync": "no"}})
			return fillRedis(r, s)
		},
	})
	register(Scenario{
		Name: "redis-auth",
		Note: "two private Redis bound to 0.0.0.0: one whose default ACL user has a password (user default on >...), set-proc-title no so its command line shows the config file, RDB snapshots (save 900 1); one with requirepass and its command line rewritten by set-proc-title (it refuses to be asked, and nothing names its config file)",
		Setup: func(r *Run) error {
			r.Redis(testdb.Options{Settings: map[string]string{
				"bind": "0.0.0.0", "set-proc-title": "no", "save": "900 1",
				"user": "default on >fixture-secret-do-not-record ~* &* +@all",
			}})
			r.Redis(testdb.Options{Settings: map[string]string{"bind": "0.0.0.0", "requirepass": "fixture-secret-do-not-record"}})
			return nil
		},
	})
	register(Scenario{
		Name:   "redis-nonroot",
		Note:   "a private Redis (user redis) bound to 0.0.0.0 with protected-mode no, collected as user nobody: its sockets cannot be seen",
		AsUser: "nobody",
		Setup:  redisSetup(testdb.Options{Settings: map[string]string{"bind": "0.0.0.0", "protected-mode": "no"}}),
	})
	register(Scenario{
		Name:  "mongo-8",
		Note:  "a mongod 8.0.4 with a packaged-style mongod.conf: bound to 127.0.0.1, authorization not enabled, WiredTiger" + standInNote,
		Setup: mongoSetup(mongotest.Options{Version: "8.0.4"}),
	})
	register(Scenario{
		Name: "mongo-6",
		Note: "a mongod 6.0.10 with net.bindIpAll true and no authorization, WiredTiger" + standInNote,
		Setup: func(r *Run) error {
			mongotest.Start(r.tb, mongotest.Options{Version: "6.0.10", Conf: func(dir string, port int) string {
				return mongoConf(dir, port, "  bindIpAll: true\n", "")
			}})
			return nil
		},
	})
	register(Scenario{
		Name: "mongo-4-mmapv1",
		Note: "a mongod 4.0.28 on the MMAPv1 storage engine, bound to 127.0.0.1, authorization enabled" + standInNote,
		Setup: func(r *Run) error {
			mongotest.Start(r.tb, mongotest.Options{Version: "4.0.28", Conf: func(dir string, port int) string {
				return mongoConf(dir, port, "  bindIp: 127.0.0.1\n", "  engine: mmapv1\n") + "security:\n  authorization: enabled\n"
			}})
			return nil
		},
	})
	register(Scenario{
		Name:   "mongo-nonroot",
		Note:   "a mongod 8.0.4 running as root with its binary, mongod.conf (bindIpAll, no authorization) and data directory readable by root only, collected as user nobody" + standInNote,
		AsUser: "nobody",
		Setup: func(r *Run) error {
			mongotest.Start(r.tb, mongotest.Options{Version: "8.0.4", User: "root", Private: true, Conf: func(dir string, port int) string {
				return mongoConf(dir, port, "  bindIpAll: true\n", "")
			}})
			return nil
		},
	})
}

// mongoConf writes a mongod.conf with the given net and storage lines.
func mongoConf(dir string, port int, netLines, storageLines string) string {
	return fmt.Sprintf(`# mongod.conf
storage:
  dbPath: %[1]s/db
%[4]s
systemLog:
  destination: file
  logAppend: true
  path: %[1]s/log/mongod.log

net:
  port: %[2]d
%[3]s  unixDomainSocket:
    pathPrefix: %[1]s/run

processManagement:
  timeZoneInfo: /usr/share/zoneinfo
`, dir, port, netLines, storageLines)
}

// redisInclude writes a file for a private Redis to include, removed after
// collection.
func redisInclude(r *Run, text string) (string, error) {
	dir, err := sharedTempDir(r, "dbhost-redis-inc-")
	if err != nil {
		return "", err
	}
	f := filepath.Join(dir, "extra.conf")
	return f, os.WriteFile(f, []byte(text), 0o644)
}

// fillRedis writes about 2 MB of keys and a snapshot, so the persistence
// files have a size.
func fillRedis(r *Run, s *testdb.Server) error {
	port := fmt.Sprint(s.Port)
	if err := r.Command("redis-cli", "-p", port, "EVAL", "for i=1,20000 do redis.call('SET','key:'..i,string.rep('x',100)) end", "0"); err != nil {
		return err
	}
	return r.Command("redis-cli", "-p", port, "SAVE")
}
