// Package contention judges context switches the way they tell something:
// per logical core against what this host can switch (a measured or assumed
// capacity), and per database query. It samples the host's counters
// (/proc/stat, per-CPU software perf counters, /proc/loadavg), every
// database process's threads (/proc/PID/task/TID/status) and each
// instance's query counter, twice over an interval, and turns the
// differences into rates and verdicts.
package contention

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/dbhost/dbhost/internal/engine"
	_ "github.com/dbhost/dbhost/internal/engine/all" // register every engine
	"github.com/dbhost/dbhost/internal/host"
)

// DefaultInterval is how long a measurement lasts unless told otherwise:
// long enough to smooth bursts, short enough to watch.
const DefaultInterval = 10 * time.Second

// Options select what a Sampler watches.
type Options struct {
	// PIDs keeps the instances whose main process, or any of its
	// descendants, has one of these PIDs; empty keeps all.
	PIDs []int
	// Engines keeps the instances of these engines; empty keeps all.
	Engines []engine.Engine
	// Engine holds the connection options (DSNs, --no-connect, timeout).
	Engine engine.Options
}

// Sampler observes one host: its CPUs' context switches and the database
// instances found on it, with a query counter per instance where one can
// be read. Its per-CPU counters and database connections stay open between
// samples; Close releases them.
type Sampler struct {
	h       *host.Host
	targets []*target
	cpu     cpuCounter
	// cpuWhy says why per-CPU counters are unavailable ("" when cpu is set).
	cpuWhy string
	notes  []string
}

// target is one watched instance.
type target struct {
	in *engine.Instance
	q  *querySource
}

// NewSampler discovers the database instances (engine.ReadTable and
// engine.Discover), keeps those the options select, opens each one's query
// counter and the per-CPU switch counters. Failing to connect to a database
// is not an error: its per-query verdict says why.
func NewSampler(ctx context.Context, h *host.Host, opts Options) (*Sampler, error) {
	t, err := engine.ReadTable(h)
	if err != nil {
		return nil, err
	}
	insts, notes := engine.Discover(ctx, h, t, opts.Engine)
	s := &Sampler{h: h, notes: notes}
	for _, in := range insts {
		if len(opts.Engines) > 0 && !slices.Contains(opts.Engines, in.Engine) {
			continue
		}
		if len(opts.PIDs) > 0 && !anyPID(descendants(t, in.PID), opts.PIDs) {
			continue
		}
		s.targets = append(s.targets, &target{in: in, q: openQueries(ctx, h, in, opts.Engine)})
	}
	if len(opts.PIDs) > 0 && len(s.targets) == 0 {
		s.notes = append(s.notes, fmt.Sprintf("no database instance has PID %s", joinInts(opts.PIDs)))
	}
	s.cpu, s.cpuWhy = openCPUCounters(h)
	return s, nil
}

// Instances lists the instances being watched.
func (s *Sampler) Instances() []*engine.Instance {
	out := make([]*engine.Instance, len(s.targets))
	for i, t := range s.targets {
		out[i] = t.in
	}
	return out
}

// Close releases the per-CPU counters and database connections.
func (s *Sampler) Close() {
	if s.cpu != nil {
		s.cpu.close()
	}
	for _, t := range s.targets {
		t.q.close()
	}
}

// Measure takes a sample, waits for the interval (or until ctx ends) and
// takes another, and compares them. A snapshot holds one sample: it is
// reported as one (Single), without waiting.
func Measure(ctx context.Context, s *Sampler, interval time.Duration, c Capacity) (*Report, error) {
	if !s.h.Live() {
		sn := s.Sample(ctx)
		if sn.statErr != nil && len(sn.insts) == 0 {
			return nil, fmt.Errorf("%s holds no /proc/stat and no database instance: nothing to report (collected by a dbhost that did not record what contention reads? collect it again)", s.h.Source())
		}
		return Single(sn, c), nil
	}
	a := s.Sample(ctx)
	if err := sleep(ctx, interval); err != nil {
		return nil, err
	}
	return Compare(a, s.Sample(ctx), c), nil
}

// sleep waits for d or until ctx ends.
func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

func anyPID(have, want []int) bool {
	for _, p := range want {
		if slices.Contains(have, p) {
			return true
		}
	}
	return false
}

// descendants lists pid and every process below it in the table: an
// instance is its main process and all it started (PostgreSQL backends,
// wrapper children).
func descendants(t *engine.Table, pid int) []int {
	children := map[int][]int{}
	for _, p := range t.Procs {
		children[p.PPID] = append(children[p.PPID], p.PID)
	}
	out := []int{pid}
	seen := map[int]bool{pid: true}
	for i := 0; i < len(out); i++ {
		for _, c := range children[out[i]] {
			if !seen[c] { // a table read over time can hold a loop
				seen[c] = true
				out = append(out, c)
			}
		}
	}
	return out
}

func joinInts(v []int) string {
	s := make([]string, len(v))
	for i, n := range v {
		s[i] = fmt.Sprint(n)
	}
	return strings.Join(s, ", ")
}
