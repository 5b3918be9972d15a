package facts

import (
	"reflect"
	"strings"
	"testing"

	"github.com/prometheus/procfs"

	"github.com/dbhost/dbhost/internal/host"
)

// numaMapsSample is real numa_maps text of a PostgreSQL postmaster (main
// shared memory, a library, the heap) with a hugetlb line as the kernel
// prints them.
const numaMapsSample = `55d1c2a00000 default file=/usr/lib/postgresql/15/bin/postgres mapped=312 mapmax=6 active=0 N0=312 kernelpagesize_kB=4
55d1c3b2a000 default heap anon=182 dirty=182 active=0 N0=182 kernelpagesize_kB=4
7fe39fda6000 default file=/dev/zero\040(deleted) dirty=2861 mapmax=6 active=0 N0=2861 kernelpagesize_kB=4
7f0000000000 interleave:0-1 file=/anon_hugepage\040(deleted) huge dirty=3 N0=2 N1=1 kernelpagesize_kB=2048
7ffd1a2b3000 default stack anon=9 dirty=9 N0=9 kernelpagesize_kB=4
`

func TestParseNUMAMaps(t *testing.T) {
	ms, err := ParseNUMAMaps(numaMapsSample)
	if err != nil {
		t.Fatal(err)
	}
	if len(ms) != 5 {
		t.Fatalf("%d mappings", len(ms))
	}
	z := ms[2]
	if z.Start != 0x7fe39fda6000 || z.Policy != "default" || z.File != "/dev/zero (deleted)" || z.Pages[0] != 2861 || z.PageSizeKB != 4 {
		t.Errorf("dev/zero mapping %+v", z)
	}
	h := ms[3]
	if !h.Huge || h.PageSizeKB != 2048 || h.Pages[0] != 2 || h.Pages[1] != 1 || h.Bytes() != 3*2048*1024 {
		t.Errorf("hugetlb mapping %+v", h)
	}
	// Sizes from maps make the 11 MiB /dev/zero mapping the largest by
	// address range even though the hugetlb one is resident in larger
	// pages.
	policy, nodes := summarizeNUMA(ms, map[uint64]uint64{0x7fe39fda6000: 149520384, 0x7f0000000000: 6 << 20})
	if policy != "default" {
		t.Errorf("policy %q", policy)
	}
	want0 := uint64(312+182+2861+9)*4096 + 2*2048*1024
	if nodes[0] != want0 || nodes[1] != 2048*1024 {
		t.Errorf("nodes %v, want N0=%d N1=%d", nodes, want0, 2048*1024)
	}
	// Without maps the resident size decides.
	if p, _ := summarizeNUMA(ms, nil); p != "default" {
		t.Errorf("policy by resident size %q", p)
	}
	for _, bad := range []string{"zzz default N0=1\n", "7f00\n"} {
		if _, err := ParseNUMAMaps(bad); err == nil {
			t.Errorf("%q: no error", bad)
		}
	}
	if ms, err := ParseNUMAMaps(""); err != nil || len(ms) != 0 {
		t.Errorf("empty: %v %v", ms, err)
	}
}

func FuzzParseNUMAMaps(f *testing.F) {
	f.Add(numaMapsSample)
	f.Add("7f00 bind:0 anon=1 N0=1 N1=18446744073709551615 kernelpagesize_kB=0\n")
	f.Add("0 prefer:1 N-1=3 Nx=2 N=1 file=/a\\040b\n")
	f.Add("ffffffffffffffff weighted interleave:0-3 N3=4\n\n\n")
	f.Fuzz(func(t *testing.T, s string) {
		ms, err := ParseNUMAMaps(s)
		if err != nil {
			return
		}
		for _, m := range ms {
			if m.PageSizeKB <= 0 || m.Policy == "" {
				t.Fatalf("mapping %+v from %q", m, s)
			}
			for n := range m.Pages {
				if n < 0 {
					t.Fatalf("negative node in %q", s)
				}
			}
		}
		policy, _ := summarizeNUMA(ms, nil)
		if len(ms) > 0 && policy == "" {
			t.Fatalf("no policy from %q", s)
		}
	})
}

