package experiment

import (
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/dbhost/dbhost/internal/host"
)

// facts reads a recorded host (testdata/record.sh) and adds a PostgreSQL
// target.
func facts(t *testing.T, name string, major int, sharedBuffers uint64) Facts {
	t.Helper()
	h, err := host.Open("testdata/hosts/" + name)
	if err != nil {
		t.Fatal(err)
	}
	f, err := HostFacts(h)
	if err != nil {
		t.Fatal(err)
	}
	f.Engine, f.Major, f.SharedBuffers = "postgres", major, sharedBuffers
	return f
}

// The recorded values, read independently of HostFacts.
func recorded(t *testing.T, name, file, field string) uint64 {
	t.Helper()
	b, err := os.ReadFile("testdata/hosts/" + name + file)
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if f := strings.Fields(line); len(f) >= 2 && f[0] == field+":" {
			n, _ := strconv.ParseUint(f[1], 10, 64)
			return n * 1024
		}
	}
	t.Fatalf("%s: no %s", file, field)
	return 0
}

func TestHostFacts(t *testing.T) {
	f := facts(t, "live", 15, 0)
	if f.MemTotal != recorded(t, "live", "/proc/meminfo", "MemTotal") || f.MemAvailable != recorded(t, "live", "/proc/meminfo", "MemAvailable") {
		t.Errorf("memory %d/%d", f.MemTotal, f.MemAvailable)
	}
	// The recorded host has two CPUs online.
	if online, _ := os.ReadFile("testdata/hosts/live/sys/devices/system/cpu/online"); strings.TrimSpace(string(online)) != "0-1" || f.CPUs != 2 {
		t.Errorf("CPUs %d from %q", f.CPUs, online)
	}
	if !slices.Equal(f.HugePageSizes, []uint64{2 << 20, 1 << 30}) {
		t.Errorf("huge page sizes %v", f.HugePageSizes)
	}
	if f.Kernel == "" || f.Hostname == "" {
		t.Errorf("kernel %q hostname %q", f.Kernel, f.Hostname)
	}
	if g := facts(t, "no1g", 15, 0); !slices.Equal(g.HugePageSizes, []uint64{2 << 20}) {
		t.Errorf("no1g: sizes %v", g.HugePageSizes)
	}
}

func armNames(p *Plan) []string {
	var out []string
	for _, a := range p.Arms {
		out = append(out, a.Name)
	}
	return out
}

func setting(a Arm, name string) string {
	for _, s := range a.Set {
		if s.Name == name {
			return s.Value
		}
	}
	return ""
}

// The hugepages preset on this host: 2 MB pages for the shared memory plus
// 10%, and 1 GB pages only where the kernel offers them, PostgreSQL is 14+
// and memory allows; the notes say which and why.
func TestHugepagesPreset(t *testing.T) {
	const sb = 4 << 30
	live := facts(t, "live", 15, sb)
	live.SharedMemory = 4493 << 20 // what PostgreSQL 15 reports for 4 GB shared_buffers
	p := &Plan{Preset: "hugepages"}
	notes, err := applyPreset(p, live)
	if err != nil {
		t.Fatal(err)
	}
	if live.MemAvailable/2 > 5<<30+sb {
		if !slices.Equal(armNames(p), []string{"4k", "2m", "1g"}) {
			t.Fatalf("arms %v with 1 GB pages offered and %d MB available; notes %v", armNames(p), live.MemAvailable>>20, notes)
		}
		// 4493 MB x 1.1 = 4942.3 MB: 5 pages of 1 GB.
		if setting(p.Arms[2], "hugepages.1G") != "5" || setting(p.Arms[2], "pg.huge_page_size") != "1GB" || setting(p.Arms[2], "pg.huge_pages") != "on" {
			t.Errorf("1g arm %+v", p.Arms[2])
		}
	}
	// 4493 MB x 1.1 = 4942.3 MB: 2472 pages of 2 MB.
	if setting(p.Arms[1], "hugepages.2M") != "2472" || setting(p.Arms[1], "pg.huge_pages") != "on" || setting(p.Arms[0], "pg.huge_pages") != "off" {
		t.Errorf("arms %+v", p.Arms)
	}
	w := p.Workload
	if w.Kind != "pgbench" || !w.SelectOnly || w.Clients[0] != max(4, 2*live.CPUs) || p.Target.DataFraction != 0.75 {
		t.Errorf("workload %+v fraction %v", w, p.Target.DataFraction)
	}

	// No 1 GB pages in the kernel: two arms, and the note says why.
	p = &Plan{Preset: "hugepages"}
	notes, err = applyPreset(p, facts(t, "no1g", 15, sb))
	if err != nil || !slices.Equal(armNames(p), []string{"4k", "2m"}) || !strings.Contains(strings.Join(notes, "\n"), "not offered by this kernel") {
		t.Errorf("no1g: arms %v notes %v err %v", armNames(p), notes, err)
	}
	// PostgreSQL 13 cannot choose the page size.
	p = &Plan{Preset: "hugepages"}
	notes, _ = applyPreset(p, facts(t, "live", 13, sb))
	if len(p.Arms) != 2 || !strings.Contains(strings.Join(notes, "\n"), "PostgreSQL 13") {
		t.Errorf("PG 13: arms %v notes %v", armNames(p), notes)
	}
	// Unknown shared memory size: estimated from shared_buffers.
	p = &Plan{Preset: "hugepages"}
	small := facts(t, "no1g", 15, 128<<20)
	if _, err := applyPreset(p, small); err != nil {
		t.Fatal(err)
	}
	// 128 + 4 + 48 = 180 MB, x 1.1 = 198 MB: 99 pages.
	if got := setting(p.Arms[1], "hugepages.2M"); got != "99" {
		t.Errorf("128 MB shared_buffers: %s pages of 2 MB, want 99", got)
	}
	// MySQL targets cannot take it.
	my := small
	my.Engine = "mysql"
	if _, err := applyPreset(&Plan{Preset: "hugepages"}, my); err == nil || !strings.Contains(err.Error(), "needs PostgreSQL") {
		t.Errorf("MySQL: %v", err)
	}
}

