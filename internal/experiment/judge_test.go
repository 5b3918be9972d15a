package experiment

import (
	"bytes"
	"math"
	"math/rand/v2"
	"reflect"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/dbhost/dbhost/internal/results"
	"github.com/dbhost/dbhost/internal/stats"
	"github.com/dbhost/dbhost/internal/workload"
)

// synthetic runs the real protocol (runBlocks, judge) with trials whose
// throughput is drawn around known medians: effect[arm] times 1000 with
// lognormal noise of cv. exclude gives the exclusion note of a trial, ""
// for one that counts.
func synthetic(t *testing.T, p *Plan, perArm int, effect []float64, cv float64, seed uint64, exclude func(tr results.Trial) string) (*judge, []results.Trial) {
	t.Helper()
	jd, err := newJudge(p, perArm)
	if err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(seed, 1))
	var trials []results.Trial
	block := 0
	err = runBlocks(jd, NewSchedule(seed), &block, func(arm, clients, b int) error {
		tr := results.Trial{Seq: len(trials), Block: b, Arm: arm, Clients: clients,
			OpsPerSec: 1000 * effect[arm] * math.Exp(cv*rng.NormFloat64()), P99: time.Millisecond}
		if exclude != nil {
			tr.Excluded = exclude(tr)
		}
		trials = append(trials, tr)
		return nil
	}, func() []results.Trial { return trials }, func(int) {}, func(int) {})
	if err != nil {
		t.Fatal(err)
	}
	return jd, trials
}

func threeArms() *Plan {
	return &Plan{Arms: []Arm{{Name: "base"}, {Name: "fast"}, {Name: "same"}},
		Workload: Workload{Clients: IntList{4}}, Protocol: Protocol{Alpha: 0.05, Equivalence: 0.02, Metric: "throughput", MaxPerArm: 12}}
}

// A 30% gain with 1% noise is declared early (with two treatments Holm's
// correction halves the first levels, so not at 4 trials per arm, where
// the smallest possible p is 2/70), the arm then stops running, and an arm
// without effect keeps running until it is shown equivalent or the budget
// ends, never "better" or "worse". Replaying the stored trials gives the
// same decisions.
func TestJudgeStopsDecidedArms(t *testing.T) {
	p := threeArms()
	jd, trials := synthetic(t, p, 12, []float64{1, 1.3, 1}, 0.01, 5, nil)
	ds := jd.decisions[4]
	if len(ds) != 2 {
		t.Fatalf("decisions %+v", ds)
	}
	if ds[0].Verdict != stats.Better || ds[0].NTreatment >= 12 {
		t.Errorf("fast arm: %s", ds[0].Reason)
	}
	if ds[1].Verdict == stats.Better || ds[1].Verdict == stats.Worse {
		t.Errorf("arm without effect: %s", ds[1].Reason)
	}
	n := map[int]int{}
	for _, tr := range trials {
		n[tr.Arm]++
	}
	if n[1] != ds[0].NTreatment || n[0] != n[2] || n[0] <= n[1] {
		t.Errorf("trials per arm %v: the decided arm must stop at its decision (%d trials), the others run on together", n, ds[0].NTreatment)
	}
	re, err := replay(p, 12, trials)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(re.decisions, jd.decisions) {
		t.Errorf("replay differs:\n%+v\n%+v", re.decisions, jd.decisions)
	}
	// A run killed in the middle of a block: the replay stops at the last
	// complete block, as the run's last look did.
	cut := len(trials) - 1
	re, err = replay(p, 12, trials[:cut])
	if err != nil {
		t.Fatal(err)
	}
	if re.decisions[4][1].Look != jd.decisions[4][1].Look-1 && jd.decisions[4][1].Look > 1 {
		t.Errorf("replay of a cut run: look %d, full run look %d", re.decisions[4][1].Look, jd.decisions[4][1].Look)
	}
}

// Excluded trials do not count: with every other base trial drifted the
// looks see half the base trials (and warn that the arms differ in size).
func TestJudgeSkipsExcluded(t *testing.T) {
	p := &Plan{Arms: []Arm{{Name: "a"}, {Name: "b"}}, Workload: Workload{Clients: IntList{2}},
		Protocol: Protocol{Alpha: 0.05, Equivalence: 0.02, Metric: "throughput", MaxPerArm: 8}}
	jd, trials := synthetic(t, p, 8, []float64{1, 1}, 0.01, 9, func(tr results.Trial) string { return drifted(tr.Seq%4 == 0) })
	d := jd.decisions[2][0]
	excluded := 0
	for _, tr := range trials {
		if tr.Excluded != "" {
			excluded++
		}
	}
	if d.NBase+d.NTreatment+excluded != len(trials) || excluded == 0 {
		t.Errorf("%d + %d counted, %d excluded, %d trials", d.NBase, d.NTreatment, excluded, len(trials))
	}
	if d.NBase == d.NTreatment {
		t.Errorf("exclusions fell evenly (%d, %d); the test needs them uneven", d.NBase, d.NTreatment)
	}
	if !strings.Contains(strings.Join(d.Warnings, " "), "arms differ in size") {
		t.Errorf("warnings %v", d.Warnings)
	}
}

