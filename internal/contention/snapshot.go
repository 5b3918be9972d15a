package contention

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/procfs"

	"github.com/dbhost/dbhost/internal/engine"
	"github.com/dbhost/dbhost/internal/host"
)

// Snapshot is the host's counters at one moment; two of them make a
// measurement (Compare).
type Snapshot struct {
	at      time.Time
	stat    procfs.Stat
	statErr error
	load    *procfs.LoadAvg
	loadErr error
	// cpus are the per-CPU switch counters, nil when unavailable (cpuWhy).
	cpus      map[int]uint64
	cpusErr   error
	cpuSource string
	cpuWhy    string
	tableErr  error
	insts     []instSnap
	notes     []string
	// recorded is the archive a recorded host's sample was read from.
	recorded string
}

// instSnap is one instance at one moment.
type instSnap struct {
	t *target
	// alive: the main process was in the process table.
	alive bool
	procs map[int]procSnap
	// queries is the engine's query counter, valid when qErr is nil.
	queries uint64
	qErr    error
}

// procSnap is one process of an instance.
type procSnap struct {
	comm  string
	cpu   float64 // user+system CPU seconds since it started
	cpuOK bool
	tasks map[int]taskSnap
	// tids lists every thread seen, counted or not.
	tids []int
	// unreadable counts threads whose status could not be read (other
	// than by exiting).
	unreadable int
	readErr    string
}

// taskSnap is one thread's context switches since it started.
type taskSnap struct{ vol, invol uint64 }

// Sample reads every counter now. It never fails as a whole: what could not
// be read is kept as an error and judged "unknown".
func (s *Sampler) Sample(ctx context.Context) *Snapshot {
	sn := &Snapshot{cpuWhy: s.cpuWhy, notes: s.notes}
	// The per-CPU counters are read right next to /proc/stat, so both
	// cover the same interval.
	if s.cpu != nil {
		sn.cpus, sn.cpusErr = s.cpu.read()
		sn.cpuSource = s.cpu.source()
	}
	sn.stat, sn.statErr = s.h.KernelStat()
	sn.at = time.Now()
	if !s.h.Live() {
		sn.at, sn.recorded = s.h.Manifest().CollectedAt, s.h.Source()
	}
	sn.load, sn.loadErr = s.h.LoadAvg()
	for _, t := range s.targets {
		is := instSnap{t: t}
		is.queries, is.qErr = t.q.read(ctx)
		sn.insts = append(sn.insts, is)
	}
	var table *engine.Table // read once, when a tree cannot be followed
	for i, t := range s.targets {
		is := &sn.insts[i]
		if procs, ok := s.followTree(t); ok {
			is.procs, is.alive = procs, len(procs) > 0 || t.q.own[t.in.PID]
			continue
		}
		if table == nil {
			var err error
			if table, err = engine.ReadTable(s.h); err != nil {
				sn.tableErr = err
				return sn
			}
		}
		if _, ok := table.Get(t.in.PID); !ok {
			continue
		}
		is.alive = true
		is.procs = map[int]procSnap{}
		for _, pid := range descendants(table, t.in.PID) {
			if t.q.own[pid] {
				continue // the backend serving dbhost's own connection
			}
			if ps, ok := readProc(s.h, pid, t.q.own); ok {
				is.procs[pid] = ps
			}
		}
	}
	return sn
}

// followTree reads an instance's processes by following each thread's
// /proc/PID/task/TID/children from the main process: only the instance's
// own processes are read, not the whole process table. ok is false when
// the kernel has no children files (CONFIG_PROC_CHILDREN) or the main
// thread's cannot be read; an empty map means the main process is gone.
func (s *Sampler) followTree(t *target) (map[int]procSnap, bool) {
	main := t.in.PID
	if _, err := s.h.ReadFile(fmt.Sprintf("/proc/%d/task/%d/children", main, main)); err != nil {
		if _, serr := s.h.Tasks(main); serr != nil && host.IsNotExist(serr) {
			return map[int]procSnap{}, true // the process itself is gone
		}
		return nil, false
	}
	procs := map[int]procSnap{}
	queue := []int{main}
	seen := map[int]bool{main: true}
	for len(queue) > 0 {
		pid := queue[0]
		queue = queue[1:]
		if t.q.own[pid] {
			continue // the backend serving dbhost's own connection
		}
		ps, ok := readProc(s.h, pid, t.q.own)
		if !ok {
			continue
		}
		procs[pid] = ps
		for _, tid := range ps.tids {
			b, err := s.h.ReadFile(fmt.Sprintf("/proc/%d/task/%d/children", pid, tid))
			if err != nil {
				continue
			}
			for _, f := range strings.Fields(string(b)) {
				if c, err := strconv.Atoi(f); err == nil && c > 0 && !seen[c] {
					seen[c] = true
					queue = append(queue, c)
				}
			}
		}
	}
	return procs, true
}

// readProc reads a process's CPU time and every thread's switch counts. A
// process that exited is skipped (ok false); a thread that exited is left
// out.
func readProc(h *host.Host, pid int, own map[int]bool) (procSnap, bool) {
	tids, err := h.Tasks(pid)
	if err != nil {
		if host.IsNotExist(err) {
			return procSnap{}, false
		}
		return procSnap{readErr: host.Explain(err)}, true
	}
	ps := procSnap{tasks: make(map[int]taskSnap, len(tids)), tids: tids}
	if st, err := h.ProcStat(pid); err == nil {
		ps.comm, ps.cpu, ps.cpuOK = st.Comm, st.CPUTime(), true
	}
	for _, tid := range tids {
		if own[tid] {
			continue
		}
		st, err := h.TaskStatus(pid, tid)
		if err != nil {
			if !host.IsNotExist(err) {
				ps.unreadable++
				ps.readErr = host.Explain(err)
			}
			continue
		}
		ps.tasks[tid] = taskSnap{vol: st.VoluntaryCtxtSwitches, invol: st.NonVoluntaryCtxtSwitches}
	}
	return ps, true
}
