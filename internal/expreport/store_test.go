package expreport

import (
	"bytes"
	"context"
	"encoding/json"
	"path/filepath"
	"testing"

	"github.com/dbhost/dbhost/internal/results"
	"github.com/dbhost/dbhost/internal/stats"
)

// The report renders what results.Store gives back exactly as what went
// in: same types, same numbers, the decisions read from the stored JSON.
func TestFromStore(t *testing.T) {
	ctx := context.Background()
	st, err := results.Open(filepath.Join(t.TempDir(), "results.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()

	in := scenario{Name: "dirty", Arms: twoArms(), Effects: []float64{1, 0.93}, PerArm: 8, Seconds: 30, Seed: 21, AA: 2,
		Exclude: map[int]string{}}.build(t)
	e := *in.Experiment
	e.ID, e.Status, e.Decision = "", "", nil
	if err := st.Create(ctx, &e); err != nil {
		t.Fatal(err)
	}
	for i := range in.Trials {
		if err := st.AddTrial(ctx, e.ID, &in.Trials[i]); err != nil {
			t.Fatal(err)
		}
	}
	// Excluded after the fact, as the experiment does on drift.
	const reason = "fingerprint drift: disk.vda.scheduler: was none, now mq-deadline"
	if err := st.Exclude(ctx, e.ID, 7, reason); err != nil {
		t.Fatal(err)
	}
	in.Trials[7].Excluded = reason
	in.Decisions = decide(t, stats.Plan{MaxPerArm: 8, Metric: "throughput"}, in.Experiment.Arms, in.Trials, 0)
	if len(in.Decisions) != 1 || in.Decisions[0].Verdict != stats.Worse {
		t.Fatalf("the scenario should decide worse: %+v", in.Decisions)
	}
	decision, _ := json.Marshal(map[string]any{"decisions": in.Decisions})
	if err := st.Finish(ctx, e.ID, results.Done, decision, ""); err != nil {
		t.Fatal(err)
	}

	got, trials, err := st.Get(ctx, "last")
	if err != nil {
		t.Fatal(err)
	}
	stored := Input{Experiment: got, Trials: trials} // decisions from the stored JSON
	html, doc, md := render(t, stored)
	checkCharts(t, in, doc)
	if chart(doc, "effect").all(func(n *node) bool { return n.hasClass("effect") })[0].attr["data-verdict"] != "worse" {
		t.Error("stored decision not shown")
	}

	// The same report as from the input itself, once the fields the
	// store sets are copied over.
	want := in
	e2 := *in.Experiment
	e2.ID, e2.Status, e2.Finished, e2.Decision = got.ID, got.Status, got.Finished, got.Decision
	want.Experiment = &e2
	var wantHTML, wantMD bytes.Buffer
	if err := HTML(&wantHTML, want); err != nil {
		t.Fatal(err)
	}
	if err := Markdown(&wantMD, want); err != nil {
		t.Fatal(err)
	}
	if html != wantHTML.String() {
		t.Error("the report from the store differs from the report from the input")
	}
	if md != wantMD.String() {
		t.Errorf("Markdown from the store differs:\n%s\nwant\n%s", md, wantMD.String())
	}
}
