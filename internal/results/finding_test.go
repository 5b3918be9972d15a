package results

import (
	"context"
	"encoding/json"
	"path/filepath"
	"testing"
	"time"
)

// storeFinding stores a finished experiment on findings of a host.
func storeFinding(t *testing.T, s *Store, id, hostname, status string, created time.Time, decision string, findings ...string) {
	t.Helper()
	ctx := context.Background()
	plan, _ := json.Marshal(map[string]any{"name": "finding", "findings": findings})
	hostJSON, _ := json.Marshal(map[string]any{"hostname": hostname})
	if err := s.Create(ctx, &Experiment{ID: id, Name: "finding", Created: created, Plan: plan, Host: hostJSON}); err != nil {
		t.Fatal(err)
	}
	var d json.RawMessage
	if decision != "" {
		d = json.RawMessage(decision)
	}
	if err := s.Finish(ctx, id, status, d, ""); err != nil {
		t.Fatal(err)
	}
}

func TestLastFindingVerdicts(t *testing.T) {
	ctx := context.Background()
	p := filepath.Join(t.TempDir(), "results.db")
	s, err := Open(p)
	if err != nil {
		t.Fatal(err)
	}
	t0 := time.Date(2026, 11, 1, 10, 0, 0, 0, time.UTC)
	better := `{"verdict":"better","ratio":1.19,"interval":[1.05,1.35]}`
	storeFinding(t, s, "e1-old", "db1", Done, t0, `{"verdict":"worse","ratio":0.9,"interval":[0.8,0.95]}`, "mem.swappiness")
	storeFinding(t, s, "e2-new", "db1", Done, t0.Add(time.Hour), better, "mem.swappiness", "mem.thp.enabled")
	// Newer, but not counting: failed, another host, no findings.
	storeFinding(t, s, "e3-failed", "db1", Failed, t0.Add(2*time.Hour), `{"verdict":"inconclusive","ratio":1,"interval":[0.5,null]}`, "mem.swappiness")
	storeFinding(t, s, "e4-other", "db2", Done, t0.Add(3*time.Hour), `{"verdict":"worse","ratio":0.5,"interval":[0.4,0.6]}`, "mem.swappiness")
	storeFinding(t, s, "e5-plain", "db1", Done, t0.Add(4*time.Hour), `{"verdict":"worse","ratio":0.5,"interval":[0.4,0.6]}`)
	storeFinding(t, s, "e6-open", "db1", Done, t0.Add(5*time.Hour), `{"verdict":"inconclusive","ratio":1.01,"interval":[0.9,null]}`, "mem.dirty")
	s.Close()

	ro, err := OpenReadOnly(p)
	if err != nil {
		t.Fatal(err)
	}
	defer ro.Close()
	got, err := ro.LastFindingVerdicts(ctx, "db1")
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 3 {
		t.Fatalf("%d checks: %+v", len(got), got)
	}
	for _, id := range []string{"mem.swappiness", "mem.thp.enabled"} {
		v := got[id]
		if v.Experiment != "e2-new" || v.Verdict != "better" || v.Ratio != 1.19 || v.Interval[0] == nil || *v.Interval[0] != 1.05 || *v.Interval[1] != 1.35 {
			t.Errorf("%s: %+v", id, v)
		}
	}
	if v := got["mem.dirty"]; v.Experiment != "e6-open" || v.Interval[1] != nil || v.Date.IsZero() {
		t.Errorf("mem.dirty: %+v", v)
	}
	if all, _ := ro.LastFindingVerdicts(ctx, ""); all["mem.swappiness"].Experiment != "e4-other" {
		t.Errorf("any host: %+v", all["mem.swappiness"])
	}
	if none, _ := ro.LastFindingVerdicts(ctx, "db3"); len(none) != 0 {
		t.Errorf("unknown host: %+v", none)
	}
}
