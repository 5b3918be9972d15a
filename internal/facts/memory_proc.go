package facts

import (
	"context"
	"sort"
	"strconv"
	"strings"

	"github.com/prometheus/procfs"

	"github.com/dbhost/dbhost/internal/host"
)

// gatherInstanceMem reads the main process's shared segments (maps), its
// memory totals (smaps_rollup, status) and where its pages live (numa_maps).
// Only the main process: numa_maps walks every page table entry and is slow
// on a process with a large buffer pool, and a PostgreSQL backend shares the
// postmaster's segments anyway. Another user's maps, smaps_rollup and
// numa_maps are unreadable without root; the errors are kept so the checks
// say "unknown" with the reason.
func gatherInstanceMem(_ context.Context, h *host.Host, f *Facts, in *Instance) {
	m := &in.Mem
	pid := in.PID
	var sizes map[uint64]uint64
	maps, err := h.ProcMaps(pid)
	if err != nil {
		m.SharedErr = explainAt(procFile(pid, "maps"), err)
	} else {
		sizes = make(map[uint64]uint64, len(maps))
		for _, mp := range maps {
			sizes[uint64(mp.StartAddr)] = uint64(mp.EndAddr - mp.StartAddr)
		}
	}
	if b, err := h.ReadFile(procFile(pid, "smaps_rollup")); err != nil {
		m.SmapsErr = host.Explain(err)
	} else {
		r := ParseSmapsRollup(string(b))
		m.RSSBytes, m.AnonHugeBytes, m.SwapBytes = r["Rss"], r["AnonHugePages"], r["Swap"]
	}
	hugetlbResident := uint64(0)
	if st, err := h.Status(pid); err == nil {
		m.HugetlbBytes = st.HugetlbPages
		hugetlbResident = st.HugetlbPages
		if m.RSSBytes == 0 {
			m.RSSBytes = st.VmRSS
		}
	}
	if maps != nil {
		c := segClassifier{mem: &f.Memory, hugetlbInUse: hugetlbResident > 0}
		c.mounts = func() []*procfs.MountInfo {
			mi, _ := h.MountInfo(pid)
			return mi
		}
		m.Shared = c.segments(maps)
	}
	if b, err := h.ReadFile(procFile(pid, "numa_maps")); err != nil {
		m.NUMAErr = host.Explain(err)
	} else if ms, err := ParseNUMAMaps(string(b)); err != nil {
		m.NUMAErr = procFile(pid, "numa_maps") + ": " + err.Error()
	} else {
		m.NUMAPolicy, m.NodeBytes = summarizeNUMA(ms, sizes)
	}
}

// ParseSmapsRollup reads "Key:   123 kB" lines into bytes. procfs's
// ProcSMapsRollup lacks AnonHugePages and the hugetlb counters.
func ParseSmapsRollup(s string) map[string]uint64 {
	out := map[string]uint64{}
	for _, ln := range strings.Split(s, "\n") {
		k, v, ok := strings.Cut(ln, ":")
		if !ok {
			continue
		}
		if n, ok := kBytes(strings.Fields(v)); ok {
			out[strings.TrimSpace(k)] = n
		}
	}
	return out
}

// kBytes reads a count and its unit ("123", "kB") in bytes; a count
// without a unit (HugePages_Total) is kept as it is.
func kBytes(f []string) (uint64, bool) {
	if len(f) == 0 {
		return 0, false
	}
	n, err := strconv.ParseUint(f[0], 10, 64)
	if err != nil {
		return 0, false
	}
	if len(f) > 1 && f[1] == "kB" {
		n <<= 10
	}
	return n, true
}

// segClassifier turns a process's mappings into shared memory segments.
type segClassifier struct {
	mem *Memory
	// hugetlbInUse: the process has hugetlb pages (status), so a System V
	// segment sized in whole huge pages is taken as SHM_HUGETLB.
	hugetlbInUse bool
	// mounts is read lazily: only a shared file mapping outside the usual
	// places needs the mount table (to spot hugetlbfs).
	mounts    func() []*procfs.MountInfo
	mountList []*procfs.MountInfo
	mountRead bool
}

type segKey struct {
	path  string
	dev   uint64
	inode uint64
}