func TestParseNodeMeminfo(t *testing.T) {
	mi := ParseNodeMeminfo("Node 0 MemTotal:        5204180 kB\nNode 0 MemFree:         3863816 kB\nNode 0 HugePages_Total:     0\nbogus\n")
	if mi["MemTotal"] != 5204180<<10 || mi["MemFree"] != 3863816<<10 || mi["HugePages_Total"] != 0 {
		t.Errorf("%v", mi)
	}
}

func TestParseSmapsRollup(t *testing.T) {
	r := ParseSmapsRollup("55d1c2a00000-7ffd1a2d4000 ---p 00000000 00:00 0                          [rollup]\nRss:               30764 kB\nAnonHugePages:      2048 kB\nShared_Hugetlb:        0 kB\nSwap:                 12 kB\n")
	if r["Rss"] != 30764<<10 || r["AnonHugePages"] != 2048<<10 || r["Swap"] != 12<<10 {
		t.Errorf("%v", r)
	}
}

func TestParseSysV(t *testing.T) {
	s := `       key      shmid perms                  size  cpid  lpid nattch   uid   gid  cuid  cgid      atime      dtime      ctime                   rss                  swap
    745552          4   600                    56  2199 26813      5   101   104   101   104 1795278824 1795278824 1795277863                  4096                     0
`
	got := parseSysV(s)
	want := []SysVSegment{{Key: "745552", ID: 4, Size: 56, NAttch: 5, CPID: 2199, UID: 101}}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("%+v", got)
	}
}

func TestTHPBootParsers(t *testing.T) {
	tmp := parseTmpfilesTHP("/etc/tmpfiles.d/thp.conf", "# THP\nw /sys/kernel/mm/transparent_hugepage/enabled - - - - never\nw /sys/kernel/mm/transparent_hugepage/khugepaged/max_ptes_none - - - - 0\nw /sys/block/vda/queue/scheduler - - - - none\n")
	want := []Persisted{
		{Key: "enabled", Value: "never", File: "/etc/tmpfiles.d/thp.conf", Line: 2},
		{Key: "khugepaged/max_ptes_none", Value: "0", File: "/etc/tmpfiles.d/thp.conf", Line: 3},
	}
	if !reflect.DeepEqual(tmp, want) {
		t.Errorf("tmpfiles %+v", tmp)
	}
	sh := parseShellTHP("/etc/rc.local", "#!/bin/sh\n# echo always > /sys/kernel/mm/transparent_hugepage/enabled\nExecStart=/bin/sh -c 'echo never > /sys/kernel/mm/transparent_hugepage/enabled && echo \"defer+madvise\" | tee /sys/kernel/mm/transparent_hugepage/defrag'\n")
	want = []Persisted{
		{Key: "enabled", Value: "never", File: "/etc/rc.local", Line: 3},
		{Key: "defrag", Value: "defer+madvise", File: "/etc/rc.local", Line: 3},
	}
	if !reflect.DeepEqual(sh, want) {
		t.Errorf("shell %+v", sh)
	}
	thp := THP{Boot: []Persisted{{Key: "enabled", Value: "madvise", File: "/proc/cmdline"}, {Key: "enabled", Value: "never", File: "/etc/tmpfiles.d/a.conf"}}}
	if p, all, ok := thp.BootValue("enabled"); !ok || p.Value != "never" || len(all) != 2 {
		t.Errorf("BootValue %+v %v %v", p, all, ok)
	}
	if got := Active(host.Reading{Value: "always defer defer+madvise [madvise] never"}); got != "madvise" {
		t.Errorf("Active %q", got)
	}
}

func pm(start, end uintptr, perms, path string, inode uint64) *procfs.ProcMap {
	return &procfs.ProcMap{StartAddr: start, EndAddr: end, Perms: &procfs.ProcMapPermissions{
		Read: true, Write: true, Shared: strings.Contains(perms, "s"), Private: strings.Contains(perms, "p")}, Inode: inode, Pathname: path}
}

