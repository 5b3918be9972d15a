package mem

import (
	"bytes"
	"encoding/json"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/dbhost/dbhost/internal/host"
)

// Every recorded scenario shows what the live test asserts: the region
// once, 32 MiB resident of 64 MiB, the right mappers, shares that add up.
func TestFixtures(t *testing.T) {
	for _, sc := range fixtureScenarios {
		name := sc.mode + "-" + sc.variant
		t.Run(name, func(t *testing.T) {
			d, r := openFixture(t, name, Options{})
			checkDemo(t, d, r)
			if r.Scanned != len(d.pids()) || len(r.Unreadable) != 0 {
				t.Errorf("scanned %d, unreadable %v; want the %d demo processes", r.Scanned, r.Unreadable, len(d.pids()))
			}
		})
	}
}

// The parent that never touched its region, whose children exited: every
// PSS share is 0, the region's 32 MiB come from map_files.
func TestFixtureChildrenExited(t *testing.T) {
	d, r := openFixture(t, "anon-exit", Options{})
	rg := d.findRegion(t, r)
	if rg.ResidentSource != "map_files" || rg.Mapped != 0 || rg.Resident != demoSize/2 {
		t.Errorf("resident %d from %q, mapped %d; want 32 MiB from map_files, nothing mapped", rg.Resident, rg.ResidentSource, rg.Mapped)
	}
	p := findProc(t, r, d.procs[0])
	if p.RegionPSS != 0 || p.Own != p.PSS {
		t.Errorf("parent region PSS %d own %d PSS %d", p.RegionPSS, p.Own, p.PSS)
	}
	if r.Host.RegionsResident != rg.Resident || r.Host.Accounted != r.Host.ProcessesOwn+rg.Resident {
		t.Errorf("host view: regions %d accounted %d own %d", r.Host.RegionsResident, r.Host.Accounted, r.Host.ProcessesOwn)
	}
}

// denied answers every stat as an unprivileged user gets it for map_files.
type denied struct{ Stater }

func (denied) StatFile(p string) (host.FileStat, error) {
	return host.FileStat{}, &fs.PathError{Op: "stat", Path: p, Err: syscall.EPERM}
}

// Without root the resident size of a shared anonymous region cannot be
// read: the report says so and shows the mapped pages as a lower bound.
func TestFixtureNotRoot(t *testing.T) {
	for _, name := range []string{"anon-stay", "anon-exit"} {
		t.Run(name, func(t *testing.T) {
			var rec recorded
			b, _ := os.ReadFile(filepath.Join(fixtureDir, name, "stats.json"))
			if err := json.Unmarshal(b, &rec); err != nil {
				t.Fatal(err)
			}
			d, r := openFixture(t, name, Options{Stater: denied{&rec}})
			rg := d.findRegion(t, r)
			if rg.ResidentKnown || rg.ResidentSource != "mapped" || rg.Resident != rg.Mapped || !strings.Contains(rg.Note, "root") {
				t.Errorf("%+v: want an unknown resident size, the mapped pages as a lower bound and a note naming root", rg)
			}
			var text bytes.Buffer
			if err := Text(&text, r, RenderOptions{}); err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(text.String(), ">="+Human(rg.Mapped)) || !strings.Contains(text.String(), "needs root") {
				t.Errorf("text does not show the lower bound and why:\n%s", text.String())
			}
		})
	}
}

func findProc(t *testing.T, r *Report, pid int) Process {
	t.Helper()
	for _, p := range r.Processes {
		if p.PID == pid {
			return p
		}
	}
	t.Fatalf("pid %d not in the report", pid)
	return Process{}
}

