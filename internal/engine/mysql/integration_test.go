package mysql_test

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/dbhost/dbhost/internal/engine"
	"github.com/dbhost/dbhost/internal/engine/mysql"
	"github.com/dbhost/dbhost/internal/host"
	"github.com/dbhost/dbhost/internal/testdb"
)

// discover finds the instance of a private server on the live host.
func discover(t *testing.T, h *host.Host, pid int, opts engine.Options) *engine.Instance {
	t.Helper()
	tbl, err := engine.ReadTable(h)
	if err != nil {
		t.Fatal(err)
	}
	insts, notes := engine.Discover(context.Background(), h, tbl, opts)
	for _, in := range insts {
		if in.PID == pid {
			return in
		}
	}
	t.Fatalf("server pid %d not discovered (notes %v)", pid, notes)
	return nil
}

func liveHost(t *testing.T) *host.Host {
	t.Helper()
	h, err := host.Open("/")
	if err != nil {
		t.Fatal(err)
	}
	return h
}

func wantSetting(t *testing.T, in *engine.Instance, name, value, source string) {
	t.Helper()
	s, ok := in.Setting(name)
	if !ok || s.Value != value || (source != "" && s.Source != source) {
		t.Errorf("setting %s = %+v (set %v), want %q from %q", name, s, ok, value, source)
	}
}

func TestPrivateMariaDBLive(t *testing.T) {
	if testing.Short() {
		t.Skip("integration: starts a MariaDB")
	}
	s := testdb.MariaDB(t, testdb.Options{Settings: map[string]string{"max-connections": "77", "innodb-flush-method": "fsync"}})
	in := discover(t, liveHost(t), s.PID, engine.Options{})
	if in.SettingsSource != "live" {
		t.Fatalf("settings from %q (live error %q), want live", in.SettingsSource, in.LiveErr)
	}
	if in.Flavor != mysql.FlavorMariaDB || !strings.Contains(in.Version, "MariaDB") || in.VersionSource != "live" {
		t.Errorf("flavor %q version %q from %q", in.Flavor, in.Version, in.VersionSource)
	}
	if !strings.Contains(in.LiveVia, s.Socket) || !strings.Contains(in.LiveVia, "as root") {
		t.Errorf("live via %q", in.LiveVia)
	}
	// Live values; where they are what the command line asked for, the
	// command line stays the source.
	wantSetting(t, in, "max_connections", "77", "cmdline")
	wantSetting(t, in, "innodb_flush_method", "fsync", "cmdline")
	wantSetting(t, in, "innodb_buffer_pool_size", "33554432", "cmdline")
	wantSetting(t, in, "innodb_io_capacity", "200", "live")
	if c := in.MySQL.Configured["innodb_buffer_pool_size"]; c.Value != "32M" || c.Source != "cmdline" {
		t.Errorf("configured innodb_buffer_pool_size %+v", c)
	}
	if b, ok := mysql.Bytes(in, "innodb_buffer_pool_size"); !ok || b != 32<<20 {
		t.Errorf("Bytes(innodb_buffer_pool_size) = %d %v", b, ok)
	}
	if in.Port != s.Port || in.DataDir != s.DataDir || in.User != "mysql" {
		t.Errorf("port %d datadir %q user %q, want %d %q mysql", in.Port, in.DataDir, in.User, s.Port, s.DataDir)
	}
	if in.Paths["data"] != s.DataDir || in.Paths["redo"] != s.DataDir || in.Paths["tmp"] == "" {
		t.Errorf("paths %v", in.Paths)
	}
	if _, ok := in.Paths["binlog"]; ok {
		t.Errorf("binlog path with --skip-log-bin: %v", in.Paths)
	}
	// --no-defaults: no option file is read, not even /etc/mysql/my.cnf.
	if len(in.ConfigFiles) != 0 {
		t.Errorf("config files read despite --no-defaults: %v", in.ConfigFiles)
	}
	for n, st := range in.Settings {
		if strings.HasPrefix(st.Source, "file:") {
			t.Errorf("setting %s from %s despite --no-defaults", n, st.Source)
		}
	}
	var root *engine.MySQLUser
	for i, u := range in.MySQL.Users {
		if u.User == "root" && u.Host == "localhost" {
			root = &in.MySQL.Users[i]
		}
	}
	if root == nil || !root.Super || root.EmptyPassword || !contains(root.Plugins, "unix_socket") {
		t.Errorf("root@localhost = %+v in %+v", root, in.MySQL.Users)
	}
	if in.MySQL.DatabasesVia != "live" || !contains(in.MySQL.Databases, "mysql") || contains(in.MySQL.Databases, "test") {
		t.Errorf("databases %v via %q", in.MySQL.Databases, in.MySQL.DatabasesVia)
	}
	if in.MySQL.Galera {
		t.Error("Galera on a plain server")
	}
	if !hasListener(in, "unix", s.Socket) || !hasListener(in, "tcp", "127.0.0.1") {
		t.Errorf("listeners %v", in.Listen)
	}
}

