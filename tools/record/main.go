// Command record records the host fixtures in testdata/hosts: for each
// scenario it changes this machine (kernel knobs through a journal, private
// database servers, loop-mounted filesystems), runs `dbhost collect`, and
// puts everything back, also on Ctrl-C and after a crash (the journal is
// restored at the next start). Each recording is stored in its text form,
// testdata/hosts/NAME.ttar (package ttar; go run ./tools/ttar build makes
// the archive).
//
//	go run ./tools/record -list
//	sudo go run ./tools/record baseline tuned-memory
//	sudo go run ./tools/record all
package main

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"testing"

	"github.com/dbhost/dbhost/internal/change"
	"github.com/dbhost/dbhost/internal/cli"
	"github.com/dbhost/dbhost/internal/fixture/ttar"
	"github.com/dbhost/dbhost/internal/host"
	"github.com/dbhost/dbhost/internal/journal"
	"github.com/dbhost/dbhost/internal/testdb"
)

// journalFile survives a crash of the recorder; the next run restores it.
const journalFile = "/var/tmp/dbhost-record.journal"

// Scenario is one recorded host.
type Scenario struct {
	Name string // fixture name: testdata/hosts/NAME.ttar
	Note string // what the fixture shows, stored in its manifest
	// AsUser collects as this user instead of root (to record what a
	// non-root audit can and cannot see).
	AsUser string
	// Setup changes the machine through r; every change is undone after
	// collection.
	Setup func(r *Run) error
}

var scenarios = map[string]Scenario{}

// register adds a scenario; scenario files call it from init.
func register(s Scenario) {
	if _, dup := scenarios[s.Name]; dup {
		panic("duplicate scenario " + s.Name)
	}
	scenarios[s.Name] = s
}

func main() {
	out := flag.String("out", "testdata/hosts", "directory for the recorded hosts (text forms)")
	list := flag.Bool("list", false, "list the scenarios")
	execCollect := flag.String("exec-collect", "", "internal: collect to this file as the current user")
	note := flag.String("note", "", "internal: note for -exec-collect")
	flag.Parse()
	if *execCollect != "" {
		os.Exit(cli.Main([]string{"dbhost", "collect", "-o", *execCollect, "--note", *note}, cli.Env{Stdout: os.Stdout, Stderr: os.Stderr}))
	}
	names := make([]string, 0, len(scenarios))
	for n := range scenarios {
		names = append(names, n)
	}
	sort.Strings(names)
	if *list {
		for _, n := range names {
			fmt.Printf("%-32s %s\n", n, scenarios[n].Note)
		}
		return
	}
	want := flag.Args()
	if len(want) == 1 && want[0] == "all" {
		want = names
	}
	if len(want) == 0 {
		fmt.Fprintln(os.Stderr, "usage: record [-out DIR] SCENARIO... | all | -list")
		os.Exit(2)
	}
	if os.Geteuid() != 0 {
		fmt.Fprintln(os.Stderr, "record: must run as root (it changes kernel settings and starts servers)")
		os.Exit(2)
	}
	failed := false
	for _, n := range want {
		s, ok := scenarios[n]
		if !ok {
			fmt.Fprintf(os.Stderr, "record: no scenario %q (see -list)\n", n)
			os.Exit(2)
		}
		if err := record(s, *out); err != nil {
			fmt.Fprintf(os.Stderr, "record %s: %v\n", n, err)
			failed = true
			continue
		}
		fmt.Printf("recorded %s\n", filepath.Join(*out, n+ttar.Ext))
	}
	if failed {
		os.Exit(1)
	}
}

// record runs one scenario under the host lock with a journal.
func record(s Scenario, outDir string) (err error) {
	unlock, err := journal.Lock(journal.HostLock)
	if err != nil {
		return err
	}
	defer unlock()
	j, err := journal.Open(journalFile, change.Kinds(change.Config{}))
	if err != nil {
		return err
	}
	stop := j.RestoreOnSignal()
	r := &Run{J: j, tb: &tb{}}
	defer func() {
		r.tb.cleanup()
		if rerr := j.Restore(); rerr != nil {
			err = errors.Join(err, rerr)
		}
		stop()
	}()
	if err := r.protect(func() error {
		if s.Setup != nil {
			return s.Setup(r)
		}
		return nil
	}); err != nil {
		return fmt.Errorf("setup: %w", err)
	}
	if err := os.MkdirAll(outDir, 0o755); err != nil {
		return err
	}
	snap, err := collectAs(s.AsUser, s.Note)
	if err != nil {
		return err
	}
	t, err := ttar.ReadArchive(bytes.NewReader(snap))
	if err != nil {
		return err
	}
	return ttar.Write(outDir, s.Name, "", t)
}

