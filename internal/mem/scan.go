package mem

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/dbhost/dbhost/internal/engine"
	"github.com/dbhost/dbhost/internal/host"
)

// Stater answers the system calls the accounting needs beyond reading
// files: stat(2) of /proc/PID/map_files/START-END and /dev/shm files (their
// allocated blocks are the object's memory) and statfs(2) of tmpfs mounts.
// *host.Host is the live one; Recorded replays a fixture's.
type Stater interface {
	StatFile(path string) (host.FileStat, error)
	Statfs(path string) (host.FSStat, error)
}

// Options select what a scan reports.
type Options struct {
	// PIDs restricts the processes shown (every process is still read:
	// a region's mappers and the host view need them all).
	PIDs []int
	// Engine restricts the processes shown to the instances of one engine.
	Engine engine.Engine
	// NUMA reads numa_maps of every selected process; otherwise only the
	// instances' main processes on a multi-node host.
	NUMA bool
	// Stater answers stat/statfs; nil means the host itself.
	Stater Stater
	// Workers reading processes in parallel; 0 means GOMAXPROCS.
	Workers int
}

// proc is one process being read.
type proc struct {
	Process
	maps     []Mapping // its mappings of shared regions, from smaps (or maps)
	err      error
	gone     bool // exited while being read
	kernel   bool // no memory of its own: kernel thread, zombie
	uid, gid int
	// pssAnonOK: Pss_Anon was present (the host line needs every process).
	pssAnonOK bool
}

type scanner struct {
	h      *host.Host
	st     Stater
	mounts *mountTable
	// noQuery: PROCMAP_QUERY is missing (before Linux 6.11, or a recorded
	// host); maps is read instead.
	noQuery atomic.Bool
}

var errNoQuery = errors.New("PROCMAP_QUERY not used")

// Scan reads the host's memory once: every process, then the shared
// regions they map, the instances they belong to and the host's view, and
// last what of it is shown. The accounting uses every process whatever is
// shown.
func Scan(ctx context.Context, h *host.Host, opt Options) (*Report, error) {
	s := &scanner{h: h, st: opt.Stater}
	if s.st == nil {
		s.st = h
	}
	r := &Report{Schema: Schema, Time: time.Now().UTC(), Source: h.Source()}
	pids, err := h.PIDs()
	if err != nil {
		return nil, fmt.Errorf("process table: %w", err)
	}
	s.readMounts(r)
	procs := s.readProcs(ctx, pids, opt.Workers)
	if ctx.Err() != nil {
		return nil, ctx.Err()
	}
	table := processTable(h, procs)
	live := liveProcs(r, procs, s.asRoot())
	if len(live) == 0 && !h.Live() {
		return nil, fmt.Errorf("%s holds no memory readings of any process (maps, smaps_rollup): it was collected by a dbhost that did not record them; collect it again", h.Source())
	}
	regions := s.sharedRegions(r, procs, live)
	// The instances, found the way every command finds them, without
	// inspecting them: their configuration, version and live settings are
	// not needed to group processes.
	insts, notes := engine.Discover(ctx, h, table, engine.Options{NoInspect: true})
	r.Notes = append(r.Notes, notes...)
	byPID := accountInstances(r, insts, table, procs, live, regions)
	s.hostView(r, live, regions)
	shown, regions := selectShown(r, opt, live, regions)
	s.numa(r, opt, shown, byPID)
	fillShown(r, shown, regions)
	return r, nil
}

// readMounts reads the mount table that tells shared memory objects from
// other files.
func (s *scanner) readMounts(r *Report) {
	if b, err := s.h.ReadFile("/proc/self/mountinfo"); err == nil {
		s.mounts = parseMountinfo(b)
	} else {
		s.mounts = parseMountinfo(nil)
		r.Notes = append(r.Notes, "mount table unreadable ("+host.Explain(err)+"): POSIX shm, tmpfs and hugetlbfs files are not recognised")
	}
}

// processTable is the process table (for the engines' detectors and the
// instances' descendants) from the same status reads as the memory
// figures; it names each process's user.
func processTable(h *host.Host, procs []*proc) *engine.Table {
	entries := make([]engine.Process, 0, len(procs))
	for _, p := range procs {
		if p != nil && !p.gone {
			entries = append(entries, engine.Process{PID: p.PID, PPID: p.PPID, Comm: p.Comm, UID: p.uid, GID: p.gid})
		}
	}
	table := engine.TableFrom(h, entries)
	for _, p := range procs {
		if p != nil && !p.gone {
			p.User = table.UserName(p.uid)
		}
	}
	return table
}

