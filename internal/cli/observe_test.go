package cli

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/dbhost/dbhost/internal/fixture"
)

// A fresh collection holds what mem and contention read: both read it back
// with --from and show the host as it was. A sleep started before the
// collection must appear with its PID and name, the host's memory total
// and CPU count must be this host's, and contention must say which figures
// one sample cannot give.
func TestMemContentionFromCollect(t *testing.T) {
	sleep := exec.Command("sleep", "60")
	if err := sleep.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sleep.Process.Kill(); sleep.Wait() })
	snap := filepath.Join(t.TempDir(), "host.tar.gz")
	if code, _, errs := runCLI(t, "collect", "-o", snap); code != ExitOK {
		t.Fatalf("collect: exit %d: %s", code, errs)
	}

	code, out, errs := runCLI(t, "mem", "--from", snap, "--format", "json")
	if code != ExitOK {
		t.Fatalf("mem --from: exit %d: %s", code, errs)
	}
	var doc struct {
		memJSON
		Source string `json:"source"`
	}
	if err := json.Unmarshal([]byte(out), &doc); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	if doc.Source != snap {
		t.Errorf("source %q, want the snapshot %q", doc.Source, snap)
	}
	found := false
	for _, p := range doc.Processes {
		if *p.PID == sleep.Process.Pid {
			found = true
			if *p.Comm != "sleep" || *p.RSS == 0 || *p.PSS > *p.RSS {
				t.Errorf("the sleep in the snapshot: comm %q rss %d pss %d", *p.Comm, *p.RSS, *p.PSS)
			}
		}
	}
	if !found || len(doc.Processes) < 2 {
		t.Errorf("%d processes, the sleep (pid %d) among them: %v", len(doc.Processes), sleep.Process.Pid, found)
	}
	if want := memTotal(t); doc.Host.MemTotal != want {
		t.Errorf("mem_total %d, this host's /proc/meminfo says %d", doc.Host.MemTotal, want)
	}

	code, out, errs = runCLI(t, "contention", "--from", snap, "--format", "json")
	if code != ExitError { // one sample: no verdict can be judged
		t.Errorf("contention --from: exit %d, want %d: %s", code, ExitError, errs)
	}
	var r struct {
		Snapshot string  `json:"snapshot"`
		Seconds  float64 `json:"interval_seconds"`
		Host     struct {
			CPUs     int `json:"cpus"`
			Switches struct {
				Err string `json:"error"`
			} `json:"switches_per_second"`
			RunQueue struct {
				Running uint64 `json:"procs_running_end"`
				Err     string `json:"error"`
			} `json:"run_queue"`
		} `json:"host"`
		Instances []struct {
			Processes int `json:"processes"`
			Threads   int `json:"threads"`
			Queries   struct {
				Err string `json:"error"`
			} `json:"queries"`
		} `json:"instances"`
		Verdicts []struct {
			ID, Status, Summary string
		} `json:"verdicts"`
	}
	if err := json.Unmarshal([]byte(out), &r); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	if r.Snapshot != snap || r.Seconds != 0 {
		t.Errorf("snapshot %q over %v s, want %q over 0 s", r.Snapshot, r.Seconds, snap)
	}
	if want := statCPUs(t); r.Host.CPUs != want {
		t.Errorf("%d CPUs, /proc/stat has %d", r.Host.CPUs, want)
	}
	if r.Host.RunQueue.Err != "" || r.Host.RunQueue.Running < 1 {
		t.Errorf("run queue from one sample: %+v (collect itself was running)", r.Host.RunQueue)
	}
	if !strings.Contains(r.Host.Switches.Err, "two samples") {
		t.Errorf("switches error %q, want why one sample gives no rate", r.Host.Switches.Err)
	}
	// Other tests' servers start and stop on this host while collect runs:
	// one that exited between discovery and the read of its threads is in
	// the snapshot without them, and says so.
	gone := 0
	for _, v := range r.Verdicts {
		if strings.Contains(v.Summary, "not recorded in this snapshot") {
			gone++
		}
	}
	for i, in := range r.Instances {
		if in.Processes < 1 || in.Queries.Err == "" || in.Threads < in.Processes && gone == 0 {
			t.Errorf("instance %d: %+v", i, in)
		}
	}
	if len(r.Verdicts) != 1+len(r.Instances) {
		t.Errorf("%d verdicts for %d instances", len(r.Verdicts), len(r.Instances))
	}
	for _, v := range r.Verdicts {
		if v.Status != "unknown" || !strings.Contains(v.Summary, "two samples") && !strings.Contains(v.Summary, "not recorded in this snapshot") {
			t.Errorf("verdict %s: %s %q", v.ID, v.Status, v.Summary)
		}
	}

	code, out, _ = runCLI(t, "contention", "--from", snap)
	for _, want := range []string{"snapshot " + snap + " taken", "one sample", "run queue", "Verdicts"} {
		if !strings.Contains(out, want) {
			t.Errorf("contention --from text lacks %q:\n%s", want, out)
		}
	}
	if code != ExitError {
		t.Errorf("contention --from text: exit %d", code)
	}
}

func memTotal(t *testing.T) uint64 {
	t.Helper()
	b, err := os.ReadFile("/proc/meminfo")
	if err != nil {
		t.Fatal(err)
	}
	for _, ln := range strings.Split(string(b), "\n") {
		if f := strings.Fields(ln); len(f) >= 2 && f[0] == "MemTotal:" {
			var kb uint64
			for _, c := range f[1] {
				kb = kb*10 + uint64(c-'0')
			}
			return kb << 10
		}
	}
	t.Fatal("no MemTotal")
	return 0
}

func statCPUs(t *testing.T) int {
	t.Helper()
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, ln := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(ln, "cpu") && !strings.HasPrefix(ln, "cpu ") {
			n++
		}
	}
	return n
}

// What needs the live host is refused with --from, and a snapshot taken
// before collect recorded memory readings says so instead of showing an
// empty host.
func TestFromRefusals(t *testing.T) {
	snap := fixture.Path("baseline")
	for _, args := range [][]string{
		{"mem", "--from", snap, "--watch", "1"},
		{"contention", "--from", snap, "--watch"},
		{"contention", "--from", snap, "--interval", "2s"},
		{"contention", "--from", snap, "--probe"},
	} {
		code, _, errs := runCLI(t, args...)
		if code != ExitError || !strings.Contains(errs, "live host") && !strings.Contains(errs, "snapshot holds one moment") {
			t.Errorf("%v: exit %d, stderr %q", args, code, errs)
		}
	}
	// Collected as root by a dbhost that read only some processes' memory
	// (its checks'): those are shown, the others counted as not recorded.
	code, out, errs := runCLI(t, "mem", "--from", snap)
	if code != ExitOK || !strings.Contains(out, "is not in the snapshot") || !strings.Contains(out, "mysql :3306") {
		t.Errorf("mem --from %s: exit %d\n%s%s", snap, code, out, errs)
	}
	// Collected without root and before collect recorded memory: nothing.
	old := fixture.Path("baseline-nonroot")
	code, out, errs = runCLI(t, "mem", "--from", old)
	if code != ExitError || !strings.Contains(errs, "holds no memory readings") || out != "" {
		t.Errorf("mem --from %s: exit %d\n%s%s", old, code, out, errs)
	}
}
