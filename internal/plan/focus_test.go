package plan_test

import (
	"strconv"
	"strings"
	"testing"

	"github.com/dbhost/dbhost/internal/check"
	"github.com/dbhost/dbhost/internal/facts"
	"github.com/dbhost/dbhost/internal/fix"
	"github.com/dbhost/dbhost/internal/fixture"
	"github.com/dbhost/dbhost/internal/plan"
)

// pgPlan is baseline's plan of issue 20: shared_buffers 5920MB with
// huge_pages on and a pool of pages.
func pgPlan(pages string) []fix.Item {
	return []fix.Item{
		{ID: "pg.shared_buffers", Subject: "postgres:5432", Fix: &fix.Fix{Config: []fix.ConfigChange{{Instance: "postgres:5432", Engine: "postgres", Key: "shared_buffers", Value: "5920MB", Restart: true}}}},
		{ID: "mem.hugepages.postgres", Subject: "postgres:5432", Fix: &fix.Fix{Sysctl: []fix.KV{{Key: "vm.nr_hugepages", Value: pages}},
			Config: []fix.ConfigChange{{Instance: "postgres:5432", Engine: "postgres", Key: "huge_pages", Value: "on", Restart: true}}}},
	}
}

func hugeVerdict(t *testing.T, g *facts.Facts) check.Finding {
	t.Helper()
	for _, fd := range check.Run(g, check.Selector{Only: []string{"mem.hugepages.postgres"}}) {
		if fd.Subject == "postgres:5432" {
			return fd
		}
	}
	t.Fatal("no mem.hugepages.postgres finding for postgres:5432")
	return check.Finding{}
}

// TestOldPoolForPlannedBuffers is issue 20's first breakage: the pool sized
// for today's 128 MB of shared buffers (73 pages) under the planned 5920MB
// with huge_pages=on. The model must leave the server unable to start, so
// the check fails on it; with a pool for the planned size it passes.
func TestOldPoolForPlannedBuffers(t *testing.T) {
	f := fixture.Facts(t, "baseline")
	g, notes := plan.Model(f, pgPlan("73"))
	fd := hugeVerdict(t, g)
	if fd.Status != check.Fail || fd.Severity != check.Critical {
		t.Errorf("old pool: mem.hugepages.postgres is %s/%s on the model, want a critical failure: %s", fd.Status, fd.Severity, fd.Reason)
	}
	if !strings.Contains(strings.Join(notes, "\n"), "would not start") {
		t.Errorf("old pool: no note says the server would not start: %q", notes)
	}
	in := instance(t, g, "postgres:5432")
	pages := in.SettingValue("shared_memory_size_in_huge_pages")
	if pages == "" || pages == "72" {
		t.Fatalf("shared_memory_size_in_huge_pages on the model is %q, want the planned size's", pages)
	}

	g, _ = plan.Model(f, pgPlan(pages))
	if fd := hugeVerdict(t, g); fd.Status != check.Pass {
		t.Errorf("pool of %s pages for the planned size: mem.hugepages.postgres is %s on the model: %s", pages, fd.Status, fd.Reason)
	}
	if !instance(t, g, "postgres:5432").Mem.UsesHugetlb() {
		t.Error("with the pool for the planned size the restarted server does not map huge pages")
	}
}

// TestPlannedSharedMemory checks the size the restarted server reports: the
// planned buffers plus today's overhead (and per-buffer bookkeeping), which
// the pages cover.
func TestPlannedSharedMemory(t *testing.T) {
	f := fixture.Facts(t, "baseline")
	g, _ := plan.Model(f, pgPlan("4000"))
	in := instance(t, g, "postgres:5432")
	mb, err := strconv.Atoi(in.SettingValue("shared_memory_size"))
	if err != nil || mb < 5920+15 || mb > 5920+15+200 { // today's 15 MB of overhead, and bookkeeping per buffer
		t.Errorf("shared_memory_size %q MB on the model, want 5935 to 6135", in.SettingValue("shared_memory_size"))
	}
	t.Logf("planned shared_memory_size %d MB, %s huge pages", mb, in.SettingValue("shared_memory_size_in_huge_pages"))
	seg, ok := in.Mem.Largest(facts.SegHugetlb)
	if !ok || seg.Size < 5935<<20 {
		t.Errorf("main segment %+v: want a hugetlb mapping of the planned size", seg)
	}
	p, _ := g.Memory.Pool(0)
	if p.Total != 4000 || p.Reserved == 0 {
		t.Errorf("pool on the model %+v: want 4000 pages with the server's reserved", p)
	}
	if o, _ := f.Memory.Pool(0); o.Total != 0 {
		t.Errorf("the observed pool changed: %+v", o)
	}
}

