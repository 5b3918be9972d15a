package redis_test

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/dbhost/dbhost/internal/check"
	"github.com/dbhost/dbhost/internal/engine"
	"github.com/dbhost/dbhost/internal/facts"
	"github.com/dbhost/dbhost/internal/host"
	"github.com/dbhost/dbhost/internal/testdb"
)

// inspect describes one PID on the live host the way engine.Discover does.
func inspect(t *testing.T, pid int, opts engine.Options) *engine.Instance {
	t.Helper()
	h, err := host.Open("/")
	if err != nil {
		t.Fatal(err)
	}
	tbl, err := engine.ReadTable(h)
	if err != nil {
		t.Fatal(err)
	}
	p, ok := tbl.Get(pid)
	if !ok {
		t.Fatalf("pid %d not in the process table", pid)
	}
	if opts.Timeout == 0 {
		opts.Timeout = 3 * time.Second
	}
	for _, d := range engine.Profiles() {
		if d.Engine() != engine.Redis {
			continue
		}
		if !d.Match(p, tbl) {
			t.Fatalf("detector does not match %+v", p)
		}
		in, err := d.Inspect(context.Background(), h, p, tbl, opts)
		if err != nil || in == nil {
			t.Fatalf("inspect: %v", err)
		}
		engine.AttachListeners(h, []*engine.Instance{in})
		return in
	}
	t.Fatal("no Redis detector registered")
	return nil
}

// includeFile writes a file the server includes, in a directory the redis
// user can read.
func includeFile(t *testing.T, text string) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "dbhost-redis-inc-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	os.Chmod(dir, 0o755)
	f := filepath.Join(dir, "extra.conf")
	if err := os.WriteFile(f, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	return f
}

func has(ls []engine.Listener, s string) bool {
	for _, l := range ls {
		if l.String() == s {
			return true
		}
	}
	return false
}

func TestPrivateRedisLive(t *testing.T) {
	if testing.Short() {
		t.Skip("integration test")
	}
	inc := includeFile(t, "maxmemory 64mb\ntcp-backlog 128\n")
	s := testdb.Redis(t, testdb.Options{Settings: map[string]string{"include": inc, "appendonly": "yes"}})
	in := inspect(t, s.PID, engine.Options{})
	want, _ := exec.Command("redis-server", "--version").Output()
	if in.Version == "" || !strings.Contains(string(want), "v="+in.Version+" ") {
		t.Errorf("version %q, redis-server --version says %q", in.Version, want)
	}
	if in.User != "redis" || in.Port != s.Port || in.DataDir != s.Dir {
		t.Errorf("user %q port %d datadir %q", in.User, in.Port, in.DataDir)
	}
	// The command line is a process title; the server itself names its
	// config file.
	if len(in.ConfigFiles) != 2 || in.ConfigFiles[0] != s.Conf || in.ConfigFiles[1] != inc {
		t.Errorf("config files %v", in.ConfigFiles)
	}
	if in.SettingsSource != "live" || in.LiveVia != "unix:"+s.Socket {
		t.Errorf("settings from %q via %q (%s)", in.SettingsSource, in.LiveVia, in.LiveErr)
	}
	for k, v := range map[string]string{"maxmemory": "67108864", "tcp_backlog": "128", "appendonly": "yes", "bind": "127.0.0.1", "port": fmt.Sprint(s.Port)} {
		if got := in.Settings[k]; got.Value != v || got.Source != "live" {
			t.Errorf("%s = %+v, want %s (live)", k, got, v)
		}
	}
	if in.Redis.AuthConfigured || in.Redis.AuthSource != "live" {
		t.Errorf("auth %v from %q", in.Redis.AuthConfigured, in.Redis.AuthSource)
	}
	if !has(in.Listen, fmt.Sprintf("127.0.0.1:%d", s.Port)) || !has(in.Listen, "unix:"+s.Socket) {
		t.Errorf("listen %v", in.Listen)
	}
	for _, l := range in.Listen {
		if l.Proto == "tcp" && l.Backlog != 0 && l.Backlog != 128 {
			t.Errorf("backlog %d, want tcp-backlog 128", l.Backlog)
		}
	}
	// Without a connection, the rewritten command line hides the file.
	in = inspect(t, s.PID, engine.Options{NoConnect: true})
	if in.Redis.AuthSource != "" || !strings.Contains(in.Redis.ConfigErr, "set-proc-title") {
		t.Errorf("no connect: auth source %q, config error %q", in.Redis.AuthSource, in.Redis.ConfigErr)
	}
}

