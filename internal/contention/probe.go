package contention

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/dbhost/dbhost/internal/host"
)

// DefaultProbeTime bounds the probe: long enough for a stable best
// sub-run, short enough to run on a production host.
const DefaultProbeTime = 3 * time.Second

// ProbeResult is a measured switching capacity; it is also the state file's
// content.
type ProbeResult struct {
	Version  int       `json:"version"`
	Measured time.Time `json:"measured"`
	Kernel   string    `json:"kernel"`
	CPUModel string    `json:"cpu_model"`
	// CPUs is the number of online logical CPUs; PinnedCPUs those a pair
	// of threads ran on (the CPUs dbhost may use).
	CPUs       int     `json:"cpus"`
	PinnedCPUs []int   `json:"pinned_cpus"`
	Seconds    float64 `json:"duration_seconds"`
	SubRuns    int     `json:"sub_runs"`
	// The best sub-run's figures: hand-offs between the paired threads,
	// and the host's context switches (/proc/stat ctxt) over the same time.
	Handoffs           float64 `json:"handoffs_per_second"`
	Switches           float64 `json:"switches_per_second"`
	SwitchesPerHandoff float64 `json:"switches_per_handoff"`
	// CostNS is what one switch costs a core, in nanoseconds: the probe's
	// CPU time over the host's switches in the least costly tenth of the
	// sub-runs. Other
	// work, and a virtual machine's cores being moved to slower hardware
	// (seen here: 30 % dearer switches for seconds at a time), only raise
	// it; the capacity is what a core can do.
	CostNS float64 `json:"cost_per_switch_ns"`
	// PerCore is the capacity: the switches one core could do per second
	// doing nothing else (1 s / CostNS). It is derived from CPU time, not
	// wall time, so other work on the host, which takes CPU time from the
	// probe, does not lower it.
	PerCore float64 `json:"switches_per_second_per_core"`
	// SubRunSwitches lists every sub-run's switches per second, in order.
	SubRunSwitches []float64 `json:"sub_run_switches_per_second"`
	Method         string    `json:"method"`
}

const probeMethod = "one pair of OS threads pinned to each CPU hands a token back and forth through a futex (each hand-off blocks one thread and wakes the other: one context switch); capacity per core = 1 s / the tenth percentile, over short sub-runs, of (the probe's CPU time / the host's /proc/stat ctxt switches), so work that takes CPU from the probe or makes its switches dearer does not lower it; the observed rate is the best sub-run"

// pair is two threads handing a token; padded so that pairs on different
// CPUs do not share a cache line.
type pair struct {
	turn  uint32 // 0 or 1: whose turn it is
	_     [60]byte
	count atomic.Uint64 // hand-offs
	_     [56]byte
}

// Futex operations (linux/futex.h): private to this process.
const (
	futexWaitPrivate = 0 | 128
	futexWakePrivate = 1 | 128
)

// futexWait sleeps while *addr == val (or returns at once if it is not).
func futexWait(addr *uint32, val uint32) {
	unix.Syscall6(unix.SYS_FUTEX, uintptr(unsafe.Pointer(addr)), futexWaitPrivate, uintptr(val), 0, 0, 0)
}

// futexWake wakes up to n threads waiting on addr.
func futexWake(addr *uint32, n int) {
	unix.Syscall6(unix.SYS_FUTEX, uintptr(unsafe.Pointer(addr)), futexWakePrivate, uintptr(n), 0, 0, 0)
}

// run is one side of a pair until stop: wait for its turn, count, hand the
// token over. It runs on its own OS thread pinned to cpu.
func (p *pair) run(side uint32, cpu int, stop *atomic.Bool, ready *sync.WaitGroup, pinErr *atomic.Value) {
	runtime.LockOSThread() // never unlocked: the pinned thread exits with the goroutine
	var set unix.CPUSet
	set.Set(cpu)
	if err := unix.SchedSetaffinity(0, &set); err != nil {
		pinErr.Store(err)
	}
	ready.Done()
	// No timeout on the wait (a timer per wait would cost more than the
	// switch); at the end Probe wakes the waiters until all have seen stop.
	for {
		for atomic.LoadUint32(&p.turn) != side {
			if stop.Load() {
				return
			}
			futexWait(&p.turn, 1-side)
		}
		p.count.Add(1)
		atomic.StoreUint32(&p.turn, 1-side)
		futexWake(&p.turn, 1)
		if stop.Load() {
			return
		}
	}
}

// probeMark is the counters at a sub-run boundary.
type probeMark struct {
	at       time.Time
	ctxt     uint64
	handoffs uint64
	cpu      time.Duration
}

// Probe measures how many context switches this host can do: for d, one
// pair of threads per usable CPU does nothing but switch. It needs the
// live system and uses every CPU fully while it runs.
func Probe(ctx context.Context, h *host.Host, d time.Duration) (*ProbeResult, error) {
	if !h.System() {
		return nil, errors.New("the probe runs on the live system only")
	}
	if d < 100*time.Millisecond {
		return nil, fmt.Errorf("probe time %s is too short (at least 100ms)", d)
	}
	online, cpus, err := probeCPUs(h)
	if err != nil {
		return nil, err
	}
	// Every pinned thread sits in a system call most of the time; enough Ps
	// keep the runtime from handing them around (which adds switches).
	if need := 2*len(cpus) + 2; runtime.GOMAXPROCS(0) < need {
		defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(need))
	}
	pairs, stop, err := startPairs(cpus)
	defer stop()
	if err != nil {
		return nil, err
	}
	// Warm up: threads settle on their CPUs, caches fill.
	if err := sleep(ctx, min(max(d/10, 20*time.Millisecond), 200*time.Millisecond)); err != nil {
		return nil, err
	}
	n := min(max(int(d/(100*time.Millisecond)), 3), 30)
	r := &ProbeResult{CPUs: len(online), PinnedCPUs: cpus, SubRuns: n, Method: probeMethod}
	if err := subRuns(ctx, h, pairs, d/time.Duration(n), r); err != nil {
		return nil, err
	}
	if k := h.Read("/proc/sys/kernel/osrelease"); k.OK() {
		r.Kernel = k.Value
	}
	r.CPUModel = cpuModel(h)
	return r, nil
}

