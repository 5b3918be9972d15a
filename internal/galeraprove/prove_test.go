package galeraprove

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/dbhost/dbhost/internal/engine"
	"github.com/dbhost/dbhost/internal/galera"
)

const detect = 40 * time.Millisecond

func quick() Options { return Options{Deadline: 400 * time.Millisecond, poll: 5 * time.Millisecond} }

func find(t *testing.T, r *Report, name string) Result {
	t.Helper()
	for _, res := range r.Results {
		if res.Scenario.Name == name {
			return res
		}
	}
	t.Fatalf("no scenario %s in %+v", name, r.Results)
	return Result{}
}

// A cluster that behaves as the model says matches every scenario of the
// seed's layouts, and the verdicts are the seed's table.
func TestRunMatchesAFaithfulCluster(t *testing.T) {
	for _, tc := range []struct {
		spec      string
		scenarios int
		survive   map[string]bool
	}{
		{"3", 5, map[string]bool{"kill_at_once_1": true, "kill_at_once_2": false, "kill_one_by_one_2": false, "partition_node1": true, "shutdown_2": true}},
		{"3+garbd", 6, map[string]bool{"kill_at_once_1": true, "kill_at_once_2": false, "kill_one_by_one_2": true, "kill_one_by_one_3": false, "shutdown_2": true}},
	} {
		t.Run(tc.spec, func(t *testing.T) {
			f := newFake(tc.spec, detect)
			r, err := run(context.Background(), f, quick())
			if err != nil {
				t.Fatal(err)
			}
			if r.Total != tc.scenarios || !r.AllMatched() {
				t.Fatalf("matched %d of %d (want all of %d): %+v", r.Matched, r.Total, tc.scenarios, r.Results)
			}
			if f.recoverCalls != tc.scenarios {
				t.Errorf("Recover called %d times, want once per scenario (%d)", f.recoverCalls, tc.scenarios)
			}
			for name, want := range tc.survive {
				res := find(t, r, name)
				if res.Survived != want || res.Prediction.Survives != want {
					t.Errorf("%s: survived %v, predicted %v, want %v", name, res.Survived, res.Prediction.Survives, want)
				}
			}
			for _, res := range r.Results {
				if !res.Settled || len(res.Notes) > 0 {
					t.Errorf("%s: settled %v, notes %q", res.Scenario.Name, res.Settled, res.Notes)
				}
				// A kill is noticed after the fake's detection time, a
				// clean shutdown at once.
				if res.Scenario.Kind != galera.Shutdown && time.Duration(res.React) < detect {
					t.Errorf("%s: reacted after %s, before the failure could be noticed (%s)", res.Scenario.Name, res.React, Millis(detect))
				}
				if res.Recover > res.Failed || res.Failed > res.Elapsed {
					t.Errorf("%s: times out of order: recover %s, failed at %s, elapsed %s", res.Scenario.Name, res.Recover, res.Failed, res.Elapsed)
				}
			}
			if r.Tolerance.Layout.Members == nil || r.Lab.Deadline == 0 || r.Lab.SuspectTimeout != Millis(detect) {
				t.Errorf("report lacks the model or the lab's timing: %+v", r.Lab)
			}
		})
	}
}