func TestClientsPreset(t *testing.T) {
	f := facts(t, "live", 15, 1<<30)
	p := &Plan{Preset: "clients"}
	if _, err := applyPreset(p, f); err != nil {
		t.Fatal(err)
	}
	var want IntList
	for c := 1; c <= min(64, max(2, 4*f.CPUs)); c *= 2 {
		want = append(want, c)
	}
	if !slices.Equal(p.Workload.Clients, want) || !slices.Equal(armNames(p), []string{"4k", "2m"}) {
		t.Errorf("sweep %v arms %v, want %v over 4k and 2m", p.Workload.Clients, armNames(p), want)
	}
	// With the user's arms, only the sweep comes from the preset, and
	// clients the user gave win.
	own := &Plan{Preset: "clients", Arms: []Arm{{Name: "a"}, {Name: "b"}}, Workload: Workload{Clients: IntList{3, 6}}}
	if _, err := applyPreset(own, f); err != nil || !slices.Equal(armNames(own), []string{"a", "b"}) || !slices.Equal(own.Workload.Clients, IntList{3, 6}) {
		t.Errorf("own arms: %v %v %v", armNames(own), own.Workload.Clients, err)
	}
}

func TestKernelPresets(t *testing.T) {
	f := facts(t, "live", 15, 1<<30)
	for name, want := range map[string][]string{
		"thp":        {"never", "madvise", "always"},
		"swappiness": {"60", "1"},
		"dirty":      {"default", "small"},
		"scheduler":  {"mq-deadline", "none"},
		"readahead":  {"128", "8192"},
	} {
		p := &Plan{Preset: name}
		if _, err := applyPreset(p, f); err != nil {
			t.Errorf("%s: %v", name, err)
			continue
		}
		if !slices.Equal(armNames(p), want) {
			t.Errorf("%s: arms %v, want %v", name, armNames(p), want)
		}
		q := *p
		q.Preset = "" // the arms as if the user had written them
		if err := q.Validate(); err != nil {
			t.Errorf("%s: %v", name, err)
		}
	}
	// Presets work for MySQL too; the default workload then is sysbench.
	my := f
	my.Engine = "mysql"
	p := &Plan{Preset: "swappiness", Target: Target{MySQL: "x"}}
	if _, err := applyPreset(p, my); err != nil {
		t.Fatal(err)
	}
	p.withDefaults(my)
	if p.Workload.Kind != "sysbench" {
		t.Errorf("MySQL swappiness preset workload %q", p.Workload.Kind)
	}
}

// The dirty preset keeps the form the host limits dirty memory in: the
// kernel clears one form when the other is written, and cannot write a
// byte limit of 0 back.
func TestDirtyPreset(t *testing.T) {
	f := facts(t, "live", 15, 1<<30)
	if f.DirtyBytes != 0 || f.DirtyBackgroundBytes != 0 {
		t.Skip("the recorded host limits dirty memory in bytes")
	}
	p := &Plan{Preset: "dirty"}
	notes, err := applyPreset(p, f)
	if err != nil {
		t.Fatal(err)
	}
	if setting(p.Arms[1], "vm.dirty_background_ratio") != "1" || setting(p.Arms[1], "vm.dirty_ratio") != "5" || setting(p.Arms[0], "vm.dirty_ratio") != "20" {
		t.Errorf("ratio arms %+v", p.Arms)
	}
	if want := Size(f.MemTotal / 100 / (1 << 20) * (1 << 20)).String(); !strings.Contains(notes[0], want) {
		t.Errorf("note %q does not give 1%% of memory (%s)", notes[0], want)
	}
	f.DirtyBytes, f.DirtyBackgroundBytes = 1<<30, 256<<20
	p = &Plan{Preset: "dirty"}
	if _, err := applyPreset(p, f); err != nil {
		t.Fatal(err)
	}
	if setting(p.Arms[0], "vm.dirty_bytes") != "1073741824" || setting(p.Arms[0], "vm.dirty_background_bytes") != "268435456" ||
		setting(p.Arms[1], "vm.dirty_bytes") != "268435456" || p.Arms[0].Name != "host" {
		t.Errorf("byte arms %+v", p.Arms)
	}
	f.DirtyBackgroundBytes = 0
	if _, err := applyPreset(&Plan{Preset: "dirty"}, f); err == nil {
		t.Error("mixed ratio and byte limits accepted")
	}
}
