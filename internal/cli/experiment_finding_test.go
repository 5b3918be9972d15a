package cli

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/dbhost/dbhost/internal/testdb"
)

// experiment --finding on the throwaway cluster: mem.dirty is made to fail
// (40 % / 30 % on this host, through the test journal, which puts the
// host's values back at cleanup); the experiment compares those values
// with the fix's, stores the finding with the verdict, puts 40/30 back,
// and the audit then shows the verdict next to the finding.
func TestExperimentFindingEndToEnd(t *testing.T) {
	integrationExperiment(t)
	if b, _ := os.ReadFile("/proc/sys/vm/dirty_bytes"); strings.TrimSpace(string(b)) != "0" {
		testdb.Need(t, "a host that limits dirty memory as a ratio", false)
	}
	j := lendingJournal(t)
	for f, v := range map[string]string{"/proc/sys/vm/dirty_ratio": "40", "/proc/sys/vm/dirty_background_ratio": "30"} {
		if err := j.Set(f, v); err != nil {
			t.Fatal(err)
		}
	}
	code, out, _ := runCLI(t, "audit", "--only", "mem.dirty", "--results-db", "")
	testdb.Need(t, "mem.dirty failing at 40 % / 30 %", code == ExitFindings && strings.Contains(out, "✗ mem.dirty"))

	dir := t.TempDir()
	var doc experimentJSON
	doc, _ = runExperimentJSON(t, dir, "--finding", "mem.dirty", "--shared-buffers", "128MB",
		"--duration", "2s", "--warmup", "1s", "--trials", "8")
	if len(doc.Arms) != 2 || doc.Arms[0].Name != "now" || doc.Arms[1].Name != "fixed" ||
		strings.Join(doc.Arms[0].Knobs, " ") != "vm.dirty_ratio=40 vm.dirty_background_ratio=30" ||
		strings.Join(doc.Arms[1].Knobs, " ") != "vm.dirty_ratio=20 vm.dirty_background_ratio=10" {
		t.Fatalf("arms %+v", doc.Arms)
	}
	s := checkStored(t, dir, doc, "vm.dirty_ratio")
	var plan struct {
		Findings        []string `json:"findings"`
		FindingWorkload string   `json:"finding_workload"`
		Target          struct {
			DataFraction float64 `json:"data_fraction"`
		} `json:"target"`
	}
	if err := json.Unmarshal(s.Experiment.Plan, &plan); err != nil {
		t.Fatal(err)
	}
	if strings.Join(plan.Findings, ",") != "mem.dirty" || plan.FindingWorkload != "dirty" || plan.Target.DataFraction != 2 {
		t.Errorf("stored plan %s", s.Experiment.Plan)
	}
	for f, v := range map[string]string{"/proc/sys/vm/dirty_ratio": "40", "/proc/sys/vm/dirty_background_ratio": "30"} {
		if b, _ := os.ReadFile(f); strings.TrimSpace(string(b)) != v {
			t.Errorf("%s is %s after the experiment, was %s", f, b, v)
		}
	}

	_, out, errs := runCLI(t, "audit", "-v", "--only", "mem.dirty", "--results-db", filepath.Join(dir, "results.db"))
	for _, l := range strings.Split(out, "\n") {
		if strings.Contains(l, "experiment:") {
			t.Logf("audit -v: %s", strings.TrimSpace(l))
		}
	}
	want := "experiment: fixed vs now " + *doc.Verdict
	if !strings.Contains(out, want) || !strings.Contains(out, "'dbhost results show "+*doc.ID+"'") {
		t.Errorf("audit -v lacks %q and the ID %s:\n%s%s", want, *doc.ID, out, errs)
	}
}

// Refusals of --finding happen before anything changes: with other arms,
// for a passing or unknown check.
func TestExperimentFindingRefusals(t *testing.T) {
	dir := t.TempDir()
	args := []string{"experiment", "--journal", filepath.Join(dir, "j"), "--db", filepath.Join(dir, "db")}
	cases := []struct {
		args []string
		want string
	}{
		{[]string{"--finding", "mem.swappiness", "--preset", "swappiness"}, "leave out --arm, --preset"},
		{[]string{"--finding", "mem.swappiness", "--arm", "a: vm.swappiness=1"}, "leave out --arm, --preset"},
		{[]string{"--finding", "mem.nosuchcheck"}, "no such check"},
		{[]string{"--finding", "galera.ports"}, "does not apply to this host"},
	}
	for _, c := range cases {
		code, _, errs := runCLI(t, append(args, c.args...)...)
		if code != ExitError || !strings.Contains(errs, c.want) {
			t.Errorf("%q: exit %d, want %q in:\n%s", c.args, code, c.want, errs)
		}
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 0 {
		t.Errorf("a refused experiment left %v", ents)
	}
}
