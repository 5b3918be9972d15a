package check_test

import (
	"encoding/json"
	"sort"
	"strings"
	"sync"
	"testing"

	"github.com/dbhost/dbhost/internal/check"
	"github.com/dbhost/dbhost/internal/facts"
	"github.com/dbhost/dbhost/internal/fixture"
	"github.com/dbhost/dbhost/internal/host"
)

// A tcase judges a recorded host with one thing changed: the facts of base
// are copied, mutate edits the copy (a sysctl, a setting, a mount option),
// and check id must give want for subject (and say each fragment). Cases
// sit on either side of a check's thresholds, so that a threshold moved or
// a comparison inverted fails a test: no recorded host has swappiness 60,
// yet judging it fine must not pass.
type tcase struct {
	name    string
	base    string
	mutate  func(f *facts.Facts)
	id      string
	subject string
	want    check.Status
	says    []string
}

// tables holds every domain's cases; each *_table_test.go file adds its own
// from init.
var (
	tablesMu sync.Mutex
	tables   []tcase
)

func addCases(cs ...tcase) {
	tablesMu.Lock()
	defer tablesMu.Unlock()
	tables = append(tables, cs...)
}

// cloneFacts deep-copies a recorded host's facts (the fixture cache is
// shared by every test). A JSON round trip is exact for facts: every field
// is exported and tagged (TestCloneIsFaithful).
func cloneFacts(t *testing.T, name string) *facts.Facts {
	t.Helper()
	b, err := json.Marshal(fixture.Facts(t, name))
	if err != nil {
		t.Fatal(err)
	}
	var f facts.Facts
	if err := json.Unmarshal(b, &f); err != nil {
		t.Fatal(err)
	}
	return &f
}

func TestTables(t *testing.T) {
	for _, c := range tables {
		t.Run(c.id+"/"+c.name, func(t *testing.T) {
			f := cloneFacts(t, c.base)
			if c.mutate != nil {
				c.mutate(f)
			}
			chk, ok := check.Lookup(c.id)
			if !ok {
				t.Fatalf("no check %s", c.id)
			}
			var got []string
			for _, r := range chk.Run(f) {
				if r.Subject != c.subject {
					got = append(got, r.Subject)
					continue
				}
				if r.Status != c.want {
					t.Fatalf("%s: %s, want %s: %s", c.subject, r.Status, c.want, r.Reason)
				}
				for _, s := range c.says {
					if !strings.Contains(r.Reason, s) {
						t.Errorf("reason lacks %q: %s", s, r.Reason)
					}
				}
				return
			}
			t.Fatalf("no result for %s (results for %v)", c.subject, got)
		})
	}
}

// tableExempt names checks whose verdicts have no two sides a changed fact
// can show, with the reason; every other check needs a pass and a fail
// case.
var tableExempt = map[string]string{}

// TestEveryCheckHasBothSides: every check in the catalog has table cases
// that pass and that fail.
func TestEveryCheckHasBothSides(t *testing.T) {
	sides := map[string]map[check.Status]int{}
	for _, c := range tables {
		if sides[c.id] == nil {
			sides[c.id] = map[check.Status]int{}
		}
		sides[c.id][c.want]++
	}
	var missing []string
	for _, c := range check.All() {
		if _, ok := tableExempt[c.ID]; ok {
			continue
		}
		if sides[c.ID][check.Pass] == 0 || sides[c.ID][check.Fail] == 0 {
			missing = append(missing, c.ID)
		}
	}
	sort.Strings(missing)
	if len(missing) > 0 {
		t.Errorf("%d checks lack a table case on each side: %s", len(missing), strings.Join(missing, ", "))
	}
}

// TestCloneIsFaithful: a cloned recorded host is judged exactly as the
// recording, so the cases test the checks and not the copy.
func TestCloneIsFaithful(t *testing.T) {
	for _, name := range []string{"baseline", "mysql-hardening-fail", "storage-zfs-seed", "numa-2node", "mem-hugepages-pg-on"} {
		orig := map[string]check.Finding{}
		for _, fd := range fixture.Findings(t, name) {
			orig[fd.ID+" "+fd.Subject] = fd
		}
		f := cloneFacts(t, name)
		n := 0
		for _, c := range check.All() {
			for _, r := range c.Run(f) {
				n++
				o := orig[c.ID+" "+r.Subject]
				if o.Status != r.Status || o.Reason != r.Reason {
					t.Errorf("%s: %s %s differs on the clone: %s %q, recording %s %q", name, c.ID, r.Subject, r.Status, r.Reason, o.Status, o.Reason)
				}
			}
		}
		if n != len(orig) {
			t.Errorf("%s: %d findings from the clone, %d from the recording", name, n, len(orig))
		}
	}
}

// ---- helpers for writing cases ----

// sysctl sets a kernel parameter's reading.
func sysctl(name, value string) func(*facts.Facts) {
	return func(f *facts.Facts) {
		f.Sysctl[name] = host.Reading{Value: value, Source: host.SysctlPath(name)}
	}
}

// all applies several mutations in order.
func all(ms ...func(*facts.Facts)) func(*facts.Facts) {
	return func(f *facts.Facts) {
		for _, m := range ms {
			m(f)
		}
	}
}

// instance returns the instance named subject ("postgres:5432").
func instance(f *facts.Facts, subject string) *facts.Instance {
	for _, in := range f.Instances {
		if in.Name() == subject {
			return in
		}
	}
	panic("no instance " + subject)
}

// setting sets an instance's effective setting.
func setting(subject, name, value string) func(*facts.Facts) {
	return func(f *facts.Facts) { instance(f, subject).Set(name, value, "live") }
}
