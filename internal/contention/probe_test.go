package contention

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/dbhost/dbhost/internal/host"
	"github.com/dbhost/dbhost/internal/testdb"
)

// TestProbeStable runs the probe as `contention --probe` does (3 s, 30
// sub-runs) until three results agree within 20 % of their median, at most
// five times, and every result is within a factor of 1.6 of the others.
// On this VM a switch costs 30 % more for seconds at a time now and then
// (no steal time: the virtual CPUs run on slower hardware), so two probes
// can measure two machines; five always include three of one, and the
// test fails when the probe scatters within one. It holds the host lock,
// so that no other test's servers and benchmarks share the probe's cores.
// With a CPU burner on every core (nice 0) it held in 5 runs of 5: the
// first three probes agreed each time, 367 K to 387 K per core in all,
// as the probe judges by the least costly tenth of its sub-runs.
func TestProbeStable(t *testing.T) {
	if testing.Short() {
		t.Skip("keeps every CPU busy for 9 to 15 s")
	}
	testdb.Journal(t) // the exclusive host lock
	h := liveHost(t)
	var rates []float64
	for i := 0; i < 5 && !agreeing(rates, 3, 0.20); i++ {
		r, err := Probe(context.Background(), h, DefaultProbeTime)
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("probe %d: %.0f switches/s (%.0f per core on %v), %.0f hand-offs/s, %.2f switches per hand-off, %.0f ns per switch; sub-runs %.0f",
			i, r.Switches, r.PerCore, r.PinnedCPUs, r.Handoffs, r.SwitchesPerHandoff, r.CostNS, r.SubRunSwitches)
		if r.SubRuns != 30 || len(r.SubRunSwitches) != 30 || r.Seconds < 2.9 || r.Seconds > 3.5 {
			t.Errorf("%d sub-runs over %.2f s", r.SubRuns, r.Seconds)
		}
		// Each hand-off blocks one thread of a pair pinned to one CPU and
		// runs the other: one switch, plus whatever else runs.
		if r.SwitchesPerHandoff < 0.9 || r.SwitchesPerHandoff > 2 {
			t.Errorf("%.2f switches per hand-off", r.SwitchesPerHandoff)
		}
		if r.PerCore < 10_000 || r.CostNS < 50 || r.CostNS > 1e6 || r.Kernel == "" || r.CPUs < len(r.PinnedCPUs) || len(r.PinnedCPUs) == 0 {
			t.Errorf("implausible probe %+v", r)
		}
		if !near(r.PerCore, 1e9/r.CostNS) {
			t.Errorf("capacity %.0f per core is not 1 s / %.0f ns", r.PerCore, r.CostNS)
		}
		// Observed switching cannot beat what the cores can do. The
		// capacity is the run's typical cost and the observation its best
		// sub-run: when this VM speeds up for a second, the best sub-run
		// exceeds the typical by as much as the sub-runs spread.
		spread := slices.Max(r.SubRunSwitches) / median(r.SubRunSwitches)
		if r.Switches > 1.2*spread*r.PerCore*float64(len(r.PinnedCPUs)) {
			t.Errorf("observed %.0f switches/s > capacity %.0f x %d CPUs x sub-run spread %.2f", r.Switches, r.PerCore, len(r.PinnedCPUs), spread)
		}
		rates = append(rates, r.PerCore)
	}
	if !agreeing(rates, 3, 0.20) {
		t.Errorf("no three of the probe results %.0f agree within 20 %% of their median", rates)
	}
	if slices.Max(rates) > 1.6*slices.Min(rates) {
		t.Errorf("probe results %.0f differ by more than a factor of 1.6", rates)
	}
}

func median(v []float64) float64 {
	s := slices.Clone(v)
	slices.Sort(s)
	return s[len(s)/2]
}

// agreeing reports whether n of the values lie within frac of the median of
// those n.
func agreeing(vals []float64, n int, frac float64) bool {
	s := slices.Clone(vals)
	slices.Sort(s)
	for i := 0; i+n <= len(s); i++ {
		med := s[i+n/2]
		if s[i] >= med*(1-frac) && s[i+n-1] <= med*(1+frac) {
			return true
		}
	}
	return false
}

func TestAgreeing(t *testing.T) {
	for _, c := range []struct {
		vals []float64
		want bool
	}{
		{[]float64{100, 101, 99}, true},
		{[]float64{561755, 619660, 861385}, false},
		{[]float64{561755, 619660, 861385, 600000}, true},
		{[]float64{100, 130, 170, 230, 300}, false},
		{[]float64{100, 125, 150, 200, 300}, true}, // 100 and 150 are 20 % from 125
		{[]float64{100}, false},
	} {
		if got := agreeing(c.vals, 3, 0.20); got != c.want {
			t.Errorf("agreeing(%v) = %v", c.vals, got)
		}
	}
}

func TestProbeNeedsLiveSystem(t *testing.T) {
	h, err := host.Open(filepath.Join("testdata", "rec", "t0"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Probe(context.Background(), h, time.Second); err == nil || !strings.Contains(err.Error(), "live") {
		t.Errorf("probe on a recorded tree: %v", err)
	}
	if _, err := Probe(context.Background(), liveHost(t), time.Millisecond); err == nil {
		t.Error("a 1 ms probe ran")
	}
}

// TestCapacityState stores a probe and reads it back as the capacity, and
// flags one taken on another kernel and CPU count as stale.
func TestCapacityState(t *testing.T) {
	h := liveHost(t)
	kernel := h.Read("/proc/sys/kernel/osrelease").Value
	cpus, err := onlineCPUs(h)
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(t.TempDir(), "var", "lib", "dbhost")
	file := filepath.Join(dir, "contention-probe.json")
	p := &ProbeResult{Version: stateVersion, Measured: time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC), Kernel: kernel,
		CPUModel: cpuModel(h), CPUs: len(cpus), PinnedCPUs: cpus, Switches: 740e3, PerCore: 370e3}
	if err := SaveProbe(file, p); err != nil {
		t.Fatal(err)
	}
	for path, want := range map[string]os.FileMode{dir: 0o755 | os.ModeDir, file: 0o644} {
		if fi, err := os.Stat(path); err != nil || fi.Mode() != want {
			t.Errorf("%s: mode %v (%v), want %v", path, fi.Mode(), err, want)
		}
	}
	c := LoadCapacity(h, file)
	if c.Source != "probe" || c.PerCore != 370e3 || c.Stale != "" || c.Measured == nil || !c.Measured.Equal(p.Measured) || !strings.Contains(c.Note, "2026-03-01") {
		t.Errorf("stored probe read back as %+v", c)
	}

	p.Kernel, p.CPUs = "4.19.0-old", len(cpus)+6
	if err := SaveProbe(file, p); err != nil {
		t.Fatal(err)
	}
	c = LoadCapacity(h, file)
	if c.Source != "probe" || !strings.Contains(c.Stale, "4.19.0-old") || !strings.Contains(c.Stale, "CPUs") || !strings.Contains(c.Note, "stale") {
		t.Errorf("probe from another kernel and CPU count: %+v", c)
	}

	if c := LoadCapacity(h, filepath.Join(dir, "none.json")); c.Source != "assumed" || c.PerCore != AssumedPerCore || !strings.Contains(c.Note, "no probe stored") {
		t.Errorf("no state file: %+v", c)
	}
	os.WriteFile(file, []byte("{not json"), 0o644)
	if c := LoadCapacity(h, file); c.Source != "assumed" || !strings.Contains(c.Note, "does not hold") {
		t.Errorf("garbage state file: %+v", c)
	}
}