// collectAs runs `dbhost collect` in a child process as the given user (root
// when empty), so the snapshot records exactly what that user can read, and
// returns the snapshot archive.
func collectAs(user, note string) ([]byte, error) {
	self, err := os.Executable()
	if err != nil {
		return nil, err
	}
	tmp, err := os.MkdirTemp("", "dbhost-record-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(tmp)
	file := filepath.Join(tmp, "snapshot.tar.gz")
	// Run a copy from the private directory: the build cache under /root is
	// closed to other users.
	bin := filepath.Join(tmp, "collector")
	b, err := os.ReadFile(self)
	if err != nil {
		return nil, err
	}
	if err := os.WriteFile(bin, b, 0o755); err != nil {
		return nil, err
	}
	if err := os.Chmod(tmp, 0o755); err != nil {
		return nil, err
	}
	cmd := exec.Command(bin, "-exec-collect", file, "-note", note)
	cmd.Stdout, cmd.Stderr = os.Stdout, os.Stderr
	cmd.Dir = "/"
	if user != "" {
		uid, gid, err := lookup(user)
		if err != nil {
			return nil, err
		}
		if err := os.Chown(tmp, uid, gid); err != nil {
			return nil, err
		}
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}}
		cmd.Env = []string{"PATH=/usr/sbin:/usr/bin:/sbin:/bin", "HOME=/nonexistent"}
	}
	if err := cmd.Run(); err != nil {
		return nil, fmt.Errorf("collect: %w", err)
	}
	return os.ReadFile(file)
}

func lookup(name string) (int, int, error) {
	b, err := os.ReadFile("/etc/passwd")
	if err != nil {
		return 0, 0, err
	}
	for _, ln := range strings.Split(string(b), "\n") {
		f := strings.Split(ln, ":")
		if len(f) > 3 && f[0] == name {
			var uid, gid int
			fmt.Sscan(f[2], &uid)
			fmt.Sscan(f[3], &gid)
			return uid, gid, nil
		}
	}
	return 0, 0, fmt.Errorf("no user %s", name)
}

// Run is what a scenario changes the machine through.
type Run struct {
	J  *journal.Journal
	tb *tb
}

// Sysctl sets a kernel parameter (restored afterwards).
func (r *Run) Sysctl(name, value string) error {
	return r.J.Set(host.SysctlPath(name), value)
}

// Set writes a /sys or /proc knob (restored afterwards).
func (r *Run) Set(path, value string) error { return r.J.Set(path, value) }

// Cleanup registers fn to run after collection, newest first.
func (r *Run) Cleanup(fn func()) { r.tb.Cleanup(fn) }

// Command runs a command (argument list) and fails the scenario on error.
func (r *Run) Command(name string, args ...string) error {
	out, err := exec.Command(name, args...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("%s %s: %v: %s", name, strings.Join(args, " "), err, strings.TrimSpace(string(out)))
	}
	return nil
}

// Postgres, MariaDB and Redis start private servers, stopped after
// collection.
func (r *Run) Postgres(o testdb.Options) *testdb.Server { return testdb.Postgres(r.tb, o) }

// MariaDB starts a private MariaDB.
func (r *Run) MariaDB(o testdb.Options) *testdb.Server { return testdb.MariaDB(r.tb, o) }

// Redis starts a private Redis.
func (r *Run) Redis(o testdb.Options) *testdb.Server { return testdb.Redis(r.tb, o) }

// protect turns a testdb failure (reported through tb.Fatal) into an error.
func (r *Run) protect(fn func() error) (err error) {
	defer func() {
		if p := recover(); p != nil {
			if f, ok := p.(fatal); ok {
				err = errors.New(string(f))
				return
			}
			panic(p)
		}
	}()
	return fn()
}

type fatal string

// tb lets testdb run outside `go test`: failures panic with fatal, which
// protect recovers; cleanups run after collection.
type tb struct {
	testing.TB
	cleanups []func()
	failed   bool
}

func (t *tb) Helper()                 {}
func (t *tb) Cleanup(fn func())       { t.cleanups = append(t.cleanups, fn) }
func (t *tb) Failed() bool            { return t.failed }
func (t *tb) Logf(f string, a ...any) { fmt.Printf(f+"\n", a...) }
func (t *tb) Fatalf(f string, a ...any) {
	t.failed = true
	panic(fatal(fmt.Sprintf(f, a...)))
}
func (t *tb) Fatal(a ...any) { t.failed = true; panic(fatal(fmt.Sprint(a...))) }
func (t *tb) Skipf(f string, a ...any) {
	t.failed = true
	panic(fatal("prerequisite missing: " + fmt.Sprintf(f, a...)))
}
func (t *tb) cleanup() {
	for i := len(t.cleanups) - 1; i >= 0; i-- {
		t.cleanups[i]()
	}
	t.cleanups = nil
}
