package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// memJSON is the part of `dbhost mem --format json` scripts rely on.
type memJSON struct {
	Processes []struct {
		PID  *int    `json:"pid"`
		Comm *string `json:"comm"`
		RSS  *uint64 `json:"rss_bytes"`
		PSS  *uint64 `json:"pss_bytes"`
		USS  *uint64 `json:"uss_bytes"`
		Swap *uint64 `json:"swap_bytes"`
	} `json:"processes"`
	Regions []struct {
		Kind     *string `json:"kind"`
		Size     *uint64 `json:"size_bytes"`
		Resident *uint64 `json:"resident_bytes"`
		PIDs     []int   `json:"pids"`
	} `json:"shared_regions"`
	Instances []json.RawMessage `json:"instances"`
	Host      struct {
		MemTotal uint64 `json:"mem_total_bytes"`
	} `json:"host"`
}

// --pid selects processes; the JSON has the documented fields. Works as
// any user: the test's own processes are always readable.
func TestMemJSONPid(t *testing.T) {
	sleep := exec.Command("sleep", "30")
	if err := sleep.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sleep.Process.Kill(); sleep.Wait() })
	self, kid := os.Getpid(), sleep.Process.Pid
	code, out, errs := runCLI(t, "mem", "--format", "json", "--pid", fmt.Sprintf("%d,%d", self, kid), "--sort", "rss")
	if code != ExitOK {
		t.Fatalf("exit %d: %s", code, errs)
	}
	var doc memJSON
	if err := json.Unmarshal([]byte(out), &doc); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	if len(doc.Processes) != 2 {
		t.Fatalf("%d processes, want the 2 selected", len(doc.Processes))
	}
	seen := map[int]bool{}
	for _, p := range doc.Processes {
		if p.PID == nil || p.Comm == nil || p.RSS == nil || p.PSS == nil || p.USS == nil || p.Swap == nil {
			t.Fatalf("process lacks a documented field: %s", out)
		}
		seen[*p.PID] = true
		if *p.RSS == 0 || *p.PSS == 0 || *p.PSS > *p.RSS || *p.USS > *p.PSS {
			t.Errorf("pid %d: rss %d pss %d uss %d", *p.PID, *p.RSS, *p.PSS, *p.USS)
		}
	}
	if !seen[self] || !seen[kid] {
		t.Errorf("pids %v, want %d and %d", seen, self, kid)
	}
	if *doc.Processes[0].RSS < *doc.Processes[1].RSS {
		t.Error("--sort rss: not sorted")
	}
	if doc.Regions == nil || doc.Instances == nil || doc.Host.MemTotal == 0 {
		t.Errorf("shared_regions %v instances %v mem_total %d: present even when empty", doc.Regions, doc.Instances, doc.Host.MemTotal)
	}
	for _, r := range doc.Regions {
		if r.Kind == nil || r.Size == nil || r.Resident == nil || r.PIDs == nil {
			t.Errorf("region lacks a documented field: %s", out)
		}
	}
}

func TestMemText(t *testing.T) {
	code, out, errs := runCLI(t, "mem", "--top", "3", "--pid", fmt.Sprint(os.Getpid()))
	if code != ExitOK {
		t.Fatalf("exit %d: %s", code, errs)
	}
	for _, want := range []string{"PROCESSES: 1 shown", "PSS", "SHARED REGIONS", "HOST (/proc/meminfo)", "AnonPages", "Shmem", " MiB"} {
		if !strings.Contains(out, want) {
			t.Errorf("text lacks %q:\n%s", want, out)
		}
	}
}

func TestMemBadFlags(t *testing.T) {
	for _, args := range [][]string{
		{"--sort", "vsz"}, {"--format", "xml"}, {"--pid", "abc"}, {"--engine", "oracle"}, {"--top", "-1"},
	} {
		if code, _, errs := runCLI(t, append([]string{"mem"}, args...)...); code != ExitError || errs == "" {
			t.Errorf("%v: exit %d, stderr %q", args, code, errs)
		}
	}
}

// --watch redraws until the context is cancelled (Ctrl-C), then exits 0.
func TestMemWatchStops(t *testing.T) {
	var out, errb strings.Builder
	ctx, cancel := context.WithTimeout(context.Background(), 1500*time.Millisecond)
	defer cancel()
	code := run(ctx, Env{Stdout: &out, Stderr: &errb}, []string{"mem", "--watch", "0.5", "--pid", fmt.Sprint(os.Getpid())})
	if code != ExitOK {
		t.Fatalf("exit %d: %s", code, errb.String())
	}
	if n := strings.Count(out.String(), "PROCESSES:"); n < 2 {
		t.Errorf("%d redraws in 1.5 s at 0.5 s, want at least 2", n)
	}
}
