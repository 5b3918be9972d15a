package facts

import (
	"context"
	"errors"
	"io/fs"
	"math"
	"sort"
	"strconv"
	"strings"

	"github.com/prometheus/procfs"

	"github.com/dbhost/dbhost/internal/host"
)

// Memory describes RAM, swap, transparent and explicit huge pages and NUMA.
type Memory struct {
	Meminfo    procfs.Meminfo `json:"meminfo"`
	MeminfoErr string         `json:"meminfo_error,omitempty"`
	Swaps      []Swap         `json:"swaps,omitempty"`
	SwapsErr   string         `json:"swaps_error,omitempty"`
	THP        THP            `json:"thp"`
	// HugePages has one pool per page size (2 MiB, 1 GiB), sorted by size.
	HugePages    []HugePagePool `json:"hugepages,omitempty"`
	HugePagesErr string         `json:"hugepages_error,omitempty"`
	NUMA         NUMA           `json:"numa"`
	// SysV lists the System V shared memory segments (/proc/sysvipc/shm):
	// their exact sizes, which /proc/PID/maps rounds up to whole pages.
	SysV    []SysVSegment `json:"sysv,omitempty"`
	SysVErr string        `json:"sysv_error,omitempty"`
}

// Swap is one active swap area.
type Swap struct {
	Filename string `json:"filename"`
	Type     string `json:"type"`
	SizeKB   int    `json:"size_kb"`
	UsedKB   int    `json:"used_kb"`
	Priority int    `json:"priority"`
}

// THP is the transparent huge page configuration
// (/sys/kernel/mm/transparent_hugepage). Enabled and Defrag hold the raw
// line ("always [madvise] never"); use Active for the bracketed choice.
type THP struct {
	Enabled          host.Reading `json:"enabled"`
	Defrag           host.Reading `json:"defrag"`
	KhugepagedDefrag host.Reading `json:"khugepaged_defrag"`
	MaxPtesNone      host.Reading `json:"khugepaged_max_ptes_none"`
	ShmemEnabled     host.Reading `json:"shmem_enabled"`
	// Boot lists where a THP value is set to survive reboot, in the order
	// boot applies them (the last one for a key wins): the kernel command
	// line (running, then the boot loader's configuration for the next
	// boot), tmpfiles.d, enabled systemd units, rc.local. Key is the file
	// below /sys/kernel/mm/transparent_hugepage ("enabled", "defrag",
	// "khugepaged/max_ptes_none"). TuneD's [vm] section is in Tuned.VM.
	Boot []Persisted `json:"boot,omitempty"`
	// BootIgnored lists THP settings in files that will not apply at boot
	// (a unit that is not enabled, a non-executable rc.local, a tmpfiles.d
	// line shadowed by an earlier one), with the reason in Note.
	BootIgnored []Persisted `json:"boot_ignored,omitempty"`
}

// Persisted is a setting found in a file that applies it at boot.
type Persisted struct {
	Key   string `json:"key"`
	Value string `json:"value"`
	File  string `json:"file"`
	Line  int    `json:"line,omitempty"`
	// Note says why a setting does not apply, where that is known.
	Note string `json:"note,omitempty"`
}

// HugePagePool is one explicit huge page size
// (/sys/kernel/mm/hugepages/hugepages-SIZEkB).
type HugePagePool struct {
	SizeKB int `json:"size_kb"`
	// Default is the size vm.nr_hugepages and Hugepagesize refer to.
	Default  bool  `json:"default,omitempty"`
	Total    int64 `json:"total"`
	Free     int64 `json:"free"`
	Reserved int64 `json:"reserved"`
	Surplus  int64 `json:"surplus"`
	// Overcommit is nr_overcommit_hugepages.
	Overcommit int64  `json:"overcommit"`
	Err        string `json:"error,omitempty"`
}

// Available is the number of pages a new mapping can still get: free pages
// not promised to an existing mapping, plus surplus pages the kernel may
// allocate on demand (nr_overcommit_hugepages).
func (p HugePagePool) Available() int64 {
	a := p.Free - p.Reserved
	if a < 0 {
		a = 0
	}
	if s := p.Overcommit - p.Surplus; s > 0 {
		a += s
	}
	return a
}

// Used is the number of pages mapped by processes (faulted in).
func (p HugePagePool) Used() int64 { return p.Total - p.Free }

// Bytes is the size of one page in bytes.
func (p HugePagePool) Bytes() uint64 { return uint64(p.SizeKB) << 10 }

// NUMA describes the memory nodes (/sys/devices/system/node).
type NUMA struct {
	Nodes []NUMANode `json:"nodes,omitempty"`
	Err   string     `json:"error,omitempty"`
}

