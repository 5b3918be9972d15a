package stats

import (
	"math/rand/v2"
	"testing"

	mstats "github.com/aclements/go-moremath/stats"
)

// The simulations below are the evidence behind the error rates the
// package states. Each is seeded, so it gives the same numbers every run;
// run them with -v to see the numbers:
//
//	go test -count=1 -v -run 'TestSim' ./internal/stats/

// runs scales a simulation down under -short.
func runs(full int) int {
	if testing.Short() {
		return full / 5
	}
	return full
}

// maxCount is the largest count of events with probability at most rate
// that n runs can show with probability 99.9%: a rule whose true rate is
// at most rate exceeds it by chance in 1 of 1000 seeds at most. Observing
// more is evidence that the true rate is above rate.
func maxCount(n int, rate float64) int {
	d := mstats.BinomialDist{N: n, P: rate}
	for c := 0; c <= n; c++ {
		if d.CDF(float64(c)) >= 0.999 {
			return c
		}
	}
	return n
}

func pctOf(c, n int) float64 { return 100 * float64(c) / float64(n) }

// naiveFalsePositives runs A/A experiments with the rule the sequential
// plan replaces: after every block, declare a difference if p ≤ alpha.
func naiveFalsePositives(t *testing.T, p Plan, sc Scenario) int {
	t.Helper()
	p, _ = p.withDefaults()
	ns := p.looks()
	nmax := ns[len(ns)-1]
	rng := rand.New(rand.NewPCG(sc.Seed, 99))
	base, treat := make([]float64, nmax), make([]float64, nmax)
	count := 0
	for range sc.Runs {
		for i := range base {
			base[i] = draw(rng, 1000, sc.CV, sc.Noise, p.Direction)
			treat[i] = draw(rng, 1000, sc.CV, sc.Noise, p.Direction)
		}
		for _, n := range ns {
			rt, err := MannWhitney(base[:n], treat[:n])
			if err != nil {
				t.Fatal(err)
			}
			if rt.P <= p.Alpha {
				count++
				break
			}
		}
	}
	return count
}

// A/A: the setting does nothing. Looking after every block (7 looks from
// 4 to 16 trials per arm), the sequential rule ends in "better" or
// "worse" in at most 5% of experiments, for normal, skewed and
// stall-ridden noise; the naive rule (p ≤ 5% at every look) does not.
func TestSimAAFalsePositiveRate(t *testing.T) {
	plan := Plan{MaxPerArm: 16}
	for _, sc := range []Scenario{
		{CV: 0.03, Noise: Normal, Seed: 1},
		{CV: 0.05, Noise: Lognormal, Seed: 2},
		{CV: 0.02, Noise: Stalls, Seed: 3},
	} {
		sc.Runs = runs(4000)
		res, err := Simulate(plan, sc)
		if err != nil {
			t.Fatal(err)
		}
		limit := maxCount(sc.Runs, DefaultAlpha)
		naive := naiveFalsePositives(t, plan, sc)
		t.Logf("A/A %-9s CV %.0f%%: sequential false verdicts %d/%d = %.2f%% (limit for 5%%: %d), naive re-check %.2f%%, mean %.1f trials per arm",
			sc.Noise, 100*sc.CV, res.AnyDifferent, sc.Runs, pctOf(res.AnyDifferent, sc.Runs), limit, pctOf(naive, sc.Runs), res.MeanPerArm)
		if res.AnyDifferent > limit {
			t.Errorf("%s: sequential rule declared a change in %d of %d A/A experiments; at 5%% at most %d are plausible",
				sc.Noise, res.AnyDifferent, sc.Runs, limit)
		}
		if naive <= limit {
			t.Errorf("%s: the naive re-check stayed within 5%% (%d of %d): the simulation cannot tell a valid rule from an invalid one",
				sc.Noise, naive, sc.Runs)
		}
	}
}

