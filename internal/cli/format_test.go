package cli

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/dbhost/dbhost/internal/experiment"
	"github.com/dbhost/dbhost/internal/results"
)

// TestUnknownFormatOneMessage: every command that takes --format refuses an
// unknown one with the same message, naming what it has, and exit status,
// before it reads anything: the snapshot, the host or the results database
// named here do not exist, and none is created.
func TestUnknownFormatOneMessage(t *testing.T) {
	dir := t.TempDir()
	missing := filepath.Join(dir, "missing")
	db := filepath.Join(dir, "results.db")
	for _, c := range []struct {
		cmd  string // as the message names it
		args []string
		want string // the formats, as the message lists them
	}{
		{"audit", []string{"audit", "--from", missing}, "json, prom or text"},
		{"checks", []string{"checks"}, "text, json or markdown"},
		{"mem", []string{"mem", "--from", missing}, "text or json"},
		{"contention", []string{"contention", "--from", missing}, "text or json"},
		{"results show", []string{"results", "show", "last", "--db", db}, "text, json or markdown"},
		{"results report", []string{"results", "report", "last", "-o", filepath.Join(dir, "r.html"), "--db", db}, "html, markdown or json"},
		{"results list", []string{"results", "list", "--db", db}, "text or json"},
		{"results compare", []string{"results", "compare", "a", "b", "--db", db}, "text or json"},
		{"experiment", []string{"experiment", "--preset", "swappiness", "--db", db, "--journal", filepath.Join(dir, "journal")}, "text, json or markdown"},
	} {
		for _, bad := range []string{"yaml", "TEXT", ""} {
			code, stdout, stderr := runCLI(t, append(c.args, "--format", bad)...)
			want := "dbhost " + c.cmd + `: unknown format "` + bad + `" (want ` + c.want + ")\n"
			if code != ExitError || stdout != "" || stderr != want {
				t.Errorf("%s --format %q: exit %d, stdout %q, stderr %q; want exit %d, no output and %q",
					strings.Join(c.args, " "), bad, code, stdout, stderr, ExitError, want)
			}
		}
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 0 {
		t.Errorf("a refused --format left files: %v", ents)
	}
}

// TestFormatSets: each command's set accepts the names (and aliases) its
// --format always has, and lists only the names.
func TestFormatSets(t *testing.T) {
	type set interface {
		Names() []string
		Check(string) error
	}
	for _, c := range []struct {
		cmd     string
		set     set
		names   []string
		aliases []string
	}{
		{"checks", catalogFormats, []string{"text", "json", "markdown"}, []string{"md"}},
		{"mem", memFormats, []string{"text", "json"}, nil},
		{"contention", contentionFormats, []string{"text", "json"}, nil},
		{"contention --probe", probeFormats, []string{"text", "json"}, nil},
		{"results show", showFormats, []string{"text", "json", "markdown"}, []string{"md"}},
		{"results report", reportFormats, []string{"html", "markdown", "json"}, []string{"md"}},
		{"results list", listFormats, []string{"text", "json"}, nil},
		{"results compare", compareFormats, []string{"text", "json"}, nil},
		{"experiment", summaryFormats, []string{"text", "json", "markdown"}, []string{"md"}},
	} {
		if got := c.set.Names(); !slices.Equal(got, c.names) {
			t.Errorf("%s: formats %q, want %q", c.cmd, got, c.names)
		}
		for _, n := range append(slices.Clone(c.names), c.aliases...) {
			if err := c.set.Check(n); err != nil {
				t.Errorf("%s: %v", c.cmd, err)
			}
		}
	}
}

// storeExperiment stores a finished two-arm experiment with a few trials in
// a new results database and returns its path and the experiment's ID.
func storeExperiment(t *testing.T) (string, string) {
	t.Helper()
	ctx := context.Background()
	db := filepath.Join(t.TempDir(), "results.db")
	st, err := results.Open(db)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	start := time.Date(2026, 11, 25, 10, 0, 0, 0, time.UTC)
	e := &results.Experiment{Name: "swappiness", Created: start, Status: results.Running,
		Arms: []results.Arm{{Index: 0, Name: "base", Knobs: []string{"vm.swappiness=60"}}, {Index: 1, Name: "low", Knobs: []string{"vm.swappiness=1"}}}}
	if err := st.Create(ctx, e); err != nil {
		t.Fatal(err)
	}
	for i := range 4 {
		tr := &results.Trial{Seq: i, Block: i / 2, Arm: i % 2, Clients: 4, Started: start.Add(time.Duration(i) * time.Minute),
			Finished: start.Add(time.Duration(i)*time.Minute + 30*time.Second), OpsPerSec: 1000 + float64(i), P99: 3 * time.Millisecond, Transactions: 30000}
		if err := st.AddTrial(ctx, e.ID, tr); err != nil {
			t.Fatal(err)
		}
	}
	sum, err := json.Marshal(experiment.Summary{ID: e.ID, Name: e.Name, Status: results.Done, Verdict: "same", Ratio: 1.001,
		Headline: "low vs base", Reason: "within 2%", Metric: "throughput", Trials: 4, MaxPerArm: 2, Clients: []int{4}})
	if err != nil {
		t.Fatal(err)
	}
	if err := st.Finish(ctx, e.ID, results.Done, sum, ""); err != nil {
		t.Fatal(err)
	}
	return db, e.ID
}

// TestStoredFormats: the results subcommands render a stored experiment in
// each of their formats; an alias gives what its format
// gives, and a report written to a file is what -o - prints.
func TestStoredFormats(t *testing.T) {
	db, id := storeExperiment(t)
	run := func(args ...string) string {
		t.Helper()
		code, out, stderr := runCLI(t, append(args, "--db", db)...)
		if code != ExitOK || out == "" {
			t.Fatalf("%s: exit %d, stdout %q, stderr %q", strings.Join(args, " "), code, out, stderr)
		}
		return out
	}
	for _, f := range []string{"text", "json", "markdown"} {
		out := run("results", "show", id, "--format", f)
		if !strings.Contains(out, "swappiness") {
			t.Errorf("results show --format %s does not name the experiment:\n%s", f, out)
		}
	}
	if md, markdown := run("results", "show", id, "--format", "md"), run("results", "show", id, "--format", "markdown"); md != markdown {
		t.Error("results show: md and markdown differ")
	}
	var doc struct {
		ID       string          `json:"id"`
		TrialLog []results.Trial `json:"trial_log"`
	}
	if err := json.Unmarshal([]byte(run("results", "show", id, "--format", "json")), &doc); err != nil || doc.ID != id || len(doc.TrialLog) != 4 {
		t.Errorf("results show --format json: %+v, %v", doc, err)
	}

	for _, f := range []string{"text", "json"} {
		if out := run("results", "list", "--format", f); !strings.Contains(out, id) {
			t.Errorf("results list --format %s does not list %s:\n%s", f, id, out)
		}
		if out := run("results", "compare", id, id, "--format", f); !strings.Contains(out, "swappiness") {
			t.Errorf("results compare --format %s does not name the experiments:\n%s", f, out)
		}
	}

	dir := t.TempDir()
	for _, f := range []string{"html", "markdown", "md", "json"} {
		stdout := run("results", "report", id, "-o", "-", "--format", f)
		file := filepath.Join(dir, "report."+f)
		code, _, stderr := runCLI(t, "results", "report", id, "-o", file, "--format", f, "--db", db)
		written, err := os.ReadFile(file)
		if code != ExitOK || err != nil || string(written) != stdout {
			t.Errorf("results report --format %s -o FILE: exit %d (%s), %v; the file differs from -o -", f, code, stderr, err)
		}
	}
	if md, markdown := run("results", "report", id, "-o", "-", "--format", "md"), run("results", "report", id, "-o", "-", "--format", "markdown"); md != markdown {
		t.Error("results report: md and markdown differ")
	}
}