// liveProcs are the processes read whole; the others are counted in
// r.Unreadable by reason (those that exited or hold no memory are not).
func liveProcs(r *Report, procs []*proc, asRoot bool) []*proc {
	reasons := map[string]int{}
	var live []*proc
	for _, p := range procs {
		switch {
		case p == nil, p.gone, p.kernel:
		case p.err != nil:
			reasons[explainShort(p.err, asRoot)]++
		default:
			live = append(live, p)
		}
	}
	r.Scanned = len(live)
	for why, n := range reasons {
		r.Unreadable = append(r.Unreadable, Unreadable{Count: n, Reason: why})
	}
	sort.Slice(r.Unreadable, func(a, b int) bool { return r.Unreadable[a].Count > r.Unreadable[b].Count })
	return live
}

// sharedRegions groups the live processes' mappings into regions, splits
// each process's memory into its share of them and its own, sizes the
// regions and adds the shared memory no process maps.
func (s *scanner) sharedRegions(r *Report, procs, live []*proc) []*Region {
	regions := s.collectRegions(live)
	shares := map[int][]*Mapper{}
	for _, rg := range regions {
		for i := range rg.Mappers {
			shares[rg.Mappers[i].PID] = append(shares[rg.Mappers[i].PID], &rg.Mappers[i])
		}
	}
	for _, p := range live {
		finishProc(p, shares)
	}
	sysv := map[uint64]sysvSeg{}
	if b, err := s.h.ReadFile("/proc/sysvipc/shm"); err == nil {
		sysv = parseSysVShm(b)
	} else if !host.IsNotExist(err) {
		r.Notes = append(r.Notes, "System V segments: "+host.Explain(err))
	}
	s.resolve(regions, sysv)
	// Who might map a file the scan found unmapped: without root, the
	// processes it could not read (by user); as root an unreadable process
	// is outside its reach (another container's), so none.
	var unreadUIDs map[int]bool
	if !s.asRoot() {
		unreadUIDs = map[int]bool{}
		for _, p := range procs {
			if p != nil && p.err != nil {
				unreadUIDs[p.uid] = true
			}
		}
	}
	return append(regions, s.orphans(regions, sysv, unreadUIDs)...)
}

// accountInstances adds the instances to the report, each with its
// processes (the main one and its descendants), their memory and the
// regions charged to it; it tags each live process with its instance and
// returns the live processes by PID.
func accountInstances(r *Report, insts []*engine.Instance, table *engine.Table, procs, live []*proc, regions []*Region) map[int]*proc {
	pidInst := map[int]*Instance{}
	for _, in := range insts {
		ri := Instance{Name: instanceName(in), Engine: string(in.Engine), PID: in.PID, Port: in.Port, DataDir: in.DataDir}
		ri.PIDs = descendants(table, in.PID)
		r.Instances = append(r.Instances, ri)
	}
	for i := range r.Instances {
		for _, pid := range r.Instances[i].PIDs {
			if _, taken := pidInst[pid]; !taken {
				pidInst[pid] = &r.Instances[i]
			}
		}
	}
	byPID := map[int]*proc{}
	for _, p := range live {
		byPID[p.PID] = p
		if in := pidInst[p.PID]; in != nil {
			p.Instance = in.Name
		}
	}
	chargeRegions(regions, pidInst)
	unread := map[int]bool{}
	for _, p := range procs {
		if p != nil && p.err != nil {
			unread[p.PID] = true
		}
	}
	for i := range r.Instances {
		in := &r.Instances[i]
		for _, pid := range in.PIDs {
			if p := byPID[pid]; p != nil {
				in.Private += p.Private
				in.Own += p.Own
			}
			if unread[pid] {
				in.Unreadable++
			}
		}
		in.Total = in.RegionsResident + in.Own
	}
	return byPID
}