func TestRedisFilesWhenCmdlineVisible(t *testing.T) {
	if testing.Short() {
		t.Skip("integration test")
	}
	inc := includeFile(t, "tcp-backlog 128\nsave 900 1\n")
	s := testdb.Redis(t, testdb.Options{Settings: map[string]string{"include": inc, "set-proc-title": "no"}})
	in := inspect(t, s.PID, engine.Options{NoConnect: true})
	if len(in.Cmdline) < 2 || in.Cmdline[1] != s.Conf {
		t.Fatalf("cmdline %q", in.Cmdline)
	}
	if len(in.ConfigFiles) != 2 || in.SettingsSource != "files" || len(in.ConfigErrors) != 0 {
		t.Errorf("files %v source %q errors %v", in.ConfigFiles, in.SettingsSource, in.ConfigErrors)
	}
	if got := in.Settings["tcp_backlog"]; got.Value != "128" || got.Source != "file:"+inc+":1" {
		t.Errorf("tcp_backlog %+v", got)
	}
	// testdb writes save "" before the include's save line: one load,
	// so the include's rule is the only one.
	if got := in.SettingValue("save"); got != "900 1" {
		t.Errorf("save %q", got)
	}
	if in.Port != s.Port || in.Redis.AuthConfigured || in.Redis.AuthSource != "default" {
		t.Errorf("port %d auth %v %q", in.Port, in.Redis.AuthConfigured, in.Redis.AuthSource)
	}
}

// localAddr is a non-loopback address of this host, to connect to a server
// bound to all interfaces the way a remote client would arrive.
func localAddr(t *testing.T) string {
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range addrs {
		if ipn, ok := a.(*net.IPNet); ok && ipn.IP.To4() != nil && !ipn.IP.IsLoopback() {
			return ipn.IP.String()
		}
	}
	testdb.Need(t, "a non-loopback IPv4 address", false)
	return ""
}

func ping(t *testing.T, addr string) string {
	t.Helper()
	c, err := net.DialTimeout("tcp", addr, 2*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(2 * time.Second))
	fmt.Fprint(c, "*1\r\n$4\r\nPING\r\n")
	line, _ := bufio.NewReader(c).ReadString('\n')
	return strings.TrimSpace(line)
}

// judge runs one check on one live instance.
func judge(t *testing.T, in *engine.Instance, id string) check.Result {
	t.Helper()
	c, ok := check.Lookup(id)
	if !ok {
		t.Fatalf("no check %s", id)
	}
	res := c.Run(&facts.Facts{Instances: []*facts.Instance{{Instance: in}}, Sysctl: map[string]host.Reading{}})
	if len(res) != 1 {
		t.Fatalf("%s: %d results", id, len(res))
	}
	return res[0]
}

