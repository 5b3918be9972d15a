package knob_test

import (
	"context"
	"database/sql"
	"os"
	"path/filepath"
	"strings"
	"testing"

	gomysql "github.com/go-sql-driver/mysql"

	"github.com/dbhost/dbhost/internal/change"
	"github.com/dbhost/dbhost/internal/engine"
	"github.com/dbhost/dbhost/internal/knob"
	"github.com/dbhost/dbhost/internal/testdb"
)

func myTarget(s *testdb.Server) knob.Target {
	return knob.Target{Engine: engine.MySQL, DataDir: s.DataDir,
		MySQL: &engine.Endpoint{Engine: engine.MySQL, Host: s.Socket, User: "root"}}
}

// global reads a global variable on a new connection (root by socket
// authentication, as testdb sets it up).
func global(t *testing.T, s *testdb.Server, name string) string {
	t.Helper()
	cfg := gomysql.NewConfig()
	cfg.User, cfg.Net, cfg.Addr = "root", "unix", s.Socket
	c, err := gomysql.NewConnector(cfg)
	if err != nil {
		t.Fatal(err)
	}
	db := sql.OpenDB(c)
	defer db.Close()
	var v string
	if err := db.QueryRow("SELECT @@GLOBAL." + name).Scan(&v); err != nil {
		t.Fatal(err)
	}
	return v
}

// Dynamic variables: SET GLOBAL, read back, and undone by a new process
// from the journal alone.
func TestMySQLGlobal(t *testing.T) {
	integration(t)
	s := testdb.MariaDB(t, testdb.Options{})
	j, file := tempChanger(t)
	ctx := context.Background()
	names := []string{"max_connections", "innodb_io_capacity", "long_query_time", "innodb_flush_log_at_trx_commit"}
	before := map[string]string{}
	for _, n := range names {
		before[n] = global(t, s, n)
	}
	a := knob.NewApplier(liveHost(t), j, myTarget(s))
	_, set, err := knob.ParseArm("a: mysql.max_connections=77 mysql.innodb-io-capacity=300 mysql.long_query_time=2.5 mysql.innodb_flush_log_at_trx_commit=2")
	if err != nil {
		t.Fatal(err)
	}
	res, err := a.Apply(ctx, set, false)
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range map[string]string{"max_connections": "77", "innodb_io_capacity": "300", "long_query_time": "2.5", "innodb_flush_log_at_trx_commit": "2"} {
		if got := global(t, s, k); got != v {
			t.Errorf("%s = %s, want %s", k, got, v)
		}
		if res.Values["mysql."+k] != v {
			t.Errorf("Applied mysql.%s = %q, want %q", k, res.Values["mysql."+k], v)
		}
	}
	if res.Restarted {
		t.Error("restarted for dynamic variables")
	}
	fp, err := a.Fingerprint(ctx, []string{"mysql.max_connections"})
	if err != nil || fp["mysql.max_connections"] != "77" || fp["mysql.innodb_flush_log_at_trx_commit"] != "2" {
		t.Errorf("Fingerprint: %v, %v", fp, err)
	}
	recoverInNewProcess(t, file)
	for _, n := range names {
		if got := global(t, s, n); got != before[n] {
			t.Errorf("after recover %s = %s, want %s", n, got, before[n])
		}
	}
}

func TestMySQLRefused(t *testing.T) {
	integration(t)
	s := testdb.MariaDB(t, testdb.Options{})
	j, _ := tempChanger(t)
	ctx := context.Background()
	tg := myTarget(s)
	for _, c := range []struct {
		set, err string
		restart  bool
	}{
		{set: "mysql.max_connections=5", err: "below the minimum 10"},
		{set: "mysql.no_such_variable=1", err: "no such variable"},
		{set: "mysql.innodb_flush_method=sometimes", err: "not one of"},
		{set: "mysql.innodb_log_buffer_size=32M", err: "not dynamic, so set by an option file and a restart, and this server may not be restarted"},
		// testdb starts MariaDB with --no-defaults.
		{set: "mysql.innodb_log_buffer_size=32M", restart: true, err: "reads no !includedir directory"},
		{set: "pg.work_mem=8MB", err: "not a PostgreSQL server"},
	} {
		tg.Restart = nil
		if c.restart {
			tg.Restart = s.Restart
		}
		a := knob.NewApplier(liveHost(t), j, tg)
		_, set, err := knob.ParseArm("a: " + c.set)
		if err != nil {
			t.Fatal(err)
		}
		if err := a.Check(ctx, set); err == nil || !strings.Contains(err.Error(), c.err) {
			t.Errorf("Check(%s) = %v, want %q", c.set, err, c.err)
		}
	}
	if len(j.Journal().Changes()) != 0 {
		t.Errorf("journaled: %v", j.Journal().Changes())
	}
}

