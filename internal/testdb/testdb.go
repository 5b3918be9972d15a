// Package testdb starts private database servers for integration tests: a
// PostgreSQL, MariaDB or Redis in a temporary directory, on a free port with
// its own socket, running as the engine's service user, stopped and removed
// when the test ends. It never touches the machine's shared instances.
package testdb

import (
	"bytes"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/dbhost/dbhost/internal/journal"
	"github.com/dbhost/dbhost/internal/pgcluster/pgbin"
)

// Required reports whether integration prerequisites must be present
// (`make test` sets DBHOST_INTEGRATION=require): then a missing server
// binary or missing root fails the test instead of skipping it.
func Required() bool { return os.Getenv("DBHOST_INTEGRATION") == "require" }

// Need skips (or, when Required, fails) a test that needs root.
func Need(t testing.TB, what string, ok bool) {
	t.Helper()
	if ok {
		return
	}
	if Required() {
		t.Fatalf("integration prerequisite missing: %s", what)
	}
	t.Skipf("skipping: %s", what)
}

// Server is a running private server.
type Server struct {
	Engine  string
	Dir     string // temporary directory holding data, socket, config, logs
	DataDir string
	Socket  string // Unix socket path (PostgreSQL: its directory)
	Port    int
	PID     int
	Conf    string // config file written for the server, if any
	User    string
	// GaleraPort is the group-communication port of a Galera node, 0 for
	// a plain server.
	GaleraPort int

	cmd     *exec.Cmd
	exited  chan struct{}
	logFile string
}

// Options tune a server start.
type Options struct {
	// Settings are extra server settings (PostgreSQL -c name=value,
	// MariaDB --name=value, Redis config lines).
	Settings map[string]string
	// ConfSettings (PostgreSQL only) are written to postgresql.conf, where
	// ALTER SYSTEM can change them, instead of on the command line, which
	// wins over it; a default the command line sets (shared_buffers,
	// max_connections) is left off it when named here.
	ConfSettings map[string]string
	// Nofile, when non-zero, starts the server under `prlimit --nofile=N`.
	Nofile int
	// Nproc, when set, starts the server under `prlimit --nproc=Nproc`
	// (prlimit's SOFT:HARD; "100:" sets the soft limit only).
	Nproc string
	// DefaultsFile (MariaDB only) starts the server with
	// --defaults-file=PATH instead of --no-defaults; the file must be
	// readable by the mysql user. The command-line settings still apply
	// over it.
	DefaultsFile string
	// Galera (MariaDB only) bootstraps the server as a single-node Galera
	// cluster (galera-4's provider), its group communication on a free
	// loopback port (Server.GaleraPort); MariaDB returns once the node is
	// Synced in a Primary component.
	Galera bool
}

// GaleraProvider is the Galera 4 library of Debian's galera-4 package.
const GaleraProvider = "/usr/lib/galera/libgalera_smm.so"

// FreePort asks the kernel for an unused TCP port on loopback.
func FreePort(t testing.TB) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("free port: %v", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

func lookupUser(t testing.TB, name string) (uid, gid int) {
	t.Helper()
	u, err := user.Lookup(name)
	Need(t, "system user "+name, err == nil)
	uid, _ = strconv.Atoi(u.Uid)
	gid, _ = strconv.Atoi(u.Gid)
	return uid, gid
}

// privateDir makes a temporary directory owned by the service user. It lives
// under /tmp (not t.TempDir, whose parents may be closed to other users).
func privateDir(t testing.TB, prefix string, uid, gid int) string {
	t.Helper()
	// Removed however the test ends, also when setup fails before the
	// server starts (Stop removes it too; RemoveAll twice is harmless).
	dir := tempDir(t, "", prefix)
	if err := os.Chown(dir, uid, gid); err != nil {
		t.Fatal(err)
	}
	return dir
}

// tempDir makes a temporary directory dbhost-PREFIX-* in parent (the
// system's temporary directory when empty), removed when the test ends
// unless it failed with DBHOST_KEEP set.
func tempDir(t testing.TB, parent, prefix string) string {
	t.Helper()
	dir, err := os.MkdirTemp(parent, "dbhost-"+prefix+"-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if !t.Failed() || os.Getenv("DBHOST_KEEP") == "" {
			os.RemoveAll(dir)
		}
	})
	return dir
}

