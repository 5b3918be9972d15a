package galera

import (
	"reflect"
	"strings"
	"testing"
)

func TestPredict(t *testing.T) {
	three := mustMembers(t, "3")
	arb := mustMembers(t, "3+garbd")
	for _, tc := range []struct {
		name     string
		l        Layout
		s        Scenario
		primary  map[string]bool
		survives bool
		why      string
	}{
		{"3 lose 1", three, Scenario{Kind: KillAtOnce, Members: []string{"node2"}},
			map[string]bool{"node1": true, "node3": true}, true, "2 of 3 votes > 1.5: Primary"},
		{"3 lose 2 at once", three, Scenario{Kind: KillAtOnce, Members: []string{"node1", "node2"}},
			map[string]bool{"node3": false}, false, "1 of 3 votes <= 1.5: non-Primary"},
		{"3 lose 2 one by one", three, Scenario{Kind: KillOneByOne, Members: []string{"node1", "node2"}},
			map[string]bool{"node3": false}, false, "node2 lost: 1 of 2 votes <= 1: non-Primary"},
		{"3+garbd lose 2 one by one", arb, Scenario{Kind: KillOneByOne, Members: []string{"node1", "node2"}},
			map[string]bool{"node3": true, "garbd": true}, true, "node2 lost: 2 of 3 votes > 1.5: Primary"},
		{"3+garbd lose 2 at once", arb, Scenario{Kind: KillAtOnce, Members: []string{"node1", "garbd"}},
			map[string]bool{"node2": false, "node3": false}, false, "2 of 4 votes <= 2"},
		// The third loss leaves garbd alone, half of the last component.
		{"3+garbd lose 3 one by one", arb, Scenario{Kind: KillOneByOne, Members: []string{"node1", "node2", "node3"}},
			map[string]bool{"garbd": false}, false, "node3 lost: 1 of 2 votes <= 1: non-Primary"},
		// Once Primary is lost nothing reforms: later losses are not judged anew.
		{"3 one by one after the loss", three, Scenario{Kind: KillOneByOne, Members: []string{"node1", "node2"}},
			map[string]bool{"node3": false}, false, "node1 lost: 2 of 3 votes > 1.5: Primary; node2 lost: 1 of 2 votes <= 1: non-Primary"},
		{"4 one by one after the loss", mustMembers(t, "a:weight=3,b,c,d"), Scenario{Kind: KillOneByOne, Members: []string{"a", "b"}},
			map[string]bool{"c": false, "d": false}, false, "a lost: 3 of 6 votes <= 3: non-Primary"},
		{"partition 2-2", mustMembers(t, "4"), Scenario{Kind: Partition, Sides: [][]string{{"node1", "node2"}, {"node3", "node4"}}},
			map[string]bool{"node1": false, "node2": false, "node3": false, "node4": false}, false, "{node1,node2} 2 of 4 votes <= 2"},
		{"partition 1-2", three, Scenario{Kind: Partition, Sides: [][]string{{"node3"}, {"node1", "node2"}}},
			map[string]bool{"node1": true, "node2": true, "node3": false}, true, "{node1,node2} 2 of 3 votes > 1.5: Primary"},
		{"shutdown 2 of 3", three, Scenario{Kind: Shutdown, Members: []string{"node2", "node3"}},
			map[string]bool{"node1": true}, true, "1 of 3 votes (2 left cleanly) > 0.5: Primary"},
		{"shutdown all data", arb, Scenario{Kind: Shutdown, Members: []string{"node1", "node2", "node3"}},
			map[string]bool{"garbd": true}, false, "no data node left"},
		{"heavy garbd keeps Primary alone", mustMembers(t, "a,b,garbd:weight=3"), Scenario{Kind: KillAtOnce, Members: []string{"a", "b"}},
			map[string]bool{"garbd": true}, false, "3 of 5 votes > 2.5: Primary (no data node left"},
		{"unknown member", three, Scenario{Kind: KillAtOnce, Members: []string{"node9"}},
			map[string]bool{}, false, `not judged: no member "node9"`},
		{"side missing", three, Scenario{Kind: Partition, Sides: [][]string{{"node1"}, {"node2"}}},
			map[string]bool{}, false, "members on no side: node3"},
		{"member twice", three, Scenario{Kind: Partition, Sides: [][]string{{"node1", "node2"}, {"node2", "node3"}}},
			map[string]bool{}, false, "more than one side"},
		{"lost twice", three, Scenario{Kind: KillOneByOne, Members: []string{"node1", "node1"}},
			map[string]bool{}, false, "lost twice"},
		{"unknown kind", three, Scenario{Kind: "flood"},
			map[string]bool{}, false, "unknown scenario kind"},
	} {
		p := tc.l.Predict(tc.s)
		if !reflect.DeepEqual(p.Primary, tc.primary) || p.Survives != tc.survives || !strings.Contains(p.Why, tc.why) {
			t.Errorf("%s: primary %v survives %v why %q; want %v %v ~%q", tc.name, p.Primary, p.Survives, p.Why, tc.primary, tc.survives, tc.why)
		}
	}
}