// NUMANode is one memory node.
type NUMANode struct {
	ID        int    `json:"id"`
	CPUs      string `json:"cpus"`
	MemTotal  uint64 `json:"mem_total_bytes"`
	MemFree   uint64 `json:"mem_free_bytes"`
	Distances []int  `json:"distances,omitempty"`
	Err       string `json:"error,omitempty"`
}

// SysVSegment is one System V shared memory segment.
type SysVSegment struct {
	Key    string `json:"key"`
	ID     uint64 `json:"shmid"`
	Size   uint64 `json:"size_bytes"`
	NAttch int    `json:"nattch"`
	CPID   int    `json:"cpid"`
	UID    int    `json:"uid"`
}

// InstanceMem is what the memory gatherer learns about one instance's main
// process.
type InstanceMem struct {
	// Shared lists the process's shared memory segments: anonymous shared
	// mappings, System V and POSIX segments, memfd and hugetlb mappings
	// (hugetlb ones also when private, as InnoDB's buffer pool with
	// large pages is). Largest first.
	Shared    []Segment `json:"shared,omitempty"`
	SharedErr string    `json:"shared_error,omitempty"`
	// HugetlbBytes is the hugetlb memory the process has faulted in
	// (HugetlbPages in /proc/PID/status); mappings reserve their pages at
	// mmap time, so a mapping can exist with few pages faulted yet.
	HugetlbBytes uint64 `json:"hugetlb_bytes"`
	// RSSBytes is the resident set (smaps_rollup Rss, else status VmRSS);
	// AnonHugeBytes is THP-backed anonymous memory and SwapBytes memory
	// swapped out (smaps_rollup).
	RSSBytes      uint64 `json:"rss_bytes"`
	AnonHugeBytes uint64 `json:"anon_huge_bytes"`
	SwapBytes     uint64 `json:"swap_bytes"`
	// SmapsErr says why smaps_rollup could not be read (another user's
	// process without root).
	SmapsErr string `json:"smaps_error,omitempty"`
	// NUMAPolicy is the policy of the largest mapping in numa_maps
	// ("default", "interleave:0-1", "bind:0", "prefer:1").
	NUMAPolicy string `json:"numa_policy,omitempty"`
	// NodeBytes is the process's resident memory per NUMA node, summed
	// from the N<node>=<pages> counts of numa_maps times each mapping's
	// page size.
	NodeBytes map[int]uint64 `json:"node_bytes,omitempty"`
	NUMAErr   string         `json:"numa_error,omitempty"`
}

// UsesHugetlb reports whether the process maps explicit huge pages.
func (m InstanceMem) UsesHugetlb() bool {
	if m.HugetlbBytes > 0 {
		return true
	}
	for _, s := range m.Shared {
		if s.Kind == SegHugetlb {
			return true
		}
	}
	return false
}

// Largest returns the largest segment of a kind ("" for any kind).
func (m InstanceMem) Largest(kind string) (Segment, bool) {
	var best Segment
	found := false
	for _, s := range m.Shared {
		if (kind == "" || s.Kind == kind) && (!found || s.Size > best.Size) {
			best, found = s, true
		}
	}
	return best, found
}

// Segment kinds.
const (
	SegAnon    = "anon"    // MAP_SHARED|MAP_ANONYMOUS ("/dev/zero (deleted)")
	SegSysV    = "sysv"    // System V shmget ("/SYSV0052e2c1 (deleted)")
	SegPOSIX   = "posix"   // shm_open (/dev/shm/...)
	SegMemfd   = "memfd"   // memfd_create ("/memfd:name (deleted)")
	SegHugetlb = "hugetlb" // MAP_HUGETLB, SHM_HUGETLB or a hugetlbfs file
)

// Segment is one shared (or hugetlb) memory mapping of a process.
type Segment struct {
	// Kind: "anon", "sysv", "posix", "memfd" or "hugetlb".
	Kind string `json:"kind"`
	Path string `json:"path"`
	// Size is the mapped size (the exact segment size for System V).
	Size uint64 `json:"size_bytes"`
	// Start is the mapping's first address (the lowest one when a mapping
	// was split into several areas).
	Start uint64 `json:"start"`
	// PageSizeKB is the kernel page size backing it: 4 for ordinary
	// shared memory, the huge page size (2048, 1048576) for hugetlb.
	PageSizeKB int `json:"page_size_kb"`
	// Private is set for private hugetlb mappings (MAP_PRIVATE|MAP_HUGETLB).
	Private bool `json:"private,omitempty"`
	// SysV is the System V segment ID (shmid) for System V segments,
	// including SHM_HUGETLB ones.
	SysV uint64 `json:"shmid,omitempty"`
}

func init() {
	registerHost(DomainMemory, gatherMemory)
	registerInstance("memory", gatherInstanceMem)
}