// Per-process accounting against the recorded files themselves.
func TestFixtureProcesses(t *testing.T) {
	d, r := openFixture(t, "anon-stay", Options{})
	for _, pid := range d.pids() {
		p := findProc(t, r, pid)
		dir := filepath.Join(fixtureDir, "anon-stay", "proc", strconv.Itoa(pid))
		sm, _ := os.ReadFile(filepath.Join(dir, "smaps"))
		tot, maps := ParseSmaps(sm, func(h *Header) bool { return h.Shared() && bytes.HasPrefix(h.Path, []byte("/dev/zero")) })
		if p.Source != "smaps" && pid != d.procs[0] {
			t.Errorf("pid %d: totals from %s; a child holds region pages, its smaps must be read", pid, p.Source)
		}
		if p.Source == "smaps_rollup" {
			// The parent has no region page: its rollup is enough (and
			// more precise: smaps rounds each mapping's PSS down to a KiB).
			rb, _ := os.ReadFile(filepath.Join(dir, "smaps_rollup"))
			tot, _ = ParseSmaps(rb, nil)
		}
		if p.RSS != tot.Rss || p.PSS != tot.Pss || p.USS != tot.PrivateClean+tot.PrivateDirty {
			t.Errorf("pid %d: rss/pss/uss %d/%d/%d, smaps says %d/%d/%d", pid, p.RSS, p.PSS, p.USS, tot.Rss, tot.Pss, tot.PrivateClean+tot.PrivateDirty)
		}
		if len(maps) != 1 || p.RegionPSS != maps[0].Pss || p.Own != p.PSS-maps[0].Pss {
			t.Errorf("pid %d: region PSS %d own %d, smaps region mappings %+v", pid, p.RegionPSS, p.Own, maps)
		}
		if p.Comm != "shmdemo" || p.User != "root" || p.PPID == 0 {
			t.Errorf("pid %d: comm %q user %q ppid %d", pid, p.Comm, p.User, p.PPID)
		}
	}
	// The second child holds 32 MiB of the region, 8 MiB shared with the
	// first: its RSS counts all of it, its USS the 16 MiB only it maps.
	c2 := findProc(t, r, d.procs[2])
	if c2.Shmem < demoSize/2 || !near(c2.RegionUSS, 16<<20, 4*pageSize) {
		t.Errorf("child 2: shmem %d region USS %d", c2.Shmem, c2.RegionUSS)
	}
}

// --pid shows the chosen processes and the regions they map, whole.
func TestFixtureSelectPID(t *testing.T) {
	d, _ := openFixture(t, "sysv-stay", Options{})
	_, r := openFixture(t, "sysv-stay", Options{PIDs: []int{d.procs[1]}})
	if len(r.Processes) != 1 || r.Processes[0].PID != d.procs[1] || !r.Filtered {
		t.Fatalf("processes %+v, want only pid %d", r.Processes, d.procs[1])
	}
	rg := d.findRegion(t, r)
	if len(rg.PIDs) != 3 {
		t.Errorf("region mapped by %v: the selection must not shrink a region's mappers", rg.PIDs)
	}
	_, r = openFixture(t, "sysv-stay", Options{PIDs: []int{1}})
	if len(r.Processes) != 0 || len(r.Regions) != 0 {
		t.Errorf("pid 1 is not in the fixture: %d processes, %d regions", len(r.Processes), len(r.Regions))
	}
}

// numa_maps with --numa: every page of the processes sits on the one node.
func TestFixtureNUMA(t *testing.T) {
	d, r := openFixture(t, "anon-stay", Options{NUMA: true})
	if len(r.NUMA.Nodes) == 0 || r.NUMA.Nodes[0].MemTotal == 0 || !strings.Contains(r.NUMA.Read, "--numa") {
		t.Fatalf("nodes %+v read %q", r.NUMA.Nodes, r.NUMA.Read)
	}
	c2 := findProc(t, r, d.procs[2])
	if c2.NUMA == nil || c2.NUMA.Err != "" {
		t.Fatalf("child 2 numa: %+v", c2.NUMA)
	}
	var sum uint64
	for _, b := range c2.NUMA.Nodes {
		sum += b
	}
	if sum < demoSize/2 || sum > c2.RSS+demoSize {
		t.Errorf("numa_maps puts %d bytes of child 2 on nodes, its RSS is %d", sum, c2.RSS)
	}
	if c2.NUMA.Imbalanced {
		t.Error("a one-node host cannot be imbalanced")
	}
	_, r = openFixture(t, "anon-stay", Options{})
	if strings.Contains(r.NUMA.Read, "--numa)") || findProc(t, r, d.procs[2]).NUMA != nil {
		t.Errorf("one node and no --numa: numa_maps must not be read (%q)", r.NUMA.Read)
	}
}

