package stats

import (
	"encoding/json"
	"math"
	"math/rand/v2"
	"testing"
)

func exps(xs ...float64) []float64 {
	out := make([]float64, len(xs))
	for i, x := range xs {
		out[i] = math.Exp(x)
	}
	return out
}

// Worked by hand: x = {1,2,3,4}, y = {3,4,6,7}. The 16 differences y−x
// sorted are −1 0 0 1 1 2 2 2 3 3 3 4 4 5 5 6; their median (the
// Hodges–Lehmann shift) is (2+3)/2 = 2.5. With 4+4 trials P(U ≤ 0) =
// 1/70 and P(U ≤ 1) = 2/70, so a 95% interval may cut c = 0 differences
// from each end ([−1, 6], actual confidence 1−2/70) and a 90% interval
// c = 1 ([0, 5], confidence 1−4/70). On samples exp(x), exp(y) the ratio
// estimate and bounds are the exponentials.
func TestHodgesLehmannByHand(t *testing.T) {
	x, y := []float64{1, 2, 3, 4}, []float64{3, 4, 6, 7}
	d := logDiffs(x, y)
	if d.center() != 2.5 {
		t.Errorf("HL shift %v, want 2.5", d.center())
	}
	for _, c := range []struct {
		conf, lo, hi, actual float64
	}{{0.95, -1, 6, 1 - 2.0/70}, {0.90, 0, 5, 1 - 4.0/70}} {
		r, err := RatioInterval(exps(x...), exps(y...), c.conf)
		if err != nil {
			t.Fatal(err)
		}
		if !near(r.Ratio, math.Exp(2.5), 1e-9) || !near(r.Interval.Lo(), math.Exp(c.lo), 1e-9) ||
			!near(r.Interval.Hi(), math.Exp(c.hi), 1e-9) || !near(r.Confidence, c.actual, 1e-12) {
			t.Errorf("conf %v: got %+v, want ratio e^2.5 [e^%v, e^%v] at %v", c.conf, r, c.lo, c.hi, c.actual)
		}
	}
	// 99% needs P(U ≤ c) ≤ 0.005 < 1/70: no finite interval.
	r, err := RatioInterval(exps(x...), exps(y...), 0.99)
	if err != nil {
		t.Fatal(err)
	}
	if r.Interval.Bounded() || r.Confidence != 1 {
		t.Errorf("99%% with 4+4: %+v, want unbounded", r)
	}
	b, _ := json.Marshal(r.Interval)
	if string(b) != "[null,null]" {
		t.Errorf("unbounded interval as JSON: %s", b)
	}
}

// Scaling both arms changes nothing; scaling the treatment by 1.1 scales
// the estimate and both bounds by 1.1.
func TestRatioIntervalIsMultiplicative(t *testing.T) {
	b := []float64{980, 1010, 1003, 995, 1021, 990}
	tr := []float64{1050, 1072, 1041, 1090, 1060, 1066}
	r0, err := RatioInterval(b, tr, 0.95)
	if err != nil {
		t.Fatal(err)
	}
	scale := func(xs []float64, f float64) []float64 {
		out := make([]float64, len(xs))
		for i, x := range xs {
			out[i] = x * f
		}
		return out
	}
	r1, _ := RatioInterval(scale(b, 7), scale(tr, 7), 0.95)
	r2, _ := RatioInterval(b, scale(tr, 1.1), 0.95)
	if !near(r1.Ratio, r0.Ratio, 1e-12) || !near(r1.Interval.Lo(), r0.Interval.Lo(), 1e-12) {
		t.Errorf("common scale moved the estimate: %+v vs %+v", r1, r0)
	}
	if !near(r2.Ratio, 1.1*r0.Ratio, 1e-12) || !near(r2.Interval.Lo(), 1.1*r0.Interval.Lo(), 1e-12) || !near(r2.Interval.Hi(), 1.1*r0.Interval.Hi(), 1e-12) {
		t.Errorf("treatment ×1.1: %+v vs %+v", r2, r0)
	}
	if r0.Interval.Lo() <= 1 || r0.Ratio < 1.05 || r0.Ratio > 1.08 {
		t.Errorf("clear 6%% gain: %+v", r0)
	}
}

// The interval excludes 1 exactly when the two-sided test rejects at
// 1−confidence (no ties), and it covers the true ratio at least as often
// as it claims.
func TestRatioIntervalDualityAndCoverage(t *testing.T) {
	rng := rand.New(rand.NewPCG(9, 10))
	runs := 3000
	if testing.Short() {
		runs = 500
	}
	const truth = 1.03
	covered := 0
	for range runs {
		n := 5 + rng.IntN(8)
		b, tr := make([]float64, n), make([]float64, n)
		for i := range b {
			b[i] = 1000 * math.Exp(0.03*rng.NormFloat64())
			tr[i] = truth * 1000 * math.Exp(0.03*rng.NormFloat64())
		}
		r, err := RatioInterval(b, tr, 0.95)
		if err != nil {
			t.Fatal(err)
		}
		rt, _ := MannWhitney(b, tr)
		excludes := !r.Interval.Contains(1)
		if rejects := rt.P <= 1-r.Confidence+1e-12; excludes != rejects {
			t.Fatalf("interval %v (conf %v) excludes 1: %v; p=%v rejects: %v", r.Interval, r.Confidence, excludes, rt.P, rejects)
		}
		if r.Interval.Contains(truth) {
			covered++
		}
	}
	// The actual confidence is ≥ 95%; allow 3 binomial standard errors.
	if min := 0.95 - 3*math.Sqrt(0.95*0.05/float64(runs)); float64(covered)/float64(runs) < min {
		t.Errorf("coverage %d/%d below %.3f", covered, runs, min)
	}
}

func TestRatioIntervalErrors(t *testing.T) {
	ok := []float64{1, 2, 3, 4}
	if _, err := RatioInterval(ok, ok, 1); err == nil {
		t.Error("confidence 1 accepted")
	}
	if _, err := RatioInterval(ok, []float64{1, 2, 0}, 0.95); err == nil {
		t.Error("zero sample accepted")
	}
	big := make([]float64, MaxExactPerArm+1)
	for i := range big {
		big[i] = float64(i + 1)
	}
	if _, err := RatioInterval(big, ok, 0.95); err == nil {
		t.Error("more than MaxExactPerArm accepted")
	}
}