// selectShown applies --pid and --engine: it keeps the instances and
// regions that hold a selected process (or belong to a selected
// instance) and returns the processes to show. The accounting before it
// used everything.
func selectShown(r *Report, opt Options, live []*proc, regions []*Region) ([]*proc, []*Region) {
	sel := selector(opt, r.Instances)
	r.Filtered = len(opt.PIDs) > 0 || opt.Engine != ""
	if r.Filtered {
		var keepInst []Instance
		for _, in := range r.Instances {
			if opt.Engine != "" && engine.Engine(in.Engine) != opt.Engine {
				continue
			}
			hit := len(opt.PIDs) == 0
			for _, pid := range in.PIDs {
				hit = hit || sel(pid)
			}
			if hit {
				keepInst = append(keepInst, in)
			}
		}
		r.Instances = keepInst
		inst := map[string]bool{}
		for _, in := range r.Instances {
			inst[in.Name] = true
		}
		var keepReg []*Region
		for _, rg := range regions {
			hit := rg.Instance != "" && inst[rg.Instance]
			for _, pid := range rg.PIDs {
				hit = hit || sel(pid)
			}
			if hit {
				keepReg = append(keepReg, rg)
			}
		}
		regions = keepReg
	}
	var shown []*proc
	for _, p := range live {
		if sel(p.PID) {
			shown = append(shown, p)
		}
	}
	return shown, regions
}

// fillShown puts the shown processes and regions in the report, largest
// first.
func fillShown(r *Report, shown []*proc, regions []*Region) {
	r.Processes = make([]Process, 0, len(shown))
	for _, p := range shown {
		r.Processes = append(r.Processes, p.Process)
	}
	r.Regions = make([]Region, 0, len(regions))
	for _, rg := range regions {
		r.Regions = append(r.Regions, *rg)
	}
	sort.SliceStable(r.Regions, func(a, b int) bool { return r.Regions[a].Resident > r.Regions[b].Resident })
	if r.Instances == nil {
		r.Instances = []Instance{}
	}
	SortProcesses(r.Processes, "pss")
}

// selector says whether a process is shown: every process, or those given
// by --pid, or those of the instances of --engine (both: those in both).
func selector(opt Options, insts []Instance) func(int) bool {
	var pids, eng map[int]bool
	if len(opt.PIDs) > 0 {
		pids = map[int]bool{}
		for _, pid := range opt.PIDs {
			pids[pid] = true
		}
	}
	if opt.Engine != "" {
		eng = map[int]bool{}
		for _, in := range insts {
			if engine.Engine(in.Engine) == opt.Engine {
				for _, pid := range in.PIDs {
					eng[pid] = true
				}
			}
		}
	}
	return func(pid int) bool {
		return (pids == nil || pids[pid]) && (eng == nil || eng[pid])
	}
}

// SortProcesses orders processes by a size, largest first: rss, pss, uss
// or swap.
func SortProcesses(ps []Process, by string) {
	key := func(p *Process) uint64 {
		switch by {
		case "rss":
			return p.RSS
		case "uss":
			return p.USS
		case "swap":
			return p.Swap
		}
		return p.PSS
	}
	sort.SliceStable(ps, func(a, b int) bool {
		ka, kb := key(&ps[a]), key(&ps[b])
		if ka != kb {
			return ka > kb
		}
		return ps[a].PID < ps[b].PID
	})
}

func instanceName(in *engine.Instance) string {
	name := string(in.Engine)
	if in.Port > 0 {
		return fmt.Sprintf("%s :%d", name, in.Port)
	}
	return fmt.Sprintf("%s pid %d", name, in.PID)
}

// descendants is pid and every process below it.
func descendants(t *engine.Table, pid int) []int {
	kids := map[int][]int{}
	for _, p := range t.Procs {
		kids[p.PPID] = append(kids[p.PPID], p.PID)
	}
	out := []int{pid}
	for i := 0; i < len(out); i++ {
		out = append(out, kids[out[i]]...)
	}
	sort.Ints(out)
	return out
}

// readProcs reads every process, in parallel: most of the time is the
// kernel producing maps and smaps_rollup (a page-table walk), which scales
// with cores. Each worker reuses one buffer.
func (s *scanner) readProcs(ctx context.Context, pids []int, workers int) []*proc {
	if workers <= 0 {
		workers = runtime.GOMAXPROCS(0)
	}
	out := make([]*proc, len(pids))
	var next int
	var mu sync.Mutex
	var wg sync.WaitGroup
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			buf := make([]byte, 0, 256<<10)
			for ctx.Err() == nil {
				mu.Lock()
				i := next
				next++
				mu.Unlock()
				if i >= len(pids) {
					return
				}
				out[i], buf = s.readProc(pids[i], buf)
			}
		}()
	}
	wg.Wait()
	return out
}

