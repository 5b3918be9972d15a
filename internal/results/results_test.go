package results

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"
)

func open(t *testing.T) *Store {
	t.Helper()
	s, err := Open(filepath.Join(t.TempDir(), "sub", "results.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func TestRoundTrip(t *testing.T) {
	ctx := context.Background()
	s := open(t)
	created := time.Date(2026, 11, 21, 10, 0, 0, 0, time.UTC)
	e := &Experiment{Name: "hugepages", Created: created, Plan: json.RawMessage(`{"workload":"pgbench"}`),
		Arms: []Arm{{Index: 0, Name: "4k", Knobs: []string{"vm.nr_hugepages=0"}}, {Index: 1, Name: "2m", Knobs: []string{"vm.nr_hugepages=600", "pg.huge_pages=on"}}}}
	if err := s.Create(ctx, e); err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(e.ID, "20261121-100000-") || e.Status != Running {
		t.Fatalf("id %q status %q", e.ID, e.Status)
	}
	want := []Trial{
		{Seq: 0, Block: 0, Arm: 0, Started: created, Finished: created.Add(time.Minute), OpsPerSec: 1234.5,
			P50: 2 * time.Millisecond, P95: 5 * time.Millisecond, P99: 9 * time.Millisecond, Transactions: 74070,
			Fingerprint: json.RawMessage(`{"thp":"madvise"}`), Output: "tps = 1234.5",
			Seconds: []Second{{At: 1, Ops: 1200}, {At: 2, Ops: 1269, Errors: 1}}},
		{Seq: 1, Block: 0, Arm: 1, Clients: 8, Started: created.Add(time.Minute), Finished: created.Add(2 * time.Minute), OpsPerSec: 1300, Transactions: 78000},
	}
	for i := range want {
		if err := s.AddTrial(ctx, e.ID, &want[i]); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Exclude(ctx, e.ID, 1, "fingerprint drift: thp madvise -> always"); err != nil {
		t.Fatal(err)
	}
	want[1].Excluded = "fingerprint drift: thp madvise -> always"
	if err := s.Finish(ctx, e.ID, Done, json.RawMessage(`{"verdict":"better","ratio":1.05}`), ""); err != nil {
		t.Fatal(err)
	}

	got, trials, err := s.Get(ctx, e.ID[:17])
	if err != nil {
		t.Fatal(err)
	}
	if got.Name != "hugepages" || got.Status != Done || got.Finished.IsZero() || !got.Created.Equal(created) {
		t.Errorf("experiment %+v", got)
	}
	if !reflect.DeepEqual(got.Arms, e.Arms) {
		t.Errorf("arms %+v, want %+v", got.Arms, e.Arms)
	}
	if string(got.Plan) != `{"workload":"pgbench"}` {
		t.Errorf("plan %s", got.Plan)
	}
	for i := range want {
		want[i].Started, want[i].Finished = want[i].Started.Local(), want[i].Finished.Local()
		trials[i].Started, trials[i].Finished = trials[i].Started.Local(), trials[i].Finished.Local()
	}
	if !reflect.DeepEqual(trials, want) {
		t.Errorf("trials\n got %+v\nwant %+v", trials, want)
	}
	list, err := s.List(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(list) != 1 || list[0].Verdict != "better" || list[0].Arms != 2 || list[0].Trials != 2 {
		t.Errorf("list %+v", list)
	}
}

func TestFileModes(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "state")
	s, err := Open(filepath.Join(dir, "r.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	for p, want := range map[string]os.FileMode{dir: 0o700, filepath.Join(dir, "r.db"): 0o600} {
		fi, err := os.Stat(p)
		if err != nil {
			t.Fatal(err)
		}
		if fi.Mode().Perm() != want {
			t.Errorf("%s mode %v, want %v", p, fi.Mode().Perm(), want)
		}
	}
}

func TestResolve(t *testing.T) {
	ctx := context.Background()
	s := open(t)
	if _, err := s.Resolve(ctx, "last"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("empty store: %v", err)
	}
	base := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	a := &Experiment{ID: "20260102-030405-aaaaaa", Name: "a", Created: base}
	b := &Experiment{ID: "20260102-030405-aabbbb", Name: "b", Created: base.Add(time.Second)}
	for _, e := range []*Experiment{a, b} {
		if err := s.Create(ctx, e); err != nil {
			t.Fatal(err)
		}
	}
	for ref, want := range map[string]string{"last": b.ID, "20260102-030405-aaa": a.ID, b.ID: b.ID} {
		if got, err := s.Resolve(ctx, ref); err != nil || got != want {
			t.Errorf("Resolve(%q) = %q, %v; want %q", ref, got, err, want)
		}
	}
	if _, err := s.Resolve(ctx, "20260102-030405-aa"); err == nil || !strings.Contains(err.Error(), "ambiguous") {
		t.Errorf("ambiguous prefix: %v", err)
	}
	for _, ref := range []string{"", "%", "2026_", "nope"} {
		if _, err := s.Resolve(ctx, ref); !errors.Is(err, ErrNotFound) {
			t.Errorf("Resolve(%q): %v", ref, err)
		}
	}
	if err := s.Delete(ctx, a.ID); err != nil {
		t.Fatal(err)
	}
	if _, _, err := s.Get(ctx, a.ID); !errors.Is(err, ErrNotFound) {
		t.Errorf("deleted experiment: %v", err)
	}
}

func TestDeleteCascades(t *testing.T) {
	ctx := context.Background()
	s := open(t)
	e := &Experiment{Name: "x", Arms: []Arm{{Name: "base", Knobs: []string{}}}}
	if err := s.Create(ctx, e); err != nil {
		t.Fatal(err)
	}
	if err := s.AddTrial(ctx, e.ID, &Trial{Seq: 0, OpsPerSec: 1, Seconds: []Second{{At: 1, Ops: 1}}}); err != nil {
		t.Fatal(err)
	}
	if err := s.Delete(ctx, e.ID); err != nil {
		t.Fatal(err)
	}
	for _, tbl := range []string{"arms", "trials", "seconds"} {
		var n int
		if err := s.db.QueryRow(`SELECT count(*) FROM ` + tbl).Scan(&n); err != nil || n != 0 {
			t.Errorf("%s: %d rows left (%v)", tbl, n, err)
		}
	}
}

func TestDuplicateTrialRejected(t *testing.T) {
	ctx := context.Background()
	s := open(t)
	e := &Experiment{Name: "x"}
	if err := s.Create(ctx, e); err != nil {
		t.Fatal(err)
	}
	tr := &Trial{Seq: 3, OpsPerSec: 1}
	if err := s.AddTrial(ctx, e.ID, tr); err != nil {
		t.Fatal(err)
	}
	if err := s.AddTrial(ctx, e.ID, tr); err == nil {
		t.Fatal("the same trial stored twice")
	}
	if err := s.AddTrial(ctx, "no-such-experiment", &Trial{Seq: 0}); err == nil {
		t.Fatal("trial of an unknown experiment stored")
	}
}

func TestMarkInterrupted(t *testing.T) {
	ctx := context.Background()
	s := open(t)
	run := &Experiment{Name: "killed"}
	done := &Experiment{Name: "finished"}
	for _, e := range []*Experiment{run, done} {
		if err := s.Create(ctx, e); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Finish(ctx, done.ID, Done, nil, ""); err != nil {
		t.Fatal(err)
	}
	ids, err := s.MarkInterrupted(ctx, "recovered after kill")
	if err != nil || len(ids) != 1 || ids[0] != run.ID {
		t.Fatalf("MarkInterrupted = %v, %v", ids, err)
	}
	got, _, err := s.Get(ctx, run.ID)
	if err != nil || got.Status != Interrupted || got.Note != "recovered after kill" {
		t.Fatalf("%+v %v", got, err)
	}
}

func TestNewerSchemaRefused(t *testing.T) {
	p := filepath.Join(t.TempDir(), "r.db")
	s, err := Open(p)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.db.Exec(`PRAGMA user_version = 99`); err != nil {
		t.Fatal(err)
	}
	s.Close()
	if _, err := Open(p); err == nil || !strings.Contains(err.Error(), "newer dbhost") {
		t.Fatalf("Open of a newer schema: %v", err)
	}
}

func TestNotADatabase(t *testing.T) {
	p := filepath.Join(t.TempDir(), "r.db")
	if err := os.WriteFile(p, []byte("this is not sqlite, it is a text file that is long enough to have a header"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := Open(p); err == nil {
		t.Fatal("a text file opened as a results database")
	}
	b, _ := os.ReadFile(p)
	if !strings.HasPrefix(string(b), "this is not sqlite") {
		t.Fatal("the file was overwritten")
	}
}
