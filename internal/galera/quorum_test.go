package galera

import (
	"reflect"
	"strings"
	"testing"
)

func mustMembers(t *testing.T, spec string) Layout {
	t.Helper()
	l, err := ParseMembers(spec)
	if err != nil {
		t.Fatalf("ParseMembers(%q): %v", spec, err)
	}
	return l
}

// TestSeedTable: the node counts of the Galera article and the ones that
// follow from the same rule.
func TestSeedTable(t *testing.T) {
	for _, tc := range []struct {
		spec             string
		atOnce, oneByOne int
		clean            int
		worst            string
		worstSurvives    bool
		even             bool
	}{
		{"1", 0, 0, 0, "node1", false, false},
		{"2", 0, 0, 1, "node1", false, true},
		{"3", 1, 1, 2, "node1", true, false},
		{"3+garbd", 1, 2, 3, "node1", true, true},
		{"4", 1, 2, 3, "node1", true, true},
		{"5", 2, 3, 4, "node1", true, false},
		{"2+garbd", 1, 1, 2, "node1", true, false},
		{"db1,db2,db3,garbd", 1, 2, 3, "db1", true, true},
		{"7", 3, 5, 6, "node1", true, false},
	} {
		got := Analyze(mustMembers(t, tc.spec))
		if got.AtOnce != tc.atOnce || got.OneByOne != tc.oneByOne || got.CleanShutdown != tc.clean ||
			got.Worst != tc.worst || got.WorstSurvives != tc.worstSurvives || got.EvenSplit != tc.even {
			t.Errorf("%s: at once %d, one by one %d, clean %d, worst %s/%v, even %v; want %d, %d, %d, %s/%v, %v",
				tc.spec, got.AtOnce, got.OneByOne, got.CleanShutdown, got.Worst, got.WorstSurvives, got.EvenSplit,
				tc.atOnce, tc.oneByOne, tc.clean, tc.worst, tc.worstSurvives, tc.even)
		}
	}
}

func TestWeights(t *testing.T) {
	// Two nodes, one of weight 2: losing the light one is survived, the
	// heavy one is not; any single failure is not guaranteed.
	got := Analyze(mustMembers(t, "a:weight=2,b"))
	if got.AtOnce != 0 || got.Worst != "a" || got.WorstSurvives || got.EvenSplit {
		t.Errorf("a:2,b: %+v", got)
	}
	if p := got.Layout.Predict(Scenario{Kind: KillAtOnce, Members: []string{"b"}}); !p.Survives || !p.Primary["a"] {
		t.Errorf("losing b: %+v", p)
	}
	// Weight 0: votes nothing, and is named.
	got = Analyze(mustMembers(t, "a,b,c,d:weight=0"))
	if got.AtOnce != 1 || got.Weight != 3 || !hasFinding(got, "pc.weight=0: d") {
		t.Errorf("weight 0: %+v", got)
	}
	// All at weight 0: nothing is ever Primary after a failure.
	got = Analyze(mustMembers(t, "a:weight=0,b:weight=0"))
	if got.AtOnce != 0 || got.CleanShutdown != 0 {
		t.Errorf("all weight 0: %+v", got)
	}
}

func hasFinding(t Tolerance, sub string) bool {
	for _, f := range t.Findings {
		if strings.Contains(f, sub) {
			return true
		}
	}
	return false
}

func TestSegments(t *testing.T) {
	for _, tc := range []struct {
		spec     string
		isolated []string
		lose     []bool
		splitOK  bool
	}{
		// 2-2 over two data centres: a cut leaves both halves non-Primary.
		{"a:segment=0,b:segment=0,c:segment=1,d:segment=1", []string{"none", "none"}, []bool{false, false}, false},
		// The same with garbd in a third segment: the side with it wins.
		{"a:segment=0,b:segment=0,c:segment=1,d:segment=1,garbd:segment=2", []string{"rest", "rest", "rest"}, []bool{true, true, true}, true},
		// 2-1: the big side keeps Primary, losing it stops the cluster.
		{"a:segment=0,b:segment=0,c:segment=1", []string{"segment", "rest"}, []bool{false, true}, true},
	} {
		got := Analyze(mustMembers(t, tc.spec))
		var iso []string
		var lose []bool
		for _, s := range got.Segments {
			iso = append(iso, s.IsolatedPrimary)
			lose = append(lose, s.LoseSurvives)
		}
		if !reflect.DeepEqual(iso, tc.isolated) || !reflect.DeepEqual(lose, tc.lose) || got.SegmentSplitSurvives() != tc.splitOK {
			t.Errorf("%s: isolated %v lose %v split ok %v; want %v %v %v", tc.spec, iso, lose, got.SegmentSplitSurvives(), tc.isolated, tc.lose, tc.splitOK)
		}
	}
	got := Analyze(mustMembers(t, "a:segment=0,b:segment=0,c:segment=1,d:segment=1"))
	if !hasFinding(got, "segment 0 cut off from the rest: no side keeps Primary") || !got.Serious() {
		t.Errorf("2-2 findings: %q", got.Findings)
	}
	if len(got.WhatIf) == 0 || !strings.Contains(got.WhatIf[0].Change, "third segment (gmcast.segment=2)") ||
		got.WhatIf[0].SegmentSplitSurvives == nil || !*got.WhatIf[0].SegmentSplitSurvives {
		t.Errorf("2-2 what if: %+v", got.WhatIf)
	}
}

func TestWhatIf(t *testing.T) {
	got := Analyze(mustMembers(t, "3"))
	if len(got.WhatIf) != 1 || got.WhatIf[0].Change != "add an arbitrator (garbd)" || got.WhatIf[0].OneByOne != 2 {
		t.Errorf("3 nodes what if: %+v", got.WhatIf)
	}
	got = Analyze(mustMembers(t, "4"))
	var changes []string
	for _, w := range got.WhatIf {
		changes = append(changes, w.Change)
	}
	want := []string{"add an arbitrator (garbd)", "remove node4", "raise node1's pc.weight to 2"}
	if !reflect.DeepEqual(changes, want) {
		t.Errorf("4 nodes what if: %q, want %q", changes, want)
	}
	got = Analyze(mustMembers(t, "2"))
	if len(got.WhatIf) == 0 || got.WhatIf[0].Change != "add an arbitrator (garbd)" || got.WhatIf[0].AtOnce != 1 {
		t.Errorf("2 nodes what if: %+v", got.WhatIf)
	}
	if !got.Serious() || !hasFinding(got, "2 voting members and no arbitrator") || !hasFinding(got, "losing node1 or node2 alone stops the cluster") {
		t.Errorf("2 nodes findings: %q", got.Findings)
	}
}
