package cli

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/spf13/pflag"

	"github.com/dbhost/dbhost/internal/fixture"
	"github.com/dbhost/dbhost/internal/results"
)

// storeFindingResult writes a finished experiment on findings of the host
// named hostname into a new results database, as 'experiment --finding'
// stores it (the plan's findings, the host's facts, the summary).
func storeFindingResult(t *testing.T, hostname, decision string, findings ...string) (db, id string) {
	t.Helper()
	db = filepath.Join(t.TempDir(), "results.db")
	st, err := results.Open(db)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	plan, _ := json.Marshal(map[string]any{"name": "finding", "findings": findings})
	hostJSON, _ := json.Marshal(map[string]any{"hostname": hostname})
	e := &results.Experiment{Name: "finding", Created: time.Date(2026, 11, 20, 9, 0, 0, 0, time.UTC), Plan: plan, Host: hostJSON,
		Arms: []results.Arm{{Index: 0, Name: "now", Knobs: []string{"vm.swappiness=60"}}, {Index: 1, Name: "fixed", Knobs: []string{"vm.swappiness=1"}}}}
	if err := st.Create(context.Background(), e); err != nil {
		t.Fatal(err)
	}
	if err := st.Finish(context.Background(), e.ID, results.Done, json.RawMessage(decision), ""); err != nil {
		t.Fatal(err)
	}
	return db, e.ID
}

// The audit shows, next to a finding, the last stored verdict of an
// experiment on its check on this host: text with -v and JSON.
func TestAuditShowsFindingExperiment(t *testing.T) {
	snap := fixture.Path("mem-swapfile")
	hostname := fixture.Facts(t, "mem-swapfile").System.Hostname
	db, id := storeFindingResult(t, hostname, `{"id":"x","verdict":"better","ratio":1.19,"interval":[1.05,1.35]}`, "mem.swappiness")
	before, _ := os.Stat(db)

	_, out, errs := runCLI(t, "audit", "--from", snap, "--only", "mem.swappiness,mem.dirty", "-v", "--results-db", db)
	want := "experiment: fixed vs now better, 1.19x (95 % CI 1.05–1.35), 2026-11-20, 'dbhost results show " + id + "'"
	if !strings.Contains(out, want) {
		t.Errorf("text lacks %q:\n%s%s", want, out, errs)
	}
	if strings.Count(out, "experiment:") != 1 {
		t.Errorf("the verdict shows on other findings too:\n%s", out)
	}
	_, out, _ = runCLI(t, "audit", "--from", snap, "--only", "mem.swappiness,mem.dirty", "--format", "json", "--results-db", db)
	var doc struct {
		Findings []struct {
			ID         string `json:"id"`
			Experiment *struct {
				Experiment string     `json:"experiment"`
				Verdict    string     `json:"verdict"`
				Ratio      float64    `json:"ratio"`
				Interval   []*float64 `json:"interval"`
				Date       time.Time  `json:"date"`
			} `json:"experiment"`
		} `json:"findings"`
	}
	if err := json.Unmarshal([]byte(out), &doc); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	linked := 0
	for _, fd := range doc.Findings {
		switch {
		case fd.ID == "mem.swappiness":
			e := fd.Experiment
			if e == nil || e.Experiment != id || e.Verdict != "better" || e.Ratio != 1.19 || len(e.Interval) != 2 ||
				e.Interval[0] == nil || *e.Interval[0] != 1.05 || *e.Interval[1] != 1.35 || e.Date.IsZero() {
				t.Errorf("mem.swappiness experiment %+v", e)
			}
			linked++
		case fd.Experiment != nil:
			t.Errorf("%s linked to %+v", fd.ID, fd.Experiment)
		}
	}
	if linked == 0 {
		t.Errorf("no mem.swappiness finding:\n%s", out)
	}
	// Read only: the database is unchanged and nothing appeared beside it.
	after, _ := os.Stat(db)
	if !after.ModTime().Equal(before.ModTime()) || after.Size() != before.Size() {
		t.Errorf("the audit changed the results database")
	}
	if ents, _ := os.ReadDir(filepath.Dir(db)); len(ents) != 1 {
		t.Errorf("files beside the database: %v", ents)
	}
}

// Another host's experiment is not shown, and a missing or unreadable
// database does not fail the audit.
func TestAuditFindingExperimentAbsent(t *testing.T) {
	snap := fixture.Path("mem-swapfile")
	db, _ := storeFindingResult(t, "another-host", `{"verdict":"better","ratio":1.19,"interval":[1.05,1.35]}`, "mem.swappiness")
	garbage := filepath.Join(t.TempDir(), "garbage.db")
	os.WriteFile(garbage, []byte("not a database"), 0o600)
	for _, path := range []string{db, filepath.Join(t.TempDir(), "none", "results.db"), garbage, ""} {
		code, out, errs := runCLI(t, "audit", "--from", snap, "--only", "mem.swappiness", "-v", "--results-db", path)
		if code != ExitFindings || strings.Contains(out, "experiment:") {
			t.Errorf("--results-db %q: exit %d\n%s%s", path, code, out, errs)
		}
		if path == garbage && !strings.Contains(out, "experiment results not shown") {
			t.Errorf("an unreadable database is not noted:\n%s", out)
		}
	}
	if _, err := os.Stat(filepath.Join(filepath.Dir(db), "..", "none")); err == nil {
		t.Errorf("the audit created a directory for a missing database")
	}
}

// A snapshot is linked to the local store only when it is named: the
// default store speaks of this machine, and a snapshot of another host
// with the same hostname must not borrow its verdicts.
func TestAuditLinkSnapshotNeedsExplicitStore(t *testing.T) {
	for _, c := range []struct {
		from string
		args []string
		want string
	}{
		{"", nil, "/default.db"},
		{"", []string{"--results-db", "/named.db"}, "/named.db"},
		{"snap.tar.gz", nil, ""},
		{"snap.tar.gz", []string{"--results-db", "/named.db"}, "/named.db"},
	} {
		fs := pflag.NewFlagSet("audit", pflag.ContinueOnError)
		db := fs.String("results-db", "/default.db", "")
		if err := fs.Parse(c.args); err != nil {
			t.Fatal(err)
		}
		if got := linkedStore(fs, c.from, *db); got != c.want {
			t.Errorf("from %q, %v: store %q, want %q", c.from, c.args, got, c.want)
		}
	}
}
