package engine

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/dbhost/dbhost/internal/host"
)

// procRoot builds a host root whose process table lists PIDs; "complete"
// ones have stat and status, the others vanished between the directory
// listing and the read, as a process that exits mid-scan does.
func procRoot(t *testing.T, complete map[int]string, vanished ...int) string {
	t.Helper()
	root := t.TempDir()
	write := func(p, s string) {
		full := filepath.Join(root, p)
		os.MkdirAll(filepath.Dir(full), 0o755)
		if err := os.WriteFile(full, []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for pid, comm := range complete {
		d := filepath.Join("proc", itoa(pid))
		write(filepath.Join(d, "stat"), itoa(pid)+" ("+comm+") S 1 "+itoa(pid)+" "+itoa(pid)+" 0 -1 4194560 0 0 0 0 0 0 0 0 20 0 1 0 100 1000 10 18446744073709551615 1 1 0 0 0 0 0 0 0 0 0 0 17 0 0 0 0 0 0 0 0 0 0 0 0 0 0\n")
		write(filepath.Join(d, "status"), "Name:\t"+comm+"\nUid:\t0\t0\t0\t0\nGid:\t0\t0\t0\t0\n")
		write(filepath.Join(d, "comm"), comm+"\n")
	}
	for _, pid := range vanished {
		os.MkdirAll(filepath.Join(root, "proc", itoa(pid)), 0o755)
	}
	write("etc/passwd", "root:x:0:0:root:/root:/bin/sh\n")
	return root
}

func itoa(i int) string { return strconv.Itoa(i) }

func TestReadTableSkipsVanishedProcesses(t *testing.T) {
	h, err := host.Open(procRoot(t, map[int]string{101: "postgres", 102: "bash"}, 103, 104))
	if err != nil {
		t.Fatal(err)
	}
	tab, err := ReadTable(h)
	if err != nil {
		t.Fatal(err)
	}
	if len(tab.Procs) != 2 {
		t.Fatalf("got %d processes, want the 2 that still exist: %+v", len(tab.Procs), tab.Procs)
	}
	if p, ok := tab.Get(101); !ok || p.Comm != "postgres" || p.User != "root" {
		t.Errorf("pid 101: %+v %v", p, ok)
	}
}

// vanishing matches "vanish" processes and fails as a process that exited
// between the table read and its inspection does.
type vanishing struct{ Base }

func (vanishing) Engine() Engine                 { return "test" }
func (vanishing) Name() string                   { return "test" }
func (vanishing) Match(p Process, _ *Table) bool { return p.Comm == "vanish" || p.Comm == "stays" }
func (vanishing) Inspect(_ context.Context, h *host.Host, p Process, _ *Table, _ Options) (*Instance, error) {
	if _, err := h.Cmdline(p.PID); err != nil && p.Comm == "vanish" {
		return nil, err
	}
	return &Instance{Engine: "test", PID: p.PID, Comm: p.Comm}, nil
}

func TestDiscoverSurvivesAProcessExiting(t *testing.T) {
	Register(vanishing{})
	h, err := host.Open(procRoot(t, map[int]string{201: "vanish", 202: "stays"}))
	if err != nil {
		t.Fatal(err)
	}
	tab, err := ReadTable(h)
	if err != nil {
		t.Fatal(err)
	}
	insts, notes := Discover(context.Background(), h, tab, Options{})
	if len(insts) != 1 || insts[0].PID != 202 {
		t.Errorf("instances %+v, want only pid 202", insts)
	}
	if len(notes) != 1 || !strings.Contains(notes[0], "pid 201") || !strings.Contains(notes[0], "not present") {
		t.Errorf("notes %q: want one saying pid 201 is gone", notes)
	}
}