// A true 10% gain with 3% noise is declared "better" by 8 trials per arm
// in nearly every experiment, mostly already at 4.
func TestSimPowerLargeChange(t *testing.T) {
	sc := Scenario{CV: 0.03, Change: 0.10, Noise: Normal, Seed: 4, Runs: runs(2000)}
	res, err := Simulate(Plan{MaxPerArm: 8}, sc)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("+10%% with 3%% noise: better by n≤8 in %.1f%%, at n=4 in %.1f%%, mean %.1f trials per arm",
		pctOf(res.Better, sc.Runs), pctOf(res.StoppedAt[0], sc.Runs), res.MeanPerArm)
	if res.Rate(res.Better) < 0.9 || res.Worse > 0 {
		t.Errorf("better in %d of %d runs (worse %d)", res.Better, sc.Runs, res.Worse)
	}
	if res.Rate(res.StoppedAt[0]) < 0.7 {
		t.Errorf("stopped at the first look in only %d of %d runs", res.StoppedAt[0], sc.Runs)
	}
}

// Power for changes of the size of the noise, with the default plan and
// with a first look at 6: logged as a table, checked against floors well
// below the measured values.
func TestSimPowerModerateChanges(t *testing.T) {
	for _, c := range []struct {
		plan   Plan
		change float64
		floor  float64
	}{
		{Plan{MaxPerArm: 16}, 0.05, 0.85},
		{Plan{MaxPerArm: 20}, 0.03, 0.5},
		{Plan{MaxPerArm: 20, FirstLook: 6}, 0.03, 0.6},
		{Plan{MaxPerArm: 20, FirstLook: 20}, 0.03, 0.75},
	} {
		sc := Scenario{CV: 0.03, Change: c.change, Noise: Normal, Seed: 5, Runs: runs(1000)}
		res, err := Simulate(c.plan, sc)
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("+%.0f%% with 3%% noise, budget %d, first look %d: better in %.1f%%, mean %.1f trials per arm",
			100*c.change, c.plan.MaxPerArm, max(c.plan.FirstLook, 4), pctOf(res.Better, sc.Runs), res.MeanPerArm)
		if res.Rate(res.Better) < c.floor {
			t.Errorf("%+v: better in %d of %d runs", c.plan, res.Better, sc.Runs)
		}
	}
}

// No change and low noise: "equivalent" (within ±2%) is the usual
// outcome, mostly early. And a change exactly at the margin (+2%) is
// called equivalent in at most 5% of experiments: equivalence is tested
// with the same spending as a difference.
func TestSimEquivalence(t *testing.T) {
	plan := Plan{MaxPerArm: 16}
	sc := Scenario{CV: 0.01, Noise: Normal, Seed: 6, Runs: runs(2000)}
	res, err := Simulate(plan, sc)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("no change, 1%% noise: equivalent in %.1f%%, mean %.1f trials per arm", pctOf(res.Equivalent, sc.Runs), res.MeanPerArm)
	if res.Rate(res.Equivalent) < 0.8 {
		t.Errorf("equivalent in only %d of %d runs", res.Equivalent, sc.Runs)
	}
	for _, change := range []float64{0.02, -0.02} {
		sc := Scenario{CV: 0.01, Change: change, Noise: Normal, Seed: 7, Runs: runs(4000)}
		res, err := Simulate(plan, sc)
		if err != nil {
			t.Fatal(err)
		}
		limit := maxCount(sc.Runs, DefaultAlpha)
		t.Logf("change %+.0f%% (at the margin), 1%% noise: equivalent in %.2f%% (limit %d of %d)", 100*change, pctOf(res.Equivalent, sc.Runs), limit, sc.Runs)
		if res.Equivalent > limit {
			t.Errorf("change %v declared equivalent in %d of %d runs", change, res.Equivalent, sc.Runs)
		}
	}
}

