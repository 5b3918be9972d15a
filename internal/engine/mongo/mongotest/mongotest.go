// Package mongotest starts a stand-in mongod for tests and fixture
// recordings on hosts where MongoDB cannot be installed (no package for
// this VM). The stand-in (./mongod) is a real process named mongod, built
// for the MongoDB version asked for, with a real mongod.conf, data
// directory, log file, listening sockets and Unix socket, all in a
// temporary directory; it is stopped and removed when the test ends. It
// speaks no MongoDB protocol: dbhost never connects to mongod.
package mongotest

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/dbhost/dbhost/internal/journal"
	"github.com/dbhost/dbhost/internal/testdb"
)

// Options describe the stand-in to start.
type Options struct {
	// Version is the MongoDB version `mongod --version` reports
	// ("8.0.4", "6.0.10", "4.0.28").
	Version string
	// Conf returns the mongod.conf text for a server whose files live in
	// dir and that listens on port; nil means PackagedConf.
	Conf func(dir string, port int) string
	// User runs the server (default "nobody": this VM has no mongodb user).
	User string
	// Private makes the binary, the config file and the data directory
	// readable by their owner only (root), as a locked-down install is:
	// what a non-root audit cannot see.
	Private bool
}

// Server is a running stand-in.
type Server struct {
	Dir    string // temporary directory holding everything
	Bin    string // the mongod binary
	Conf   string // mongod.conf
	DBPath string
	Port   int
	PID    int
	User   string

	cmd    *exec.Cmd
	exited chan struct{}
	stderr bytes.Buffer
}

// PackagedConf is a mongod.conf shaped like the one the Debian/RHEL
// packages install, with paths in dir and the given port, bound to
// loopback, authorization not enabled (the packaged default).
func PackagedConf(dir string, port int) string {
	return fmt.Sprintf(`# mongod.conf

# for documentation of all options, see:
#   http://docs.mongodb.org/manual/reference/configuration-options/

# Where and how to store data.
storage:
  dbPath: %[1]s/db

# where to write logging data.
systemLog:
  destination: file
  logAppend: true
  path: %[1]s/log/mongod.log

# network interfaces
net:
  port: %[2]d
  bindIp: 127.0.0.1
  unixDomainSocket:
    pathPrefix: %[1]s/run

# how the process runs
processManagement:
  timeZoneInfo: /usr/share/zoneinfo

#security:

#operationProfiling:

#replication:

#sharding:
`, dir, port)
}

// Start builds and starts a stand-in mongod.
func Start(t testing.TB, o Options) *Server {
	t.Helper()
	testdb.Need(t, "root (the stand-in runs as another user)", os.Geteuid() == 0)
	if o.Version == "" {
		o.Version = "8.0.4"
	}
	if o.User == "" {
		o.User = "nobody"
	}
	if o.Conf == nil {
		o.Conf = PackagedConf
	}
	u, err := user.Lookup(o.User)
	testdb.Need(t, "user "+o.User, err == nil)
	uid, _ := strconv.Atoi(u.Uid)
	gid, _ := strconv.Atoi(u.Gid)

	if o.Private && uid != 0 {
		t.Fatal("mongotest: Private needs User root (the files are root's)")
	}

	unlock, err := journal.LockShared(journal.HostLock)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(unlock) // registered first, so it runs after Stop

	// Under a directory only root can change, as a packaged mongod is:
	// dbhost runs `mongod --version` only from such a place.
	dir := testdb.RootOnlyDir(t, "mongod")
	s := &Server{Dir: dir, Bin: filepath.Join(dir, "bin", "mongod"), Conf: filepath.Join(dir, "mongod.conf"),
		DBPath: filepath.Join(dir, "db"), Port: testdb.FreePort(t), User: o.User}
	t.Cleanup(func() { s.Stop(t) })
	build(t, o.Version, s.Bin)

	mode, fileMode := os.FileMode(0o755), os.FileMode(0o644)
	if o.Private {
		mode, fileMode = 0o700, 0o600
	}
	must(t, os.Chmod(dir, 0o755)) // the server must reach its socket and files
	for _, d := range []string{"db", "log", "run"} {
		must(t, os.Mkdir(filepath.Join(dir, d), 0o750))
		must(t, os.Chown(filepath.Join(dir, d), uid, gid))
	}
	if o.Private {
		must(t, os.Chmod(s.DBPath, 0o700))
	}
	must(t, os.Chmod(filepath.Join(dir, "bin"), mode))
	must(t, os.Chmod(s.Bin, mode))
	must(t, os.WriteFile(s.Conf, []byte(o.Conf(dir, s.Port)), fileMode))
	if !o.Private {
		must(t, os.Chown(s.Conf, 0, gid))
		must(t, os.Chmod(s.Conf, 0o640))
	}

	cmd := exec.Command(s.Bin, "--config", s.Conf)
	cmd.Dir = "/"
	cmd.Env = []string{"PATH=/usr/bin:/bin"}
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}, Setpgid: true}
	cmd.Stderr = &s.stderr
	if err := cmd.Start(); err != nil {
		t.Fatalf("start stand-in mongod: %v", err)
	}
	s.cmd, s.PID, s.exited = cmd, cmd.Process.Pid, make(chan struct{})
	go func() { cmd.Wait(); close(s.exited) }()

	// The stand-in writes mongod.lock once its sockets listen.
	lock := filepath.Join(s.DBPath, "mongod.lock")
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) {
		select {
		case <-s.exited:
			t.Fatalf("stand-in mongod exited at start: %s", s.stderr.String())
		case <-time.After(20 * time.Millisecond):
		}
		if st, err := os.Stat(lock); err == nil && st.Size() > 0 {
			return s
		}
	}
	t.Fatalf("stand-in mongod did not start listening: %s", s.stderr.String())
	return nil
}

// Stop ends the server and removes its directory; safe to call twice.
func (s *Server) Stop(t testing.TB) {
	if s.cmd != nil {
		cmd := s.cmd
		s.cmd = nil
		cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-s.exited:
		case <-time.After(10 * time.Second):
			syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
			<-s.exited
		}
	}
	if s.Dir != "" && (!t.Failed() || os.Getenv("DBHOST_KEEP") == "") {
		os.RemoveAll(s.Dir)
	}
}

// build compiles the stand-in for a version into dst. The Go build cache
// makes repeated builds cheap.
func build(t testing.TB, version, dst string) {
	t.Helper()
	_, file, _, _ := runtime.Caller(0)
	goBin, err := exec.LookPath("go")
	if err != nil {
		goBin = "/usr/local/go/bin/go" // where `make test` finds Go on a fresh machine
	}
	must(t, os.MkdirAll(filepath.Dir(dst), 0o755))
	cmd := exec.Command(goBin, "build", "-trimpath", "-ldflags", "-X main.version="+version, "-o", dst, "./mongod")
	cmd.Dir = filepath.Dir(file)
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("build stand-in mongod: %v\n%s", err, strings.TrimSpace(string(out)))
	}
}

func must(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