// One by one: each kill waits until the survivors reformed, and never
// comes sooner than a suspect timeout after the previous one.
func TestOneByOneWaitsForTheOthers(t *testing.T) {
	f := newFake("3+garbd", 0) // the fake reacts at once ...
	f.suspect = 60 * time.Millisecond
	s := galera.Scenario{Name: "obo", Kind: galera.KillOneByOne, Members: []string{"node1", "garbd", "node2"}}
	r, err := run(context.Background(), f, Options{Scenarios: []galera.Scenario{s}, Deadline: time.Second, poll: 5 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	if len(f.killedAt) != 3 {
		t.Fatalf("%d kills, want 3", len(f.killedAt))
	}
	for i := 1; i < 3; i++ {
		if gap := f.killedAt[i].Sub(f.killedAt[i-1]); gap < f.suspect {
			t.Errorf("kill %d came %s after the previous one, less than the suspect timeout %s", i+1, gap, f.suspect)
		}
	}
	res := r.Results[0]
	if !res.Match || res.Survived {
		t.Errorf("3 one by one of 3+garbd: match %v survived %v, want a matched loss of Primary: %+v", res.Match, res.Survived, res)
	}
	reacted := 0
	for _, st := range res.Steps {
		if strings.HasPrefix(st.What, "the others reacted") {
			reacted++
		}
	}
	if reacted != 2 {
		t.Errorf("steps %+v: want the survivors' reaction recorded after each of the first two kills", res.Steps)
	}

	// Killed at once instead, the same members leave node3 alone in a
	// cluster of 4, and the fake (like Galera) says so.
	f = newFake("3+garbd", 0)
	s = galera.Scenario{Name: "at_once", Kind: galera.KillAtOnce, Members: []string{"node1", "garbd"}}
	r, err = run(context.Background(), f, Options{Scenarios: []galera.Scenario{s}, Deadline: time.Second, poll: 5 * time.Millisecond})
	if err != nil || !r.AllMatched() || r.Results[0].Survived {
		t.Fatalf("2 of 3+garbd at once: %v %+v", err, r.Results)
	}
}

// A cluster that contradicts the model is a result, not an error: the
// scenario does not match and the nodes' views are reported.
func TestMismatchIsAResult(t *testing.T) {
	f := newFake("3", detect)
	// node3 claims to stay Primary on its own: a split brain.
	f.lie = func(name string, st *engine.GaleraStatus) {
		if name == "node3" && st.ClusterSize == 1 {
			st.ClusterStatus = "Primary"
		}
	}
	s := galera.Scenario{Name: "kill_at_once_2", Kind: galera.KillAtOnce, Members: []string{"node1", "node2"}}
	r, err := run(context.Background(), f, Options{Scenarios: []galera.Scenario{s}, Deadline: time.Second, poll: 5 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	res := r.Results[0]
	if res.Match || r.AllMatched() || r.Matched != 0 || r.Total != 1 {
		t.Fatalf("a split brain matched: %+v", r)
	}
	if !res.Settled || !res.Survived || res.Prediction.Survives {
		t.Errorf("settled %v survived %v predicted %v", res.Settled, res.Survived, res.Prediction.Survives)
	}
	if len(res.Nodes) != 1 || res.Nodes[0].Name != "node3" || res.Nodes[0].ClusterStatus != "Primary" || res.Nodes[0].ClusterSize != 1 || res.Nodes[0].Match {
		t.Errorf("node3's view not reported as observed: %+v", res.Nodes)
	}
	var text strings.Builder
	if err := r.WriteText(&text); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(text.String(), "Primary/1: node3") || !strings.Contains(text.String(), "NO") {
		t.Errorf("text does not show the mismatch:\n%s", text.String())
	}
}

// Views that never show the failure end at the deadline: not settled, no
// match, and the last views are kept.
func TestViewsThatNeverSettle(t *testing.T) {
	f := newFake("3", detect)
	f.lie = func(name string, st *engine.GaleraStatus) { st.ClusterSize, st.ClusterStatus = 3, "Primary" }
	s := galera.Scenario{Name: "kill_at_once_1", Kind: galera.KillAtOnce, Members: []string{"node1"}}
	deadline := 150 * time.Millisecond
	start := time.Now()
	r, err := run(context.Background(), f, Options{Scenarios: []galera.Scenario{s}, Deadline: deadline, poll: 5 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	res := r.Results[0]
	if res.Settled || res.Match || len(res.Notes) == 0 || !strings.Contains(res.Notes[0], "did not settle") {
		t.Fatalf("want an unsettled mismatch with a note: %+v", res)
	}
	if took := time.Since(start); took < deadline {
		t.Errorf("gave up after %s, before the deadline %s", took, deadline)
	}
	for _, n := range res.Nodes {
		if n.ClusterSize != 3 || n.Settled {
			t.Errorf("%s: %+v, want the last (stale) view", n.Name, n)
		}
	}
}

// A node that cannot be read is reported, and the scenario does not match.
func TestUnreadableNode(t *testing.T) {
	f := newFake("3", detect)
	s := galera.Scenario{Name: "kill_at_once_1", Kind: galera.KillAtOnce, Members: []string{"node1"}}
	f.lie = func(name string, st *engine.GaleraStatus) {
		if name == "node2" && st.ClusterSize == 2 {
			f.statusErr["node2"] = errors.New("connection refused")
		}
	}
	r, err := run(context.Background(), f, Options{Scenarios: []galera.Scenario{s}, Deadline: 200 * time.Millisecond, poll: 5 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	res := r.Results[0]
	if res.Match || !strings.Contains(strings.Join(res.Notes, "\n"), "node2 could not be read: connection refused") {
		t.Fatalf("want a mismatch naming node2: %+v", res)
	}
}

// A lab that cannot be brought back is an error naming the scenario and
// the step; the scenarios that ran stay in the report.
func TestRecoverFailureIsAnError(t *testing.T) {
	f := newFake("3", detect)
	s1 := galera.Scenario{Name: "kill_at_once_1", Kind: galera.KillAtOnce, Members: []string{"node1"}}
	s2 := galera.Scenario{Name: "shutdown_2", Kind: galera.Shutdown, Members: []string{"node1", "node2"}}
	o := quick()
	o.Scenarios = []galera.Scenario{s1, s2}
	f.recoverErr = nil
	calls := 0
	f.lie = nil
	// The second recovery fails.
	wrapped := &failingRecover{fakeLab: f, failAt: 2, calls: &calls}
	r, err := run(context.Background(), wrapped, o)
	if err == nil || !strings.Contains(err.Error(), `scenario "shutdown_2": recover the lab: node2 will not start`) {
		t.Fatalf("error %v, want one naming the scenario and the step", err)
	}
	if r == nil || r.Total != 1 || r.Results[0].Scenario.Name != "kill_at_once_1" || r.Error != err.Error() || r.AllMatched() {
		t.Fatalf("report %+v, want the first scenario and the error", r)
	}

	// Recover that says yes to a cluster that is not healthy is caught.
	f = newFake("3", detect)
	f.recoverSick = "node2"
	_, err = run(context.Background(), f, quick())
	if err == nil || !strings.Contains(err.Error(), "node2 reports non-Primary") {
		t.Fatalf("error %v, want the unhealthy baseline named", err)
	}
}

type failingRecover struct {
	*fakeLab
	failAt int
	calls  *int
}

func (f *failingRecover) Recover(ctx context.Context) error {
	*f.calls++
	if *f.calls == f.failAt {
		return errors.New("node2 will not start")
	}
	return f.fakeLab.Recover(ctx)
}

func TestBadScenariosAreRefused(t *testing.T) {
	for _, s := range []galera.Scenario{
		{Name: "x", Kind: galera.KillAtOnce, Members: []string{"node9"}},
		{Name: "x", Kind: galera.KillAtOnce},
		{Name: "x", Kind: galera.KillOneByOne, Members: []string{"node1", "node1"}},
		{Name: "x", Kind: galera.Partition, Sides: [][]string{{"node1"}, {"node2"}}},
		{Name: "x", Kind: galera.Partition, Sides: [][]string{{"node1", "node2"}, {"node2", "node3"}}},
		{Name: "x", Kind: "reboot", Members: []string{"node1"}},
	} {
		f := newFake("3", detect)
		r, err := run(context.Background(), f, Options{Scenarios: []galera.Scenario{s}})
		if err == nil || r.Error == "" || f.recoverCalls != 0 {
			t.Errorf("%+v: error %v, recover called %d times; want a refusal before touching the lab", s, err, f.recoverCalls)
		}
	}
}

func TestInterruptIsAnError(t *testing.T) {
	f := newFake("3", time.Hour)
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	_, err := run(ctx, f, Options{Deadline: time.Hour, poll: 5 * time.Millisecond})
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("error %v, want the context's", err)
	}
}

func TestMillisJSON(t *testing.T) {
	b, err := json.Marshal(struct {
		D Millis `json:"d_ms"`
	}{Millis(2345 * time.Millisecond)})
	if err != nil || string(b) != `{"d_ms":2345}` {
		t.Fatalf("%s %v", b, err)
	}
	var back struct {
		D Millis `json:"d_ms"`
	}
	if err := json.Unmarshal(b, &back); err != nil || time.Duration(back.D) != 2345*time.Millisecond {
		t.Fatalf("%v %v", back.D, err)
	}
	if s := Millis(2345 * time.Millisecond).String(); s != "2.3 s" {
		t.Errorf("String %q", s)
	}
	if json.Unmarshal([]byte(`"x"`), &back) == nil {
		t.Error("a string read as milliseconds")
	}
}

func TestDefaultDeadline(t *testing.T) {
	if d := DefaultDeadline(2 * time.Second); d != 13*time.Second {
		t.Errorf("2 s suspect: %s", d)
	}
	if d := DefaultDeadline(0); d != 25*time.Second {
		t.Errorf("Galera's default: %s", d)
	}
}

// A member that stops on its own (garbd refused by a busy donor, say)
// makes the scenario another one: reported, and no match; the wait ends
// on the views of what is left (node1 and garbd lost together: 2 of 4).
func TestMemberStoppingOnItsOwn(t *testing.T) {
	f := newFake("3+garbd", detect)
	f.lie = func(name string, st *engine.GaleraStatus) {
		if !f.running["node1"] && f.running["garbd"] {
			f.running["garbd"] = false // called with f.mu held
			f.pending, f.due = true, time.Now().Add(f.detect)
		}
	}
	s := galera.Scenario{Name: "kill_at_once_1", Kind: galera.KillAtOnce, Members: []string{"node1"}}
	r, err := run(context.Background(), f, Options{Scenarios: []galera.Scenario{s}, Deadline: time.Second, poll: 5 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	// It stops in the second attempt too: reported as it is.
	res := r.Results[0]
	if res.Match || !res.Void || !res.Settled || !strings.Contains(strings.Join(res.Notes, "\n"), "garbd stopped during the scenario without being made to; its log ends:\n  (garbd's log)") {
		t.Fatalf("want a settled mismatch naming garbd: %+v", res)
	}
	if len(r.Reruns) != 1 || !r.Reruns[0].Void || r.Total != 1 || r.Matched != 0 {
		t.Fatalf("want one void attempt run again and counted once: %d reruns, %d of %d", len(r.Reruns), r.Matched, r.Total)
	}
	for _, n := range res.Nodes {
		if n.Reach != 2 || n.ClusterSize != 2 || n.Primary() {
			t.Errorf("%s: %+v, want non-Primary/2 reaching 2 once garbd is gone", n.Name, n)
		}
	}
}

// A member that stops on its own once: the void attempt is kept apart and
// the scenario run again, which then behaves as predicted.
func TestVoidScenarioRunAgain(t *testing.T) {
	f := newFake("3+garbd", detect)
	stopped := false
	f.lie = func(name string, st *engine.GaleraStatus) {
		if !stopped && !f.running["node1"] && f.running["garbd"] {
			stopped = true
			f.running["garbd"] = false // called with f.mu held
			f.pending, f.due = true, time.Now().Add(f.detect)
		}
	}
	s := galera.Scenario{Name: "kill_at_once_1", Kind: galera.KillAtOnce, Members: []string{"node1"}}
	r, err := run(context.Background(), f, Options{Scenarios: []galera.Scenario{s}, Deadline: time.Second, poll: 5 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	if len(r.Reruns) != 1 || !r.Reruns[0].Void || len(r.Results) != 1 || !r.Results[0].Match || r.Results[0].Void || !r.AllMatched() {
		t.Fatalf("want the second attempt to match: reruns %+v, results %+v", r.Reruns, r.Results)
	}
}

// A bad scenario anywhere in the list is refused before the first one runs.
func TestScenariosCheckedFirst(t *testing.T) {
	f := newFake("3", detect)
	good := galera.Scenario{Name: "kill_at_once_1", Kind: galera.KillAtOnce, Members: []string{"node1"}}
	bad := galera.Scenario{Name: "bad", Kind: galera.KillAtOnce, Members: []string{"node7"}}
	r, err := run(context.Background(), f, Options{Scenarios: []galera.Scenario{good, bad}})
	if err == nil || !strings.Contains(err.Error(), `"node7"`) || f.recoverCalls != 0 || r.Total != 0 {
		t.Fatalf("error %v, %d recoveries, %d results: want a refusal before any", err, f.recoverCalls, r.Total)
	}
}

// Clean shutdowns go one at a time: two members leaving in the same
// instant can be taken for a partition by Galera.
func TestShutdownOneAtATime(t *testing.T) {
	f := newFake("3+garbd", detect)
	s := galera.Scenario{Name: "shutdown_2", Kind: galera.Shutdown, Members: []string{"node2", "node3"}}
	r, err := run(context.Background(), f, Options{Scenarios: []galera.Scenario{s}, Deadline: time.Second, poll: 5 * time.Millisecond})
	if err != nil || !r.AllMatched() {
		t.Fatalf("%v %+v", err, r.Results)
	}
	if len(f.shutdown) != 2 || len(f.shutdown[0]) != 1 || f.shutdown[0][0] != "node2" || f.shutdown[1][0] != "node3" {
		t.Errorf("Shutdown calls %q, want node2 then node3", f.shutdown)
	}
	if st := r.Results[0].Steps; len(st) != 5 || !strings.HasPrefix(st[2].What, "the others reacted: node1 Primary/3, node3 Primary/3") {
		t.Errorf("steps %+v: want node2's leave taken in before node3 goes", st)
	}
}
