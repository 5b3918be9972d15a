package pgcluster

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/dbhost/dbhost/internal/host"
	"github.com/dbhost/dbhost/internal/journal"
)

// testdata/postmaster.pid was written by a cluster of this package on the
// development VM (PostgreSQL 15).
func TestParsePIDFile(t *testing.T) {
	b, err := os.ReadFile("testdata/postmaster.pid")
	if err != nil {
		t.Fatal(err)
	}
	p, err := parsePIDFile(b)
	if err != nil {
		t.Fatal(err)
	}
	want := pidFile{PID: 8153, DataDir: "/tmp/dbhost-pgcluster-0080a6b04c5d/data", Port: 40377,
		SocketDir: "/tmp/dbhost-pgcluster-0080a6b04c5d", Status: "ready"}
	if p != want {
		t.Errorf("parsePIDFile = %+v, want %+v", p, want)
	}
	// Early in startup only the first lines exist: no status yet.
	lines := strings.SplitAfter(string(b), "\n")
	p, err = parsePIDFile([]byte(strings.Join(lines[:4], "")))
	if err != nil || p.PID != 8153 || p.Status != "" {
		t.Errorf("partial pid file: %+v, %v", p, err)
	}
	for _, bad := range []string{"", "8153", "abc\n/x\n", "-1\n/x\n", "0\n/x\n"} {
		if _, err := parsePIDFile([]byte(bad)); err == nil {
			t.Errorf("parsePIDFile(%q) accepted", bad)
		}
	}
}

func TestRecordCheck(t *testing.T) {
	ok := Record{Dir: "/tmp/dbhost-pgcluster-abc", Marker: MarkerName, Token: "dbhost pgcluster 0123456789abcdef"}
	if err := ok.check(); err != nil {
		t.Errorf("check(%+v): %v", ok, err)
	}
	for _, bad := range []Record{
		{Dir: "/tmp", Marker: MarkerName, Token: ok.Token},
		{Dir: "/", Marker: MarkerName, Token: ok.Token},
		{Dir: "tmp/dbhost-pgcluster-abc", Marker: MarkerName, Token: ok.Token},
		{Dir: "/tmp/dbhost-pgcluster-abc/../../etc", Marker: MarkerName, Token: ok.Token},
		{Dir: "/var/lib/postgresql", Marker: MarkerName, Token: ok.Token},
		{Dir: ok.Dir, Marker: "../x", Token: ok.Token},
		{Dir: ok.Dir, Marker: "", Token: ok.Token},
		{Dir: ok.Dir, Marker: MarkerName, Token: ""},
	} {
		if err := bad.check(); err == nil {
			t.Errorf("check(%+v) accepted", bad)
		}
		// The undo refuses it before looking at anything.
		if err := bad.undo(quickStop); err == nil {
			t.Errorf("undo(%+v) succeeded", bad)
		}
	}
}

var quickStop = stopTimes{fast: 5 * time.Second, quit: 2 * time.Second, kill: 2 * time.Second}

func testRecord(t *testing.T) Record {
	t.Helper()
	dir := filepath.Join(t.TempDir(), dirPrefix+"test")
	return Record{Dir: dir, Marker: MarkerName, Token: "dbhost pgcluster 00112233445566778899aabbccddeeff", Port: 1, Bin: "/nonexistent"}
}

