package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"
)

func keys(m map[string]any) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// wantKeys fails unless m has every key of want (documented in
// docs/contention.md) and nothing undocumented.
func wantKeys(t *testing.T, what string, m map[string]any, want, optional string) {
	t.Helper()
	allowed := map[string]bool{}
	for _, k := range strings.Fields(want + " " + optional) {
		allowed[k] = true
	}
	for _, k := range strings.Fields(want) {
		if _, ok := m[k]; !ok {
			t.Errorf("%s: no %q (have %v)", what, k, keys(m))
		}
	}
	for k := range m {
		if !allowed[k] {
			t.Errorf("%s: undocumented key %q", what, k)
		}
	}
}

// TestContentionJSON measures this host for a second and checks the JSON
// shape docs/contention.md documents.
func TestContentionJSON(t *testing.T) {
	state := filepath.Join(t.TempDir(), "probe.json")
	code, out, errs := runCLI(t, "contention", "--interval", "1s", "--format", "json", "--state", state)
	if code == ExitError {
		t.Fatalf("exit %d: %s", code, errs)
	}
	var r map[string]any
	if err := json.Unmarshal([]byte(out), &r); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	wantKeys(t, "report", r, "schema time interval_seconds host capacity instances verdicts", "notes")
	if r["schema"] != "dbhost.contention/1" {
		t.Errorf("schema %v", r["schema"])
	}
	if s, _ := r["interval_seconds"].(float64); s < 0.9 || s > 2 {
		t.Errorf("interval %v s", r["interval_seconds"])
	}
	hf, _ := r["host"].(map[string]any)
	wantKeys(t, "host", hf, "cpus switches_per_second switches_per_second_per_core per_cpu per_cpu_source per_cpu_averaged cpu_busy_percent run_queue", "")
	for _, k := range []string{"switches_per_second", "switches_per_second_per_core", "cpu_busy_percent"} {
		f, _ := hf[k].(map[string]any)
		wantKeys(t, k, f, "value source", "error")
	}
	cpus, _ := hf["cpus"].(float64)
	per, _ := hf["per_cpu"].([]any)
	if cpus < 1 || len(per) != int(cpus) {
		t.Fatalf("%v CPUs, %d per-CPU figures", cpus, len(per))
	}
	for _, c := range per {
		wantKeys(t, "per_cpu", c.(map[string]any), "cpu switches_per_second busy_percent share_of_capacity", "")
	}
	rq, _ := hf["run_queue"].(map[string]any)
	wantKeys(t, "run_queue", rq, "procs_running_start procs_running_end procs_blocked loadavg source", "error")
	c, _ := r["capacity"].(map[string]any)
	wantKeys(t, "capacity", c, "per_core_per_second source note", "measured kernel cpu_model cpus state_file stale")
	if c["source"] != "assumed" || !strings.Contains(c["note"].(string), "no probe stored in "+state) {
		t.Errorf("capacity without a probe: %v", c)
	}
	insts, _ := r["instances"].([]any)
	for _, x := range insts {
		in := x.(map[string]any)
		wantKeys(t, "instance", in, "name engine pid processes threads processes_came processes_went threads_came threads_went switches switches_per_second voluntary_per_second involuntary_per_second cpu_cores source queries processes_detail",
			"flavor threads_unreadable excluded_own switches_per_query error")
		q, _ := in["queries"].(map[string]any)
		wantKeys(t, "queries", q, "count per_second own_subtracted", "source via note transactions error")
	}
	vs, _ := r["verdicts"].([]any)
	if len(vs) < 1+len(insts) {
		t.Fatalf("%d verdicts for %d instances", len(vs), len(insts))
	}
	for _, x := range vs {
		v := x.(map[string]any)
		wantKeys(t, "verdict", v, "id subject status summary reason", "value")
		switch v["status"] {
		case "ok", "warning", "info", "unknown":
		default:
			t.Errorf("verdict status %v", v["status"])
		}
	}
	if v := vs[0].(map[string]any); v["id"] != "contention.per_core" || v["subject"] != "host" {
		t.Errorf("first verdict %v, want the per-core one", v)
	}
}

