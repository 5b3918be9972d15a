package cli

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/dbhost/dbhost/internal/apply"
	"github.com/dbhost/dbhost/internal/check"
	"github.com/dbhost/dbhost/internal/engine"
	"github.com/dbhost/dbhost/internal/facts"
	"github.com/dbhost/dbhost/internal/fix"
	"github.com/dbhost/dbhost/internal/host"
	"github.com/dbhost/dbhost/internal/testdb"
)

func liveFindings(t *testing.T) ([]check.Finding, *facts.Facts) {
	t.Helper()
	h, err := host.Open("/")
	if err != nil {
		t.Fatal(err)
	}
	f := facts.Gather(context.Background(), h, gatherOptions(engine.Options{}))
	return check.Run(f, check.Selector{}), f
}

// TestRuntimeFixesMakeFindingsPass applies, through apply and the change
// layer (journaled, read back), the runtime part of every failing
// finding's fix on this host (sysctls, /sys knobs, block queue
// attributes), audits again and expects each of those findings to pass.
// Everything is rolled back afterwards, also on Ctrl-C; a change set a
// run killed hard leaves is recovered by the next run.
func TestRuntimeFixesMakeFindingsPass(t *testing.T) {
	j := testdb.Journal(t)
	state := filepath.Join("/var/tmp", "dbhost-test-runtime-fixes.changes")
	if _, err := apply.Recover(state, apply.Options{}); err != nil {
		t.Fatal(err)
	}
	// At least one finding with a runtime fix fails, whatever this host's
	// settings: a dirty_ratio above 20 % of RAM (restored afterwards).
	if err := j.Set("/proc/sys/vm/dirty_ratio", "40"); err != nil {
		t.Fatal(err)
	}

	before, f := liveFindings(t)
	var selected []check.Finding
	for _, f := range before {
		if f.Status != check.Fail || f.Fix == nil || len(fix.Knobs(f.Fix)) == 0 {
			continue
		}
		// Only fixes made entirely of runtime knobs can pass without a
		// restart or reboot.
		if len(f.Fix.Limits)+len(f.Fix.Dropins)+len(f.Fix.Config)+len(f.Fix.Mount) > 0 || f.Fix.Manual != "" {
			continue
		}
		// sysctl.drift's and mem.thp.persisted's fixes are the files that
		// persist a value: setting it at run time changes nothing they
		// judge (on a host where another finding sets the drifting key,
		// its fix persists that value; a THP mode set at run time is what
		// mem.thp.persisted fails as "at runtime only").
		if f.ID == "sysctl.drift" || f.ID == "mem.thp.persisted" {
			continue
		}
		selected = append(selected, f)
	}
	p, err := apply.Build("/", fix.ContextFrom(f), selected)
	if err != nil {
		t.Fatal(err)
	}
	// The runtime values only: the files persist them, which this test
	// does not judge.
	p.Files, p.Settings, p.IncludeDirs = nil, nil, nil
	applied := map[string]bool{}
	for _, v := range p.Values {
		for _, fd := range v.Findings {
			applied[fd] = true
		}
	}
	cs, err := apply.Apply(p, apply.Options{StateDir: state})
	if err != nil {
		t.Fatalf("apply: %v", err)
	}
	t.Cleanup(func() {
		if _, err := apply.Rollback(state, cs.ID, apply.Options{}); err != nil {
			t.Errorf("rollback: %v (the next run recovers %s)", err, state)
			return
		}
		os.RemoveAll(state)
	})
	if !applied["mem.dirty"] {
		t.Fatalf("mem.dirty with dirty_ratio 40 did not fail with a runtime fix: applied %v", applied)
	}
	after, _ := liveFindings(t)
	for _, f := range after {
		k := apply.Target{ID: f.ID, Subject: f.Subject}.String()
		if applied[k] && f.Status != check.Pass {
			t.Errorf("%s still %s after applying its fix: %s", k, f.Status, f.Reason)
		}
		delete(applied, k)
	}
	for k := range applied {
		t.Errorf("%s disappeared after applying its fix", k)
	}
	t.Logf("%d values changed in change set %s", len(cs.Values), cs.ID)
}