func asUser(cmd *exec.Cmd, uid, gid int) {
	cmd.SysProcAttr = &syscall.SysProcAttr{
		Credential: &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)},
		Setpgid:    true, // Ctrl-C of `go test` must not reach the server first
	}
}

func run(t testing.TB, uid, gid int, name string, args ...string) {
	t.Helper()
	cmd := exec.Command(name, args...)
	asUser(cmd, uid, gid)
	cmd.Dir = "/"
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out.String())
	}
}

// wrap prefixes prlimit when a file or process limit is asked for.
func wrap(o Options, name string, args ...string) (string, []string) {
	var lim []string
	if o.Nofile > 0 {
		lim = append(lim, fmt.Sprintf("--nofile=%d:%d", o.Nofile, o.Nofile))
	}
	if o.Nproc != "" {
		lim = append(lim, "--nproc="+o.Nproc)
	}
	if len(lim) > 0 {
		return "prlimit", append(append(lim, "--", name), args...)
	}
	return name, args
}

// HoldHost takes the host lock shared for the rest of the test: a private
// server, and the processes that set it up (initdb's bootstrap backends are
// named postgres too), are on the host that tests comparing two audits of
// it hold still with the lock taken exclusively. Registered before the
// server's own cleanups, so it is released after Stop. A parallel test
// calls t.Parallel before it: paused by t.Parallel with the lock held, it
// would keep a serial test that takes the lock exclusively waiting for ever
// (TestParallelBeforeLock checks every test).
func HoldHost(t testing.TB) {
	t.Helper()
	unlock, err := journal.LockShared(journal.HostLock)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(unlock)
}

func (s *Server) start(t testing.TB, uid, gid int, name string, args ...string) {
	t.Helper()
	cmd := exec.Command(name, args...)
	asUser(cmd, uid, gid)
	cmd.Dir = s.Dir
	log, err := os.OpenFile(s.logFile, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	os.Chown(s.logFile, uid, gid) // servers that open their own log need it
	cmd.Stdout, cmd.Stderr = log, log
	if err := cmd.Start(); err != nil {
		log.Close()
		t.Fatalf("start %s: %v", name, err)
	}
	log.Close()
	s.cmd = cmd
	s.PID = cmd.Process.Pid
	s.exited = make(chan struct{})
	go func() { cmd.Wait(); close(s.exited) }()
	t.Cleanup(func() { s.Stop(t) })
}

// Stop shuts the server down (SIGTERM, then SIGKILL after 20 s) and removes
// its directory. It is safe to call twice.
func (s *Server) Stop(t testing.TB) {
	if s.cmd == nil {
		return
	}
	cmd := s.cmd
	s.cmd = nil
	sig := syscall.SIGTERM
	if s.Engine == "postgres" {
		sig = syscall.SIGINT // fast shutdown: no waiting for clients
	}
	cmd.Process.Signal(sig)
	select {
	case <-s.exited:
	case <-time.After(20 * time.Second):
		syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		<-s.exited
	}
	if !t.Failed() || os.Getenv("DBHOST_KEEP") == "" {
		os.RemoveAll(s.Dir)
	}
}

// Log returns the server's log, for failure messages.
func (s *Server) Log() string {
	b, _ := os.ReadFile(s.logFile)
	return string(b)
}

func waitFor(t testing.TB, s *Server, what string, ok func() bool) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for time.Now().Before(deadline) {
		if ok() {
			return
		}
		select {
		case <-s.exited:
			t.Fatalf("%s exited before it was ready; log:\n%s", s.Engine, s.Log())
		case <-time.After(50 * time.Millisecond):
		}
	}
	t.Fatalf("%s did not become ready (%s); log:\n%s", s.Engine, what, s.Log())
}

func dial(network, addr string) bool {
	c, err := net.DialTimeout(network, addr, 200*time.Millisecond)
	if err != nil {
		return false
	}
	c.Close()
	return true
}

// PostgresBin finds the newest installed PostgreSQL server binaries.
func PostgresBin() (string, error) { return pgbin.Dir() }

