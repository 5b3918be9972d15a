package stats

import (
	"encoding/json"
	"errors"
	"math"
	"strings"
	"testing"
)

var (
	sepBase  = []float64{1000, 1004, 998, 1010}
	sepTreat = []float64{1090, 1102, 1085, 1095}
)

// Complete separation at the first look (4 per arm, p = 2/70 = the level
// the first look spends) is a verdict; the direction decides which.
func TestDecideCompleteSeparationAtFirstLook(t *testing.T) {
	p := Plan{MaxPerArm: 12, Metric: "throughput"}
	d, err := p.Decide(sepBase, sepTreat, 1)
	if err != nil {
		t.Fatal(err)
	}
	if d.Verdict != Better || !d.Stop || !near(d.P, 2.0/70, 1e-12) || !near(d.AlphaLook, 2.0/70, 1e-12) {
		t.Fatalf("decision %+v", d)
	}
	if d.Look != 1 || d.Looks != 5 || d.NBase != 4 || d.NTreatment != 4 {
		t.Errorf("bookkeeping %+v", d)
	}
	if d.Ratio < 1.08 || d.Ratio > 1.10 || !near(d.RatioOfMedians, 1092.5/1002, 1e-12) {
		t.Errorf("ratio %v, ratio of medians %v", d.Ratio, d.RatioOfMedians)
	}
	// With the smallest level, the interval is [min, max] of the ratios.
	if !near(d.Interval.Lo(), 1085.0/1010, 1e-12) || !near(d.Interval.Hi(), 1102.0/998, 1e-12) {
		t.Errorf("interval %v", d.Interval)
	}
	if !strings.HasPrefix(d.Reason, "throughput 1.09x (95% CI 1.07–1.10), p=0.029 at look 1 of 5, 4 trials per arm: better") {
		t.Errorf("reason %q", d.Reason)
	}
	if !hasWarning(d, "only 4 trials per arm") {
		t.Errorf("no early warning: %v", d.Warnings)
	}

	p.Direction = LowerIsBetter
	p.Metric = "latency"
	d, _ = p.Decide(sepBase, sepTreat, 1)
	if d.Verdict != Worse {
		t.Errorf("higher latency: %s", d.Verdict)
	}
	d, _ = p.Decide(sepTreat, sepBase, 1)
	if d.Verdict != Better || d.Ratio > 1 {
		t.Errorf("lower latency: %s %v", d.Verdict, d.Ratio)
	}
}

func hasWarning(d Decision, s string) bool {
	for _, w := range d.Warnings {
		if strings.Contains(w, s) {
			return true
		}
	}
	return false
}

// One trial out of order at 4 per arm is not enough (p = 4/70 > 2/70),
// and the reason says what the look needed.
func TestDecideNotYet(t *testing.T) {
	p := Plan{MaxPerArm: 12, Metric: "throughput"}
	d, err := p.Decide([]float64{1000, 1004, 998, 1090}, []float64{1085, 1102, 1003, 1095}, 1)
	if err != nil {
		t.Fatal(err)
	}
	if d.Verdict != Inconclusive || d.Stop {
		t.Fatalf("%+v", d)
	}
	if !strings.Contains(d.Reason, "no verdict yet (this look needs p ≤ 0.029); continue") {
		t.Errorf("reason %q", d.Reason)
	}
	// The same data at the last look of a 4-trial plan ends the experiment.
	d, _ = Plan{MaxPerArm: 4, Metric: "throughput"}.Decide([]float64{1000, 1004, 998, 1090}, []float64{1085, 1102, 1003, 1095}, 1)
	if d.Verdict != Inconclusive || !d.Stop || !strings.Contains(d.Reason, "inconclusive: neither a change nor equivalence within ±2%") {
		t.Errorf("last look: %+v", d)
	}
}