func TestPrivateMariaDBFilesOnly(t *testing.T) {
	if testing.Short() {
		t.Skip("integration: starts a MariaDB")
	}
	// log-bin after testdb's --skip-log-bin: the later option wins.
	s := testdb.MariaDB(t, testdb.Options{Settings: map[string]string{"max-connections": "77", "log-bin": "mysql-bin"}})
	in := discover(t, liveHost(t), s.PID, engine.Options{NoConnect: true})
	if in.SettingsSource != "files" || !strings.Contains(in.LiveErr, "no-connect") {
		t.Fatalf("source %q live error %q", in.SettingsSource, in.LiveErr)
	}
	if in.Flavor != mysql.FlavorMariaDB || !strings.Contains(in.VersionSource, "--version") || !strings.HasPrefix(in.Version, "10.") && !strings.HasPrefix(in.Version, "11.") {
		t.Errorf("flavor %q version %q from %q", in.Flavor, in.Version, in.VersionSource)
	}
	wantSetting(t, in, "max_connections", "77", "cmdline")
	wantSetting(t, in, "innodb_buffer_pool_size", "32M", "cmdline")
	wantSetting(t, in, "log_bin", "mysql-bin", "cmdline")
	if in.Paths["binlog"] != s.DataDir {
		t.Errorf("binlog path %q, want the data directory", in.Paths["binlog"])
	}
	if live := discover(t, liveHost(t), s.PID, engine.Options{}); live.Paths["binlog"] != s.DataDir || live.SettingValue("log_bin") != "ON" {
		t.Errorf("live binlog path %q (log_bin %q)", live.Paths["binlog"], live.SettingValue("log_bin"))
	}
	wantSetting(t, in, "back_log", "65", "default") // 50 + 77/5
	wantSetting(t, in, "innodb_io_capacity", "200", "default")
	wantSetting(t, in, "symbolic_links", "ON", "default")
	if b, ok := mysql.Bytes(in, "innodb_buffer_pool_size"); !ok || b != 32<<20 {
		t.Errorf("Bytes = %d %v", b, ok)
	}
	if in.Port != s.Port || in.DataDir != s.DataDir || in.Paths["redo"] != s.DataDir {
		t.Errorf("port %d datadir %q paths %v", in.Port, in.DataDir, in.Paths)
	}
	if len(in.MySQL.Users) != 0 || in.MySQL.DatabasesVia != "datadir" {
		t.Errorf("users %v databases via %q", in.MySQL.Users, in.MySQL.DatabasesVia)
	}
}

// A server started with --defaults-file reads that file, what it includes
// and the *.cnf files of its include directory, in name order, and nothing
// else.
func TestPrivateMariaDBDefaultsFile(t *testing.T) {
	if testing.Short() {
		t.Skip("integration: starts a MariaDB")
	}
	dir := writeConfTree(t)
	s := testdb.MariaDB(t, testdb.Options{DefaultsFile: filepath.Join(dir, "my.cnf")})
	for _, opts := range []engine.Options{{}, {NoConnect: true}} {
		in := discover(t, liveHost(t), s.PID, opts)
		want := []string{filepath.Join(dir, "my.cnf"), filepath.Join(dir, "conf.d", "10-first.cnf"), filepath.Join(dir, "conf.d", "20-second.cnf"), filepath.Join(dir, "extra.cnf")}
		if !reflect.DeepEqual(in.ConfigFiles, want) {
			t.Errorf("config files %v, want %v", in.ConfigFiles, want)
		}
		if in.IncludeDir != filepath.Join(dir, "conf.d") {
			t.Errorf("include dir %q", in.IncludeDir)
		}
		// Live or not, the files are where these were set.
		symlinks := "OFF"
		if opts.NoConnect {
			symlinks = "0"
		}
		wantSetting(t, in, "max_connections", "88", "file:"+filepath.Join(dir, "conf.d", "20-second.cnf")+":2")
		wantSetting(t, in, "skip_name_resolve", "ON", "file:"+filepath.Join(dir, "my.cnf")+":3")
		wantSetting(t, in, "symbolic_links", symlinks, "file:"+filepath.Join(dir, "extra.cnf")+":2")
		for n, st := range in.Settings {
			if strings.Contains(st.Source, "/etc/mysql") {
				t.Errorf("setting %s from %s: the machine's my.cnf was read", n, st.Source)
			}
		}
	}
}

