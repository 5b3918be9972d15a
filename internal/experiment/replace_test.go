package experiment

import (
	"bytes"
	"encoding/json"
	"reflect"
	"strconv"
	"strings"
	"testing"

	"github.com/dbhost/dbhost/internal/results"
	"github.com/dbhost/dbhost/internal/stats"
)

const stealNote = "steal time 14% during the trial: the hypervisor gave the CPU to others"

// twoArms is the plan of the live commit_delay test: 4 trials per arm, a
// large effect, and the default replacement budget (as many again).
func twoArms() *Plan {
	p := &Plan{Name: "delay", Arms: []Arm{{Name: "base"}, {Name: "delay"}}, Workload: Workload{Clients: IntList{4}},
		Protocol: Protocol{Alpha: 0.05, Equivalence: 0.02, Metric: "throughput", MaxPerArm: 4}}
	p.Protocol.MaxReplace = p.Protocol.replaceBudget(4)
	return p
}

// summarize builds the summary and its text as the run prints them.
func summarize(t *testing.T, p *Plan, jd *judge, trials []results.Trial) (*Summary, string) {
	t.Helper()
	sum := buildSummary(p, &results.Experiment{ID: "x", Name: p.Name}, trials, jd, nil)
	var b bytes.Buffer
	if err := WriteText(&b, sum); err != nil {
		t.Fatal(err)
	}
	return sum, b.String()
}

// recompute replays trials through a plan that went through the results
// database's JSON, as `dbhost results show` does.
func recompute(t *testing.T, p *Plan, trials []results.Trial) *Summary {
	t.Helper()
	b, err := json.Marshal(p)
	if err != nil {
		t.Fatal(err)
	}
	st := &Stored{Experiment: &results.Experiment{ID: "x", Name: p.Name, Plan: b}, Trials: trials, Plan: &Plan{}}
	if err := json.Unmarshal(b, st.Plan); err != nil {
		t.Fatal(err)
	}
	sum, err := st.Recompute()
	if err != nil {
		t.Fatal(err)
	}
	return sum
}

// Two trials excluded for steal time, in two blocks, are replaced within
// the budget: the verdict rests on the 4 counting trials per arm it was
// planned with, the summary says what happened, and the stored trials
// recompute to the same decisions and the same account.
func TestReplacementWithinBudget(t *testing.T) {
	p := twoArms()
	stolen := map[int]bool{1: true, 6: true}
	jd, trials := synthetic(t, p, 4, []float64{1, 0.2}, 0.05, 7, func(tr results.Trial) string {
		if stolen[tr.Seq] {
			return stealNote
		}
		return ""
	})
	d := jd.decisions[4][0]
	if d.Verdict != stats.Worse || d.NBase < 4 || d.NTreatment < 4 {
		t.Fatalf("decision %s on %d vs %d trials: want worse on at least 4 per arm", d.Verdict, d.NTreatment, d.NBase)
	}
	sum, text := summarize(t, p, jd, trials)
	r := sum.Replacement
	if r == nil || r.Budget != 4 || !reflect.DeepEqual(r.Excluded, map[string]int{"steal time": 2}) || len(r.Spent) != 0 {
		t.Fatalf("replacement %+v", r)
	}
	if r.Run == 0 || r.Run != len(trials)-8 || r.Run != len(p.Arms)*r.PerArm {
		t.Errorf("%d trials run in place of excluded ones, %d trials in all (8 planned), %d per arm", r.Run, len(trials), jd.replaced[4])
	}
	want := "excluded: 2 trials excluded for steal time, " + strconv.Itoa(r.Run) + " run in their place (" + strconv.Itoa(r.PerArm) + " per arm, of up to 4)"
	if !strings.Contains(text, want) {
		t.Errorf("text lacks %q:\n%s", want, text)
	}
	if re := recompute(t, p, trials); !reflect.DeepEqual(re.Replacement, r) || re.Verdict != sum.Verdict || re.Reason != sum.Reason {
		t.Errorf("recomputed %+v %s, run %+v %s", re.Replacement, re.Reason, r, sum.Reason)
	}
}