// A later look tests at its own, smaller level: p below 5% is not enough.
func TestDecideLaterLookNeedsItsLevel(t *testing.T) {
	p := Plan{MaxPerArm: 16}
	s, _ := p.Schedule()
	base := []float64{100, 101, 102, 103, 104, 105, 106, 107}
	// Treatment mostly above: U = 56 of 64, p ≈ 0.007 — below 0.05,
	// above look 3's level.
	treat := []float64{103.5, 105.5, 106.5, 107.5, 108, 109, 110, 111}
	d, err := p.Decide(base, treat, 3)
	if err != nil {
		t.Fatal(err)
	}
	if d.P > 0.05 || d.P <= s[2].Alpha || d.Verdict != Inconclusive {
		t.Fatalf("p=%v level=%v verdict %s", d.P, s[2].Alpha, d.Verdict)
	}
	if !hasWarning(d, "looking repeatedly costs evidence") {
		t.Errorf("warnings %v", d.Warnings)
	}
	if d.Interval.Contains(1) != true {
		t.Errorf("interval %v must contain 1 when the test does not reject", d.Interval)
	}
}

func TestDecideEquivalent(t *testing.T) {
	p := Plan{MaxPerArm: 6, Metric: "throughput"}
	base := []float64{1000, 1001, 999, 1002, 998, 1000}
	treat := []float64{1001, 999, 1000, 1002, 1000.5, 998.5}
	d, err := p.Decide(base, treat, 2)
	if err != nil {
		t.Fatal(err)
	}
	if d.Verdict != Equivalent || !d.Stop {
		t.Fatalf("%+v", d)
	}
	if !(d.EquivalenceInterval.Lo() >= 0.98 && d.EquivalenceInterval.Hi() <= 1.02) || d.PEquivalence > d.AlphaLook {
		t.Errorf("equivalence interval %v p %v", d.EquivalenceInterval, d.PEquivalence)
	}
	if !strings.Contains(d.Reason, "equivalent: any change is within ±2%") {
		t.Errorf("reason %q", d.Reason)
	}
	// Equivalence turned off: the same data stay inconclusive.
	p.Equivalence = -1
	d, _ = p.Decide(base, treat, 2)
	if d.Verdict != Inconclusive || d.Equivalence != 0 {
		t.Errorf("equivalence off: %+v", d)
	}
}

// A real but tiny change can be both significant and inside the margin:
// the verdict is the change, with a note that it is small.
func TestDecideBetterButSmall(t *testing.T) {
	p := Plan{MaxPerArm: 6, Metric: "throughput"}
	base := []float64{1000, 1000.2, 999.9, 1000.1, 1000.3, 999.8}
	treat := []float64{1005, 1005.2, 1004.9, 1005.1, 1005.3, 1004.8}
	d, err := p.Decide(base, treat, 2)
	if err != nil {
		t.Fatal(err)
	}
	if d.Verdict != Better || !strings.Contains(d.Reason, "but by less than 2%") || !hasWarning(d, "smaller than the ±2%") {
		t.Errorf("%+v", d)
	}
}

func TestDecideTooFewTrials(t *testing.T) {
	p := Plan{MaxPerArm: 12}
	d, err := p.Decide([]float64{1, 2, 3}, []float64{10, 20, 30}, 1)
	if err != nil {
		t.Fatal(err)
	}
	if d.Verdict != Inconclusive || d.Stop || !hasWarning(d, "no verdict before 4") || !strings.Contains(d.Reason, "too few trials") {
		t.Errorf("%+v", d)
	}
	if !hasWarning(d, "planned at 4 trials per arm, got 3") {
		t.Errorf("warnings %v", d.Warnings)
	}
	// Even a huge separation at 3+4 is no verdict.
	d, _ = p.Decide([]float64{1, 2, 3}, []float64{10, 20, 30, 40}, 1)
	if d.Verdict != Inconclusive || !hasWarning(d, "arms differ in size") {
		t.Errorf("%+v", d)
	}
}