func gatherMemory(_ context.Context, h *host.Host, f *Facts) {
	m := &f.Memory
	mi, err := h.Meminfo()
	if err != nil {
		m.MeminfoErr = explainAt("/proc/meminfo", err)
	} else {
		m.Meminfo = mi
	}
	if sw, err := h.Swaps(); err != nil {
		m.SwapsErr = explainAt("/proc/swaps", err)
	} else {
		for _, s := range sw {
			m.Swaps = append(m.Swaps, Swap{Filename: s.Filename, Type: s.Type, SizeKB: s.Size, UsedKB: s.Used, Priority: s.Priority})
		}
	}
	m.THP = gatherTHP(h)
	defaultKB := 0
	if mi.Hugepagesize != nil {
		defaultKB = int(*mi.Hugepagesize)
	}
	m.HugePages, m.HugePagesErr = gatherHugePages(h, defaultKB)
	m.NUMA = gatherNUMA(h)
	m.SysV, m.SysVErr = gatherSysV(h)
}

// explainAt explains an error of a procfs reader under the path the host
// sees: procfs reports the path below the snapshot's temporary root.
func explainAt(p string, err error) string {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		err = &fs.PathError{Op: pe.Op, Path: p, Err: pe.Err}
	}
	return host.Explain(err)
}

const hugepagesDir = host.HugePagesRoot

// gatherHugePages reads every pool under /sys/kernel/mm/hugepages.
func gatherHugePages(h *host.Host, defaultKB int) ([]HugePagePool, string) {
	names, err := h.ReadDir(hugepagesDir)
	if err != nil {
		return nil, host.Explain(err)
	}
	var pools []HugePagePool
	for _, n := range names {
		size, ok := host.HugePageSizeKB(n)
		if !ok || size > math.MaxInt32 {
			continue
		}
		kb := int(size)
		p := HugePagePool{SizeKB: kb, Default: kb == defaultKB}
		dir := hugepagesDir + "/" + n + "/"
		for _, fv := range []struct {
			file string
			dst  *int64
		}{
			{"nr_hugepages", &p.Total}, {"free_hugepages", &p.Free}, {"resv_hugepages", &p.Reserved},
			{"surplus_hugepages", &p.Surplus}, {"nr_overcommit_hugepages", &p.Overcommit},
		} {
			r := h.Read(dir + fv.file)
			v, why := r.Count() // a page count: never negative
			if why != "" {
				if p.Err == "" {
					p.Err = why
				}
				continue
			}
			*fv.dst = v
		}
		pools = append(pools, p)
	}
	sort.Slice(pools, func(a, b int) bool { return pools[a].SizeKB < pools[b].SizeKB })
	return pools, ""
}

// gatherSysV reads /proc/sysvipc/shm:
//
//	key shmid perms size cpid lpid nattch uid gid cuid cgid atime dtime ctime rss swap
func gatherSysV(h *host.Host) ([]SysVSegment, string) {
	b, err := h.ReadFile("/proc/sysvipc/shm")
	if err != nil {
		return nil, host.Explain(err)
	}
	return parseSysV(string(b)), ""
}

func parseSysV(s string) []SysVSegment {
	var out []SysVSegment
	for i, ln := range strings.Split(s, "\n") {
		f := strings.Fields(ln)
		if i == 0 || len(f) < 8 {
			continue // header
		}
		id, err1 := strconv.ParseUint(f[1], 10, 64)
		size, err2 := strconv.ParseUint(f[3], 10, 64)
		if err1 != nil || err2 != nil {
			continue
		}
		cpid, _ := strconv.Atoi(f[4])
		nattch, _ := strconv.Atoi(f[6])
		uid, _ := strconv.Atoi(f[7])
		out = append(out, SysVSegment{Key: f[0], ID: id, Size: size, CPID: cpid, NAttch: nattch, UID: uid})
	}
	return out
}

// MemTotal returns the host's RAM in bytes.
func (m Memory) MemTotal() (uint64, bool) {
	if m.Meminfo.MemTotal == nil {
		return 0, false
	}
	return *m.Meminfo.MemTotal << 10, true
}

// Pool returns the huge page pool of a size (0: the default size).
func (m Memory) Pool(sizeKB int) (HugePagePool, bool) {
	for _, p := range m.HugePages {
		if (sizeKB == 0 && p.Default) || (sizeKB != 0 && p.SizeKB == sizeKB) {
			return p, true
		}
	}
	return HugePagePool{}, false
}

// DefaultHugePageKB is Hugepagesize from /proc/meminfo (0 when unknown).
func (m Memory) DefaultHugePageKB() int {
	if m.Meminfo.Hugepagesize == nil {
		return 0
	}
	return int(*m.Meminfo.Hugepagesize)
}

// SwapTotalBytes is the size of all active swap areas.
func (m Memory) SwapTotalBytes() uint64 {
	var t uint64
	for _, s := range m.Swaps {
		t += uint64(s.SizeKB) << 10
	}
	return t
}