func TestSegments(t *testing.T) {
	mem := &Memory{
		HugePages: []HugePagePool{{SizeKB: 2048, Default: true, Total: 100, Free: 40}, {SizeKB: 1 << 20}},
		SysV:      []SysVSegment{{ID: 4, Size: 56}, {ID: 7, Size: 64 << 20}},
	}
	const g = 1 << 30
	maps := []*procfs.ProcMap{
		pm(0x7f0000000000, 0x7f0000000000+150<<20, "rw-s", "/dev/zero (deleted)", 1028),
		pm(0x7f1000000000, 0x7f1000001000, "rw-s", "/SYSV000b6050 (deleted)", 4),
		pm(0x7f2000000000, 0x7f2000007000, "rw-s", "/dev/shm/PostgreSQL.1", 9),
		pm(0x7f3000000000, 0x7f3000000000+124<<20, "rw-p", "/anon_hugepage (deleted)", 55),
		pm(0x7f3000000000+124<<20, 0x7f3000000000+128<<20, "rw-p", "/anon_hugepage (deleted)", 55), // split area
		pm(0x7f4000000000, 0x7f4000000000+64<<20, "rw-s", "/SYSV00000000 (deleted)", 7),
		pm(0x7f5000000000, 0x7f5000002000, "rw-p", "/usr/lib/libc.so.6", 77),
		pm(0x7f6000000000, 0x7f6000000000+g, "rw-s", "/mnt/huge/pool", 88),
		pm(0x7f7000000000, 0x7f7000001000, "rw-s", "/memfd:wayland (deleted)", 99),
	}
	c := segClassifier{mem: mem, hugetlbInUse: true, mounts: func() []*procfs.MountInfo {
		return []*procfs.MountInfo{{MountPoint: "/mnt/huge", FSType: "hugetlbfs", SuperOptions: map[string]string{"pagesize": "1G"}}}
	}}
	got := map[string]Segment{}
	for _, s := range c.segments(maps) {
		got[s.Path+"#"+strings.TrimSpace(s.Kind)] = s
	}
	check := func(key, kind string, size uint64, pageKB int) {
		t.Helper()
		s, ok := got[key]
		if !ok || s.Kind != kind || s.Size != size || s.PageSizeKB != pageKB {
			t.Errorf("%s: %+v (found %v), want %s %d %d", key, s, ok, kind, size, pageKB)
		}
	}
	check("/dev/zero (deleted)#anon", SegAnon, 150<<20, 4)
	check("/SYSV000b6050 (deleted)#sysv", SegSysV, 56, 4) // exact size from /proc/sysvipc/shm
	check("/dev/shm/PostgreSQL.1#posix", SegPOSIX, 7<<12, 4)
	check("/anon_hugepage (deleted)#hugetlb", SegHugetlb, 128<<20, 2048) // two areas, one object
	check("/SYSV00000000 (deleted)#hugetlb", SegHugetlb, 64<<20, 2048)   // SHM_HUGETLB by geometry
	check("/mnt/huge/pool#hugetlb", SegHugetlb, g, 1<<20)
	check("/memfd:wayland (deleted)#memfd", SegMemfd, 4096, 4)
	if _, ok := got["/usr/lib/libc.so.6#"]; ok || len(got) != 7 {
		t.Errorf("segments %v", got)
	}
	if got["/anon_hugepage (deleted)#hugetlb"].Private != true {
		t.Errorf("private hugetlb not marked")
	}
	// Without hugetlb pages in use a whole-huge-page SysV segment stays
	// ordinary shared memory.
	c2 := segClassifier{mem: mem}
	for _, s := range c2.segments(maps[5:6]) {
		if s.Kind != SegSysV {
			t.Errorf("%+v", s)
		}
	}
	im := InstanceMem{Shared: c.segments(maps)}
	if !im.UsesHugetlb() {
		t.Error("UsesHugetlb false")
	}
	if l, ok := im.Largest(""); !ok || l.Size != g {
		t.Errorf("largest %+v", l)
	}
}

func TestHugePagePool(t *testing.T) {
	p := HugePagePool{SizeKB: 2048, Total: 100, Free: 40, Reserved: 30, Overcommit: 10, Surplus: 4}
	if p.Available() != 10+6 || p.Used() != 60 || p.Bytes() != 2<<20 {
		t.Errorf("available %d used %d bytes %d", p.Available(), p.Used(), p.Bytes())
	}
	if parsePageSize("2M") != 2048 || parsePageSize("1G") != 1<<20 || parsePageSize("x") != 0 {
		t.Error("parsePageSize")
	}
}