// A/A/A/A: three treatment arms that change nothing. With Holm's
// correction the chance that any of them is called better or worse stays
// at most 5%; testing each arm on its own at 5% does not.
func TestSimHolmFamilyWise(t *testing.T) {
	plan := Plan{MaxPerArm: 16}
	sc := Scenario{CV: 0.03, Treatments: 3, Noise: Lognormal, Seed: 8, Runs: runs(3000)}
	res, err := Simulate(plan, sc)
	if err != nil {
		t.Fatal(err)
	}
	limit := maxCount(sc.Runs, DefaultAlpha)

	// Unadjusted: each arm run through its own single-arm plan.
	p, _ := plan.withDefaults()
	ns := p.looks()
	rng := rand.New(rand.NewPCG(sc.Seed, 77))
	arms := make([][]float64, 4)
	for i := range arms {
		arms[i] = make([]float64, p.MaxPerArm)
	}
	unadjusted := 0
	for range sc.Runs {
		for _, a := range arms {
			for j := range a {
				a[j] = draw(rng, 1000, sc.CV, sc.Noise, p.Direction)
			}
		}
		hit := false
		for arm := 1; arm < 4 && !hit; arm++ {
			for k, n := range ns {
				d, err := plan.Decide(arms[0][:n], arms[arm][:n], k+1)
				if err != nil {
					t.Fatal(err)
				}
				if d.Verdict == Better || d.Verdict == Worse {
					hit = true
				}
				if d.Stop {
					break
				}
			}
		}
		if hit {
			unadjusted++
		}
	}
	t.Logf("A/A/A/A: any false verdict with Holm %d/%d = %.2f%% (limit %d), without %.2f%%",
		res.AnyDifferent, sc.Runs, pctOf(res.AnyDifferent, sc.Runs), limit, pctOf(unadjusted, sc.Runs))
	if res.AnyDifferent > limit {
		t.Errorf("Holm: %d of %d A/A/A/A experiments had a false verdict; at most %d plausible", res.AnyDifferent, sc.Runs, limit)
	}
	if unadjusted <= limit {
		t.Errorf("unadjusted arms stayed within 5%% (%d of %d): the test cannot show what Holm is for", unadjusted, sc.Runs)
	}

	// A real winner among null arms is still found.
	win, err := Simulate(plan, Scenario{CV: 0.03, Change: 0.10, Treatments: 3, Seed: 9, Runs: runs(500)})
	if err != nil {
		t.Fatal(err)
	}
	if win.Rate(win.Better) < 0.9*3 {
		t.Errorf("three arms +10%%: %d better verdicts in %d runs", win.Better, win.Runs)
	}
}

func TestSimulateIsDeterministic(t *testing.T) {
	sc := Scenario{CV: 0.03, Change: 0.03, Seed: 11, Runs: 200}
	a, _ := Simulate(Plan{MaxPerArm: 12}, sc)
	b, _ := Simulate(Plan{MaxPerArm: 12}, sc)
	if a.Better != b.Better || a.MeanPerArm != b.MeanPerArm {
		t.Errorf("same seed, different results: %+v %+v", a, b)
	}
	if _, err := Simulate(Plan{MaxPerArm: 12}, Scenario{CV: -1}); err == nil {
		t.Error("negative CV accepted")
	}
}

// The interval reported when the experiment stops, early or at the end,
// contains the true ratio in at least 95% of experiments: each look's
// interval misses with probability at most its level, and the levels add
// up to at most 5%.
func TestSimSequentialCoverage(t *testing.T) {
	plan := Plan{MaxPerArm: 12}
	p, _ := plan.withDefaults()
	ns := p.looks()
	const truth = 1.03
	n := runs(3000)
	rng := rand.New(rand.NewPCG(13, 14))
	base, treat := make([]float64, p.MaxPerArm), make([]float64, p.MaxPerArm)
	missed, early := 0, 0
	for range n {
		for i := range base {
			base[i] = draw(rng, 1000, 0.03, Lognormal, p.Direction)
			treat[i] = draw(rng, truth*1000, 0.03, Lognormal, p.Direction)
		}
		for k, m := range ns {
			d, err := plan.Decide(base[:m], treat[:m], k+1)
			if err != nil {
				t.Fatal(err)
			}
			if d.Stop {
				if !d.Interval.Contains(truth) {
					missed++
				}
				if k < len(ns)-1 {
					early++
				}
				break
			}
		}
	}
	limit := maxCount(n, DefaultAlpha)
	t.Logf("true ratio 1.03, 3%% noise: final interval missed it in %d/%d = %.2f%% (limit %d); %.0f%% stopped early",
		missed, n, pctOf(missed, n), limit, pctOf(early, n))
	if missed > limit {
		t.Errorf("interval missed the true ratio in %d of %d experiments", missed, n)
	}
}
