package cli

import (
	"context"
	"testing"

	"github.com/dbhost/dbhost/internal/check"
	"github.com/dbhost/dbhost/internal/engine"
	"github.com/dbhost/dbhost/internal/facts"
	"github.com/dbhost/dbhost/internal/fix"
	"github.com/dbhost/dbhost/internal/host"
	"github.com/dbhost/dbhost/internal/testdb"
)

func liveFindings(t *testing.T) []check.Finding {
	t.Helper()
	h, err := host.Open("/")
	if err != nil {
		t.Fatal(err)
	}
	f := facts.Gather(context.Background(), h, gatherOptions(engine.Options{}))
	return check.Run(f, check.Selector{})
}

// TestRuntimeFixesMakeFindingsPass applies, through a journal, the runtime
// part of every failing finding's fix on this host (sysctls, /sys knobs,
// block queue attributes), audits again and expects each of those findings
// to pass. Everything is restored afterwards, also on Ctrl-C.
func TestRuntimeFixesMakeFindingsPass(t *testing.T) {
	j := testdb.Journal(t)
	// At least one finding with a runtime fix fails, whatever this host's
	// settings: a dirty_ratio above 20 % of RAM (restored afterwards).
	if err := j.Set("/proc/sys/vm/dirty_ratio", "40"); err != nil {
		t.Fatal(err)
	}

	before := liveFindings(t)
	applied := map[string]bool{}
	for _, f := range before {
		if f.Status != check.Fail || f.Fix == nil || len(fix.Knobs(f.Fix)) == 0 {
			continue
		}
		// Only fixes made entirely of runtime knobs can pass without a
		// restart or reboot.
		if len(f.Fix.Limits)+len(f.Fix.Dropins)+len(f.Fix.Config)+len(f.Fix.Mount) > 0 || f.Fix.Manual != "" {
			continue
		}
		// sysctl.drift's fix is the file that persists a value: setting it
		// at run time changes nothing it judges (on a host where another
		// finding sets the drifting key, its fix persists that value).
		if f.ID == "sysctl.drift" {
			continue
		}
		if err := fix.ApplyKnobs(j, f.Fix); err != nil {
			t.Errorf("%s %s: apply: %v", f.ID, f.Subject, err)
			continue
		}
		applied[f.ID+" "+f.Subject] = true
	}
	if !applied["mem.dirty host"] {
		t.Fatalf("mem.dirty with dirty_ratio 40 did not fail with a runtime fix: applied %v", applied)
	}
	after := liveFindings(t)
	for _, f := range after {
		k := f.ID + " " + f.Subject
		if applied[k] && f.Status != check.Pass {
			t.Errorf("%s still %s after applying its fix: %s", k, f.Status, f.Reason)
		}
		delete(applied, k)
	}
	for k := range applied {
		t.Errorf("%s disappeared after applying its fix", k)
	}
	t.Logf("%d journaled changes", len(j.Changes()))
}