// A sweep splits alpha over the client counts and decides each alone; the
// headline is the largest client count.
func TestJudgeSweep(t *testing.T) {
	p := &Plan{Arms: []Arm{{Name: "a"}, {Name: "b"}}, Workload: Workload{Clients: IntList{1, 2, 4}},
		Protocol: Protocol{Alpha: 0.06, Equivalence: 0.02, Metric: "throughput", MaxPerArm: 8}}
	jd, trials := synthetic(t, p, 8, []float64{1, 1.25}, 0.01, 3, nil)
	for _, c := range p.Workload.Clients {
		d := jd.decisions[c][0]
		if d.Alpha != 0.02 {
			t.Errorf("%d clients: alpha %v, want 0.06/3", c, d.Alpha)
		}
		if d.Verdict != stats.Better {
			t.Errorf("%d clients: %s", c, d.Reason)
		}
	}
	exp := &results.Experiment{ID: "x", Name: "sweep"}
	sum := buildSummary(p, exp, trials, jd, nil)
	if sum.Headline != "b vs a at 4 clients" || sum.Verdict != stats.Better || len(sum.Comparisons) != 3 || len(sum.Decisions) != 1 {
		t.Errorf("summary %+v", sum)
	}
	if sum.Arms[1].Ratio != jd.decisions[4][0].Ratio || sum.Arms[0].Trials+sum.Arms[1].Trials != len(trials) {
		t.Errorf("arms %+v", sum.Arms)
	}
	var b bytes.Buffer
	if err := WriteText(&b, sum); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"BETTER", "per client count", "  1 clients", "host NOT fully restored"} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("text lacks %q:\n%s", want, b.String())
		}
	}
}

// The progress bar: one line per trial always, the bar with live
// throughput and an ETA only on a terminal.
func TestProgress(t *testing.T) {
	var plain, term bytes.Buffer
	for _, c := range []struct {
		b   *bytes.Buffer
		bar bool
	}{{&plain, false}, {&term, true}} {
		pr := newProgress(c.b, c.bar)
		pr.startTrial("trial 1/4 base", 4, 10*time.Second)
		pr.lastDraw = time.Time{}
		pr.second(secondAt(1234))
		pr.endTrial("trial 1/4 base  1234.0 tps")
		pr.println("look 1: ...")
	}
	if strings.Contains(plain.String(), "ETA") || strings.Contains(plain.String(), "\r") {
		t.Errorf("no terminal, yet a bar: %q", plain.String())
	}
	if !strings.Contains(plain.String(), "trial 1/4 base  1234.0 tps\nlook 1: ...\n") {
		t.Errorf("plain output %q", plain.String())
	}
	s := term.String()
	if !regexp.MustCompile(`ETA ≤ 0m(39|40)s`).MatchString(s) || !strings.Contains(s, "1234/s") || !strings.Contains(s, "\r\033[K") {
		t.Errorf("terminal output %q: want a bar with throughput and ETA (4 trials of 10s left)", s)
	}
}

func secondAt(ops float64) workload.Second { return workload.Second{At: time.Second, Ops: ops} }

// The fewest trials per arm at which a verdict is possible at all grows
// with the arms and client counts that share alpha: 4 for one treatment
// (p = 2/70 ≤ 0.05), more when Holm or a sweep divides alpha.
func TestFirstDecisive(t *testing.T) {
	p := &Plan{Protocol: Protocol{Alpha: 0.05}}
	prev := 0
	for _, tc := range []struct{ treatments, clients int }{{1, 1}, {2, 1}, {2, 3}, {3, 5}} {
		n := firstDecisive(p, tc.treatments, tc.clients)
		alpha := 0.05 / float64(tc.treatments*tc.clients)
		// The smallest two-sided p of n vs n trials is 2/C(2n, n).
		minP := func(n int) float64 {
			c := 1.0
			for i := 1; i <= n; i++ {
				c = c * float64(n+i) / float64(i)
			}
			return 2 / c
		}
		if minP(n) > alpha || (n > 4 && minP(n-2) <= alpha) {
			t.Errorf("%d treatments, %d client counts: first decisive at %d per arm (min p %.4f, alpha %.4f)", tc.treatments, tc.clients, n, minP(n), alpha)
		}
		if n < prev {
			t.Errorf("fewer trials needed with more comparisons: %d after %d", n, prev)
		}
		prev = n
	}
	if n := firstDecisive(p, 1, 1); n != 4 {
		t.Errorf("one treatment: %d, want 4", n)
	}
}

// A budget of 4 trials per arm with three trials excluded for steal time
// (as a busy hypervisor did in CI: 3 base and 2 treatment trials left, too
// few for any verdict) is made up by further blocks: the look sees 4
// counting trials per arm, and a replay of the stored trials makes the
// same decisions.
func TestJudgeMakesUpExcludedTrials(t *testing.T) {
	p := &Plan{Arms: []Arm{{Name: "base"}, {Name: "delay"}}, Workload: Workload{Clients: IntList{4}},
		Protocol: Protocol{Alpha: 0.05, Equivalence: 0.02, Metric: "throughput", MaxPerArm: 4}}
	p.Protocol.MaxReplace = p.Protocol.replaceBudget(4)
	stolen := map[int]bool{3: true, 4: true, 6: true}
	jd, trials := synthetic(t, p, 4, []float64{1, 0.2}, 0.05, 11, func(tr results.Trial) string { return drifted(stolen[tr.Seq]) })
	d := jd.decisions[4]
	if len(d) != 1 || d[0].NBase < 4 || d[0].NTreatment < 4 {
		t.Fatalf("decisions %+v after %d trials: want a look at 4 counting trials per arm", d, len(trials))
	}
	if jd.replaced[4] == 0 || len(trials) <= 8 {
		t.Errorf("%d trials, %d per arm in place of excluded ones: the exclusions were not made up", len(trials), jd.replaced[4])
	}
	again, err := replay(p, 4, trials)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(again.decisions, jd.decisions) {
		t.Errorf("replay decided %+v, the run %+v", again.decisions, jd.decisions)
	}
}

// drifted is the exclusion note of a drifted trial when excluded is true.
func drifted(excluded bool) string {
	if excluded {
		return "fingerprint drift: test"
	}
	return ""
}