// A variable that is not dynamic goes to an option file in the server's
// !includedir and takes a restart; the undo removes the file and restarts.
func TestMySQLOptionFile(t *testing.T) {
	integration(t)
	// root writes option files only where root alone can change them:
	// not under the world-writable /tmp.
	dir := testdb.RootOnlyDir(t, "dbhost-mycnf-")
	confd := filepath.Join(dir, "conf.d")
	if err := os.Mkdir(confd, 0o755); err != nil {
		t.Fatal(err)
	}
	os.Chmod(dir, 0o755)
	defaults := filepath.Join(dir, "my.cnf")
	if err := os.WriteFile(defaults, []byte("[mysqld]\nskip-name-resolve\n!includedir "+confd+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	s := testdb.MariaDB(t, testdb.Options{DefaultsFile: defaults})
	j, _ := tempChanger(t)
	ctx := context.Background()
	before := global(t, s, "innodb_log_buffer_size")
	tg := myTarget(s)
	tg.Restart = s.Restart
	a := knob.NewApplier(liveHost(t), j, tg)
	pid := s.PID
	set := []knob.Setting{{Name: "mysql.innodb_log_buffer_size", Value: "32M"}, {Name: "mysql.max_connections", Value: "88"}}
	res, err := a.Apply(ctx, set, false)
	if err != nil {
		t.Fatal(err)
	}
	if !res.Restarted || s.PID == pid {
		t.Error("not restarted")
	}
	// The dynamic variable is set after the restart, which would lose it.
	if got := global(t, s, "innodb_log_buffer_size"); got != "33554432" || global(t, s, "max_connections") != "88" {
		t.Errorf("innodb_log_buffer_size = %s, max_connections = %s", got, global(t, s, "max_connections"))
	}
	onlyChangeKinds(t, j, change.KindSetting, change.KindFile, change.KindRestart)
	opt := filepath.Join(confd, knob.OptionFileName)
	if b, err := os.ReadFile(opt); err != nil || !strings.Contains(string(b), "innodb_log_buffer_size = 32M") {
		t.Errorf("%s: %q, %v", opt, b, err)
	}
	pid = s.PID
	if err := j.Restore(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(opt); !os.IsNotExist(err) {
		t.Errorf("%s left behind: %v", opt, err)
	}
	if s.PID == pid {
		t.Error("restore did not restart the server")
	}
	if got := global(t, s, "innodb_log_buffer_size"); got != before {
		t.Errorf("after restore innodb_log_buffer_size = %s, want %s", got, before)
	}
}

// A value the server clamps with a mere warning fails the read-back,
// warning included, and is put back.
func TestMySQLClamped(t *testing.T) {
	integration(t)
	s := testdb.MariaDB(t, testdb.Options{})
	j, _ := tempChanger(t)
	before := global(t, s, "innodb_buffer_pool_size")
	a := knob.NewApplier(liveHost(t), j, myTarget(s))
	// Above the minimum SYSTEM_VARIABLES states (2M), below the one
	// MariaDB 10.11 enforces.
	_, err := a.Apply(context.Background(), []knob.Setting{{Name: "mysql.innodb_buffer_pool_size", Value: "3M"}}, false)
	got := global(t, s, "innodb_buffer_pool_size")
	if err == nil || !strings.Contains(err.Error(), "mysql.innodb_buffer_pool_size: wanted 3M, the server has "+got) ||
		!strings.Contains(err.Error(), "Truncated") {
		t.Errorf("clamped value: %v (server has %s)", err, got)
	}
	if err := j.Restore(); err != nil {
		t.Fatal(err)
	}
	if got := global(t, s, "innodb_buffer_pool_size"); got != before {
		t.Errorf("after restore: %s, want %s", got, before)
	}
}