// writeConfTree writes an option-file tree readable by the mysql user:
// my.cnf with !includedir conf.d and !include extra.cnf.
func writeConfTree(t *testing.T) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "dbhost-mycnf-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	files := map[string]string{
		"my.cnf":               "[mysqld]\nmax_connections = 50\nskip-name-resolve\n!includedir " + filepath.Join(dir, "conf.d") + "\n!include " + filepath.Join(dir, "extra.cnf") + "\n",
		"conf.d/20-second.cnf": "[mysqld]\nmax_connections = 88\n",
		"conf.d/10-first.cnf":  "[mariadb]\nmax_connections = 60\n[client]\nport = 1\n",
		"conf.d/ignored.txt":   "[mysqld]\nmax_connections = 1\n",
		"extra.cnf":            "[server]\nsymbolic-links = 0\n",
	}
	for name, content := range files {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	return dir
}

// collect then replay: the instance read from the snapshot equals the one
// read live, and a snapshot replays the live read even when asked not to
// connect.
func TestSnapshotReplay(t *testing.T) {
	if testing.Short() {
		t.Skip("integration: starts a MariaDB")
	}
	s := testdb.MariaDB(t, testdb.Options{Settings: map[string]string{"max-connections": "66"}})
	h := liveHost(t)
	if err := h.StartRecording(); err != nil {
		t.Fatal(err)
	}
	live := discover(t, h, s.PID, engine.Options{Timeout: 5 * time.Second})
	snap := filepath.Join(t.TempDir(), "snap.tar.gz")
	f, err := os.Create(snap)
	if err != nil {
		t.Fatal(err)
	}
	if err := h.WriteSnapshot(f, host.SnapshotInfo{Note: "mysql replay test"}); err != nil {
		t.Fatal(err)
	}
	f.Close()
	sh, err := host.OpenSnapshot(snap)
	if err != nil {
		t.Fatal(err)
	}
	defer sh.Close()
	replayed := discover(t, sh, s.PID, engine.Options{NoConnect: true})
	a, _ := json.MarshalIndent(live, "", " ")
	b, _ := json.MarshalIndent(replayed, "", " ")
	if string(a) != string(b) {
		t.Errorf("replay differs:\nlive %s\nsnapshot %s", a, b)
	}
	if live.SettingsSource != "live" {
		t.Errorf("live read failed: %s", live.LiveErr)
	}
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

func hasListener(in *engine.Instance, proto, addr string) bool {
	for _, l := range in.Listen {
		if l.Proto == proto && l.Addr == addr {
			return true
		}
	}
	return false
}

// A DSN with a password is used for the connection but never recorded:
// the snapshot holds no trace of the secret.
func TestLiveDSNRecordsNoSecret(t *testing.T) {
	if testing.Short() {
		t.Skip("integration: starts a MariaDB")
	}
	s := testdb.MariaDB(t, testdb.Options{})
	const secret = "S3cret-dbhost-fixture"
	out, err := exec.Command("mariadb", "--no-defaults", "--socket="+s.Socket, "--user=root",
		"--execute=CREATE USER 'auditor'@'localhost' IDENTIFIED BY '"+secret+"'; GRANT SELECT ON mysql.* TO 'auditor'@'localhost'").CombinedOutput()
	if err != nil {
		t.Fatalf("create user: %v: %s", err, out)
	}
	h := liveHost(t)
	if err := h.StartRecording(); err != nil {
		t.Fatal(err)
	}
	// The DSN names this server's socket: its credentials are used there.
	in := discover(t, h, s.PID, engine.Options{MySQLDSN: "auditor:" + secret + "@unix(" + s.Socket + ")/"})
	if in.SettingsSource != "live" || !strings.Contains(in.LiveVia, "as auditor (DSN given)") || strings.Contains(in.LiveVia, secret) {
		t.Fatalf("source %q via %q error %q", in.SettingsSource, in.LiveVia, in.LiveErr)
	}
	if len(in.MySQL.Users) == 0 {
		t.Errorf("accounts not read with SELECT on mysql.*: %s", in.MySQL.UsersErr)
	}
	var buf bytes.Buffer
	if err := h.WriteSnapshot(&buf, host.SnapshotInfo{Note: "secret test"}); err != nil {
		t.Fatal(err)
	}
	zr, err := gzip.NewReader(&buf)
	if err != nil {
		t.Fatal(err)
	}
	raw, err := io.ReadAll(zr)
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Contains(raw, []byte(secret)) {
		t.Error("the snapshot contains the password")
	}
	b, _ := json.Marshal(in)
	if bytes.Contains(b, []byte(secret)) {
		t.Error("the instance facts contain the password")
	}
}
