package stats

import (
	"math"
	"math/rand/v2"
	"strings"
	"testing"
	"time"
)

func TestRobustCV(t *testing.T) {
	// log-MAD of exp({0, ±0.03, ±0.06}) is 0.03: CV = 1.4826·0.03.
	cv, err := RobustCV(exps(0, 0.03, -0.03, 0.06, -0.06))
	if err != nil {
		t.Fatal(err)
	}
	if !near(cv, madScale*0.03, 1e-12) {
		t.Errorf("RobustCV = %v, want %v", cv, madScale*0.03)
	}
	// One stalled trial does not move it.
	stalled, _ := RobustCV(exps(0, 0.03, -0.03, 0.06, -1.5))
	if !near(stalled, cv, 1e-12) {
		t.Errorf("with an outlier %v, without %v", stalled, cv)
	}
	if _, err := RobustCV([]float64{1, 2}); err == nil {
		t.Error("two samples accepted")
	}
}

func aaSamples(n int, cv float64, seed uint64) []float64 {
	rng := rand.New(rand.NewPCG(seed, 1))
	out := make([]float64, n)
	for i := range out {
		out[i] = 5000 * (1 + cv*rng.NormFloat64())
	}
	return out
}

// The MDE is the smallest change the plan declares with 80% power: the
// simulation at the MDE reaches 80%, just below it does not.
func TestCalibrate(t *testing.T) {
	samples := aaSamples(16, 0.03, 12)
	plan := Plan{MaxPerArm: 16}
	c, err := Calibrate(samples, 90*time.Second, plan)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%+v", c)
	if c.NoiseCV < 0.015 || c.NoiseCV > 0.045 {
		t.Errorf("noise %v for samples with 3%% CV", c.NoiseCV)
	}
	power := func(change float64) float64 {
		r, err := Simulate(plan, Scenario{CV: c.NoiseCV, Change: change, Runs: calibrationRuns, Seed: calibrationSeed})
		if err != nil {
			t.Fatal(err)
		}
		return r.Rate(r.Better)
	}
	if p := power(c.MDE); p < 0.8 {
		t.Errorf("power at MDE %v is %v", c.MDE, p)
	}
	if p := power(c.MDE - 0.002); p >= 0.8 {
		t.Errorf("power just below MDE %v is already %v", c.MDE, p)
	}
	// A 3% noise over 16 trials per arm: a few percent.
	if c.MDE < 0.02 || c.MDE > 0.08 {
		t.Errorf("MDE %v", c.MDE)
	}
	if c.Max != 48*time.Minute || c.Expected != Duration(c.TrialsPerArm, 2, 90*time.Second) ||
		c.TrialsPerArm < 4 || c.TrialsPerArm > 16 || c.ExpectedNoChange <= c.Expected {
		t.Errorf("durations: %+v", c)
	}
	// More noise, larger MDE; the latency direction gives the same MDE
	// for the mirrored change.
	noisy, _ := Calibrate(aaSamples(16, 0.06, 12), 90*time.Second, plan)
	if noisy.MDE <= c.MDE {
		t.Errorf("MDE with 6%% noise %v, with 3%% %v", noisy.MDE, c.MDE)
	}
	lat, err := Calibrate(samples, 90*time.Second, Plan{MaxPerArm: 16, Direction: LowerIsBetter})
	if err != nil || math.Abs(lat.MDE-c.MDE) > 0.003 {
		t.Errorf("latency MDE %v vs %v (%v)", lat.MDE, c.MDE, err)
	}
}

func TestCalibrateErrors(t *testing.T) {
	plan := Plan{MaxPerArm: 12}
	if _, err := Calibrate([]float64{100, 100, 100, 100, 101}, time.Minute, plan); err == nil || !strings.Contains(err.Error(), "rate-limited") {
		t.Errorf("constant samples: %v", err)
	}
	if _, err := Calibrate([]float64{100, math.NaN(), 101}, time.Minute, plan); err == nil {
		t.Error("NaN accepted")
	}
	if _, err := Calibrate([]float64{100, 101}, time.Minute, plan); err == nil {
		t.Error("two samples accepted")
	}
	if _, err := Calibrate(aaSamples(8, 0.03, 1), 0, plan); err == nil {
		t.Error("zero trial duration accepted")
	}
	if _, err := Calibrate(aaSamples(8, 0.03, 1), time.Minute, Plan{}); err == nil {
		t.Error("plan without budget accepted")
	}
	c, err := Calibrate(aaSamples(5, 0.03, 1), time.Minute, plan)
	if err != nil {
		t.Fatal(err)
	}
	if len(c.Warnings) == 0 || !strings.Contains(c.Warnings[0], "only 5 trials") {
		t.Errorf("few samples: %v", c.Warnings)
	}
}
