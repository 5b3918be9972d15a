package contention

import (
	"fmt"
	"sort"
	"time"

	"github.com/prometheus/procfs"

	"github.com/dbhost/dbhost/internal/host"
)

// Report is one measurement: rates over the interval, the capacity they are
// judged against, and the verdicts. docs/contention.md describes its JSON.
type Report struct {
	Schema    string            `json:"schema"`
	Time      time.Time         `json:"time"`
	Seconds   float64           `json:"interval_seconds"`
	Host      HostFigures       `json:"host"`
	Capacity  Capacity          `json:"capacity"`
	Instances []InstanceFigures `json:"instances"`
	Verdicts  []Verdict         `json:"verdicts"`
	Notes     []string          `json:"notes,omitempty"`
	// Snapshot is the archive of a report on one recorded sample (Single):
	// no rates, and the verdicts on them unknown.
	Snapshot string `json:"snapshot,omitempty"`
}

// Schema names the JSON layout of a Report; fields are only added within
// a version.
const Schema = "dbhost.contention/1"

// Figure is a rate with where it came from, or why it is missing.
type Figure struct {
	Value  float64 `json:"value"`
	Source string  `json:"source"`
	Err    string  `json:"error,omitempty"`
}

// OK reports whether the figure was measured.
func (f Figure) OK() bool { return f.Err == "" }

// HostFigures are the whole host's rates.
type HostFigures struct {
	// CPUs is the number of online logical CPUs (cpuN lines of /proc/stat).
	CPUs int `json:"cpus"`
	// Switches is context switches per second, all CPUs (/proc/stat ctxt).
	Switches Figure `json:"switches_per_second"`
	// SwitchesPerCore is Switches divided by CPUs.
	SwitchesPerCore Figure `json:"switches_per_second_per_core"`
	// PerCPU holds each CPU's switches and busy share; PerCPUSource says
	// where the switches come from, and Averaged marks the fallback of
	// dividing the total evenly.
	PerCPU       []CPUFigures `json:"per_cpu"`
	PerCPUSource string       `json:"per_cpu_source"`
	Averaged     bool         `json:"per_cpu_averaged"`
	// Busy is the share of CPU time not idle, waiting for I/O or stolen,
	// in percent.
	Busy     Figure   `json:"cpu_busy_percent"`
	RunQueue RunQueue `json:"run_queue"`
}

// CPUFigures are one logical CPU's rates.
type CPUFigures struct {
	CPU      int     `json:"cpu"`
	Switches float64 `json:"switches_per_second"`
	Busy     float64 `json:"busy_percent"`
	// Share is Switches over the capacity per core (0.1 is 10 %).
	Share float64 `json:"share_of_capacity"`
}

// RunQueue is the number of runnable tasks: procs_running of /proc/stat at
// both ends (it counts dbhost itself), procs_blocked at the end, and the
// load averages at the end.
type RunQueue struct {
	RunningStart uint64     `json:"procs_running_start"`
	RunningEnd   uint64     `json:"procs_running_end"`
	Blocked      uint64     `json:"procs_blocked"`
	Load         [3]float64 `json:"loadavg"`
	Source       string     `json:"source"`
	Err          string     `json:"error,omitempty"`
}

