package contention

import (
	"fmt"

	"github.com/dbhost/dbhost/internal/host"
)

// oneSample says why a recorded host gives no rates; needsTwo says it
// where a rate is missing.
const (
	oneSample = "one sample: a snapshot holds one reading of each counter, and rates need two readings over an interval (run dbhost contention on the host itself)"
	needsTwo  = "a rate needs two samples; the snapshot holds one"
)

// Single reports what one sample (a snapshot's) tells without a second:
// the CPUs, the run queue and load, each instance's processes and threads.
// Every rate, and every verdict that judges one, says it needs two
// samples.
func Single(sn *Snapshot, c Capacity) *Report {
	r := &Report{Schema: Schema, Time: sn.at.UTC(), Capacity: c, Snapshot: sn.recorded, Notes: append([]string(nil), sn.notes...)}
	hf := &r.Host
	hf.Switches = Figure{Source: procStatSource, Err: needsTwo}
	hf.SwitchesPerCore = Figure{Source: procStatSource + " / CPUs", Err: needsTwo}
	hf.Busy = Figure{Source: busySource, Err: needsTwo}
	hf.PerCPUSource = "unavailable: " + needsTwo
	hf.RunQueue.Source = runQueueSource
	switch {
	case sn.statErr != nil:
		why := host.Explain(sn.statErr)
		hf.Switches.Err, hf.SwitchesPerCore.Err, hf.Busy.Err, hf.RunQueue.Err = why, why, why, why
	default:
		hf.CPUs = len(sn.stat.CPU)
		rq := &hf.RunQueue
		rq.RunningStart, rq.RunningEnd, rq.Blocked = sn.stat.ProcessesRunning, sn.stat.ProcessesRunning, sn.stat.ProcessesBlocked
		if sn.loadErr != nil {
			rq.Err = host.Explain(sn.loadErr)
		} else {
			rq.Load = [3]float64{sn.load.Load1, sn.load.Load5, sn.load.Load15}
		}
	}
	for i := range sn.insts {
		r.Instances = append(r.Instances, singleInstance(&sn.insts[i], sn.tableErr))
	}
	r.Verdicts = judge(r)
	return r
}

// singleInstance counts an instance's processes and threads in one sample;
// its switches and queries need a second.
func singleInstance(is *instSnap, tableErr error) InstanceFigures {
	in := is.t.in
	f := InstanceFigures{Name: in.Name(), Engine: string(in.Engine), Flavor: in.Flavor, PID: in.PID, Source: taskSource, Err: needsTwo}
	f.Queries = QueryFigures{Err: needsTwo}
	if is.qErr != nil {
		f.Queries.Err = host.Explain(is.qErr)
	}
	switch {
	case tableErr != nil:
		f.Err = "process table: " + host.Explain(tableErr)
	case !is.alive:
		f.Err = fmt.Sprintf("main process %d is not in the snapshot's process table", in.PID)
	}
	for pid, ps := range is.procs {
		f.Processes++
		f.Threads += len(ps.tasks)
		f.Unreadable += ps.unreadable
		f.Procs = append(f.Procs, ProcessFigures{PID: pid, Comm: ps.comm, Threads: len(ps.tasks)})
		if ps.readErr != "" && len(ps.tasks) == 0 && f.Err == needsTwo {
			f.Err = ps.readErr
		}
	}
	sortProcs(f.Procs)
	return f
}
