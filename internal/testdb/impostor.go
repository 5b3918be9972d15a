package testdb

import (
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// Nobody is the unprivileged account impostors run as.
const Nobody = 65534

// Impostor is what a hostile local user starts: a program of their own,
// named like a database server (its comm is the name), in a directory they
// own, run as nobody with any argv, listening where it is told. It is the
// project's fakebin (internal/engine/testdata/fakebin).
type Impostor struct {
	Dir string // owned by nobody: the binary, log/, and the files asked for
	PID int
}

// ImpostorOptions describe one impostor.
type ImpostorOptions struct {
	// Name is the server name it runs under: postgres, mariadbd, mysqld,
	// redis-server, mongod.
	Name string
	// Args are its arguments; "DIR" in one is replaced by Dir.
	Args []string
	// Env: FAKE_MODE=pg|mysql with FAKE_SOCKET and FAKE_TCP make it
	// listen (see fakebin).
	Env []string
	// Files and Links are made below Dir, owned by nobody (relative path
	// to content, or to link target; "DIR" in either is replaced). Dirs
	// are made first, mode 0700.
	Dirs  []string
	Files map[string]string
	Links map[string]string
}

var (
	fakeOnce sync.Once
	fakeBin  []byte
	fakeErr  error
)

// fakebin builds the impostor program once per test binary.
func fakebin(t testing.TB) []byte {
	t.Helper()
	fakeOnce.Do(func() {
		mod, err := exec.Command("go", "env", "GOMOD").Output()
		if err != nil {
			fakeErr = err
			return
		}
		dir, err := os.MkdirTemp("", "dbhost-fakebin-")
		if err != nil {
			fakeErr = err
			return
		}
		defer os.RemoveAll(dir)
		bin := filepath.Join(dir, "fakebin")
		src := filepath.Join(filepath.Dir(strings.TrimSpace(string(mod))), "internal", "engine", "testdata", "fakebin")
		if out, err := exec.Command("go", "build", "-o", bin, src).CombinedOutput(); err != nil {
			fakeErr = &buildError{err, string(out)}
			return
		}
		fakeBin, fakeErr = os.ReadFile(bin)
	})
	if fakeErr != nil {
		t.Fatalf("build the impostor: %v", fakeErr)
	}
	return fakeBin
}

type buildError struct {
	err error
	out string
}

func (e *buildError) Error() string { return e.err.Error() + "\n" + e.out }

// StartImpostor installs and starts an impostor as nobody (root only) and
// waits until it runs; it is killed, with anything it started, when the
// test ends. The host lock is held shared while it lives: audits that
// compare two looks at the host must not see it come and go.
func StartImpostor(t testing.TB, o ImpostorOptions) *Impostor {
	t.Helper()
	Need(t, "root (impostors run as nobody)", os.Geteuid() == 0)
	HoldHost(t)
	bin := fakebin(t)
	dir := tempDir(t, "", "impostor")
	os.Chmod(dir, 0o755)
	mustChown(t, dir, Nobody)
	sub := func(s string) string { return strings.ReplaceAll(s, "DIR", dir) }
	for _, d := range append([]string{"log"}, o.Dirs...) {
		p := filepath.Join(dir, sub(d))
		if err := os.MkdirAll(p, 0o700); err != nil {
			t.Fatal(err)
		}
		mustChown(t, p, Nobody)
	}
	for rel, content := range o.Files {
		p := filepath.Join(dir, sub(rel))
		if err := os.WriteFile(p, []byte(sub(content)), 0o644); err != nil {
			t.Fatal(err)
		}
		mustChown(t, p, Nobody)
	}
	for rel, target := range o.Links {
		p := filepath.Join(dir, sub(rel))
		if err := os.Symlink(sub(target), p); err != nil {
			t.Fatal(err)
		}
		if err := os.Lchown(p, Nobody, Nobody); err != nil {
			t.Fatal(err)
		}
	}
	exe := filepath.Join(dir, o.Name)
	if err := os.WriteFile(exe, bin, 0o755); err != nil {
		t.Fatal(err)
	}
	mustChown(t, exe, Nobody)
	args := make([]string, len(o.Args))
	for i, a := range o.Args {
		args[i] = sub(a)
	}
	cmd := exec.Command(exe, args...)
	cmd.Dir = dir
	cmd.Env = append([]string{"PATH=/usr/bin:/bin"}, o.Env...)
	// Pdeathsig: a test binary killed hard (a closed pipe, a timeout)
	// takes its impostors along, or they would haunt later audits.
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: Nobody, Gid: Nobody}, Setpgid: true, Pdeathsig: syscall.SIGKILL}
	runtime.LockOSThread() // the signal follows the thread that forks
	defer runtime.UnlockOSThread()
	if err := cmd.Start(); err != nil {
		t.Fatalf("start impostor %s: %v", o.Name, err)
	}
	t.Cleanup(func() { syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL); cmd.Wait() })
	im := &Impostor{Dir: dir, PID: cmd.Process.Pid}
	want := "uid="
	if len(o.Env) > 0 && strings.Contains(strings.Join(o.Env, " "), "FAKE_MODE=") {
		want = "listening"
	}
	deadline := time.Now().Add(10 * time.Second)
	for !strings.Contains(im.Log("exec.log"), want) {
		if time.Now().After(deadline) {
			t.Fatalf("impostor %s did not start: %s", o.Name, im.Log("exec.log"))
		}
		time.Sleep(10 * time.Millisecond)
	}
	return im
}

// Log returns one of the impostor's logs (exec.log, harvest.log).
func (im *Impostor) Log(name string) string {
	b, _ := os.ReadFile(filepath.Join(im.Dir, "log", name))
	return string(b)
}

func mustChown(t testing.TB, p string, uid int) {
	t.Helper()
	if err := os.Chown(p, uid, uid); err != nil {
		t.Fatal(err)
	}
}
