package plan

import (
	"strconv"

	"github.com/dbhost/dbhost/internal/engine"
	"github.com/dbhost/dbhost/internal/engine/mysql"
	"github.com/dbhost/dbhost/internal/facts"
)

// pool returns the huge page pool of a size (0: the default size) in the
// model, or nil.
func (m *model) pool(sizeKB int) *facts.HugePagePool {
	for i := range m.g.Memory.HugePages {
		p := &m.g.Memory.HugePages[i]
		if (sizeKB == 0 && p.Default) || (sizeKB != 0 && p.SizeKB == sizeKB) {
			return p
		}
	}
	return nil
}

// resizePool sets a pool's persistent page count as writing nr_hugepages
// does: growing adds free pages (the model assumes the kernel finds the
// memory); shrinking frees only pages nobody maps or has reserved, and the
// rest stay as surplus until released.
func (m *model) resizePool(sizeKB int, n int64, by string) {
	p := m.pool(sizeKB)
	if p == nil {
		m.note("%s = %d: the kernel has no huge page pool of that size: not modelled", by, n)
		return
	}
	switch {
	case n >= p.Total:
		p.Free += n - p.Total
		p.Total = n
	default:
		idle := max(p.Free-p.Reserved, 0)
		drop := min(p.Total-n, idle)
		p.Total -= drop
		p.Free -= drop
		if p.Total > n {
			p.Surplus += p.Total - n
			m.note("%s = %d: %d pages are in use and stay as surplus until released", by, n, p.Total-n)
		}
	}
	if p.Default {
		m.setReading("vm.nr_hugepages", strconv.FormatInt(p.Total-p.Surplus, 10))
	}
}

// setReading sets a gathered kernel parameter's value without the effects
// setSysctl has.
func (m *model) setReading(name, value string) {
	if r, ok := m.g.Sysctl[name]; ok {
		r.Value, r.Err = value, ""
		m.g.Sysctl[name] = r
	}
}

// memBase is what the kernel's commit accounting depends on: the pools'
// size, the overcommit parameters and the memory the servers commit.
type memBase struct {
	hugetlbKB          uint64
	ratio, kbytes      int64
	committedByServers map[string]uint64
}

func memoryBase(f *facts.Facts) memBase {
	b := memBase{hugetlbKB: hugetlbKB(f), committedByServers: map[string]uint64{}}
	b.ratio, _ = f.SysctlReading("vm.overcommit_ratio").Count()
	b.kbytes, _ = f.SysctlReading("vm.overcommit_kbytes").Count()
	for _, in := range f.Instances {
		b.committedByServers[in.Name()] = committedBy(in)
	}
	return b
}

// hugetlbKB is the memory every pool holds (Hugetlb in /proc/meminfo).
func hugetlbKB(f *facts.Facts) uint64 {
	var kb uint64
	for _, p := range f.Memory.HugePages {
		kb += uint64(max(p.Total, 0)) * uint64(p.SizeKB)
	}
	return kb
}

// committedBy is what a server's shared memory and buffers add to
// Committed_AS: shared anonymous and System V mappings are charged when
// mapped, hugetlb ones are not (their pool is set aside already).
func committedBy(in *facts.Instance) uint64 {
	var b uint64
	for _, s := range in.Mem.Shared {
		if s.Kind == facts.SegAnon || s.Kind == facts.SegSysV {
			b += s.Size
		}
	}
	return b + bufferPoolCommit(in)
}

// bufferPoolCommit is InnoDB's buffer pool, allocated (and charged) whole
// at start unless it lives in huge pages.
func bufferPoolCommit(in *facts.Instance) uint64 {
	if in.Engine != engine.MySQL || in.Mem.UsesHugetlb() {
		return 0
	}
	b, _ := mysql.Bytes(in.Instance, "innodb_buffer_pool_size")
	return b
}

// memoryAfter brings /proc/meminfo in line with the planned pools and
// servers: the huge page counters, Committed_AS, and CommitLimit, which
// the kernel computes as swap + (MemTotal - hugetlb) x overcommit_ratio /
// 100, or swap + overcommit_kbytes when that is set. CommitLimit moves by
// the difference of that formula before and after the plan, so a kernel
// whose figure differs from it (a container's view) keeps its offset.
func (m *model) memoryAfter() {
	mi := &m.g.Memory.Meminfo
	after := memoryBase(m.g)
	if p := m.pool(0); p != nil {
		setKB(&mi.HugePagesTotal, nil, uint64(max(p.Total, 0)))
		setKB(&mi.HugePagesFree, nil, uint64(max(p.Free, 0)))
		setKB(&mi.HugePagesRsvd, nil, uint64(max(p.Reserved, 0)))
		setKB(&mi.HugePagesSurp, nil, uint64(max(p.Surplus, 0)))
	}
	setKB(&mi.Hugetlb, &mi.HugetlbBytes, after.hugetlbKB)
	if mi.CommittedAS != nil {
		c := int64(*mi.CommittedAS)
		for name, b := range after.committedByServers {
			c += (int64(b) - int64(m.memBefore.committedByServers[name])) / 1024
		}
		setKB(&mi.CommittedAS, &mi.CommittedASBytes, uint64(max(c, 0)))
	}
	if mi.CommitLimit != nil && mi.MemTotal != nil {
		swap := uint64(0)
		if mi.SwapTotal != nil {
			swap = *mi.SwapTotal
		}
		before, now := commitLimitKB(*mi.MemTotal, swap, m.memBefore), commitLimitKB(*mi.MemTotal, swap, after)
		setKB(&mi.CommitLimit, &mi.CommitLimitBytes, uint64(max(int64(*mi.CommitLimit)+now-before, 0)))
	}
}

// commitLimitKB is the kernel's CommitLimit (mm/util.c vm_commit_limit),
// computed in 4 kB pages as the kernel does, so its rounding is the kernel's.
func commitLimitKB(memKB, swapKB uint64, b memBase) int64 {
	const pageKB = 4
	if b.kbytes > 0 {
		return int64((uint64(b.kbytes)/pageKB + swapKB/pageKB) * pageKB)
	}
	pages := (memKB - min(b.hugetlbKB, memKB)) / pageKB
	return int64((pages*uint64(max(b.ratio, 0))/100 + swapKB/pageKB) * pageKB)
}

// setKB sets a /proc/meminfo field (kB) and, when it has one, its bytes
// twin.
func setKB(kb **uint64, bytes **uint64, v uint64) {
	if *kb == nil && v == 0 {
		return
	}
	k := v
	*kb = &k
	if bytes != nil {
		b := v << 10
		*bytes = &b
	}
}