// readProc reads one process: status (the table entry and the kernel's
// counters by type), maps (cheap: no page-table walk) to find its shared
// regions, then smaps_rollup for its totals, or smaps when it has pages of
// a shared region: then the region's share is needed mapping by mapping,
// and the totals come from the same read (one page-table walk, and totals
// and shares of one moment: own = PSS - region PSS must not mix two reads).
func (s *scanner) readProc(pid int, buf []byte) (*proc, []byte) {
	p := &proc{Process: Process{PID: pid}}
	base := "/proc/" + strconv.Itoa(pid) + "/"
	buf, err := s.h.ReadFileInto(base+"status", buf)
	if err != nil {
		return p.fail(err), buf
	}
	st := parseStatus(buf)
	if !st.ok {
		p.gone = true // empty: exited while being read
		return p, buf
	}
	p.Comm, p.PPID, p.uid, p.gid = st.Name, st.PPID, st.UID, st.GID
	if !st.HasMM {
		p.kernel = true // a kernel thread or a zombie: no memory of its own
		return p, buf
	}
	p.Anon, p.File, p.Shmem = st.RssAnon, st.RssFile, st.RssShmem

	// Totals come from smaps_rollup (a page-table walk, a few lines of
	// output). The shared regions a process maps come from maps (no walk),
	// also those it holds no page of (the parent that never touched its
	// region). Where it holds shmem pages, PAGEMAP_SCAN tells which pages
	// of each region mapping are present, and the regions' shares are
	// computed from every mapper's pages (collectRegions) — the way the
	// kernel computes PSS, without formatting smaps, whose text for every
	// mapping costs ten times the rollup. smaps is read where that is not
	// possible: hugetlb pages (PSS leaves them out, smaps counts them per
	// mapping), a kernel without PAGEMAP_SCAN (before 6.7), a recorded host,
	// or no rollup (before 4.14).
	readSmaps := st.Hugetlb > 0 || !st.hasSplit
	var tot Counters
	if !readSmaps {
		var done bool
		tot, readSmaps, done, buf = s.readRollup(p, st, base, buf)
		if done {
			return s.notRecorded(p), buf
		}
	}
	if readSmaps {
		var done bool
		tot, done, buf = s.readSmaps(p, st, base, buf)
		if done {
			return s.notRecorded(p), buf
		}
	}
	p.setTotals(tot, readSmaps)
	return p, buf
}

var errNotRecorded = errors.New("its memory (maps, smaps_rollup) is not in the snapshot (collected by an older dbhost, or it exited during the collection)")

// notRecorded tells a process a snapshot has the status of but not the
// memory from one that exited: on a snapshot it is unreadable, not gone.
func (s *scanner) notRecorded(p *proc) *proc {
	if p.gone && !s.h.Live() {
		p.gone, p.err = false, errNotRecorded
	}
	return p
}