// InstanceFigures are one database instance's rates.
type InstanceFigures struct {
	Name   string `json:"name"`
	Engine string `json:"engine"`
	Flavor string `json:"flavor,omitempty"`
	PID    int    `json:"pid"`
	// Processes and Threads were there at both ends and are counted; the
	// came/went counts were not (they exist at one end only).
	Processes     int `json:"processes"`
	Threads       int `json:"threads"`
	ProcessesCame int `json:"processes_came"`
	ProcessesWent int `json:"processes_went"`
	ThreadsCame   int `json:"threads_came"`
	ThreadsWent   int `json:"threads_went"`
	// Unreadable counts threads whose status could not be read.
	Unreadable int `json:"threads_unreadable,omitempty"`
	// Switches over the interval (voluntary + involuntary) and per second.
	SwitchCount uint64  `json:"switches"`
	Switches    float64 `json:"switches_per_second"`
	Voluntary   float64 `json:"voluntary_per_second"`
	Involuntary float64 `json:"involuntary_per_second"`
	// CPUCores is CPU time used per second (1.0 = one core busy).
	CPUCores float64 `json:"cpu_cores"`
	Source   string  `json:"source"`
	// Excluded counts the processes/threads serving dbhost's own
	// connection, left out of the figures.
	Excluded int          `json:"excluded_own,omitempty"`
	Queries  QueryFigures `json:"queries"`
	// PerQuery is context switches per query counting both directions:
	// /proc counts a thread's switches out; each time it resumes it is
	// switched in as often (the switch is counted on the task it
	// replaces). Twice the switches out, over the queries: the scale on
	// which a query costs at least 2 (switch the worker in, and out once
	// it has answered). Switches between two of the instance's own threads
	// are counted twice, so it is an upper bound.
	PerQuery *float64         `json:"switches_per_query,omitempty"`
	Procs    []ProcessFigures `json:"processes_detail"`
	Err      string           `json:"error,omitempty"`
}

// QueryFigures are an instance's queries over the interval.
type QueryFigures struct {
	// Count is the counter's difference minus dbhost's own queries (Own).
	Count     uint64  `json:"count"`
	PerSecond float64 `json:"per_second"`
	Own       int     `json:"own_subtracted"`
	Source    string  `json:"source,omitempty"`
	Via       string  `json:"via,omitempty"`
	Note      string  `json:"note,omitempty"`
	// Transactions: the counter counts transactions (pg_stat_database),
	// each of one or more statements.
	Transactions bool   `json:"transactions,omitempty"`
	Err          string `json:"error,omitempty"`
}

// ProcessFigures are one process's rates (all its threads).
type ProcessFigures struct {
	PID         int     `json:"pid"`
	Comm        string  `json:"comm"`
	Threads     int     `json:"threads"`
	Voluntary   float64 `json:"voluntary_per_second"`
	Involuntary float64 `json:"involuntary_per_second"`
	CPUCores    float64 `json:"cpu_cores"`
}

const (
	procStatSource = "/proc/stat ctxt"
	busySource     = "/proc/stat cpu lines"
	runQueueSource = "/proc/stat procs_running, procs_blocked; /proc/loadavg"
	taskSource     = "/proc/PID/task/TID/status voluntary_ctxt_switches + nonvoluntary_ctxt_switches"
)

// Compare turns two snapshots of the same sampler into rates and verdicts.
func Compare(a, b *Snapshot, c Capacity) *Report {
	secs := b.at.Sub(a.at).Seconds()
	r := &Report{Schema: Schema, Time: b.at.UTC(), Seconds: secs, Capacity: c, Notes: append([]string(nil), b.notes...)}
	if secs <= 0 {
		r.Notes = append(r.Notes, "the two samples were taken at the same time; no rates")
		secs = 1e-9
	}
	r.Host = hostFigures(a, b, secs, c)
	for i := range b.insts {
		if i < len(a.insts) {
			r.Instances = append(r.Instances, instanceFigures(&a.insts[i], &b.insts[i], secs, a.tableErr, b.tableErr))
		}
	}
	r.Verdicts = judge(r)
	return r
}

