package change_test

import (
	"database/sql"
	"encoding/json"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"

	gomysql "github.com/go-sql-driver/mysql"

	"github.com/dbhost/dbhost/internal/change"
	"github.com/dbhost/dbhost/internal/testdb"
)

// TestRecoverVersion1PGAutoconf recovers version 1 journals of kind
// pg.autoconf (what `dbhost experiment` wrote for PostgreSQL parameters)
// on a private PostgreSQL: postgresql.auto.conf is put back byte for byte
// with its owner and mode, the server reloads it, and a parameter read
// only at start is put back with the recorded restart command.
func TestRecoverVersion1PGAutoconf(t *testing.T) {
	testdb.Need(t, "root", os.Geteuid() == 0)
	s := testdb.Postgres(t, testdb.Options{})
	bin, err := testdb.PostgresBin()
	if err != nil {
		t.Fatal(err)
	}
	argv := []string{filepath.Join(bin, "pg_ctl"), "restart", "-D", s.DataDir, "-m", "fast", "-w", "-t", "60", "-l", filepath.Join(s.Dir, "pg_ctl.log")}
	// pg_ctl's server is not the one testdb started: stop it here.
	t.Cleanup(func() {
		cmd := exec.Command(argv[0], "stop", "-D", s.DataDir, "-m", "immediate")
		asUser(t, cmd, "postgres")
		cmd.Run()
	})
	conf := filepath.Join(s.DataDir, "postgresql.auto.conf")
	before, err := os.ReadFile(conf)
	if err != nil {
		t.Fatal(err)
	}
	var st syscall.Stat_t
	if err := syscall.Stat(conf, &st); err != nil {
		t.Fatal(err)
	}
	wm, locks := s.SQL(t, "SHOW work_mem"), s.SQL(t, "SHOW max_locks_per_transaction")
	recoverV1 := func(restart bool) {
		t.Helper()
		entry := map[string]any{"kind": change.LegacyPGAutoconf, "what": "PostgreSQL " + s.DataDir, "data": map[string]any{
			"data_dir": s.DataDir, "postmaster_pid": s.PID, "restart": restart, "restart_argv": argv, "restart_user": "postgres",
			"file": map[string]any{"path": conf, "exists": true, "content": string(before), "uid": st.Uid, "gid": st.Gid, "mode": st.Mode & 0o777},
		}}
		b, _ := json.Marshal([]any{entry})
		file := filepath.Join(t.TempDir(), "experiment.journal")
		if err := os.WriteFile(file, b, 0o600); err != nil {
			t.Fatal(err)
		}
		if err := change.Recover(file, change.Config{}); err != nil {
			t.Fatal(err)
		}
		if got, _ := os.ReadFile(conf); string(got) != string(before) {
			t.Errorf("postgresql.auto.conf after recover:\n%s\nwant:\n%s", got, before)
		}
		var now syscall.Stat_t
		if err := syscall.Stat(conf, &now); err != nil || now.Uid != st.Uid || now.Mode&0o777 != st.Mode&0o777 {
			t.Errorf("postgresql.auto.conf owner %d mode %o after recover, want %d %o (%v)", now.Uid, now.Mode&0o777, st.Uid, st.Mode&0o777, err)
		}
	}

	// A reload parameter: the file back and a SIGHUP.
	s.PGSet(t, "work_mem", "9MB")
	recoverV1(false)
	eventually(t, func() bool { return s.SQL(t, "SHOW work_mem") == wm }, "work_mem back to "+wm)

	// A start-time parameter: the file back and a restart with the
	// recorded command.
	s.SQL(t, "ALTER SYSTEM SET max_locks_per_transaction = 128")
	if err := s.Restart(t.Context()); err != nil {
		t.Fatal(err)
	}
	if got := s.SQL(t, "SHOW max_locks_per_transaction"); got != "128" {
		t.Fatalf("max_locks_per_transaction = %s before the recovery", got)
	}
	recoverV1(true)
	if got := s.SQL(t, "SHOW max_locks_per_transaction"); got != locks {
		t.Errorf("max_locks_per_transaction = %s after recover, want %s", got, locks)
	}
}

func eventually(t *testing.T, ok func() bool, what string) {
	t.Helper()
	for deadline := time.Now().Add(15 * time.Second); !ok(); time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("not %s after 15s", what)
		}
	}
}

func asUser(t *testing.T, cmd *exec.Cmd, name string) {
	t.Helper()
	u, err := user.Lookup(name)
	if err != nil {
		t.Fatal(err)
	}
	uid, _ := strconv.Atoi(u.Uid)
	gid, _ := strconv.Atoi(u.Gid)
	cmd.Dir = "/"
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}, Setpgid: true}
}