// Zero variance: identical arms are equivalent, separated constant arms
// differ; both warn that constant samples are suspicious.
func TestDecideConstantSamples(t *testing.T) {
	p := Plan{MaxPerArm: 8}
	same := []float64{500, 500, 500, 500}
	d, err := p.Decide(same, same, 1)
	if err != nil {
		t.Fatal(err)
	}
	if d.Verdict != Equivalent || d.Ratio != 1 || d.P != 1 || !hasWarning(d, "same value in every trial") {
		t.Errorf("identical: %+v", d)
	}
	d, _ = p.Decide(same, []float64{550, 550, 550, 550}, 1)
	if d.Verdict != Better || !near(d.Ratio, 1.1, 1e-12) || !hasWarning(d, "same value in every trial") {
		t.Errorf("constant, separated: %+v", d)
	}
	b, err := json.Marshal(d)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(b), `"verdict":"better"`) {
		t.Errorf("json %s", b)
	}
}

func TestDecideErrors(t *testing.T) {
	p := Plan{MaxPerArm: 8}
	ok := []float64{1, 2, 3, 4}
	for name, bad := range map[string][]float64{
		"NaN": {1, math.NaN(), 3, 4}, "Inf": {1, 2, math.Inf(1), 4}, "negative": {1, 2, -3, 4}, "zero": {0, 2, 3, 4}, "empty": {},
	} {
		if _, err := p.Decide(ok, bad, 1); err == nil {
			t.Errorf("%s treatment accepted", name)
		}
		if _, err := p.Decide(bad, ok, 1); err == nil {
			t.Errorf("%s base accepted", name)
		}
	}
	_, err := p.Decide(ok, []float64{1, 2, -3, 4}, 1)
	if err == nil || !strings.Contains(err.Error(), "treatment: sample 3 is -3") {
		t.Errorf("error text: %v", err)
	}
	for _, look := range []int{0, 4} {
		if _, err := p.Decide(ok, ok, look); !errors.Is(err, errLook) {
			t.Errorf("look %d: %v", look, err)
		}
	}
	if _, err := (Plan{}).Decide(ok, ok, 1); err == nil {
		t.Error("plan without budget accepted")
	}
}

// JSON carries every number and null for open interval bounds.
func TestDecisionJSON(t *testing.T) {
	d, err := Plan{MaxPerArm: 12, Metric: "throughput"}.Decide(sepBase, sepTreat, 1)
	if err != nil {
		t.Fatal(err)
	}
	b, err := json.Marshal(d)
	if err != nil {
		t.Fatal(err)
	}
	var back Decision
	if err := json.Unmarshal(b, &back); err != nil {
		t.Fatal(err)
	}
	if back.Verdict != d.Verdict || back.Interval != d.Interval || back.P != d.P || back.Reason != d.Reason || back.Direction != d.Direction {
		t.Errorf("round trip lost data:\n%s", b)
	}
	for _, key := range []string{`"ratio":`, `"ratio_of_medians":`, `"interval":[`, `"p":`, `"alpha_look":`, `"alpha_spent":`, `"n_base":4`, `"warnings":[`, `"reason":"throughput`} {
		if !strings.Contains(string(b), key) {
			t.Errorf("JSON lacks %s: %s", key, b)
		}
	}
	// At look 1 with a budget of α/3 (three treatments) nothing is
	// attainable at 4 per arm: the interval is open.
	s, _ := Plan{MaxPerArm: 12}.NewSequence(3)
	ds, err := s.Next(sepBase, sepTreat, sepTreat, sepTreat)
	if err != nil {
		t.Fatal(err)
	}
	if ds[0].Interval.Bounded() || ds[0].Verdict != Inconclusive {
		t.Errorf("α/3 at 4 per arm: %+v", ds[0])
	}
	b, _ = json.Marshal(ds[0])
	if !strings.Contains(string(b), `"interval":[null,null]`) {
		t.Errorf("open interval: %s", b)
	}
}