func TestRemoveDirNeedsMarker(t *testing.T) {
	r := testRecord(t)
	// Gone already: success, twice.
	for range 2 {
		if err := r.undo(quickStop); err != nil {
			t.Fatalf("undo of a missing directory: %v", err)
		}
	}
	// Made but not marked yet, and empty: removed.
	if err := os.Mkdir(r.Dir, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := r.undo(quickStop); err != nil {
		t.Fatalf("undo of an empty unmarked directory: %v", err)
	}
	if _, err := os.Stat(r.Dir); !os.IsNotExist(err) {
		t.Fatalf("empty unmarked directory left: %v", err)
	}
	// Holding something but no marker: untouched.
	keep := filepath.Join(r.Dir, "data", "precious")
	if err := os.MkdirAll(filepath.Dir(keep), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(keep, []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	err := r.undo(quickStop)
	if err == nil || !strings.Contains(err.Error(), "marker") {
		t.Errorf("undo without marker: %v, want a refusal naming the marker", err)
	}
	mustExist(t, keep)
	// A marker with someone else's token: untouched.
	mk := filepath.Join(r.Dir, MarkerName)
	if err := os.WriteFile(mk, []byte("dbhost pgcluster ffffffffffffffffffffffffffffffff\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := r.undo(quickStop); err == nil {
		t.Error("undo with a foreign token succeeded")
	}
	mustExist(t, keep)
	// A marker that is a symbolic link to a file with the right content: untouched.
	elsewhere := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(elsewhere, []byte(r.Token), 0o600); err != nil {
		t.Fatal(err)
	}
	os.Remove(mk)
	if err := os.Symlink(elsewhere, mk); err != nil {
		t.Fatal(err)
	}
	if err := r.undo(quickStop); err == nil {
		t.Error("undo with a symlinked marker succeeded")
	}
	mustExist(t, keep)
	// The right marker: removed, and removing again is success.
	os.Remove(mk)
	if err := os.WriteFile(mk, []byte(r.Token+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		if err := r.undo(quickStop); err != nil {
			t.Fatalf("undo with the marker: %v", err)
		}
	}
	if _, err := os.Stat(r.Dir); !os.IsNotExist(err) {
		t.Errorf("marked directory not removed: %v", err)
	}
}

// A directory that is a symbolic link is never followed.
func TestRemoveDirRefusesSymlink(t *testing.T) {
	r := testRecord(t)
	target := t.TempDir()
	keep := filepath.Join(target, "precious")
	os.WriteFile(keep, []byte("x"), 0o600)
	os.WriteFile(filepath.Join(target, MarkerName), []byte(r.Token), 0o600)
	if err := os.Symlink(target, r.Dir); err != nil {
		t.Fatal(err)
	}
	if err := r.undo(quickStop); err == nil {
		t.Error("undo through a symlinked directory succeeded")
	}
	mustExist(t, keep)
}

// Through the journal, as `dbhost experiment recover` runs it: a
// postmaster.pid naming a live process that is not a PostgreSQL server of
// this directory (a PID reused after a crash) must not get a signal, and a
// directory without the marker must survive; the entry stays in the journal
// for a later attempt.
func TestUndoViaJournalIsCareful(t *testing.T) {
	r := testRecord(t)
	sleep := exec.Command("sleep", "60")
	if err := sleep.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sleep.Process.Kill(); sleep.Wait() })
	data := r.dataDir()
	if err := os.MkdirAll(data, 0o700); err != nil {
		t.Fatal(err)
	}
	pf := strconv.Itoa(sleep.Process.Pid) + "\n" + data + "\n1\n1\n" + r.Dir + "\n\n 0 0\nready   \n"
	if err := os.WriteFile(filepath.Join(data, "postmaster.pid"), []byte(pf), 0o600); err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(t.TempDir(), "experiment.journal")
	j, err := journal.Open(file, Kinds())
	if err != nil {
		t.Fatal(err)
	}
	if err := j.Record(Kind, "test cluster", r); err != nil {
		t.Fatal(err)
	}
	if err := j.Restore(); err == nil {
		t.Fatal("restore removed a directory without marker")
	}
	mustExist(t, filepath.Join(data, "postmaster.pid"))
	if n := len(j.Changes()); n != 1 {
		t.Errorf("journal holds %d entries after the refused undo, want 1", n)
	}
	// With the marker, recovery (a new reader of the file) removes it.
	if err := os.WriteFile(filepath.Join(r.Dir, MarkerName), []byte(r.Token+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := journal.Recover(file, Kinds()); err != nil {
		t.Fatalf("recover: %v", err)
	}
	if _, err := os.Stat(r.Dir); !os.IsNotExist(err) {
		t.Errorf("directory left after recover: %v", err)
	}
	if _, err := os.Stat(file); !os.IsNotExist(err) {
		t.Errorf("journal left after recover: %v", err)
	}
	if err := syscall.Kill(sleep.Process.Pid, 0); err != nil {
		t.Errorf("the unrelated process named in postmaster.pid was hit: %v", err)
	}
	if h, _ := host.Open("/"); h != nil {
		if st, err := h.ProcStat(sleep.Process.Pid); err != nil || st.State == "Z" {
			t.Errorf("the unrelated process named in postmaster.pid is gone (%v)", err)
		}
	}
}

func mustExist(t *testing.T, p string) {
	t.Helper()
	if _, err := os.Stat(p); err != nil {
		t.Errorf("%s was removed: %v", p, err)
	}
}