// TestRecoverVersion1MySQL recovers version 1 journals of kinds
// mysql.global and mysql.optfile (what `dbhost experiment` wrote for
// MySQL/MariaDB variables) on a private MariaDB: the variable is set back
// on the server found at the journaled socket; dbhost's option file is
// removed and the server restarted the way the entry says ("systemctl
// restart UNIT" is the unit's restart, through Config.Systemctl).
func TestRecoverVersion1MySQL(t *testing.T) {
	testdb.Need(t, "root", os.Geteuid() == 0)
	dir := testdb.RootOnlyDir(t, "dbhost-mycnf-")
	confd := filepath.Join(dir, "conf.d")
	if err := os.Mkdir(confd, 0o755); err != nil {
		t.Fatal(err)
	}
	defaults := filepath.Join(dir, "my.cnf")
	if err := os.WriteFile(defaults, []byte("[mysqld]\nskip-name-resolve\n!includedir "+confd+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	s := testdb.MariaDB(t, testdb.Options{DefaultsFile: defaults})
	cfg := gomysql.NewConfig()
	cfg.User, cfg.Net, cfg.Addr = "root", "unix", s.Socket
	conn, err := gomysql.NewConnector(cfg)
	if err != nil {
		t.Fatal(err)
	}
	db := sql.OpenDB(conn)
	defer db.Close()
	query := func(q string) string {
		t.Helper()
		var v string
		if err := db.QueryRow(q).Scan(&v); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
		return v
	}
	recoverV1 := func(c change.Config, kind string, data map[string]any) {
		t.Helper()
		b, _ := json.Marshal([]any{map[string]any{"kind": kind, "what": "MySQL " + s.DataDir, "data": data}})
		file := filepath.Join(t.TempDir(), "experiment.journal")
		if err := os.WriteFile(file, b, 0o600); err != nil {
			t.Fatal(err)
		}
		if err := change.Recover(file, c); err != nil {
			t.Fatal(err)
		}
	}

	// SET GLOBAL: set back on the server found at the socket.
	before := query("SELECT @@GLOBAL.max_connections")
	if _, err := db.Exec("SET GLOBAL max_connections = 77"); err != nil {
		t.Fatal(err)
	}
	uptime, _ := strconv.ParseInt(query("SELECT VARIABLE_VALUE FROM information_schema.GLOBAL_STATUS WHERE VARIABLE_NAME = 'UPTIME'"), 10, 64)
	recoverV1(change.Config{}, change.LegacyMySQLGlobal, map[string]any{"net": "unix", "addr": s.Socket, "user": "root",
		"data_dir": s.DataDir, "variable": "max_connections", "old": before, "type": "INT UNSIGNED", "started": time.Now().Unix() - uptime})
	if got := query("SELECT @@GLOBAL.max_connections"); got != before {
		t.Errorf("max_connections = %s after recover, want %s", got, before)
	}

	// The option file: removed, and the server restarted.
	logBuffer := query("SELECT @@GLOBAL.innodb_log_buffer_size")
	opt := filepath.Join(confd, "zz-dbhost-experiment.cnf")
	if err := os.WriteFile(opt, []byte("[mysqld]\ninnodb_log_buffer_size = 32M\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := s.Restart(t.Context()); err != nil {
		t.Fatal(err)
	}
	db.Close()
	db = sql.OpenDB(conn)
	if got := query("SELECT @@GLOBAL.innodb_log_buffer_size"); got != "33554432" {
		t.Fatalf("innodb_log_buffer_size = %s with the option file", got)
	}
	bin := testdb.RootOnlyDir(t, "dbhost-systemctl-")
	ran := filepath.Join(bin, "ran")
	systemctl := filepath.Join(bin, "systemctl")
	if err := os.WriteFile(systemctl, []byte("#!/bin/sh\necho \"$@\" > "+ran+"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	recoverV1(change.Config{Systemctl: []string{systemctl}}, change.LegacyMySQLOptionFile, map[string]any{
		"data_dir": s.DataDir, "pid_file": query("SELECT @@pid_file"), "restart_argv": []string{"systemctl", "restart", "mariadb-test.service"}, "restart_user": "root",
		"file": map[string]any{"path": opt, "exists": false, "uid": 0, "gid": 0, "mode": 0}})
	if _, err := os.Stat(opt); !os.IsNotExist(err) {
		t.Errorf("%s left after recover: %v", opt, err)
	}
	if b, err := os.ReadFile(ran); err != nil || string(b) != "restart mariadb-test.service\n" {
		t.Errorf("the unit's restart ran with %q, %v", b, err)
	}
	// The stand-in only records the restart: make it, and the server
	// runs without the option file.
	if err := s.Restart(t.Context()); err != nil {
		t.Fatal(err)
	}
	db.Close()
	db = sql.OpenDB(conn)
	if got := query("SELECT @@GLOBAL.innodb_log_buffer_size"); got != logBuffer {
		t.Errorf("innodb_log_buffer_size = %s after recover and restart, want %s", got, logBuffer)
	}
}