func TestRedisOpenToTheNetwork(t *testing.T) {
	if testing.Short() {
		t.Skip("integration test")
	}
	ip := localAddr(t)
	// Bound to every interface, no password, protected mode off: open.
	s := testdb.Redis(t, testdb.Options{Settings: map[string]string{"bind": "0.0.0.0", "protected-mode": "no"}})
	if got := ping(t, fmt.Sprintf("%s:%d", ip, s.Port)); got != "+PONG" {
		t.Fatalf("a client on %s got %q, want +PONG", ip, got)
	}
	in := inspect(t, s.PID, engine.Options{})
	if r := judge(t, in, "redis.auth"); r.Status != check.Fail || r.Fix == nil || !strings.Contains(r.Reason, fmt.Sprintf("0.0.0.0:%d", s.Port)) {
		t.Errorf("open server: %s %s", r.Status, r.Reason)
	}
	s.Stop(t)

	// The same with protected mode on (the default): remote clients are
	// refused, the check passes and says why.
	s = testdb.Redis(t, testdb.Options{Settings: map[string]string{"bind": "0.0.0.0"}})
	if got := ping(t, fmt.Sprintf("%s:%d", ip, s.Port)); !strings.HasPrefix(got, "-DENIED") {
		t.Fatalf("protected mode: a client on %s got %q, want -DENIED", ip, got)
	}
	in = inspect(t, s.PID, engine.Options{})
	if r := judge(t, in, "redis.auth"); r.Status != check.Pass || !strings.Contains(r.Reason, "protected mode") {
		t.Errorf("protected server: %s %s", r.Status, r.Reason)
	}
	s.Stop(t)

	// A password: the server answers NOAUTH, which is proof enough.
	s = testdb.Redis(t, testdb.Options{Settings: map[string]string{"bind": "0.0.0.0", "requirepass": "integration-secret"}})
	in = inspect(t, s.PID, engine.Options{})
	if !in.Redis.AuthConfigured || in.Redis.AuthSource != "live" {
		t.Errorf("requirepass: auth %v from %q (%s)", in.Redis.AuthConfigured, in.Redis.AuthSource, in.LiveErr)
	}
	if r := judge(t, in, "redis.auth"); r.Status != check.Pass {
		t.Errorf("password server: %s %s", r.Status, r.Reason)
	}
	for k, v := range in.Settings {
		if strings.Contains(v.Value, "integration-secret") {
			t.Errorf("setting %s holds the password", k)
		}
	}
}

func TestRedisPersistenceJudged(t *testing.T) {
	if testing.Short() {
		t.Skip("integration test")
	}
	s := testdb.Redis(t, testdb.Options{Settings: map[string]string{"appendonly": "yes", "appendfsync": "no"}})
	in := inspect(t, s.PID, engine.Options{})
	r := judge(t, in, "redis.persistence")
	if r.Status != check.Fail || r.Fix == nil || r.Fix.Config[0].Value != "everysec" {
		t.Fatalf("appendfsync no: %s %s", r.Status, r.Reason)
	}
	// Apply the fix's runtime command and judge again.
	out, err := exec.Command("redis-cli", "-p", fmt.Sprint(s.Port), "CONFIG", "SET", "appendfsync", "everysec").CombinedOutput()
	if err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	in = inspect(t, s.PID, engine.Options{})
	if r := judge(t, in, "redis.persistence"); r.Status != check.Pass || !strings.Contains(r.Reason, "2 s") {
		t.Errorf("after the fix: %s %s", r.Status, r.Reason)
	}
}

// discovered describes the private server as discovery does, with its
// trust judged.
func discovered(t *testing.T, s *testdb.Server, opts engine.Options) (*host.Host, *engine.Instance) {
	t.Helper()
	h, err := host.Open("/")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { h.Close() })
	tbl, err := engine.ReadTable(h)
	if err != nil {
		t.Fatal(err)
	}
	if opts.Timeout == 0 {
		opts.Timeout = 3 * time.Second
	}
	insts, _ := engine.Discover(context.Background(), h, tbl, opts)
	for _, in := range insts {
		if in.PID == s.PID {
			return h, in
		}
	}
	t.Fatalf("the private Redis (pid %d) was not discovered", s.PID)
	return nil, nil
}

func cli(t *testing.T, s *testdb.Server, args ...string) string {
	t.Helper()
	out, err := exec.Command("redis-cli", append([]string{"-s", s.Socket}, args...)...).CombinedOutput()
	if err != nil {
		t.Fatalf("redis-cli %v: %v: %s", args, err, out)
	}
	return strings.TrimSpace(string(out))
}

