package check_test

import (
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/dbhost/dbhost/internal/check"
	"github.com/dbhost/dbhost/internal/fixture"
)

// neverUnknown lists the checks whose inputs every user can read, so no
// recorded host can leave them undecided.
var neverUnknown = map[string]string{
	"mem.hugepages.memlock":   "/proc/PID/limits and /proc/sysvipc/shm are world-readable",
	"mem.hugepages.shm_group": "/proc/sys/vm/hugetlb_shm_group and /proc/sysvipc/shm are world-readable",
	"mem.max_map_count":       "vm.max_map_count and /proc/PID/limits are world-readable",
	"security.db_as_root":     "a process's user is in /proc/PID/status, which everyone can read",
	"storage.nfs.options":     "judged only on NFS mounts, whose options mountinfo always shows",
	"storage.nfs.soft":        "judged only on NFS mounts, whose options mountinfo always shows",
}

// neverPass lists the checks no recorded host passes, and why; their pass
// side is shown by table tests on mutated recordings.
var neverPass = map[string]string{
	"mongodb.wt_cache": "every recorded MongoDB keeps WiredTiger's default of half the RAM on a host shared with three other databases, more than its share (memory_sizing_table_test shows the pass side)",
}

var idPattern = regexp.MustCompile(`^[a-z]+(\.[a-z0-9_]+)+$`)

// TestCatalog holds every check to the house rules: a stable ID with a
// domain prefix, a title and doc, and on the recorded hosts in
// testdata/hosts at least one subject where it passes, one where it fails
// and one where it cannot judge.
func TestCatalog(t *testing.T) {
	all := check.All()
	if len(all) < 45 {
		t.Errorf("%d checks, the catalog promises at least 45", len(all))
	}
	seen := map[string]map[check.Status]int{}
	for _, c := range all {
		if !idPattern.MatchString(c.ID) {
			t.Errorf("%s: ID is not domain.name", c.ID)
		}
		if len(strings.Fields(c.Doc)) < 20 {
			t.Errorf("%s: doc too short to say what it looks at and why", c.ID)
		}
		checkProblem(t, c)
		seen[c.ID] = map[check.Status]int{}
	}
	for _, name := range fixture.Names(t) {
		for _, fd := range fixture.Findings(t, name) {
			seen[fd.ID][fd.Status]++
			if fd.Status == check.Unknown && fd.Reason == "" {
				t.Errorf("%s %s on %s: unknown without a reason", fd.ID, fd.Subject, name)
			}
			if fd.Status == check.Fail && fd.Fix == nil {
				t.Errorf("%s %s on %s: fails without a fix", fd.ID, fd.Subject, name)
			}
		}
	}
	for _, c := range all {
		st := seen[c.ID]
		if _, exempt := neverPass[c.ID]; st[check.Pass] == 0 && !exempt {
			t.Errorf("%s: passes on no recorded host", c.ID)
		}
		if st[check.Fail] == 0 {
			t.Errorf("%s: fails on no recorded host", c.ID)
		}
		if _, exempt := neverUnknown[c.ID]; st[check.Unknown] == 0 && !exempt {
			t.Errorf("%s: no recorded host where it cannot judge", c.ID)
		} else if exempt && st[check.Unknown] > 0 {
			t.Errorf("%s: listed as never unknown, but is", c.ID)
		}
	}
}

// maxProblem bounds a problem's length: it shares a report line with the
// mark, the ID and the subject.
const maxProblem = 90

// checkProblem holds a check's Problem to the house style: the failing
// state, in a short line like the title, not the title itself.
func checkProblem(t *testing.T, c *check.Check) {
	t.Helper()
	p := c.Problem
	switch {
	case strings.TrimSpace(p) == "":
		t.Errorf("%s: no Problem (the failing state a report shows)", c.ID)
	case p != strings.TrimSpace(p) || strings.ContainsAny(p, "\n\t"):
		t.Errorf("%s: Problem %q has surrounding space or a line break", c.ID, p)
	case strings.EqualFold(p, c.Title):
		t.Errorf("%s: Problem repeats the title %q", c.ID, p)
	case strings.HasSuffix(p, "."):
		t.Errorf("%s: Problem %q ends with a period (titles do not)", c.ID, p)
	case len(p) > maxProblem:
		t.Errorf("%s: Problem is %d bytes, more than %d: %q", c.ID, len(p), maxProblem, p)
	case strings.ToUpper(p[:1]) != p[:1] && !startsWithName(p):
		t.Errorf("%s: Problem %q starts in lower case but not with a parameter or program name", c.ID, p)
	}
}

// startsWithName: a problem may start with a lower-case name (vm.swappiness,
// mongod, khugepaged, pg_hba.conf, systemd, dbhost) as titles do.
func startsWithName(p string) bool {
	w, _, _ := strings.Cut(p, " ")
	return strings.ContainsAny(w, "._") || slices.Contains([]string{"mongod", "khugepaged", "systemd", "dbhost"}, w)
}

// TestProblemIsTheFailingHeadline: a failing finding reads as the problem
// and a passing one as the desired state, on a recorded host.
func TestProblemIsTheFailingHeadline(t *testing.T) {
	var fail, pass bool
	for _, fd := range fixture.Findings(t, "baseline") {
		c, _ := check.Lookup(fd.ID)
		if fd.Title != c.Title || fd.Problem != c.Problem {
			t.Errorf("%s: finding has title %q, problem %q; the check %q, %q", fd.ID, fd.Title, fd.Problem, c.Title, c.Problem)
		}
		switch fd.Status {
		case check.Fail:
			fail = true
			if fd.Headline() != c.Problem {
				t.Errorf("%s fails but reads %q", fd.ID, fd.Headline())
			}
		case check.Pass, check.Unknown:
			pass = pass || fd.Status == check.Pass
			if fd.Headline() != c.Title {
				t.Errorf("%s %s but reads %q", fd.ID, fd.Status, fd.Headline())
			}
		}
	}
	if !fail || !pass {
		t.Errorf("baseline: a failing finding %v, a passing one %v; the test needs both", fail, pass)
	}
}

// TestEveryCheckHasItsOwnTest: each check ID is named in a test file other
// than this one, where its verdicts and reasons are asserted.
func TestEveryCheckHasItsOwnTest(t *testing.T) {
	tests, _ := filepath.Glob("*_test.go")
	var src strings.Builder
	for _, f := range tests {
		if f == "catalog_test.go" {
			continue
		}
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		src.Write(b)
	}
	body := src.String()
	for _, c := range check.All() {
		if !strings.Contains(body, `"`+c.ID+`"`) {
			t.Errorf("%s is not named in any check test", c.ID)
		}
	}
}
