package mem

import (
	"fmt"
	"sort"

	"github.com/dbhost/dbhost/internal/facts"
	"github.com/dbhost/dbhost/internal/host"
)

// hostView reconciles /proc/meminfo with the processes and regions read.
func (s *scanner) hostView(r *Report, live []*proc, regions []*Region) {
	v := &r.Host
	b, err := s.h.ReadFile("/proc/meminfo")
	if err != nil {
		v.Err = host.Explain(err)
		return
	}
	mi := facts.ParseSmapsRollup(string(b)) // "Key: N kB" lines, in bytes
	v.MemTotal, v.MemFree, v.MemAvailable = mi["MemTotal"], mi["MemFree"], mi["MemAvailable"]

	pt := sumProcs(live)
	rt := sumRegions(regions)
	v.ProcessesOwn, v.RegionsResident = pt.own, rt.resident
	v.Accounted = v.ProcessesOwn + v.RegionsResident

	v.Lines = append(v.Lines, anonLine(mi, pt, len(live) > 0, unreadNote(r.Unreadable)))
	v.Lines = append(v.Lines, s.shmemLine(v, mi, rt))
	// Huge pages in use (all pool sizes) against the hugetlb regions and
	// the processes' private hugetlb mappings.
	hugeUsed, hugePool := hugetlbUsage(s.h, mi)
	if hugePool > 0 || rt.huge > 0 || pt.hugeOutside > 0 {
		hl := Line{Name: "Hugetlb (in use)", Kernel: hugeUsed, ExplainedBy: []Item{
			{"hugetlb regions, resident", rt.huge},
			{"processes' hugetlb pages outside regions", pt.hugeOutside},
		}, Note: "reserved but not yet faulted pages are free in the pool, not in use"}
		v.Lines = append(v.Lines, finish(hl))
	}
	kernelCounters(v, mi, hugePool)
}

// procTotals sums what the processes read hold.
type procTotals struct {
	own, anonPSS, anonRSS, hugeOutside uint64
	pssAnonAll                         bool // every process had Pss_Anon
}

func sumProcs(live []*proc) procTotals {
	t := procTotals{pssAnonAll: true}
	for _, p := range live {
		t.own += p.Own
		t.anonPSS += p.PSSAnon
		t.anonRSS += p.Anon
		t.hugeOutside += p.hugetlbOutside
		t.pssAnonAll = t.pssAnonAll && p.pssAnonOK
	}
	return t
}

// regionTotals sums the regions' resident bytes by where the kernel counts
// them: hugetlb, a tmpfs device (by major:minor), or Shmem's internal mount.
type regionTotals struct {
	resident, shm, huge uint64
	lowerBound          int // regions whose resident size is a lower bound
	onDev               map[[2]uint32]uint64
}

func sumRegions(regions []*Region) regionTotals {
	t := regionTotals{onDev: map[[2]uint32]uint64{}}
	for _, rg := range regions {
		t.resident += rg.Resident
		if !rg.ResidentKnown {
			t.lowerBound++
		}
		switch {
		case rg.Kind == KindHugetlb || rg.Kind == KindHugetlbfs || (rg.Kind == KindSysV && rg.PageSize > 4096) ||
			(rg.Kind == KindMemfd && rg.PageSize > 4096):
			t.huge += rg.Resident
		case rg.Kind == KindPOSIX || rg.Kind == KindTmpfs:
			t.onDev[[2]uint32{rg.key.major, rg.key.minor}] += rg.Resident
		default:
			t.shm += rg.Resident
		}
	}
	return t
}

// unreadNote is what the anonymous line adds when processes were unreadable.
func unreadNote(unreadable []Unreadable) string {
	unread := 0
	for _, u := range unreadable {
		unread += u.Count
	}
	if unread == 0 {
		return ""
	}
	return fmt.Sprintf("; includes what the %d unreadable processes hold", unread)
}

// anonLine explains AnonPages. The sum of the processes' anonymous PSS
// counts each page once; their RSS counts a page shared copy-on-write with
// a fork parent once per process.
func anonLine(mi map[string]uint64, pt procTotals, anyLive bool, unreadNote string) Line {
	anon := Line{Name: "AnonPages", Kernel: mi["AnonPages"]}
	if pt.pssAnonAll && anyLive {
		anon.ExplainedBy = []Item{{"processes' anonymous PSS", pt.anonPSS}}
		anon.Note = "Pss_Anon of smaps_rollup; where smaps was read, the PSS of anonymous mappings plus, for file mappings with copy-on-write pages, their PSS in proportion; unexplained: processes not read, pages moving during the scan" + unreadNote
	} else {
		anon.ExplainedBy = []Item{{"processes' private anonymous RSS (RssAnon)", pt.anonRSS}}
		anon.Note = "this kernel has no Pss_Anon: pages shared copy-on-write after fork count once per process, so the sum can exceed AnonPages" + unreadNote
	}
	return finish(anon)
}