func TestImbalanced(t *testing.T) {
	const g = 1 << 30
	for _, tc := range []struct {
		policy string
		nodes  map[int]uint64
		want   bool
	}{
		{"default", map[int]uint64{0: 9 * g, 1: 1 * g / 2}, true},
		{"interleave:0-1", map[int]uint64{0: 9 * g, 1: 1 * g}, true},
		{"default", map[int]uint64{0: 5 * g, 1: 5 * g}, false},
		{"default", map[int]uint64{0: g / 2}, false}, // too small to matter
		{"bind:0", map[int]uint64{0: 10 * g}, false}, // placed on purpose
		{"default", map[int]uint64{0: 8 * g, 1: 2 * g}, false},
	} {
		if got := Imbalanced(tc.policy, tc.nodes); got != tc.want {
			t.Errorf("Imbalanced(%s, %v) = %v, want %v", tc.policy, tc.nodes, got, tc.want)
		}
	}
}

// A process that cannot be read is counted with its reason, once.
func TestUnreadableCounted(t *testing.T) {
	src := filepath.Join(fixtureDir, "anon-stay")
	dir := t.TempDir()
	if err := os.CopyFS(dir, os.DirFS(src)); err != nil {
		t.Fatal(err)
	}
	var m demoMeta
	b, _ := os.ReadFile(filepath.Join(dir, "demo.json"))
	json.Unmarshal(b, &m)
	// A maps that is a directory cannot be read, as a file another user
	// owns cannot (root reads everything, so the test makes it unreadable
	// this way).
	for _, pid := range m.Procs[:2] {
		p := filepath.Join(dir, "proc", strconv.Itoa(pid), "maps")
		os.Remove(p)
		os.Remove(filepath.Join(dir, "proc", strconv.Itoa(pid), "smaps"))
		os.Mkdir(p, 0o755)
		os.Mkdir(filepath.Join(dir, "proc", strconv.Itoa(pid), "smaps"), 0o755)
	}
	h, err := host.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	var rec recorded
	b, _ = os.ReadFile(filepath.Join(dir, "stats.json"))
	json.Unmarshal(b, &rec)
	r, err := Scan(t.Context(), h, Options{Stater: &rec})
	if err != nil {
		t.Fatal(err)
	}
	if len(r.Unreadable) != 1 || r.Unreadable[0].Count != 2 || len(r.Processes) != 1 {
		t.Errorf("unreadable %+v, processes %d: want 2 counted on one line, 1 read", r.Unreadable, len(r.Processes))
	}
	var text bytes.Buffer
	Text(&text, r, RenderOptions{})
	if strings.Count(text.String(), "could not be read") != 1 {
		t.Errorf("want one line for the unreadable processes:\n%s", text.String())
	}
}

// A process that exits between listing and reading is skipped silently.
func TestVanishedSkipped(t *testing.T) {
	src := filepath.Join(fixtureDir, "anon-stay")
	dir := t.TempDir()
	if err := os.CopyFS(dir, os.DirFS(src)); err != nil {
		t.Fatal(err)
	}
	var m demoMeta
	b, _ := os.ReadFile(filepath.Join(dir, "demo.json"))
	json.Unmarshal(b, &m)
	// Status read, the rest gone: what a process exiting mid-scan leaves.
	for _, f := range []string{"maps", "smaps", "smaps_rollup"} {
		os.Remove(filepath.Join(dir, "proc", strconv.Itoa(m.Procs[1]), f))
	}
	h, _ := host.Open(dir)
	r, err := Scan(t.Context(), h, Options{Stater: &recorded{}})
	if err != nil {
		t.Fatal(err)
	}
	if len(r.Unreadable) != 0 || len(r.Processes) != 2 {
		t.Errorf("unreadable %+v, %d processes: a vanished process is neither", r.Unreadable, len(r.Processes))
	}
}