func hostFigures(a, b *Snapshot, secs float64, c Capacity) HostFigures {
	var hf HostFigures
	hf.RunQueue.Source = runQueueSource
	hf.Switches.Source, hf.SwitchesPerCore.Source, hf.Busy.Source = procStatSource, procStatSource+" / CPUs", busySource
	if err := firstErr(a.statErr, b.statErr); err != nil {
		why := host.Explain(err)
		hf.Switches.Err, hf.SwitchesPerCore.Err, hf.Busy.Err, hf.RunQueue.Err = why, why, why, why
		hf.PerCPUSource = "unavailable: " + why
		return hf
	}
	hf.CPUs = len(b.stat.CPU)
	hf.RunQueue.RunningStart, hf.RunQueue.RunningEnd, hf.RunQueue.Blocked = a.stat.ProcessesRunning, b.stat.ProcessesRunning, b.stat.ProcessesBlocked
	if b.loadErr != nil {
		hf.RunQueue.Err = host.Explain(b.loadErr)
	} else {
		hf.RunQueue.Load = [3]float64{b.load.Load1, b.load.Load5, b.load.Load15}
	}
	if b.stat.ContextSwitches < a.stat.ContextSwitches {
		hf.Switches.Err = "ctxt went backwards between the samples"
		hf.SwitchesPerCore.Err = hf.Switches.Err
	} else {
		hf.Switches.Value = float64(b.stat.ContextSwitches-a.stat.ContextSwitches) / secs
		if hf.CPUs > 0 {
			hf.SwitchesPerCore.Value = hf.Switches.Value / float64(hf.CPUs)
		}
	}
	hf.Busy.Value = busyPercent(a.stat.CPUTotal, b.stat.CPUTotal)

	ids := make([]int, 0, len(b.stat.CPU))
	for id := range b.stat.CPU {
		if _, ok := a.stat.CPU[id]; ok {
			ids = append(ids, int(id))
		}
	}
	sort.Ints(ids)
	perCPU, why := perCPUSwitches(a, b, ids, secs)
	switch {
	case why == "":
		hf.PerCPUSource = b.cpuSource
	case hf.Switches.OK():
		hf.PerCPUSource, hf.Averaged = averagedSource+why, true
	default:
		hf.PerCPUSource = "unavailable: " + why
	}
	for _, id := range ids {
		cf := CPUFigures{CPU: id, Busy: busyPercent(a.stat.CPU[int64(id)], b.stat.CPU[int64(id)])}
		switch {
		case perCPU != nil:
			cf.Switches = perCPU[id]
		case hf.Averaged:
			cf.Switches = hf.SwitchesPerCore.Value
		}
		if c.PerCore > 0 {
			cf.Share = cf.Switches / c.PerCore
		}
		hf.PerCPU = append(hf.PerCPU, cf)
	}
	return hf
}

// perCPUSwitches returns each CPU's switches per second from the per-CPU
// counters, or why there are none.
func perCPUSwitches(a, b *Snapshot, ids []int, secs float64) (map[int]float64, string) {
	switch {
	case b.cpuWhy != "":
		return nil, b.cpuWhy
	case a.cpusErr != nil || b.cpusErr != nil:
		return nil, host.Explain(firstErr(a.cpusErr, b.cpusErr))
	case a.cpus == nil || b.cpus == nil:
		return nil, "no per-CPU counts"
	}
	out := map[int]float64{}
	for _, id := range ids {
		x, okA := a.cpus[id]
		y, okB := b.cpus[id]
		if !okA || !okB || y < x {
			return nil, fmt.Sprintf("no usable per-CPU count for CPU %d (it came online or the counter restarted)", id)
		}
		out[id] = float64(y-x) / secs
	}
	return out, ""
}

// busyPercent is the share of CPU time spent neither idle, waiting for
// I/O, nor stolen by the hypervisor. (user already includes guest time.)
func busyPercent(a, b procfs.CPUStat) float64 {
	// A CPU's iowait (and, across a CPU going offline, others) can go
	// backwards (proc(5)): a negative step counts as none, so that busy
	// never exceeds the total (a CPU 100.3 % busy under load).
	d := func(x, y float64) float64 { return max(y-x, 0) }
	busy := d(a.User, b.User) + d(a.Nice, b.Nice) + d(a.System, b.System) + d(a.IRQ, b.IRQ) + d(a.SoftIRQ, b.SoftIRQ)
	total := busy + d(a.Idle, b.Idle) + d(a.Iowait, b.Iowait) + d(a.Steal, b.Steal)
	if total <= 0 {
		return 0
	}
	return 100 * busy / total
}