// Several treatments: a clear winner is declared once Holm's first step
// can, null arms stay undecided, and a verdict is kept at later looks.
func TestSequenceHolm(t *testing.T) {
	p := Plan{MaxPerArm: 12, Metric: "throughput"}
	s, err := p.NewSequence(3)
	if err != nil {
		t.Fatal(err)
	}
	base := []float64{1000, 1010, 990, 1005, 995, 1002, 1008, 993}
	win := []float64{1200, 1210, 1190, 1205, 1195, 1202, 1208, 1193}
	nullA := []float64{1001, 1011, 989, 1004, 996, 1003, 1007, 992}
	nullB := []float64{999, 1009, 991, 1006, 994, 1001, 1009, 994}
	var ds []Decision
	for look := 1; look <= 3; look++ {
		n := 2 + 2*look
		ds, err = s.Next(base[:n], win[:n], nullA[:n], nullB[:n])
		if err != nil {
			t.Fatal(err)
		}
		if look == 1 && ds[0].Verdict != Inconclusive {
			t.Errorf("look 1 with α/3: %s (2/70 > α/3)", ds[0].Verdict)
		}
	}
	if ds[0].Verdict != Better || ds[1].Verdict == Better || ds[2].Verdict == Better {
		t.Fatalf("verdicts %s %s %s", ds[0].Verdict, ds[1].Verdict, ds[2].Verdict)
	}
	decidedAt := ds[0].Look
	// The winner's decision stays as it was when it was made.
	ds2, err := s.Next(base[:8], nil, nullA[:8], nullB[:8])
	if err != nil {
		t.Fatal(err)
	}
	if ds2[0].Look != decidedAt || ds2[0].Verdict != Better {
		t.Errorf("decision not kept: %+v", ds2[0])
	}
	if _, err := s.Next(base, win); err == nil {
		t.Error("wrong number of arms accepted")
	}
}

// With ties the exact p-value and the interval can disagree, and then the
// stricter one decides. Here (6 per arm, look 2) the interval excludes 1
// but p = 0.0173 is above the look's level 0.0152: no verdict. A p
// threshold moved up (doubled) would call it better.
func TestDecideTiesPValueDecides(t *testing.T) {
	p := Plan{MaxPerArm: 6, Metric: "throughput"}
	d, err := p.Decide([]float64{101, 105, 101, 100, 100, 100}, []float64{106, 106, 104, 106, 104, 103}, 2)
	if err != nil {
		t.Fatal(err)
	}
	if !(d.Interval.Lo() > 1) || !(d.P > d.AlphaLook) || d.P > 2*d.AlphaLook {
		t.Fatalf("not the case this test is about: p=%v level=%v interval %v", d.P, d.AlphaLook, d.Interval)
	}
	if d.Verdict != Inconclusive {
		t.Errorf("p=%v above level %v gave %s", d.P, d.AlphaLook, d.Verdict)
	}
}

// And the other way (8 per arm, look 3 of 12): p = 0.0030 is below the
// level 0.0047, but tied values put a ratio of exactly 1 into the
// interval: no verdict. An interval computed at a larger level (narrower)
// would call it better.
func TestDecideTiesIntervalDecides(t *testing.T) {
	p := Plan{MaxPerArm: 12, Metric: "throughput"}
	d, err := p.Decide([]float64{102, 100, 100, 100, 102, 100, 100, 101}, []float64{103, 101, 103, 102, 103, 103, 103, 101}, 3)
	if err != nil {
		t.Fatal(err)
	}
	if !(d.P <= d.AlphaLook) || d.Interval.Lo() != 1 {
		t.Fatalf("not the case this test is about: p=%v level=%v interval %v", d.P, d.AlphaLook, d.Interval)
	}
	if d.Verdict != Inconclusive {
		t.Errorf("an interval reaching 1 gave %s", d.Verdict)
	}
}