func TestContentionBadFlags(t *testing.T) {
	for _, args := range [][]string{
		{"--format", "xml"}, {"--pid", "abc"}, {"--engine", "oracle"}, {"--interval", "1ms"}, {"extra"},
	} {
		code, _, errs := runCLI(t, append([]string{"contention"}, args...)...)
		if code != ExitError || errs == "" {
			t.Errorf("%v: exit %d, stderr %q", args, code, errs)
		}
	}
	// A PID no database holds: nothing to watch, and it says so.
	code, out, _ := runCLI(t, "contention", "--interval", "200ms", "--pid", "999999999", "--state", filepath.Join(t.TempDir(), "p.json"))
	if code == ExitError || !strings.Contains(out, "no database instance has PID 999999999") {
		t.Errorf("exit %d:\n%s", code, out)
	}
}

// TestContentionProbeThenJudge stores a short probe and judges against it.
func TestContentionProbeThenJudge(t *testing.T) {
	state := filepath.Join(t.TempDir(), "lib", "probe.json")
	code, out, errs := runCLI(t, "contention", "--probe", "--probe-time", "300ms", "--state", state)
	if code != ExitOK || !strings.Contains(out, "switches/s total") || !strings.Contains(out, "stored in "+state) {
		t.Fatalf("probe: exit %d\n%s%s", code, out, errs)
	}
	if fi, err := os.Stat(state); err != nil || fi.Mode() != 0o644 {
		t.Fatalf("state file: %v %v", fi, err)
	}
	code, out, errs = runCLI(t, "contention", "--interval", "200ms", "--format", "json", "--state", state, "--engine", "redis")
	if code == ExitError {
		t.Fatalf("exit %d: %s", code, errs)
	}
	var r struct {
		Capacity struct {
			Source  string  `json:"source"`
			PerCore float64 `json:"per_core_per_second"`
			Stale   string  `json:"stale"`
		} `json:"capacity"`
		Instances []struct {
			Engine string `json:"engine"`
		} `json:"instances"`
	}
	if err := json.Unmarshal([]byte(out), &r); err != nil {
		t.Fatal(err)
	}
	if r.Capacity.Source != "probe" || r.Capacity.PerCore <= 0 || r.Capacity.Stale != "" {
		t.Errorf("capacity %+v", r.Capacity)
	}
	for _, in := range r.Instances {
		if in.Engine != "redis" {
			t.Errorf("--engine redis kept a %s instance", in.Engine)
		}
	}
}

// TestContentionWatch: --watch repeats until the context ends (SIGINT in
// Main), one JSON object per line.
func TestContentionWatch(t *testing.T) {
	if testing.Short() {
		t.Skip("watches for 2.5 s")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2500*time.Millisecond)
	defer cancel()
	var out, errb bytes.Buffer
	code := run(ctx, Env{Stdout: &out, Stderr: &errb}, []string{"contention", "--watch", "--interval", "700ms", "--format", "json", "--engine", "redis", "--state", filepath.Join(t.TempDir(), "p.json")})
	if code != ExitOK {
		t.Fatalf("exit %d: %s", code, errb.String())
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	if len(lines) < 2 {
		t.Fatalf("%d reports in 2.5 s of 0.7 s intervals:\n%s", len(lines), out.String())
	}
	var prev time.Time
	for _, ln := range lines {
		var r struct {
			Time    time.Time `json:"time"`
			Seconds float64   `json:"interval_seconds"`
		}
		if err := json.Unmarshal([]byte(ln), &r); err != nil {
			t.Fatalf("%v: %q", err, ln)
		}
		if r.Seconds < 0.6 || !r.Time.After(prev) {
			t.Errorf("report at %v over %.2f s (previous %v)", r.Time, r.Seconds, prev)
		}
		prev = r.Time
	}
}