// shmemLine explains Shmem: regions on the kernel's internal mount, plus
// what every tmpfs holds (POSIX shm lives on /dev/shm), which it lists in
// v.Tmpfs, fullest first.
func (s *scanner) shmemLine(v *HostView, mi map[string]uint64, rt regionTotals) Line {
	shm := Line{Name: "Shmem", Kernel: mi["Shmem"]}
	shm.ExplainedBy = append(shm.ExplainedBy, Item{"shared regions (anonymous, System V, memfd), resident", rt.shm})
	var tmpfsUsed uint64
	for _, m := range s.mounts.list {
		if m.fstype == "hugetlbfs" {
			continue
		}
		t := TmpfsUsage{Mount: m.point, Dev: fmt.Sprintf("%d:%d", m.major, m.minor), Regions: rt.onDev[[2]uint32{m.major, m.minor}]}
		st, err := s.st.Statfs(m.point)
		if err != nil {
			t.Err = host.Explain(err)
		} else {
			t.Used = st.Used()
			tmpfsUsed += t.Used
		}
		v.Tmpfs = append(v.Tmpfs, t)
	}
	sort.SliceStable(v.Tmpfs, func(a, b int) bool { return v.Tmpfs[a].Used > v.Tmpfs[b].Used })
	shm.ExplainedBy = append(shm.ExplainedBy, Item{"tmpfs files (used blocks of every tmpfs, POSIX shm regions included)", tmpfsUsed})
	shm.Note = "unexplained: shared regions no process maps (held only by a file descriptor), regions of processes not read"
	if rt.lowerBound > 0 {
		shm.Note += fmt.Sprintf("; %d regions' resident size is a lower bound (not root)", rt.lowerBound)
	}
	return finish(shm)
}

// kernelCounters lists the kernel's other counters (caches and its own
// memory) and what MemTotal - MemFree holds beyond them.
func kernelCounters(v *HostView, mi map[string]uint64, hugePool uint64) {
	items := []Item{
		{"AnonPages", mi["AnonPages"]},
		{"Shmem", mi["Shmem"]},
		{"file cache (Cached - Shmem)", sub(mi["Cached"], mi["Shmem"])},
		{"Buffers", mi["Buffers"]},
		{"SwapCached", mi["SwapCached"]},
		{"Slab reclaimable (SReclaimable)", mi["SReclaimable"]},
		{"Slab unreclaimable (SUnreclaim)", mi["SUnreclaim"]},
		{"KernelStack", mi["KernelStack"]},
		{"PageTables", mi["PageTables"]},
		{"SecPageTables", mi["SecPageTables"]},
		{"Percpu", mi["Percpu"]},
		{"Zswap pool", mi["Zswap"]},
		{"Hugetlb pool", hugePool},
	}
	var itemised uint64
	for _, it := range items {
		itemised += it.Bytes
		if it.Bytes > 0 {
			v.Kernel = append(v.Kernel, it)
		}
	}
	v.Unitemised = int64(sub(v.MemTotal, v.MemFree)) - int64(itemised)
}

func finish(l Line) Line {
	for _, it := range l.ExplainedBy {
		l.Explained += it.Bytes
	}
	l.Unexplained = int64(l.Kernel) - int64(l.Explained)
	return l
}

// hugetlbUsage sums every huge page pool (/sys/kernel/mm/hugepages): bytes
// in use and the pool's size. Without sysfs it falls back to meminfo's
// default-size counters.
func hugetlbUsage(h *host.Host, mi map[string]uint64) (used, pool uint64) {
	const dir = host.HugePagesRoot
	names, err := h.ReadDir(dir)
	if err == nil {
		found := false
		for _, n := range names {
			size, ok := host.HugePageSizeKB(n)
			if !ok {
				continue
			}
			nr, ok1 := h.Read(dir + "/" + n + "/nr_hugepages").Int()
			free, ok2 := h.Read(dir + "/" + n + "/free_hugepages").Int()
			if !ok1 || !ok2 {
				continue
			}
			found = true
			pool += uint64(nr) * size << 10
			if nr > free {
				used += uint64(nr-free) * size << 10
			}
		}
		if found {
			return used, pool
		}
	}
	size := mi["Hugepagesize"]
	total, free := mi["HugePages_Total"], mi["HugePages_Free"]
	return sub(total, free) * size, total * size
}
