package experiment

import (
	"strings"
	"testing"

	"github.com/dbhost/dbhost/internal/fixture"
	"github.com/dbhost/dbhost/internal/host"
)

// planOn builds the arms of an experiment on findings of a recorded host,
// reading current values from the same recording.
func planOn(t *testing.T, name string, ids ...string) (*FindingPlan, error) {
	t.Helper()
	h, err := host.OpenSnapshot(fixture.Path(name))
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	return PlanFindings(h, fixture.Findings(t, name), ids)
}

func armStrings(fp *FindingPlan) []string {
	var out []string
	for _, a := range fp.Arms {
		out = append(out, a.String())
	}
	return out
}

func TestPlanFindingsArms(t *testing.T) {
	cases := []struct {
		host     string
		ids      []string
		arms     []string
		workload string
		note     string
	}{
		{"mem-swapfile", []string{"mem.swappiness"}, []string{"now: vm.swappiness=60", "fixed: vm.swappiness=1"}, "swappiness", ""},
		// THP: the runtime knob is tested; the command line only persists it.
		{"mem-thp-always", []string{"mem.thp.enabled"}, []string{"now: thp.enabled=always", "fixed: thp.enabled=never"}, "thp", "transparent_hugepage=never"},
		{"mem-dirty-high", []string{"mem.dirty"}, []string{"now: vm.dirty_ratio=40 vm.dirty_background_ratio=30", "fixed: vm.dirty_ratio=20 vm.dirty_background_ratio=10"}, "dirty", ""},
		// Several findings: one fixed arm with all their knobs; the
		// first finding chooses the workload.
		{"mem-thp-always", []string{"mem.thp.enabled", "mem.thp.defrag"}, []string{"now: thp.enabled=always thp.defrag=always", "fixed: thp.enabled=never thp.defrag=never"}, "thp", ""},
		{"mem-dirty-high", []string{"mem.dirty", "mem.overcommit"}, []string{"now: vm.dirty_ratio=40 vm.dirty_background_ratio=30 vm.overcommit_memory=0 vm.overcommit_ratio=50", "fixed: vm.dirty_ratio=20 vm.dirty_background_ratio=10 vm.overcommit_memory=2 vm.overcommit_ratio=50"}, "dirty", "hugepages preset's workload"},
		// A block queue attribute: the finding's device only.
		{"mem-swapfile", []string{"storage.read_ahead"}, []string{"now: disk.read_ahead_kb=vda=8192", "fixed: disk.read_ahead_kb=vda=128"}, "readahead", ""},
	}
	for _, c := range cases {
		t.Run(c.host+"/"+strings.Join(c.ids, ","), func(t *testing.T) {
			fp, err := planOn(t, c.host, c.ids...)
			if err != nil {
				t.Fatal(err)
			}
			if got := armStrings(fp); strings.Join(got, "|") != strings.Join(c.arms, "|") {
				t.Errorf("arms %q, want %q", got, c.arms)
			}
			if fp.Workload != c.workload {
				t.Errorf("workload of preset %q, want %q", fp.Workload, c.workload)
			}
			if strings.Join(fp.IDs, ",") != strings.Join(c.ids, ",") {
				t.Errorf("IDs %q", fp.IDs)
			}
			if c.note != "" && !strings.Contains(strings.Join(fp.Notes, "\n"), c.note) {
				t.Errorf("notes %q lack %q", fp.Notes, c.note)
			}
			// The arms are a valid plan as they stand.
			p := &Plan{Arms: fp.Arms, Findings: fp.IDs, FindingWorkload: fp.Workload}
			if err := p.Validate(); err != nil {
				t.Errorf("plan: %v", err)
			}
		})
	}
}

func TestPlanFindingsRefused(t *testing.T) {
	cases := []struct{ host, id, want string }{
		{"mem-swappiness-1", "mem.swappiness", "nothing to fix: pass on host"},
		{"mem-swapfile", "mem.nosuchcheck", "no such check"},
		{"mem-swapfile", "storage.zfs.atime", "does not apply"},
		// Only a kernel command line change (and a command to paste).
		{"time-clocksource-hpet", "time.clocksource", "cannot be applied at runtime: the kernel command line (clocksource=tsc, needs a reboot)"},
		// Database configuration needing a restart.
		{"mem-swapfile", "mem.hugepages.postgres", "which needs a restart"},
		// A /sys file no experiment knob sets.
		{"mem-thp-always", "mem.thp.khugepaged", "khugepaged/max_ptes_none: no experiment knob sets it"},
		{"limits-pg-files-short", "limits.nofile", "cannot be applied at runtime: process limits"},
		{"mem-swapfile", "net.fin_timeout", "no preset workload opens them"},
	}
	for _, c := range cases {
		t.Run(c.host+"/"+c.id, func(t *testing.T) {
			fp, err := planOn(t, c.host, c.id)
			if err == nil {
				t.Fatalf("accepted: %q", armStrings(fp))
			}
			if !strings.Contains(err.Error(), c.want) {
				t.Errorf("error %q, want %q", err, c.want)
			}
		})
	}
}

func TestFindingWorkloadsArePresets(t *testing.T) {
	for _, w := range findingWorkloads {
		if w.preset != "" && presetWorkloads[w.preset] == nil {
			t.Errorf("%s: preset %q has no workload", w.prefix, w.preset)
		}
	}
	for name := range presets {
		if name != "clients" && presetWorkloads[name] == nil {
			t.Errorf("preset %s: no entry in presetWorkloads", name)
		}
	}
}