// probeCPUs lists the online CPUs and those of them dbhost may run on.
func probeCPUs(h *host.Host) (online, usable []int, err error) {
	online, err = onlineCPUs(h)
	if err != nil {
		return nil, nil, err
	}
	var allowed unix.CPUSet
	if err := unix.SchedGetaffinity(0, &allowed); err != nil {
		return nil, nil, fmt.Errorf("sched_getaffinity: %w", err)
	}
	for _, c := range online {
		if allowed.IsSet(c) {
			usable = append(usable, c)
		}
	}
	if len(usable) == 0 {
		return nil, nil, errors.New("no online CPU is allowed to dbhost")
	}
	return online, usable, nil
}

// startPairs starts one pair of pinned threads on each CPU and waits until
// all are pinned. stop ends them all; it is to be called whatever the
// error.
func startPairs(cpus []int) (pairs []*pair, stop func(), err error) {
	pairs = make([]*pair, len(cpus))
	var stopped atomic.Bool
	var ready, running sync.WaitGroup
	var pinErr atomic.Value
	for i, c := range cpus {
		p := &pair{}
		pairs[i] = p
		for side := uint32(0); side < 2; side++ {
			ready.Add(1)
			running.Add(1)
			go func() {
				defer running.Done()
				p.run(side, c, &stopped, &ready, &pinErr)
			}()
		}
	}
	stop = func() {
		// A side may check stop just before it is set and wait after its
		// partner has left: wake the pairs until every thread is out.
		stopped.Store(true)
		out := make(chan struct{})
		go func() { running.Wait(); close(out) }()
		for {
			for _, p := range pairs {
				futexWake(&p.turn, 2)
			}
			select {
			case <-out:
				return
			case <-time.After(time.Millisecond):
			}
		}
	}
	ready.Wait()
	if err, _ := pinErr.Load().(error); err != nil {
		return pairs, stop, fmt.Errorf("pinning a thread to a CPU: %w", err)
	}
	return pairs, stop, nil
}

// markProbe reads the counters at a sub-run boundary: the host's switches,
// the pairs' hand-offs and dbhost's CPU time.
func markProbe(h *host.Host, pairs []*pair) (probeMark, error) {
	var m probeMark
	st, err := h.KernelStat()
	if err != nil {
		return m, err
	}
	m.at, m.ctxt = time.Now(), st.ContextSwitches
	for _, p := range pairs {
		m.handoffs += p.count.Load()
	}
	var ru unix.Rusage
	if err := unix.Getrusage(unix.RUSAGE_SELF, &ru); err != nil {
		return m, err
	}
	m.cpu = time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
	return m, nil
}

// subRuns measures r.SubRuns sub-runs of step each and fills r's figures:
// the observed rates from the sub-run with the most hand-offs, the cost
// per switch from the cheap end of all of them.
func subRuns(ctx context.Context, h *host.Host, pairs []*pair, step time.Duration, r *ProbeResult) error {
	start, err := markProbe(h, pairs)
	if err != nil {
		return err
	}
	r.Version, r.Measured = stateVersion, start.at.UTC()
	prev := start
	var best, bestEnd probeMark
	bestRate := -1.0
	var costs []float64
	for i := 0; i < r.SubRuns; i++ {
		if err := sleep(ctx, step); err != nil {
			return err
		}
		m, err := markProbe(h, pairs)
		if err != nil {
			return err
		}
		secs := m.at.Sub(prev.at).Seconds()
		r.SubRunSwitches = append(r.SubRunSwitches, float64(m.ctxt-prev.ctxt)/secs)
		if rate := float64(m.handoffs-prev.handoffs) / secs; rate > bestRate {
			bestRate, best, bestEnd = rate, prev, m
		}
		if m.ctxt > prev.ctxt && m.cpu > prev.cpu {
			costs = append(costs, float64(m.cpu-prev.cpu)/float64(m.ctxt-prev.ctxt))
		}
		prev = m
	}
	r.Seconds = prev.at.Sub(start.at).Seconds()
	secs := bestEnd.at.Sub(best.at).Seconds()
	switches := float64(bestEnd.ctxt - best.ctxt)
	handoffs := float64(bestEnd.handoffs - best.handoffs)
	if switches <= 0 || handoffs <= 0 {
		return errors.New("the threads did not switch: the host gave them no CPU time")
	}
	r.Handoffs = handoffs / secs
	r.Switches = switches / secs
	r.SwitchesPerHandoff = switches / handoffs
	if len(costs) == 0 {
		return errors.New("the probe used no CPU time")
	}
	// The tenth percentile: the least costly sub-runs, but not a lone one
	// whose count other processes' switches inflated.
	slices.Sort(costs)
	r.CostNS = costs[len(costs)/10]
	r.PerCore = 1e9 / r.CostNS
	return nil
}