func TestRenderJSONShape(t *testing.T) {
	_, r := openFixture(t, "posix-stay", Options{})
	var buf bytes.Buffer
	if err := JSON(&buf, r, RenderOptions{Sort: "rss", Top: 2}); err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Processes []map[string]any `json:"processes"`
		Regions   []map[string]any `json:"shared_regions"`
	}
	if err := json.Unmarshal(buf.Bytes(), &doc); err != nil {
		t.Fatal(err)
	}
	if len(doc.Processes) != 2 || len(doc.Regions) == 0 {
		t.Fatalf("processes %d regions %d", len(doc.Processes), len(doc.Regions))
	}
	for _, k := range []string{"pid", "comm", "rss_bytes", "pss_bytes", "uss_bytes", "swap_bytes"} {
		if _, ok := doc.Processes[0][k]; !ok {
			t.Errorf("process lacks %q", k)
		}
	}
	for _, k := range []string{"kind", "size_bytes", "resident_bytes", "pids"} {
		if _, ok := doc.Regions[0][k]; !ok {
			t.Errorf("region lacks %q", k)
		}
	}
	if doc.Processes[0]["rss_bytes"].(float64) < doc.Processes[1]["rss_bytes"].(float64) {
		t.Error("not sorted by RSS")
	}
}

func TestHuman(t *testing.T) {
	for in, want := range map[uint64]string{0: "0 B", 1023: "1023 B", 1024: "1.0 KiB", 1536 << 20: "1.5 GiB", 8 << 30: "8.0 GiB"} {
		if got := Human(in); got != want {
			t.Errorf("Human(%d) = %q, want %q", in, got, want)
		}
	}
}

// A System V segment's inode number is its shmid, which can equal the inode
// of a memfd or shared anonymous region on the same internal mount: they
// are different objects.
func TestSysVInodeCollision(t *testing.T) {
	s := &scanner{mounts: parseMountinfo(nil)}
	mk := func(pid int, path string) *proc {
		return &proc{Process: Process{PID: pid}, maps: []Mapping{{Start: 0x1000, End: 0x2000, Perms: [4]byte{'r', 'w', '-', 's'},
			Major: 0, Minor: 1, Inode: 34, Path: path, Counters: Counters{Rss: 4096, Pss: 4096}}}}
	}
	regions := s.collectRegions([]*proc{mk(10, "/memfd:vmem (deleted)"), mk(20, "/SYSV00985fd7 (deleted)"), mk(30, "/SYSV00985fd7 (deleted)")})
	if len(regions) != 2 || regions[0].Kind != KindMemfd || regions[1].Kind != KindSysV || len(regions[1].PIDs) != 2 {
		for _, rg := range regions {
			t.Logf("%s %s %v", rg.Kind, rg.Name, rg.PIDs)
		}
		t.Error("want the memfd and the System V segment apart")
	}
}