// Postgres starts a private PostgreSQL: initdb in a temporary directory,
// trust authentication on its own socket directory and a free loopback port.
func Postgres(t testing.TB, o Options) *Server {
	t.Helper()
	HoldHost(t)
	Need(t, "root (initdb runs as the postgres user)", os.Geteuid() == 0)
	bin, err := PostgresBin()
	Need(t, fmt.Sprint(err), err == nil)
	uid, gid := lookupUser(t, "postgres")
	dir := privateDir(t, "pg", uid, gid)
	s := &Server{Engine: "postgres", Dir: dir, DataDir: filepath.Join(dir, "data"), Socket: dir,
		Port: FreePort(t), User: "postgres", logFile: filepath.Join(dir, "server.log")}
	run(t, uid, gid, filepath.Join(bin, "initdb"), "-D", s.DataDir, "-U", "postgres", "--auth=trust", "-E", "UTF8", "--locale=C.UTF-8", "--no-sync", "--no-instructions")
	if len(o.ConfSettings) > 0 {
		appendConf(t, filepath.Join(s.DataDir, "postgresql.conf"), o.ConfSettings)
	}
	args := []string{"-D", s.DataDir, "-p", strconv.Itoa(s.Port), "-k", dir}
	for _, kv := range [][2]string{{"listen_addresses", "127.0.0.1"}, {"shared_buffers", "32MB"}, {"max_connections", "20"},
		{"fsync", "off"}, {"logging_collector", "off"}} {
		if _, inConf := o.ConfSettings[kv[0]]; !inConf {
			args = append(args, "-c", kv[0]+"="+kv[1])
		}
	}
	for _, k := range sortedKeys(o.Settings) {
		args = append(args, "-c", k+"="+o.Settings[k])
	}
	name, args := wrap(o, filepath.Join(bin, "postgres"), args...)
	s.start(t, uid, gid, name, args...)
	sock := filepath.Join(dir, fmt.Sprintf(".s.PGSQL.%d", s.Port))
	waitFor(t, s, "socket "+sock, func() bool { return dial("unix", sock) && pgReady(s.DataDir) })
	return s
}

