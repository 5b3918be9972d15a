package stats

import (
	"encoding/json"
	"os"
	"strings"
	"testing"
	"time"
)

// loadBench reads the recorded pgbench trials (see TestRecordPgbench).
func loadBench(t *testing.T) map[string]benchExperiment {
	t.Helper()
	b, err := os.ReadFile("testdata/pgbench.json")
	if err != nil {
		t.Fatal(err)
	}
	var fx benchFixture
	if err := json.Unmarshal(b, &fx); err != nil {
		t.Fatal(err)
	}
	out := map[string]benchExperiment{}
	for _, e := range fx.Experiments {
		out[e.Name] = e
	}
	return out
}

// runRecorded replays a recorded experiment look by look, as the
// experiment command would, and returns every decision made.
func runRecorded(t *testing.T, e benchExperiment) []Decision {
	t.Helper()
	base, treat := e.arm("A"), e.arm("B")
	plan := Plan{MaxPerArm: min(len(base), len(treat)), Metric: "throughput"}
	looks, err := plan.Looks()
	if err != nil {
		t.Fatal(err)
	}
	var ds []Decision
	for k, n := range looks {
		d, err := plan.Decide(base[:n], treat[:n], k+1)
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("%s: %s", e.Name, d.Reason)
		ds = append(ds, d)
		if d.Stop {
			break
		}
	}
	return ds
}

// Real A/A runs on a busy shared host: trials vary by 20–25% and drift,
// yet no look calls a change, and the budget ends inconclusive.
func TestRecordedAAIsNotAChange(t *testing.T) {
	fx := loadBench(t)
	for _, name := range []string{"select-aa", "tpcb-aa"} {
		e, ok := fx[name]
		if !ok {
			t.Fatalf("fixture lacks %s", name)
		}
		ds := runRecorded(t, e)
		for _, d := range ds {
			if d.Verdict == Better || d.Verdict == Worse {
				t.Errorf("%s look %d: %s", name, d.Look, d.Reason)
			}
		}
		if last := ds[len(ds)-1]; last.Verdict != Inconclusive || !last.Stop || last.Look != last.Looks {
			t.Errorf("%s ended with %+v", name, last)
		}
	}
}

// Real changes with large effects (synchronous_commit=off for writes,
// prepared statements for reads) separate completely after 4 trials per
// arm even on that noisy host.
func TestRecordedChangesAreBetter(t *testing.T) {
	fx := loadBench(t)
	for _, name := range []string{"tpcb-sync-commit", "select-prepared"} {
		ds := runRecorded(t, fx[name])
		d := ds[len(ds)-1]
		if d.Verdict != Better || d.Look != 1 || d.Interval.Lo() <= 1 || d.Ratio < 1.3 {
			t.Errorf("%s: %+v", name, d)
		}
		// The reverse comparison (undoing the change) is worse.
		rev, err := Plan{MaxPerArm: 6, Metric: "throughput"}.Decide(fx[name].arm("B")[:4], fx[name].arm("A")[:4], 1)
		if err != nil {
			t.Fatal(err)
		}
		if rev.Verdict != Worse {
			t.Errorf("%s reversed: %s", name, rev.Reason)
		}
	}
}

// Calibration on the real A/A trials: the noise is measured, flagged as
// too high for small effects, and the MDE is correspondingly large.
func TestRecordedCalibration(t *testing.T) {
	fx := loadBench(t)
	for _, name := range []string{"select-aa", "tpcb-aa"} {
		e := fx[name]
		c, err := Calibrate(append(e.arm("A"), e.arm("B")...), 5*time.Second, Plan{MaxPerArm: 20})
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("%s: noise ±%.1f%%, MDE %.1f%%, expected %v (%0.1f trials per arm), at most %v",
			name, 100*c.NoiseCV, 100*c.MDE, c.Expected, c.TrialsPerArm, c.Max)
		if c.NoiseCV < 0.1 || c.NoiseCV > 0.6 || c.MDE < c.NoiseCV || c.Samples != 20 {
			t.Errorf("%s: %+v", name, c)
		}
		if len(c.Warnings) == 0 || !strings.Contains(c.Warnings[0], "only large changes") {
			t.Errorf("%s: no noise warning: %v", name, c.Warnings)
		}
	}
}