// Shares from present pages: a page mapped by n mappings counts 1/n to
// each; pages only one process maps are its USS.
func TestShareRegion(t *testing.T) {
	rg := &Region{Mappers: []Mapper{{PID: 1}, {PID: 2}, {PID: 3}}, runs: []mapperRuns{
		{pid: 1, runs: nil},                         // the parent: mapped, never touched
		{pid: 2, runs: [][2]uint64{{0, 4}}},         // a quarter of 16 pages
		{pid: 3, runs: [][2]uint64{{0, 2}, {2, 8}}}, // a half, in two runs
		{pid: 3, runs: [][2]uint64{{6, 7}}},         // page 6 mapped a second time
	}}
	shareRegion(rg)
	want := map[int][3]uint64{ // rss, pss, uss in pages*4096
		1: {0, 0, 0},
		2: {4 * 4096, 2 * 4096, 0},
		3: {9 * 4096, 2*4096 + 3*4096 + 4096, 3 * 4096},
	}
	for _, mp := range rg.Mappers {
		w := want[mp.PID]
		if mp.RSS != w[0] || mp.PSS != w[1] || mp.USS != w[2] {
			t.Errorf("pid %d: rss %d pss %d uss %d, want %v", mp.PID, mp.RSS, mp.PSS, mp.USS, w)
		}
	}
}

// A two-node host, derived from the anon-stay recording by editing only the
// node files and the second child's numa_maps (this VM has one node): its
// region pages are scaled to 1.25 GiB, nearly all on node 0, under
// the default policy — imbalanced; the parent holds almost nothing there.
func TestFixtureNUMAImbalanced(t *testing.T) {
	dir := t.TempDir()
	if err := os.CopyFS(dir, os.DirFS(filepath.Join(fixtureDir, "anon-stay"))); err != nil {
		t.Fatal(err)
	}
	var m demoMeta
	b, _ := os.ReadFile(filepath.Join(dir, "demo.json"))
	json.Unmarshal(b, &m)
	node0 := filepath.Join(dir, "sys/devices/system/node/node0/meminfo")
	n0, err := os.ReadFile(node0)
	if err != nil {
		t.Fatal(err)
	}
	os.MkdirAll(filepath.Join(dir, "sys/devices/system/node/node1"), 0o755)
	os.WriteFile(filepath.Join(dir, "sys/devices/system/node/node1/meminfo"), bytes.ReplaceAll(n0, []byte("Node 0 "), []byte("Node 1 ")), 0o644)
	nm := filepath.Join(dir, "proc", strconv.Itoa(m.Procs[2]), "numa_maps")
	b, _ = os.ReadFile(nm)
	b = bytes.Replace(b, []byte("N0=8192 "), []byte("N0=327680 N1=1024 "), 1) // 1.25 GiB + 4 MiB
	os.WriteFile(nm, b, 0o644)
	var rec recorded
	b, _ = os.ReadFile(filepath.Join(dir, "stats.json"))
	json.Unmarshal(b, &rec)
	h, _ := host.Open(dir)
	r, err := Scan(t.Context(), h, Options{Stater: &rec, NUMA: true})
	if err != nil {
		t.Fatal(err)
	}
	if len(r.NUMA.Nodes) != 2 {
		t.Fatalf("nodes %+v", r.NUMA.Nodes)
	}
	c2, parent := findProc(t, r, m.Procs[2]), findProc(t, r, m.Procs[0])
	if c2.NUMA == nil || !c2.NUMA.Imbalanced || c2.NUMA.Policy != "default" {
		t.Errorf("child 2: %+v, want imbalanced under the default policy", c2.NUMA)
	}
	if parent.NUMA == nil || parent.NUMA.Imbalanced {
		t.Errorf("parent: %+v, too small to be imbalanced", parent.NUMA)
	}
	var text bytes.Buffer
	Text(&text, r, RenderOptions{})
	if !strings.Contains(text.String(), "IMBALANCED") || !strings.Contains(text.String(), "NUMA: 2 nodes") {
		t.Errorf("text:\n%s", text.String())
	}
	// Without --numa on a multi-node host only instances' main processes
	// are read: the demo has none.
	r, _ = Scan(t.Context(), h, Options{Stater: &rec})
	if findProc(t, r, m.Procs[2]).NUMA != nil || !strings.Contains(r.NUMA.Read, "instance main processes") {
		t.Errorf("without --numa: %q", r.NUMA.Read)
	}
}