// TestRedisSettingsLive: maxmemory read, changed to a size with a unit,
// seen applied although Redis shows it in bytes, and put back; a setting
// CONFIG SET cannot change is refused with the server's message; the
// connection is the live read's (the discovery without a live read finds
// the same server for a rollback).
func TestRedisSettingsLive(t *testing.T) {
	testdb.Need(t, "root", os.Geteuid() == 0)
	_, err := exec.LookPath("redis-cli")
	testdb.Need(t, "redis-cli (apt-get install redis-tools)", err == nil)
	s := testdb.Redis(t, testdb.Options{Settings: map[string]string{"maxmemory": "64mb"}})
	ctx := context.Background()
	for _, opts := range []engine.Options{{}, {NoConnect: true}} {
		h, in := discovered(t, s, opts)
		if !in.Trusted() {
			t.Fatalf("the private server is not trusted: %s", in.Trust.Why)
		}
		if !engine.ChangesSettings(in) {
			t.Fatal("redis settings are not changed")
		}
		srv, err := engine.OpenSettings(ctx, h, in, engine.Options{Timeout: 3 * time.Second})
		if err != nil {
			t.Fatalf("no-connect %v: %v", opts.NoConnect, err)
		}
		before, err := srv.Get(ctx, "maxmemory")
		if err != nil || before.Value != "67108864" || before.Saved != nil || before.Restart {
			t.Fatalf("get: %+v %v", before, err)
		}
		if srv.SavesItself() || !strings.Contains(srv.Method(false), "CONFIG SET") {
			t.Errorf("saves itself %v, method %q", srv.SavesItself(), srv.Method(false))
		}
		if srv.Unchanged(before, "1957mb", false) || !srv.Unchanged(before, "64MB", false) || srv.Unchanged(before, "64m", false) {
			t.Error("Unchanged does not compare sizes as Redis reads them")
		}
		if ok, _, err := srv.Applied(ctx, "maxmemory", "1957mb", false); ok || err != nil {
			t.Fatalf("applied before the change: %v %v", ok, err)
		}
		if err := srv.Change(ctx, "maxmemory", "1957mb", false); err != nil {
			t.Fatal(err)
		}
		if got := cli(t, s, "CONFIG", "GET", "maxmemory"); !strings.HasSuffix(got, "2052063232") {
			t.Fatalf("after the change the server says %q", got)
		}
		if ok, pending, err := srv.Applied(ctx, "maxmemory", "1957mb", false); !ok || pending || err != nil {
			t.Fatalf("applied: %v %v %v", ok, pending, err)
		}
		if err := srv.Restore(ctx, "maxmemory", before, false); err != nil {
			t.Fatal(err)
		}
		if got := cli(t, s, "CONFIG", "GET", "maxmemory"); !strings.HasSuffix(got, "67108864") {
			t.Fatalf("after the restore the server says %q", got)
		}
		err = srv.Change(ctx, "daemonize", "yes", false)
		if err == nil || !strings.Contains(err.Error(), "refused by the server") {
			t.Errorf("immutable setting: %v", err)
		}
		if _, err := srv.Get(ctx, "no-such-setting"); err == nil {
			t.Error("an unknown setting was read")
		}
		if err := srv.Change(ctx, "maxmemory", "1mb flushall", false); err == nil {
			t.Error("a value with a space was sent")
		}
		srv.Close()
	}
	// The server's files were not touched: CONFIG SET is not kept.
	if b, err := os.ReadFile(s.Conf); err != nil || !strings.Contains(string(b), "maxmemory 64mb") {
		t.Errorf("redis.conf: %v\n%s", err, b)
	}
}

// TestRedisSettingsPassword: a server with requirepass is sent no
// password, and its settings are not opened; nothing is changed.
func TestRedisSettingsPassword(t *testing.T) {
	testdb.Need(t, "root", os.Geteuid() == 0)
	_, err := exec.LookPath("redis-cli")
	testdb.Need(t, "redis-cli (apt-get install redis-tools)", err == nil)
	s := testdb.Redis(t, testdb.Options{Settings: map[string]string{"requirepass": "integration-secret", "maxmemory": "64mb"}})
	h, in := discovered(t, s, engine.Options{})
	if !in.Trusted() {
		t.Fatalf("the private server is not trusted: %s", in.Trust.Why)
	}
	_, err = engine.OpenSettings(context.Background(), h, in, engine.Options{Timeout: 3 * time.Second})
	if err == nil || !strings.Contains(err.Error(), "requires authentication") || strings.Contains(err.Error(), "integration-secret") {
		t.Fatalf("requirepass: %v", err)
	}
	out, _ := exec.Command("redis-cli", "-s", s.Socket, "--no-auth-warning", "-a", "integration-secret", "CONFIG", "GET", "maxmemory").CombinedOutput()
	if !strings.Contains(string(out), "67108864") {
		t.Errorf("maxmemory changed: %s", out)
	}
}
