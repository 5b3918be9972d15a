package stats

import (
	"encoding/json"
	"strings"
	"testing"
	"time"
)

func TestLooks(t *testing.T) {
	for _, c := range []struct {
		p    Plan
		want []int
	}{
		{Plan{MaxPerArm: 12}, []int{4, 6, 8, 10, 12}},
		{Plan{MaxPerArm: 9}, []int{4, 6, 8, 9}},
		{Plan{MaxPerArm: 4}, []int{4}},
		{Plan{MaxPerArm: 20, FirstLook: 6, LookEvery: 4}, []int{6, 10, 14, 18, 20}},
	} {
		got, err := c.p.Looks()
		if err != nil {
			t.Fatal(err)
		}
		if len(got) != len(c.want) {
			t.Fatalf("%+v: looks %v, want %v", c.p, got, c.want)
		}
		for i := range got {
			if got[i] != c.want[i] {
				t.Fatalf("%+v: looks %v, want %v", c.p, got, c.want)
			}
		}
	}
}

// Every schedule spends at most Alpha in total, each level is one the rank
// test can attain at that look's size, and with the default Alpha the
// first look (4 per arm) spends exactly the smallest attainable p, 2/70.
func TestScheduleSpendsAtMostAlpha(t *testing.T) {
	for _, sp := range []Spending{OBrienFleming, Pocock} {
		for _, alpha := range []float64{0.01, 0.05, 0.1} {
			for nmax := 4; nmax <= 40; nmax++ {
				p := Plan{MaxPerArm: nmax, Alpha: alpha, Spending: sp}
				s, err := p.Schedule()
				if err != nil {
					t.Fatal(err)
				}
				sum := 0.0
				for _, l := range s {
					sum += l.Alpha
					if l.Alpha > 0 {
						null := exactNull(l.N, l.N)
						if got := null.floorLevel(l.Alpha); got != l.Alpha {
							t.Errorf("%v α=%v nmax=%d: level %v at n=%d not attainable", sp, alpha, nmax, l.Alpha, l.N)
						}
					}
					if !near(l.Spent, sum, 1e-15) {
						t.Errorf("Spent %v, sum %v", l.Spent, sum)
					}
				}
				if sum > alpha*(1+1e-9) {
					t.Errorf("%v α=%v nmax=%d: spends %v", sp, alpha, nmax, sum)
				}
				if sum < 0.8*alpha && nmax >= 8 {
					t.Errorf("%v α=%v nmax=%d: wastes budget, spends only %v", sp, alpha, nmax, sum)
				}
				if alpha == 0.05 && nmax > 4 && !near(s[0].Alpha, 2.0/70, 1e-15) {
					t.Errorf("%v nmax=%d: first look spends %v, want 2/70", sp, nmax, s[0].Alpha)
				}
			}
		}
	}
}

// Holm's steps need levels that never grow as the budget shrinks.
func TestHolmLevelsMonotone(t *testing.T) {
	for _, nmax := range []int{8, 12, 20, 30} {
		p, _ := Plan{MaxPerArm: nmax}.withDefaults()
		ns := p.looks()
		lv := p.holmLevels(ns, 5)
		for j := 1; j < len(lv); j++ {
			sum := 0.0
			for k := range ns {
				if lv[j][k] > lv[j-1][k] {
					t.Errorf("nmax=%d look %d: level for α/%d (%v) above α/%d (%v)", nmax, k+1, j+1, lv[j][k], j, lv[j-1][k])
				}
				sum += lv[j][k]
			}
			if sum > p.Alpha/float64(j+1)*(1+1e-9) {
				t.Errorf("nmax=%d: budget α/%d overspent: %v", nmax, j+1, sum)
			}
		}
	}
}

func TestPlanValidation(t *testing.T) {
	for _, p := range []Plan{
		{},                               // no budget
		{MaxPerArm: 3},                   // below 4
		{MaxPerArm: 10, FirstLook: 3},    // verdicts on 3 trials
		{MaxPerArm: 10, Alpha: 0.7},      // absurd alpha
		{MaxPerArm: 10, Alpha: -0.1},     // negative alpha
		{MaxPerArm: 10, Equivalence: .6}, // margin of 60%
		{MaxPerArm: MaxExactPerArm + 1},
		{MaxPerArm: 10, LookEvery: -2},
		{MaxPerArm: 10, Direction: 7},
		{MaxPerArm: 10, Spending: 9},
	} {
		if err := p.Validate(); err == nil {
			t.Errorf("%+v validated", p)
		}
	}
	if err := (Plan{MaxPerArm: 4}).Validate(); err != nil {
		t.Error(err)
	}
}

func TestPlanJSON(t *testing.T) {
	p := Plan{MaxPerArm: 12, Direction: LowerIsBetter, Spending: Pocock, Metric: "p99 latency"}
	b, err := json.Marshal(p)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(b), `"direction":"lower-is-better"`) || !strings.Contains(string(b), `"spending":"pocock"`) {
		t.Errorf("plan JSON %s", b)
	}
	var q Plan
	if err := json.Unmarshal(b, &q); err != nil || q != p {
		t.Errorf("round trip: %+v, %v", q, err)
	}
}

func TestBudget(t *testing.T) {
	for _, c := range []struct{ total, arms, want int }{
		{24, 2, 12}, {25, 2, 12}, {26, 2, 12}, {28, 2, 14}, {8, 2, 4}, {30, 3, 10}, {1000, 2, MaxExactPerArm},
	} {
		got, err := MaxPerArmForTrials(c.total, c.arms)
		if err != nil || got != c.want {
			t.Errorf("MaxPerArmForTrials(%d, %d) = %d, %v; want %d", c.total, c.arms, got, err, c.want)
		}
	}
	if _, err := MaxPerArmForTrials(7, 2); err == nil {
		t.Error("3 per arm accepted")
	}
	if _, err := MaxPerArmForTrials(20, 1); err == nil {
		t.Error("one arm accepted")
	}
	got, err := MaxPerArmForTime(2*time.Hour, 3*time.Minute, 2) // 40 trials
	if err != nil || got != 20 {
		t.Errorf("2h of 3-minute trials: %d, %v; want 20", got, err)
	}
	if _, err := MaxPerArmForTime(10*time.Minute, 3*time.Minute, 2); err == nil || !strings.Contains(err.Error(), "3m0s per trial") {
		t.Errorf("10 minutes of 3-minute trials: %v", err)
	}
	if _, err := MaxPerArmForTime(time.Hour, 0, 2); err == nil {
		t.Error("zero trial duration accepted")
	}
	if d := Duration(10, 2, time.Minute); d != 20*time.Minute {
		t.Errorf("Duration = %v", d)
	}
}
