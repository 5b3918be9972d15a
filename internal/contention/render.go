package contention

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"

	"github.com/dbhost/dbhost/internal/textio"
)

// WriteJSON writes a value as indented JSON (a Report, a ProbeResult).
func WriteJSON(w io.Writer, v any, indent bool) error {
	enc := json.NewEncoder(w)
	if indent {
		enc.SetIndent("", "  ")
	}
	return enc.Encode(v)
}

// topProcesses is how many processes per instance the text shows.
const topProcesses = 5

// WriteText writes a report for people.
func WriteText(w io.Writer, r *Report) error {
	ew := &textio.ErrWriter{W: w}
	p := func(format string, args ...any) { fmt.Fprintf(ew, format, args...) }
	hf := r.Host
	if r.Snapshot != "" {
		p("dbhost contention: snapshot %s taken %s, %d CPUs\n", r.Snapshot, r.Time.Local().Format("2006-01-02 15:04:05"), hf.CPUs)
		p("  %s; shown: what one sample tells\n", oneSample)
	} else {
		p("dbhost contention: %.1f s ending %s, %d CPUs\n", r.Seconds, r.Time.Local().Format("15:04:05"), hf.CPUs)
	}
	p("Capacity: %s\n", r.Capacity.Note)

	p("\nHost\n")
	if hf.Switches.OK() {
		p("  switches   %s/s total, %s/s per core   [%s]\n", human(hf.Switches.Value), human(hf.SwitchesPerCore.Value), hf.Switches.Source)
	} else {
		p("  switches   unknown: %s\n", hf.Switches.Err)
	}
	if len(hf.PerCPU) > 0 {
		var parts []string
		for _, c := range hf.PerCPU {
			parts = append(parts, fmt.Sprintf("cpu%d %s/s (%s) %.0f%% busy", c.CPU, human(c.Switches), pct(c.Share), c.Busy))
		}
		p("  per CPU    %s   [%s]\n", strings.Join(parts, ", "), hf.PerCPUSource)
	} else if hf.PerCPUSource != "" {
		p("  per CPU    %s\n", hf.PerCPUSource)
	}
	if hf.Busy.OK() {
		p("  CPU busy   %.0f%%   [%s]\n", hf.Busy.Value, hf.Busy.Source)
	} else if r.Snapshot != "" {
		p("  CPU busy   unknown: %s\n", hf.Busy.Err)
	}
	rq := hf.RunQueue
	if rq.Err == "" && r.Snapshot != "" {
		p("  run queue  %d running (dbhost included), %d blocked; load %.2f %.2f %.2f   [%s]\n",
			rq.RunningEnd, rq.Blocked, rq.Load[0], rq.Load[1], rq.Load[2], rq.Source)
	} else if rq.Err == "" {
		p("  run queue  %d running at start, %d at end (dbhost included), %d blocked; load %.2f %.2f %.2f   [%s]\n",
			rq.RunningStart, rq.RunningEnd, rq.Blocked, rq.Load[0], rq.Load[1], rq.Load[2], rq.Source)
	} else {
		p("  run queue  unknown: %s\n", rq.Err)
	}

	if len(r.Instances) == 0 {
		p("\nDatabases: none found running\n")
	} else {
		p("\nDatabases   [switches: %s]\n", taskSource)
	}
	for _, in := range r.Instances {
		writeInstance(p, in, r.Snapshot != "")
	}

	p("\nVerdicts\n")
	for _, v := range r.Verdicts {
		p("  %s %-8s %-18s %s\n", mark(v.Status), v.Status, v.Subject, v.Summary)
	}
	for _, n := range r.Notes {
		p("\nnote: %s\n", n)
	}
	return ew.Err
}

// writeInstance writes one instance's figures; from one sample (a
// snapshot) there are no rates to write.
func writeInstance(p func(string, ...any), in InstanceFigures, single bool) {
	p("  %s  %s, pid %d\n", in.Name, in.Flavor, in.PID)
	if in.Err != "" {
		p("    %s\n", in.Err)
	}
	p("    %d processes, %d threads counted", in.Processes, in.Threads)
	if in.ProcessesCame+in.ProcessesWent+in.ThreadsCame+in.ThreadsWent > 0 {
		p(" (not counted: %d processes and %d threads came, %d processes and %d threads went)", in.ProcessesCame, in.ThreadsCame, in.ProcessesWent, in.ThreadsWent)
	}
	if in.Unreadable > 0 {
		p("; %d threads unreadable", in.Unreadable)
	}
	p("\n")
	if !single {
		p("    switches %s/s (voluntary %s/s, involuntary %s/s), CPU %.2f cores\n", human(in.Switches), human(in.Voluntary), human(in.Involuntary), in.CPUCores)
	}
	q := in.Queries
	if q.Err != "" {
		p("    queries unknown: %s\n", q.Err)
	} else {
		via := ""
		if q.Via != "" {
			via = " via " + q.Via
		}
		p("    queries %s/s (%d, dbhost's own %d subtracted)   [%s%s]\n", human(q.PerSecond), q.Count, q.Own, q.Source, via)
		if q.Note != "" {
			p("    %s\n", q.Note)
		}
	}
	if in.PerQuery != nil {
		p("    %.1f switches per query\n", *in.PerQuery)
	}
	for i, pf := range in.Procs {
		if i == topProcesses {
			p("    ... %d more processes\n", len(in.Procs)-topProcesses)
			break
		}
		if single {
			p("      %7d %-16s %3d threads\n", pf.PID, pf.Comm, pf.Threads)
			continue
		}
		p("      %7d %-16s %3d threads  %8s/s vol %8s/s invol  %.2f cores\n", pf.PID, pf.Comm, pf.Threads, human(pf.Voluntary), human(pf.Involuntary), pf.CPUCores)
	}
}

func mark(status string) string {
	switch status {
	case OK:
		return "✓"
	case Warning:
		return "✗"
	case Info:
		return "i"
	}
	return "?"
}

// WriteProbeText writes a probe result for people.
func WriteProbeText(w io.Writer, r *ProbeResult) error {
	ew := &textio.ErrWriter{W: w}
	fmt.Fprintf(ew, "dbhost contention --probe: %.1f s on %d of %d CPUs (%s, kernel %s)\n", r.Seconds, len(r.PinnedCPUs), r.CPUs, r.CPUModel, r.Kernel)
	fmt.Fprintf(ew, "  observed        %s switches/s total   [/proc/stat ctxt, best of %d sub-runs]\n", human(r.Switches), r.SubRuns)
	fmt.Fprintf(ew, "  capacity        %s switches/s per core   [1 s / CPU time per switch]\n", human(r.PerCore))
	fmt.Fprintf(ew, "  hand-offs       %s/s (%.2f switches per hand-off)\n", human(r.Handoffs), r.SwitchesPerHandoff)
	fmt.Fprintf(ew, "  cost per switch %.2f µs of CPU time\n", r.CostNS/1000)
	fmt.Fprintf(ew, "  %s/s per core is the ceiling; above %.0f %% of it (%s/s) switching takes a noticeable share of a core\n", human(r.PerCore), MaxShare*100, human(r.PerCore*MaxShare))
	return ew.Err
}