// readRollup reads a process's shared region mappings (PROCMAP_QUERY, else
// maps) and its totals from smaps_rollup, and which pages of its regions
// are present. smaps is needed instead (readSmaps) when there is no rollup
// or the pages cannot be read; done means p is complete (failed, exited or
// without memory).
func (s *scanner) readRollup(p *proc, st procStatus, base string, buf []byte) (tot Counters, readSmaps, done bool, _ []byte) {
	pid := p.PID
	var regs []Mapping
	keep := func(h *Header) {
		if _, ok := s.mounts.classify(h); ok {
			regs = append(regs, Mapping{Start: h.Start, End: h.End, Perms: h.Perms, Offset: h.Offset, Major: h.Major,
				Minor: h.Minor, Inode: h.Inode, Path: string(h.Path), Counters: Counters{Size: h.End - h.Start}})
		}
	}
	var vmas []host.VMA
	err := errNoQuery
	if !s.noQuery.Load() {
		vmas, err = s.h.SharedFileMappings(pid)
	}
	switch {
	case err == nil:
		for _, v := range vmas {
			keep(&Header{Start: v.Start, End: v.End, Perms: v.Perms, Offset: v.Offset, Major: v.Major, Minor: v.Minor,
				Inode: v.Inode, Path: []byte(v.Name)})
		}
	case host.IsNotExist(err) || host.IsPermission(err):
		p.fail(err)
		return tot, false, true, buf
	default:
		if err != errNoQuery {
			s.noQuery.Store(true) // no PROCMAP_QUERY here: maps from now on
		}
		buf, err = s.h.ReadFileInto(base+"maps", buf)
		if err != nil {
			p.fail(err)
			return tot, false, true, buf
		}
		ParseMaps(buf, keep)
	}
	p.Source = "smaps_rollup"
	buf, err = s.h.ReadFileInto(base+"smaps_rollup", buf)
	switch {
	case err == nil && len(buf) == 0:
		p.kernel = true // its memory went away: exiting
		return tot, false, true, buf
	case err == nil:
		tot, _ = ParseSmaps(buf, nil)
		p.maps = regs
		if st.RssShmem == 0 {
			for i := range p.maps {
				p.maps[i].scanned = true // no page of any region
			}
		} else if len(regs) > 0 {
			if err := s.present(pid, p.maps); err != nil {
				if host.IsNotExist(err) {
					p.fail(err)
					return tot, false, true, buf
				}
				readSmaps = true
			}
		}
	case host.IsNotExist(err):
		readSmaps = true // no rollup before Linux 4.14
	default:
		p.fail(err)
		return tot, false, true, buf
	}
	return tot, readSmaps, false, buf
}

// readSmaps reads a process's totals and its region mappings from smaps,
// mapping by mapping; done means p is complete (failed or exiting).
func (s *scanner) readSmaps(p *proc, st procStatus, base string, buf []byte) (tot Counters, done bool, _ []byte) {
	p.Source = "smaps"
	buf, err := s.h.ReadFileInto(base+"smaps", buf)
	if err != nil {
		p.fail(err)
		return tot, true, buf
	}
	if len(buf) == 0 {
		p.kernel = true
		return tot, true, buf
	}
	tot, p.maps = ParseSmaps(buf, func(h *Header) bool {
		_, ok := s.mounts.classify(h)
		return ok
	})
	// Its pages too, so that the regions it shares with processes read
	// the other way are computed from everyone's pages.
	if len(p.maps) > 0 && st.RssShmem > 0 {
		s.present(p.PID, p.maps)
	}
	return tot, false, buf
}

// setTotals fills a process's figures from its smaps or smaps_rollup
// totals.
func (p *proc) setTotals(tot Counters, fromSmaps bool) {
	if p.Anon == 0 && p.File == 0 && p.Shmem == 0 {
		p.Anon = tot.Anonymous // status without the split (before Linux 4.5)
	}
	p.RSS, p.PSS, p.USS = tot.Rss, tot.Pss, tot.USS()
	p.Swap, p.SwapPSS = tot.Swap, tot.SwapPss
	p.PSSAnon, p.PSSFile, p.PSSShmem = tot.PssAnon, tot.PssFile, tot.PssShmem
	p.pssAnonOK = tot.HasPssAnon || fromSmaps // smaps: estimated per mapping
	p.Hugetlb = tot.SharedHugetlb + tot.PrivateHugetlb
	p.THP = tot.AnonHugePages
}

// present reads which pages of each region mapping are present.
func (s *scanner) present(pid int, maps []Mapping) error {
	ranges := make([][2]uint64, len(maps))
	for i, m := range maps {
		ranges[i] = [2]uint64{m.Start, m.End}
	}
	runs, err := s.h.PresentPages(pid, ranges)
	if err != nil {
		return err
	}
	for i := range maps {
		m := &maps[i]
		first := m.Offset / pageBytes
		for _, r := range runs[i] {
			m.present = append(m.present, [2]uint64{first + (r[0]-m.Start)/pageBytes, first + (r[1]-m.Start+pageBytes-1)/pageBytes})
		}
		m.scanned = true
	}
	return nil
}

const pageBytes = 4096