func (c *segClassifier) segments(maps []*procfs.ProcMap) []Segment {
	idx := map[segKey]int{}
	var out []Segment
	for _, mp := range maps {
		kind, pageKB, ok := c.classify(mp)
		if !ok {
			continue
		}
		size := uint64(mp.EndAddr - mp.StartAddr)
		k := segKey{mp.Pathname, mp.Dev, mp.Inode}
		if i, seen := idx[k]; seen {
			// One object mapped as several areas (split by mprotect):
			// its size is their sum.
			out[i].Size += size
			continue
		}
		s := Segment{Kind: kind, Path: mp.Pathname, Size: size, Start: uint64(mp.StartAddr),
			PageSizeKB: pageKB, Private: mp.Perms != nil && mp.Perms.Private}
		if strings.HasPrefix(mp.Pathname, "/SYSV") {
			s.SysV = mp.Inode // the inode of a System V mapping is its shmid
		}
		idx[k] = len(out)
		out = append(out, s)
	}
	for i := range out {
		s := &out[i]
		if s.SysV != 0 || strings.HasPrefix(s.Path, "/SYSV") {
			for _, sv := range c.mem.SysV {
				if sv.ID == s.SysV {
					s.Size = sv.Size
				}
			}
			// SHM_HUGETLB segments look like any System V segment in maps;
			// the process's hugetlb pages and whole-huge-page geometry
			// give them away.
			if s.Kind == SegSysV && c.hugetlbInUse {
				if kb := c.hugePageFor(s.Start, s.Size, false); kb > 0 {
					s.Kind, s.PageSizeKB = SegHugetlb, kb
				}
			}
		}
		if s.Kind == SegHugetlb && s.PageSizeKB == 0 {
			s.PageSizeKB = c.hugePageFor(s.Start, s.Size, true)
		}
	}
	sort.SliceStable(out, func(a, b int) bool { return out[a].Size > out[b].Size })
	return out
}

// classify decides whether a mapping is shared memory and of which kind.
func (c *segClassifier) classify(mp *procfs.ProcMap) (kind string, pageKB int, ok bool) {
	p := mp.Pathname
	shared := mp.Perms != nil && mp.Perms.Shared
	switch {
	case strings.HasPrefix(p, "/anon_hugepage"):
		return SegHugetlb, 0, true // shared or private MAP_HUGETLB
	case !shared:
		// Private file mappings are program text and libraries; a private
		// mapping of a hugetlbfs file (libhugetlbfs remapping text) is not
		// shared memory and is not worth a mount table read per process.
		return "", 0, false
	case strings.HasPrefix(p, "/dev/zero"):
		return SegAnon, 4, true
	case strings.HasPrefix(p, "/SYSV"):
		return SegSysV, 4, true
	case strings.HasPrefix(p, "/dev/shm/"):
		return SegPOSIX, 4, true
	case strings.HasPrefix(p, "/memfd:"):
		return SegMemfd, 4, true
	case p == "" || strings.HasPrefix(p, "["):
		return SegAnon, 4, true
	}
	if kb, ok := c.hugetlbfs(p); ok {
		return SegHugetlb, kb, true
	}
	return "", 0, false // an ordinary shared file mapping
}

// hugetlbfs reports whether a path lies on a hugetlbfs mount and its page
// size (0 when the mount does not say: the default size).
func (c *segClassifier) hugetlbfs(p string) (int, bool) {
	if !c.mountRead {
		c.mountRead = true
		if c.mounts != nil {
			c.mountList = c.mounts()
		}
	}
	best := ""
	var bestMount *procfs.MountInfo
	for _, m := range c.mountList {
		mp := m.MountPoint
		if (p == mp || strings.HasPrefix(p, strings.TrimSuffix(mp, "/")+"/")) && len(mp) >= len(best) {
			best, bestMount = mp, m
		}
	}
	if bestMount == nil || bestMount.FSType != "hugetlbfs" {
		return 0, false
	}
	if v, ok := bestMount.SuperOptions["pagesize"]; ok {
		return parsePageSize(v), true
	}
	return 0, true
}

// parsePageSize reads hugetlbfs's pagesize= option ("2M", "1024M", "1G").
func parsePageSize(v string) int {
	mult := 1
	switch {
	case strings.HasSuffix(v, "G"):
		mult, v = 1<<20, strings.TrimSuffix(v, "G")
	case strings.HasSuffix(v, "M"):
		mult, v = 1<<10, strings.TrimSuffix(v, "M")
	case strings.HasSuffix(v, "K"), strings.HasSuffix(v, "k"):
		v = v[:len(v)-1]
	}
	n, err := strconv.Atoi(v)
	if err != nil {
		return 0
	}
	return n * mult
}

// hugePageFor infers the huge page size of a hugetlb mapping from its
// geometry: its start and size are multiples of its page size. When several
// pool sizes fit (a 1 GiB-aligned mapping also fits 2 MiB), the pool with
// pages in use or reserved is preferred, then the default size. With
// fallback false it returns 0 when no size fits.
func (c *segClassifier) hugePageFor(start, size uint64, fallback bool) int {
	var fits []HugePagePool
	for _, p := range c.mem.HugePages {
		b := p.Bytes()
		if b > 0 && start%b == 0 && size%b == 0 && size > 0 {
			fits = append(fits, p)
		}
	}
	pick := func(ok func(HugePagePool) bool) int {
		for i := len(fits) - 1; i >= 0; i-- {
			if ok(fits[i]) {
				return fits[i].SizeKB
			}
		}
		return 0
	}
	if kb := pick(func(p HugePagePool) bool { return p.Used() > 0 || p.Reserved > 0 }); kb > 0 {
		return kb
	}
	if kb := pick(func(p HugePagePool) bool { return p.Default }); kb > 0 {
		return kb
	}
	if len(fits) > 0 {
		return fits[0].SizeKB
	}
	if fallback {
		return c.mem.DefaultHugePageKB()
	}
	return 0
}
