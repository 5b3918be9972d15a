package engine_test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/dbhost/dbhost/internal/engine"
	_ "github.com/dbhost/dbhost/internal/engine/all"
	"github.com/dbhost/dbhost/internal/host"
	"github.com/dbhost/dbhost/internal/journal"
	"github.com/dbhost/dbhost/internal/testdb"
)

const nobody = 65534

// buildFake compiles testdata/fakebin once per test. The fakes look like
// the host's servers to any audit, so the test holds the host lock shared:
// a test that compares two audits of the host (cli's collect-equals-live)
// holds it exclusively.
func buildFake(t *testing.T) []byte {
	t.Helper()
	unlock, err := journal.LockShared(journal.HostLock)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(unlock)
	bin := filepath.Join(t.TempDir(), "fakebin")
	if out, err := exec.Command("go", "build", "-o", bin, "./testdata/fakebin").CombinedOutput(); err != nil {
		t.Fatalf("build fakebin: %v\n%s", err, out)
	}
	b, err := os.ReadFile(bin)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// installFake writes the fake binary as dir/name, owned by owner, with a
// log directory beside it that the fakes (running as nobody) write to.
func installFake(t *testing.T, bin []byte, dir, name string, owner int) string {
	t.Helper()
	logDir := filepath.Join(dir, "log")
	if err := os.MkdirAll(logDir, 0o755); err != nil {
		t.Fatal(err)
	}
	os.Chown(logDir, nobody, nobody)
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, bin, 0o755); err != nil {
		t.Fatal(err)
	}
	os.Chown(p, owner, owner)
	return p
}

// startFake starts an installed fake as nobody and returns its PID.
func startFake(t *testing.T, path, cwd string, env []string, args ...string) int {
	t.Helper()
	cmd := exec.Command(path, args...)
	cmd.Dir = cwd
	cmd.Env = env
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: nobody, Gid: nobody}, Setpgid: true}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL); cmd.Wait() })
	return cmd.Process.Pid
}

// readLog returns a fake's log (exec.log or harvest.log).
func readLog(dir, name string) string {
	b, _ := os.ReadFile(filepath.Join(dir, "log", name))
	return string(b)
}

// waitLog waits until a log holds n lines containing what.
func waitLog(t *testing.T, dir, name, what string, n int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for strings.Count(readLog(dir, name), what) < n {
		if time.Now().After(deadline) {
			t.Fatalf("%s: want %d lines with %q:\n%s", name, n, what, readLog(dir, name))
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// fakeServers installs fakes under server names in dir (owned by owner)
// and starts each as nobody; it returns the PIDs by name and reads the
// execution log.
func fakeServers(t *testing.T, dir string, owner int, names ...string) (map[string]int, func() string) {
	t.Helper()
	bin := buildFake(t)
	pids := map[string]int{}
	for _, n := range names {
		pids[n] = startFake(t, installFake(t, bin, dir, n, owner), dir, nil)
	}
	waitLog(t, dir, "exec.log", "uid=", len(names))
	return pids, func() string { return readLog(dir, "exec.log") }
}

func discover(t *testing.T, pids map[string]int) map[string]*engine.Instance {
	t.Helper()
	found, _ := discoverWith(t, pids, engine.Options{Timeout: 2 * time.Second})
	return found
}

// discoverWith runs discovery as audit does and returns the instances of
// the given PIDs by name, and the discovery notes.
func discoverWith(t *testing.T, pids map[string]int, opts engine.Options) (map[string]*engine.Instance, []string) {
	t.Helper()
	h, tbl := liveTable(t)
	insts, notes := engine.Discover(context.Background(), h, tbl, opts)
	out := map[string]*engine.Instance{}
	for name, pid := range pids {
		for _, in := range insts {
			if in.PID == pid {
				out[name] = in
			}
		}
		if out[name] == nil {
			t.Fatalf("the fake %s (pid %d) was not discovered; notes %q", name, pid, notes)
		}
	}
	return out, notes
}

// TestNoExecOfUserBinaries: a user starts "servers" from a directory of
// their own. Discovery, run as root, must not execute their binaries (not
// even --version) and must say why the version is unknown.
func TestNoExecOfUserBinaries(t *testing.T) {
	testdb.Need(t, "root (discovery as root, fakes as nobody)", os.Geteuid() == 0)
	dir, err := os.MkdirTemp("", "dbhost-evil-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	os.Chmod(dir, 0o755)
	os.Chown(dir, nobody, nobody)
	names := []string{"redis-server", "mongod", "postgres", "mariadbd"}
	pids, log := fakeServers(t, dir, nobody, names...)
	found := discover(t, pids)
	if runs := log(); strings.Contains(runs, "--version") || strings.Count(runs, "\n") != len(names) {
		t.Errorf("discovery executed a binary nobody controls:\n%s", runs)
	}
	for _, n := range names {
		in := found[n]
		if in.Version != "" {
			t.Errorf("%s: version %q from %q believed", n, in.Version, in.VersionSource)
		}
		why := strings.Join(in.ConfigErrors, "; ")
		if !strings.Contains(why, "version unknown: "+filepath.Join(dir, n)+" is not run") {
			t.Errorf("%s: no reason given for the unknown version: %q", n, why)
		}
	}
}

// TestExecTrustedBinaryAsServerUser: a binary only root can change is run
// for its version — as the server's user, not as root.
func TestExecTrustedBinaryAsServerUser(t *testing.T) {
	dir := testdb.RootOnlyDir(t, "trusted")
	names := []string{"redis-server", "mongod", "postgres"}
	pids, log := fakeServers(t, dir, 0, names...)
	found := discover(t, pids)
	want := map[string]string{"redis-server": "9.9.1", "mongod": "9.9.2", "postgres": "99.3"}
	for _, n := range names {
		if in := found[n]; in.Version != want[n] || !strings.Contains(in.VersionSource, "--version") {
			t.Errorf("%s: version %q from %q (errors %q), want %s", n, in.Version, in.VersionSource, in.ConfigErrors, want[n])
		}
	}
	// Another discovery on this host (a parallel test) may also run these
	// trusted fakes: count that each was run, never as root.
	runs := log()
	for _, n := range names {
		if !strings.Contains(runs, n+`" "--version"`) {
			t.Errorf("%s was not run for its version:\n%s", n, runs)
		}
	}
	if strings.Contains(runs, "uid=0 ") {
		t.Errorf("want every --version run as uid 65534, not root:\n%s", runs)
	}
}

func liveTable(t *testing.T) (*host.Host, *engine.Table) {
	t.Helper()
	h, err := host.Open("/")
	if err != nil {
		t.Fatal(err)
	}
	tbl, err := engine.ReadTable(h)
	if err != nil {
		t.Fatal(err)
	}
	return h, tbl
}