// finishProc computes what a process holds in and outside the regions, from
// the regions' mappers.
func finishProc(p *proc, shares map[int][]*Mapper) {
	var regHuge uint64
	for _, mp := range shares[p.PID] {
		p.RegionPSS += mp.PSS
		p.RegionUSS += mp.USS
		regHuge += mp.Hugetlb
	}
	p.hugetlbOutside = sub(p.Hugetlb, regHuge)
	p.Own = sub(p.PSS, p.RegionPSS) + p.hugetlbOutside
	p.Private = sub(p.USS, p.RegionUSS)
}

func (p *proc) fail(err error) *proc {
	if host.IsNotExist(err) {
		p.gone = true // exited mid-scan: not an error
	} else {
		p.err = err
	}
	return p
}

func sub(a, b uint64) uint64 {
	if b > a {
		return 0
	}
	return a - b
}

// asRoot reports whether the processes were read as root: by this
// process, or by the one that collected a snapshot.
func (s *scanner) asRoot() bool { return s.h.Manifest().AsRoot() }

// explainShort groups errors for the one-line unreadable summary.
func explainShort(err error, asRoot bool) string {
	if host.IsPermission(err) {
		if asRoot {
			// Root is refused by ptrace access rules for some processes
			// (another user namespace, a process marked non-dumpable).
			return "permission denied even to root (ptrace access check: another user namespace or a non-dumpable process)"
		}
		return "permission denied (run dbhost as root to read other users' processes)"
	}
	var pe interface{ Unwrap() error }
	if errors.As(err, &pe) {
		if e := pe.Unwrap(); e != nil {
			return e.Error()
		}
	}
	return err.Error()
}

// collectRegions groups the processes' region mappings by object.
func (s *scanner) collectRegions(live []*proc) []*Region {
	idx := map[objKey]*Region{}
	var out []*Region
	for _, p := range live {
		per := map[objKey]*Mapper{}
		for i := range p.maps {
			m := &p.maps[i]
			kind, _ := s.mounts.classify(&Header{Perms: m.Perms, Major: m.Major, Minor: m.Minor, Path: []byte(m.Path)})
			k := objKey{m.Major, m.Minor, m.Inode, kind == KindSysV}
			rg := idx[k]
			if rg == nil {
				rg = &Region{Kind: kind, Name: m.Path, Dev: fmt.Sprintf("%d:%d", m.Major, m.Minor), Inode: m.Inode, key: k}
				if kind == KindSysV {
					id := m.Inode
					rg.ShmID = &id
					rg.Key = strings.TrimSuffix(strings.TrimPrefix(m.Path, "/SYSV"), " (deleted)")
				}
				idx[k] = rg
				out = append(out, rg)
			}
			if m.KernelPageSize > rg.PageSize {
				rg.PageSize = m.KernelPageSize
			}
			mp := per[k]
			if mp == nil {
				rg.Mappers = append(rg.Mappers, Mapper{PID: p.PID, Comm: p.Comm})
				mp = &rg.Mappers[len(rg.Mappers)-1]
				per[k] = mp
				rg.PIDs = append(rg.PIDs, p.PID)
			}
			mp.RSS += m.Rss
			mp.PSS += m.Pss
			mp.USS += m.PrivateClean + m.PrivateDirty + m.PrivateHugetlb
			mp.Swap += m.Swap
			mp.Hugetlb += m.SharedHugetlb + m.PrivateHugetlb
			mp.Size += m.End - m.Start
			rg.mapStart = append(rg.mapStart, mapRef{p.PID, m.Start, m.End})
			rg.runs = append(rg.runs, mapperRuns{pid: p.PID, runs: m.present})
			rg.unscanned = rg.unscanned || !m.scanned
		}
		// per points into rg.Mappers: safe, a region gets at most one new
		// mapper per process, so its slice does not grow under the pointer.
	}
	for _, rg := range out {
		if !rg.unscanned && rg.Kind != KindHugetlb && rg.Kind != KindHugetlbfs && rg.PageSize <= pageBytes {
			shareRegion(rg)
		}
		rg.runs = nil
		for _, mp := range rg.Mappers {
			rg.Mapped += mp.PSS
			if mp.Size > rg.maxMapped {
				rg.maxMapped = mp.Size
			}
			if mp.Hugetlb > 0 && mp.PSS == 0 && mp.Hugetlb > rg.Mapped {
				rg.Mapped = mp.Hugetlb // PSS leaves hugetlb out: the largest mapper's pages
			}
		}
		sort.Ints(rg.PIDs)
	}
	return out
}