// When the budget runs out with trials still missing, the look goes on
// with what it has, and the verdict says why it has no more: every base
// trial of the first eight was taken by steal time, the budget of 2 more
// per arm replaced the first block only.
func TestReplacementBudgetSpent(t *testing.T) {
	p := twoArms()
	p.Protocol.Replace = 2
	p.Protocol.MaxReplace = p.Protocol.replaceBudget(4)
	jd, trials := synthetic(t, p, 4, []float64{1, 0.2}, 0.05, 7, func(tr results.Trial) string {
		if tr.Arm == 0 && tr.Seq < 8 {
			return stealNote
		}
		return ""
	})
	if len(trials) != 12 {
		t.Fatalf("%d trials: want the 8 planned and one block of 4 in place of excluded ones", len(trials))
	}
	d := jd.decisions[4][0]
	if d.Verdict != stats.Inconclusive || d.NBase != 2 ||
		!strings.Contains(d.Reason, "too few trials") || !strings.Contains(d.Reason, "the replacement budget of 2 more per arm is spent") {
		t.Fatalf("decision %s on %d base trials: %s", d.Verdict, d.NBase, d.Reason)
	}
	sum, text := summarize(t, p, jd, trials)
	if r := sum.Replacement; r.Run != 4 || !reflect.DeepEqual(r.Spent, []int{4}) || r.Excluded["steal time"] != 4 {
		t.Errorf("replacement %+v", r)
	}
	for _, want := range []string{"replacement budget of 2 more per arm is spent",
		"excluded: 4 trials excluded for steal time, 4 run in their place (2 per arm, of up to 2: spent with trials still missing at 4 clients)"} {
		if !strings.Contains(text, want) {
			t.Errorf("text lacks %q:\n%s", want, text)
		}
	}
	if re := recompute(t, p, trials); re.Reason != sum.Reason || !reflect.DeepEqual(re.Replacement, sum.Replacement) {
		t.Errorf("recomputed %q %+v, run %q %+v", re.Reason, re.Replacement, sum.Reason, sum.Replacement)
	}
}

// Without a replacement budget (replace: -1, or an experiment stored
// before there was one) an excluded trial is not replaced: the run CI
// saw, 3 counting trials against the 4 a verdict needs, and a reason
// that says so.
func TestReplacementNone(t *testing.T) {
	p := twoArms()
	p.Protocol.Replace = -1
	p.Protocol.MaxReplace = p.Protocol.replaceBudget(4)
	jd, trials := synthetic(t, p, 4, []float64{1, 0.2}, 0.05, 7, func(tr results.Trial) string {
		if tr.Seq == 2 {
			return stealNote
		}
		return ""
	})
	d := jd.decisions[4][0]
	if len(trials) != 8 || d.Verdict != stats.Inconclusive || min(d.NBase, d.NTreatment) != 3 ||
		!strings.Contains(d.Reason, "left 1 per arm short of the 4 planned") || !strings.Contains(d.Reason, "no trials may run in place of excluded ones") {
		t.Errorf("%d trials, %s on %d vs %d: %s", len(trials), d.Verdict, d.NTreatment, d.NBase, d.Reason)
	}
	if r := recompute(t, p, trials).Replacement; r.Budget != 0 || r.Run != 0 || !reflect.DeepEqual(r.Spent, []int{4}) {
		t.Errorf("recomputed replacement %+v", r)
	}
}

// The budget: as many again by default, none when negative, whole
// blocks; a plan file sets it.
func TestReplaceBudget(t *testing.T) {
	for _, c := range []struct{ replace, perArm, want int }{{0, 4, 4}, {0, 8, 8}, {-1, 4, 0}, {3, 4, 4}, {2, 8, 2}} {
		if got := (Protocol{Replace: c.replace}).replaceBudget(c.perArm); got != c.want {
			t.Errorf("replace %d, %d per arm: %d, want %d", c.replace, c.perArm, got, c.want)
		}
	}
	p, err := ParsePlan(strings.NewReader("arms: ['a: vm.swappiness=1', 'b: vm.swappiness=60']\nprotocol:\n  replace: -1\n"))
	if err != nil || p.Protocol.Replace != -1 {
		t.Fatalf("plan %+v, %v", p, err)
	}
}

// Exclusion notes are counted by cause, A/A calibration's marker left
// out, the most frequent first.
func TestExcludedCauses(t *testing.T) {
	ts := []results.Trial{{Excluded: stealNote}, {Excluded: calibrationNote + "; " + stealNote},
		{Excluded: "fingerprint drift: vm.swappiness 60 -> 1"}, {Excluded: "failed: pgbench exited 1"}, {Excluded: stealNote}}
	if got, want := excludedCauses(ts), "5 trials excluded (3 for steal time, 1 for a failed run, 1 for fingerprint drift)"; got != want {
		t.Errorf("%q, want %q", got, want)
	}
	if got, want := excludedCauses(ts[:1]), "1 trial excluded for steal time"; got != want {
		t.Errorf("%q, want %q", got, want)
	}
	if s := (&Replacement{Budget: 4, Excluded: map[string]int{}}).String(); s != "" {
		t.Errorf("nothing excluded, yet %q", s)
	}
}