// TestToleranceAgainstPredict checks the searches against Predict, member
// set by member set and order by order, on layouts with weights,
// arbitrators and segments: AtOnce and OneByOne are the boundaries.
func TestToleranceAgainstPredict(t *testing.T) {
	for _, spec := range []string{"1", "2", "3", "4", "5", "3+garbd", "2+garbd", "a:weight=2,b,c", "a:weight=3,b,c,d:weight=0,garbd",
		"a:segment=0,b:segment=0,c:segment=1,d:segment=1,garbd:segment=2", "a,b:weight=2,c:weight=2,garbd:arbitrator:weight=2"} {
		l := mustMembers(t, spec)
		tol := Analyze(l)
		n := len(l.Members)
		// At once: every set of AtOnce members survives, some set of
		// AtOnce+1 does not.
		failsAt := n + 1
		for s := 0; s < 1<<n; s++ {
			var names []string
			for i := 0; i < n; i++ {
				if s&(1<<i) != 0 {
					names = append(names, l.Members[i].Name)
				}
			}
			if !l.Predict(Scenario{Kind: KillAtOnce, Members: names}).Survives && len(names) < failsAt {
				failsAt = len(names)
			}
		}
		if tol.AtOnce != failsAt-1 {
			t.Errorf("%s: AtOnce %d, Predict fails first at %d", spec, tol.AtOnce, failsAt)
		}
		// One by one: every order of every set, through Predict.
		failsOBO := n + 1
		var perm func(prefix []string, used int)
		perm = func(prefix []string, used int) {
			if len(prefix) > 0 && !l.Predict(Scenario{Kind: KillOneByOne, Members: prefix}).Survives {
				if len(prefix) < failsOBO {
					failsOBO = len(prefix)
				}
				return
			}
			for i := 0; i < n; i++ {
				if used&(1<<i) == 0 {
					perm(append(append([]string(nil), prefix...), l.Members[i].Name), used|1<<i)
				}
			}
		}
		perm(nil, 0)
		if tol.OneByOne != failsOBO-1 {
			t.Errorf("%s: OneByOne %d, Predict fails first at %d", spec, tol.OneByOne, failsOBO)
		}
		if tol.OneByOne < tol.AtOnce {
			t.Errorf("%s: one by one %d < at once %d", spec, tol.OneByOne, tol.AtOnce)
		}
	}
}

func TestScenarios(t *testing.T) {
	names := func(ss []Scenario) []string {
		var out []string
		for _, s := range ss {
			out = append(out, s.Name)
		}
		return out
	}
	for _, tc := range []struct {
		spec string
		want []string
	}{
		{"3", []string{"kill_at_once_1", "kill_at_once_2", "kill_one_by_one_2", "partition_node1", "shutdown_2"}},
		{"3+garbd", []string{"kill_at_once_1", "kill_at_once_2", "kill_one_by_one_2", "kill_one_by_one_3", "partition_node1", "shutdown_2"}},
		{"2", []string{"kill_at_once_1", "partition_node1", "shutdown_1"}},
		{"1", nil},
		{"4:segments=2", []string{"kill_at_once_1", "kill_at_once_2", "kill_one_by_one_2", "kill_one_by_one_3", "partition_segment_0", "shutdown_3"}},
		{"2+garbd:segments=3", []string{"kill_at_once_1", "kill_at_once_2", "kill_one_by_one_2", "partition_segment_0", "partition_segment_1", "partition_segment_2", "shutdown_1"}},
	} {
		l := mustMembers(t, tc.spec)
		ss := Scenarios(l)
		if got := names(ss); !reflect.DeepEqual(got, tc.want) {
			t.Errorf("%s: scenarios %q, want %q", tc.spec, got, tc.want)
		}
		tol := Analyze(l)
		c := newCalc(l)
		for _, s := range ss {
			p := l.Predict(s)
			if strings.HasPrefix(p.Why, "not judged") {
				t.Errorf("%s %s: %s", tc.spec, s.Name, p.Why)
			}
			if s.Kind == KillAtOnce || s.Kind == KillOneByOne {
				lost, _ := c.index(s.Members)
				if c.data&^lost == 0 {
					t.Errorf("%s %s kills every data node", tc.spec, s.Name)
				}
				// The boundary on both sides.
				k := len(s.Members)
				bound := tol.AtOnce
				if s.Kind == KillOneByOne {
					bound = tol.OneByOne
				}
				if p.Survives != (k <= bound) {
					t.Errorf("%s %s: survives %v with tolerance %d", tc.spec, s.Name, p.Survives, bound)
				}
			}
			if s.Kind == Shutdown && !p.Survives {
				t.Errorf("%s %s: a clean shutdown keeping a data node should survive: %s", tc.spec, s.Name, p.Why)
			}
		}
	}
	// The worst choice: the heavy member goes first.
	ss := Scenarios(mustMembers(t, "a,b:weight=2,c,d"))
	if ss[0].Name != "kill_at_once_1" || !reflect.DeepEqual(ss[0].Members, []string{"b"}) {
		t.Errorf("worst single: %+v", ss[0])
	}
}