// resolve finds each region's apparent and resident size.
func (s *scanner) resolve(regions []*Region, sysv map[uint64]sysvSeg) {
	for _, rg := range regions {
		rg.Size = rg.maxMapped
		if rg.Kind == KindSysV {
			if seg, ok := sysv[rg.Inode]; ok {
				rg.Size = seg.Size
				rg.Key = fmt.Sprintf("0x%08x", uint32(seg.Key))
				if seg.HasRSS {
					rg.Resident, rg.Swap, rg.ResidentKnown, rg.ResidentSource = seg.RSS, seg.Swap, true, "sysvipc"
					continue
				}
			}
		}
		var why error
		if !strings.HasSuffix(rg.Name, " (deleted)") && (rg.Kind == KindPOSIX || rg.Kind == KindHugetlbfs || rg.Kind == KindTmpfs) {
			st, err := s.st.StatFile(rg.Name)
			if err == nil && sameObject(st, rg.key) {
				s.setStat(rg, st, "stat")
				continue
			}
			why = err
		}
		for _, ref := range rg.mapStart {
			st, err := s.st.StatFile(fmt.Sprintf("/proc/%d/map_files/%x-%x", ref.pid, ref.start, ref.end))
			if err == nil {
				s.setStat(rg, st, "map_files")
				break
			}
			why = err
			if host.IsPermission(err) {
				break // the same for every mapper
			}
		}
		if rg.ResidentKnown {
			continue
		}
		rg.Resident, rg.ResidentSource = rg.Mapped, "mapped"
		if host.IsPermission(why) {
			rg.Note = "resident size needs root (CAP_SYS_ADMIN reads /proc/PID/map_files); shown: the pages processes map, a lower bound"
		} else if why != nil {
			rg.Note = "resident size unknown (" + host.Explain(why) + "); shown: the pages processes map, a lower bound"
		}
	}
}

func (s *scanner) setStat(rg *Region, st host.FileStat, src string) {
	rg.Resident, rg.ResidentKnown, rg.ResidentSource = uint64(st.Blocks)*512, true, src
	if st.Size > 0 {
		rg.Size = uint64(st.Size)
	}
}

func sameObject(st host.FileStat, k objKey) bool {
	return unix.Major(st.Dev) == k.major && unix.Minor(st.Dev) == k.minor && st.Ino == k.ino
}

// orphans finds the shared memory no process maps: System V segments with
// no attachment, files in /dev/shm and on hugetlbfs mounts nobody maps.
func (s *scanner) orphans(regions []*Region, sysv map[uint64]sysvSeg, unreadUIDs map[int]bool) []*Region {
	var out []*Region
	seenSysV := map[uint64]bool{}
	seenFile := map[objKey]bool{}
	for _, rg := range regions {
		if rg.Kind == KindSysV {
			seenSysV[rg.Inode] = true
		}
		seenFile[rg.key] = true
	}
	ids := make([]uint64, 0, len(sysv))
	for id := range sysv {
		ids = append(ids, id)
	}
	sort.Slice(ids, func(a, b int) bool { return ids[a] < ids[b] })
	for _, id := range ids {
		if seenSysV[id] {
			continue
		}
		seg := sysv[id]
		id := id
		rg := &Region{Kind: KindSysV, Name: fmt.Sprintf("/SYSV%08x", uint32(seg.Key)), ShmID: &id,
			Key: fmt.Sprintf("0x%08x", uint32(seg.Key)), Inode: id, Size: seg.Size, PIDs: []int{}}
		if seg.HasRSS {
			rg.Resident, rg.Swap, rg.ResidentKnown, rg.ResidentSource = seg.RSS, seg.Swap, true, "sysvipc"
		}
		if seg.Nattch == 0 {
			rg.Orphaned = true
			rg.Note = fmt.Sprintf("no process attached (created by pid %d)", seg.CPID)
		} else {
			rg.Note = fmt.Sprintf("attached %d times by processes this scan could not read", seg.Nattch)
		}
		rg.key = objKey{^uint32(0), ^uint32(0), id, true}
		rg.mapStart = []mapRef{{pid: seg.CPID}}
		out = append(out, rg)
	}
	for _, m := range s.mounts.list {
		if m.fstype == "devtmpfs" || (m.fstype == "tmpfs" && m.point != "/dev/shm") {
			continue // other tmpfs files show up in the host view's tmpfs usage
		}
		names, err := s.h.ReadDir(m.point)
		if err != nil || len(names) > 10000 {
			continue
		}
		kind := KindPOSIX
		if m.fstype == "hugetlbfs" {
			kind = KindHugetlbfs
		}
		for _, n := range names {
			path := strings.TrimSuffix(m.point, "/") + "/" + n
			st, err := s.st.StatFile(path)
			if err != nil || st.Mode&syscall.S_IFMT != syscall.S_IFREG {
				continue
			}
			k := objKey{unix.Major(st.Dev), unix.Minor(st.Dev), st.Ino, false}
			if seenFile[k] {
				continue
			}
			rg := &Region{Kind: kind, Name: path, Dev: fmt.Sprintf("%d:%d", k.major, k.minor), Inode: st.Ino,
				PIDs: []int{}, Orphaned: true, key: k, Note: "no process maps it (it may be held open)"}
			if unreadUIDs[int(st.UID)] || (len(unreadUIDs) > 0 && st.Mode&0o066 != 0) {
				// A process this scan could not read may map it.
				rg.Orphaned, rg.Note = false, "no process this scan could read maps it (run as root to know)"
			}
			s.setStat(rg, st, "stat")
			rg.Size = uint64(st.Size)
			out = append(out, rg)
		}
	}
	return out
}