// TestLaterSysctlFileWins: a file that sorts after dbhost's sysctl.d file
// and sets the same parameter wins at boot, so the model's next-boot value
// is that file's (a breakage the plan must see), while the running value is
// the planned one.
func TestLaterSysctlFileWins(t *testing.T) {
	f := fixture.Facts(t, "baseline").Clone()
	f.Persist.SysctlFiles = append(f.Persist.SysctlFiles[:len(f.Persist.SysctlFiles)-1], "/etc/sysctl.d/99-zz.conf", "/etc/sysctl.conf")
	f.Persist.Sysctl = append(f.Persist.Sysctl, facts.SysctlEntry{Persisted: facts.Persisted{Key: "vm.swappiness", Value: "60", File: "/etc/sysctl.d/99-zz.conf", Line: 1}})
	items := []fix.Item{{ID: "mem.swappiness", Fix: &fix.Fix{Sysctl: []fix.KV{{Key: "vm.swappiness", Value: "1"}}}}}
	g, _ := plan.Model(f, items)
	if r := g.SysctlReading("vm.swappiness"); r.Value != "1" {
		t.Errorf("running vm.swappiness on the model is %q, want 1", r.Value)
	}
	p, ok := g.Persist.PersistedSysctl("vm.swappiness")
	if !ok || p.Value != "60" || p.File != "/etc/sysctl.d/99-zz.conf" {
		t.Errorf("next boot's vm.swappiness on the model is %+v, want 60 from /etc/sysctl.d/99-zz.conf", p)
	}
	i := indexOf(g.Persist.SysctlFiles, "/etc/sysctl.d/60-dbhost.conf")
	if i < 0 || i > indexOf(g.Persist.SysctlFiles, "/etc/sysctl.d/99-zz.conf") {
		t.Errorf("dbhost's file is not read before 99-zz.conf: %v", g.Persist.SysctlFiles)
	}
	fd, _ := judged(g, "sysctl.drift", "host")
	if fd.Status != check.Fail || !strings.Contains(fd.Reason, "vm.swappiness") {
		t.Errorf("sysctl.drift on the model is %s (%s), want the overridden value named", fd.Status, fd.Reason)
	}

	// Without the later file, dbhost's value is the next boot's.
	g, _ = plan.Model(fixture.Facts(t, "baseline"), items)
	if p, ok := g.Persist.PersistedSysctl("vm.swappiness"); !ok || p.Value != "1" || p.File != "/etc/sysctl.d/60-dbhost.conf" {
		t.Errorf("next boot's vm.swappiness without an override is %+v, want 1 from dbhost's file", p)
	}
}

// TestOvercommitRecomputed: mode 2 with a ratio changes CommitLimit as the
// kernel computes it, less the planned huge page pool.
func TestOvercommitRecomputed(t *testing.T) {
	f := fixture.Facts(t, "baseline")
	items := []fix.Item{{ID: "mem.overcommit", Fix: &fix.Fix{Sysctl: []fix.KV{{Key: "vm.overcommit_memory", Value: "2"}, {Key: "vm.overcommit_ratio", Value: "80"}, {Key: "vm.nr_hugepages", Value: "1000"}}}}}
	g, _ := plan.Model(f, items)
	mi := g.Memory.Meminfo
	want := (*mi.MemTotal - 1000*2048) / 4 * 80 / 100 * 4
	if *mi.CommitLimit != want || *mi.Hugetlb != 1000*2048 {
		t.Errorf("CommitLimit %d kB, Hugetlb %d kB on the model, want %d and %d", *mi.CommitLimit, *mi.Hugetlb, want, 1000*2048)
	}
	if *f.Memory.Meminfo.CommitLimit == want {
		t.Error("the observed CommitLimit changed")
	}
}

func instance(t *testing.T, g *facts.Facts, name string) *facts.Instance {
	t.Helper()
	for _, in := range g.Instances {
		if in.Name() == name {
			return in
		}
	}
	t.Fatalf("no instance %s", name)
	return nil
}

func indexOf(s []string, v string) int {
	for i, x := range s {
		if x == v {
			return i
		}
	}
	return -1
}