func instanceFigures(a, b *instSnap, secs float64, errA, errB error) InstanceFigures {
	in := b.t.in
	f := InstanceFigures{Name: in.Name(), Engine: string(in.Engine), Flavor: in.Flavor, PID: in.PID, Source: taskSource, Excluded: len(b.t.q.own)}
	f.Queries = QueryFigures{Source: b.t.q.source, Via: b.t.q.via, Note: b.t.q.note, Own: b.t.q.ownQueries, Transactions: b.t.q.transactions}
	switch {
	case errA != nil || errB != nil:
		f.Err = "process table: " + host.Explain(firstErr(errA, errB))
	case !a.alive || !b.alive:
		f.Err = fmt.Sprintf("main process %d was not running at both samples", in.PID)
	}
	for pid, pb := range b.procs {
		pa, ok := a.procs[pid]
		if !ok {
			f.ProcessesCame++
			f.ThreadsCame += len(pb.tasks)
			continue
		}
		pf, switches := f.compareProcess(pid, pa, pb, secs)
		f.Processes++
		f.Threads += pf.Threads
		f.SwitchCount += switches
		f.Voluntary += pf.Voluntary
		f.Involuntary += pf.Involuntary
		f.CPUCores += pf.CPUCores
		f.Procs = append(f.Procs, pf)
	}
	for pid, pa := range a.procs {
		if _, ok := b.procs[pid]; !ok {
			f.ProcessesWent++
			f.ThreadsWent += len(pa.tasks)
		}
	}
	f.Switches = float64(f.SwitchCount) / secs
	sortProcs(f.Procs)

	f.countQueries(a, b, secs)
	return f
}

// compareProcess is one process's figures between two samples of it, and
// its threads' context switches; the threads that came and went between
// them, and its unreadable ones, count on f.
func (f *InstanceFigures) compareProcess(pid int, pa, pb procSnap, secs float64) (ProcessFigures, uint64) {
	pf := ProcessFigures{PID: pid, Comm: pb.comm}
	var vol, invol uint64
	for tid, tb := range pb.tasks {
		ta, ok := pa.tasks[tid]
		// A count that went down is a new thread with a reused ID.
		if !ok || tb.vol < ta.vol || tb.invol < ta.invol {
			f.ThreadsCame++
			if ok {
				f.ThreadsWent++
			}
			continue
		}
		pf.Threads++
		vol += tb.vol - ta.vol
		invol += tb.invol - ta.invol
	}
	for tid := range pa.tasks {
		if _, ok := pb.tasks[tid]; !ok {
			f.ThreadsWent++
		}
	}
	f.Unreadable += pb.unreadable
	if pb.readErr != "" && len(pb.tasks) == 0 && f.Err == "" {
		f.Err = pb.readErr
	}
	if pa.cpuOK && pb.cpuOK && pb.cpu >= pa.cpu {
		pf.CPUCores = (pb.cpu - pa.cpu) / secs
	}
	pf.Voluntary, pf.Involuntary = float64(vol)/secs, float64(invol)/secs
	return pf, vol + invol
}

// countQueries is the instance's query count between the two samples, less
// dbhost's own, and the switches per query.
func (f *InstanceFigures) countQueries(a, b *instSnap, secs float64) {
	switch {
	case a.qErr != nil || b.qErr != nil:
		f.Queries.Err = host.Explain(firstErr(a.qErr, b.qErr))
	case b.queries < a.queries:
		f.Queries.Err = "the query counter went backwards (statistics reset, server restart or evicted pg_stat_statements entries)"
	default:
		n := b.queries - a.queries
		own := uint64(max(0, f.Queries.Own))
		if n < own {
			f.Queries.Own = int(n) // what the counter shows of dbhost's own is all it shows
			own = n
		}
		f.Queries.Count = n - own
		f.Queries.PerSecond = float64(f.Queries.Count) / secs
		if f.Queries.Count > 0 && f.Err == "" {
			v := 2 * float64(f.SwitchCount) / float64(f.Queries.Count)
			f.PerQuery = &v
		}
	}
}

// sortProcs orders processes by switches, most first, then by PID.
func sortProcs(ps []ProcessFigures) {
	sort.Slice(ps, func(i, j int) bool {
		si, sj := ps[i].Voluntary+ps[i].Involuntary, ps[j].Voluntary+ps[j].Involuntary
		if si != sj {
			return si > sj
		}
		return ps[i].PID < ps[j].PID
	})
}

func firstErr(errs ...error) error {
	for _, e := range errs {
		if e != nil {
			return e
		}
	}
	return nil
}