// chargeRegions charges each region to the instance most of its mappers
// belong to (a System V segment nobody maps: to the instance of its
// creator).
func chargeRegions(regions []*Region, pidInst map[int]*Instance) {
	for _, rg := range regions {
		count := map[*Instance]int{}
		var best *Instance
		for _, pid := range rg.PIDs {
			if in := pidInst[pid]; in != nil {
				count[in]++
				if best == nil || count[in] > count[best] {
					best = in
				}
			}
		}
		if best == nil && rg.Kind == KindSysV && len(rg.mapStart) == 1 && rg.mapStart[0].start == 0 {
			best = pidInst[rg.mapStart[0].pid] // orphan: the creator's instance
		}
		if best == nil {
			continue
		}
		rg.Instance = best.Name
		best.Regions = append(best.Regions, rg.Name)
		best.RegionsSize += rg.Size
		best.RegionsResident += rg.Resident
	}
}

// mapperRuns are one mapping's present pages, as page offsets in the region.
type mapperRuns struct {
	pid  int
	runs [][2]uint64
}

// shareRegion computes each mapper's RSS, PSS and USS of a region from the
// pages every mapper has present: a page mapped n times counts 1/n to each
// mapping of it, as the kernel's PSS does, and to the USS of a process
// only it maps it.
func shareRegion(rg *Region) {
	var points []uint64
	for _, mr := range rg.runs {
		for _, r := range mr.runs {
			points = append(points, r[0], r[1])
		}
	}
	slices.Sort(points)
	points = slices.Compact(points)
	// count[k] is how many mappings have the pages [points[k], points[k+1]).
	diff := make([]int, len(points)+1)
	at := func(v uint64) int { i, _ := slices.BinarySearch(points, v); return i }
	for _, mr := range rg.runs {
		for _, r := range mr.runs {
			diff[at(r[0])]++
			diff[at(r[1])]--
		}
	}
	count := make([]int, len(points))
	c := 0
	for k := range count {
		c += diff[k]
		count[k] = c
	}
	byPID := map[int]*Mapper{}
	for i := range rg.Mappers {
		mp := &rg.Mappers[i]
		mp.RSS, mp.PSS, mp.USS = 0, 0, 0
		byPID[mp.PID] = mp
	}
	pss := map[int]float64{}
	for _, mr := range rg.runs {
		mp := byPID[mr.pid]
		for _, r := range mr.runs {
			mp.RSS += (r[1] - r[0]) * pageBytes
			for k := at(r[0]); k < len(points)-1 && points[k] < r[1]; k++ {
				pages := points[k+1] - points[k]
				pss[mr.pid] += float64(pages*pageBytes) / float64(count[k])
				if count[k] == 1 {
					mp.USS += pages * pageBytes
				}
			}
		}
	}
	for pid, v := range pss {
		byPID[pid].PSS = uint64(v)
	}
}