// appendConf adds name = 'value' lines to a PostgreSQL configuration
// file (the last line of a name wins).
func appendConf(t testing.TB, file string, settings map[string]string) {
	t.Helper()
	f, err := os.OpenFile(file, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	for _, k := range sortedKeys(settings) {
		if _, err := fmt.Fprintf(f, "%s = '%s'\n", k, strings.ReplaceAll(settings[k], "'", "''")); err != nil {
			t.Fatal(err)
		}
	}
}

func sortedKeys(m map[string]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// pgReady reads postmaster.pid's status line ("ready" once it accepts).
func pgReady(data string) bool {
	b, err := os.ReadFile(filepath.Join(data, "postmaster.pid"))
	return err == nil && strings.Contains(string(b), "ready")
}

// MariaDB starts a private MariaDB (or MySQL) server with --no-defaults, so
// the machine's my.cnf is not read, on a free port and its own socket.
func MariaDB(t testing.TB, o Options) *Server {
	t.Helper()
	HoldHost(t)
	Need(t, "root (the server runs as the mysql user)", os.Geteuid() == 0)
	daemon, err := exec.LookPath("mariadbd")
	if err != nil {
		daemon, err = exec.LookPath("mysqld")
	}
	if err != nil {
		for _, p := range []string{"/usr/sbin/mariadbd", "/usr/sbin/mysqld"} {
			if _, e := os.Stat(p); e == nil {
				daemon, err = p, nil
				break
			}
		}
	}
	Need(t, "MariaDB server (apt-get install mariadb-server)", err == nil)
	install, err := exec.LookPath("mariadb-install-db")
	if err != nil {
		install, err = exec.LookPath("mysql_install_db")
	}
	Need(t, "mariadb-install-db", err == nil)
	if o.Galera {
		_, err := os.Stat(GaleraProvider)
		Need(t, "galera-4 (apt-get install galera-4): "+GaleraProvider, err == nil)
	}
	uid, gid := lookupUser(t, "mysql")
	dir := privateDir(t, "mariadb", uid, gid)
	s := &Server{Engine: "mysql", Dir: dir, DataDir: filepath.Join(dir, "data"), Socket: filepath.Join(dir, "mysqld.sock"),
		Port: FreePort(t), User: "mysql", logFile: filepath.Join(dir, "server.log")}
	// A private tmpdir: concurrent bootstraps sharing /tmp trip over each
	// other's temporary tables.
	tmp := filepath.Join(dir, "tmp")
	if err := os.Mkdir(tmp, 0o700); err != nil {
		t.Fatal(err)
	}
	os.Chown(tmp, uid, gid)
	run(t, uid, gid, install, "--no-defaults", "--datadir="+s.DataDir, "--auth-root-authentication-method=socket", "--skip-test-db", "--tmpdir="+tmp)
	first := "--no-defaults"
	if o.DefaultsFile != "" {
		first = "--defaults-file=" + o.DefaultsFile
	}
	args := []string{first, "--datadir=" + s.DataDir, "--socket=" + s.Socket, "--port=" + strconv.Itoa(s.Port),
		"--bind-address=127.0.0.1", "--pid-file=" + filepath.Join(dir, "mysqld.pid"), "--log-error=" + s.logFile,
		"--innodb-buffer-pool-size=32M", "--skip-log-bin", "--innodb-log-file-size=16M"}
	if _, set := o.Settings["tmpdir"]; !set {
		args = append(args, "--tmpdir="+tmp)
	}
	if o.Galera {
		// Bootstrap of a new cluster of one: no state transfer, no IST
		// listener; a small gcache and no saved view keep it quick to
		// start and small on disk. Later Settings override these.
		s.GaleraPort = FreePort(t)
		args = append(args, "--wsrep-on=ON", "--wsrep-provider="+GaleraProvider, "--wsrep-cluster-address=gcomm://",
			"--wsrep-new-cluster", "--wsrep-cluster-name=dbhost-test", "--wsrep-node-address=127.0.0.1",
			fmt.Sprintf("--wsrep-provider-options=gmcast.listen_addr=tcp://127.0.0.1:%d;gcache.size=8M;pc.recovery=false", s.GaleraPort),
			"--binlog-format=ROW", "--innodb-autoinc-lock-mode=2", "--default-storage-engine=InnoDB")
	}
	keys := make([]string, 0, len(o.Settings))
	for k := range o.Settings {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		args = append(args, "--"+k+"="+o.Settings[k])
	}
	name, args := wrap(o, daemon, args...)
	s.start(t, uid, gid, name, args...)
	waitFor(t, s, "socket "+s.Socket, func() bool { return dial("unix", s.Socket) })
	if o.Galera {
		waitFor(t, s, "wsrep Synced in a Primary component", func() bool { return galeraSynced(s.Socket) })
	}
	return s
}

// Redis starts a private Redis from a config file it writes, so config
// discovery has a real redis.conf to read.
func Redis(t testing.TB, o Options) *Server {
	t.Helper()
	HoldHost(t)
	Need(t, "root (the server runs as the redis user)", os.Geteuid() == 0)
	daemon, err := exec.LookPath("redis-server")
	Need(t, "redis-server (apt-get install redis-server)", err == nil)
	uid, gid := lookupUser(t, "redis")
	dir := privateDir(t, "redis", uid, gid)
	s := &Server{Engine: "redis", Dir: dir, DataDir: dir, Socket: filepath.Join(dir, "redis.sock"),
		Port: FreePort(t), User: "redis", logFile: filepath.Join(dir, "server.log"), Conf: filepath.Join(dir, "redis.conf")}
	conf := fmt.Sprintf("port %d\nbind 127.0.0.1\nunixsocket %s\ndir %s\nsave \"\"\nappendonly no\ndaemonize no\nlogfile %s\n",
		s.Port, s.Socket, dir, s.logFile)
	keys := make([]string, 0, len(o.Settings))
	for k := range o.Settings {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		conf += k + " " + o.Settings[k] + "\n"
	}
	if err := os.WriteFile(s.Conf, []byte(conf), 0o640); err != nil {
		t.Fatal(err)
	}
	os.Chown(s.Conf, uid, gid)
	name, args := wrap(o, daemon, s.Conf)
	s.start(t, uid, gid, name, args...)
	waitFor(t, s, "port", func() bool { return dial("tcp", fmt.Sprintf("127.0.0.1:%d", s.Port)) })
	return s
}

// ServerPID returns the PID of the server process itself (not a prlimit
// wrapper, which execs into it and so has the same PID).
func (s *Server) ServerPID() int { return s.PID }
