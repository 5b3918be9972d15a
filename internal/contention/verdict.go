package contention

import (
	"fmt"
)

// Verdict statuses.
const (
	OK      = "ok"
	Warning = "warning"
	Info    = "info"
	Unknown = "unknown"
)

// Thresholds.
const (
	// MaxShare: more than 10 % of a core's switching capacity means more
	// than about 10 % of its time goes to switching.
	MaxShare = 0.10
	// MinPerQuery: a query costs at least two switches (wake the worker,
	// send the reply and wait for the next).
	MinPerQuery = 2.0
	// MaxPerQuery: up to ten switches per query, contention is unlikely to
	// be the problem.
	MaxPerQuery = 10.0
	// Busy: an instance using half a core or more, or a host more than
	// half busy, is busy enough for spinning to show.
	BusyCores   = 0.5
	BusyPercent = 50.0
	// FewShare: switching that costs under 1 % of the CPU time used is
	// "few switches".
	FewShare = 0.01
)

// Verdict is one judgement with its reason.
type Verdict struct {
	ID      string `json:"id"`
	Subject string `json:"subject"`
	Status  string `json:"status"`
	// Value is the judged figure (a share of capacity, switches per query).
	Value   *float64 `json:"value,omitempty"`
	Summary string   `json:"summary"`
	Reason  string   `json:"reason"`
}

// Verdict IDs.
const (
	IDPerCore  = "contention.per_core"
	IDPerQuery = "contention.per_query"
	IDSpin     = "contention.spin"
)

func judge(r *Report) []Verdict {
	var out []Verdict
	out = append(out, perCoreVerdict(r.Host, r.Capacity))
	// The host as a whole, when its databases are what keeps it busy (a
	// host busy compiling says nothing about locks).
	hostCores, dbCores := r.Host.Busy.Value/100*float64(r.Host.CPUs), 0.0
	for _, in := range r.Instances {
		if in.Err == "" {
			dbCores += in.CPUCores
		}
	}
	busy := r.Host.Busy.OK() && r.Host.Switches.OK() && r.Host.Busy.Value >= BusyPercent && dbCores >= hostCores/2
	if v, ok := spinVerdict("host", hostCores, r.Host.Switches.Value, busy, r.Capacity); ok {
		out = append(out, v)
	}
	for _, in := range r.Instances {
		out = append(out, perQueryVerdict(in, r.Seconds))
		if in.Err == "" {
			if v, ok := spinVerdict(in.Name, in.CPUCores, in.Switches, in.CPUCores >= BusyCores, r.Capacity); ok {
				out = append(out, v)
			}
		}
	}
	return out
}

// perCoreVerdict judges the busiest core's switching against the capacity.
func perCoreVerdict(h HostFigures, c Capacity) Verdict {
	v := Verdict{ID: IDPerCore, Subject: "host",
		Reason: fmt.Sprintf("context switches are judged per logical core against what one core can switch (%s); above %.0f %% of it, switching itself takes a noticeable share of the CPU", c.Note, MaxShare*100)}
	if !h.Switches.OK() {
		v.Status, v.Summary = Unknown, "cannot judge: "+h.Switches.Err
		return v
	}
	if c.PerCore <= 0 || len(h.PerCPU) == 0 {
		v.Status, v.Summary = Unknown, "cannot judge: no capacity or no CPU figures"
		return v
	}
	top := h.PerCPU[0]
	for _, cf := range h.PerCPU[1:] {
		if cf.Switches > top.Switches {
			top = cf
		}
	}
	share := top.Switches / c.PerCore
	v.Value = &share
	what := fmt.Sprintf("busiest core cpu%d", top.CPU)
	if h.Averaged {
		what = "per core (averaged)"
	}
	v.Summary = fmt.Sprintf("%s: %s switches/s = %s of capacity %s/s", what, human(top.Switches), pct(share), human(c.PerCore))
	v.Status = shareStatus(share)
	if v.Status == Warning {
		v.Summary += fmt.Sprintf(": more than %.0f %% of the core goes to switching; find who switches (per-instance figures, pidstat -w)", MaxShare*100)
	}
	return v
}

// shareStatus classifies a per-core share of capacity.
func shareStatus(share float64) string {
	if share > MaxShare {
		return Warning
	}
	return OK
}

// perQueryStatus classifies switches per query; it is what perQueryVerdict
// says, without the words. Per transaction (transactions true) a high
// figure may be many statements, so it is not a warning.
func perQueryStatus(perQuery float64, transactions bool) string {
	switch {
	case perQuery < MinPerQuery:
		return Info
	case perQuery <= MaxPerQuery:
		return OK
	case transactions:
		return Info
	}
	return Warning
}

// perQueryVerdict judges an instance's switches per query.
func perQueryVerdict(in InstanceFigures, secs float64) Verdict {
	v := Verdict{ID: IDPerQuery, Subject: in.Name,
		Reason: fmt.Sprintf("a query costs at least %.0f context switches (the worker is switched in to run it and out once it has answered); up to %.0f contention is unlikely, above it threads wait on each other. Switches in are counted as many as the switches out /proc reports", MinPerQuery, MaxPerQuery)}
	unit, units := "query", "queries"
	if in.Queries.Transactions {
		unit, units = "transaction", "transactions"
	}
	switch {
	case in.Err != "":
		v.Status, v.Summary = Unknown, "cannot judge: "+in.Err
		return v
	case in.Queries.Err != "":
		v.Status, v.Summary = Unknown, "cannot count queries: "+in.Queries.Err
		return v
	case in.Queries.Count == 0:
		v.Status = Info
		v.Summary = fmt.Sprintf("idle: no %s in %.1f s (dbhost's own %d not counted); its %s switches/s are background work", units, secs, in.Queries.Own, human(in.Switches))
		return v
	case in.PerQuery == nil:
		v.Status, v.Summary = Unknown, "cannot judge: no switch count"
		return v
	}
	pq := *in.PerQuery
	v.Value = &pq
	v.Status = perQueryStatus(pq, in.Queries.Transactions)

	base := fmt.Sprintf("%.1f switches per %s (%s switches/s in and out, %s %s/s)", pq, unit, human(2*in.Switches), human(in.Queries.PerSecond), units)
	switch {
	case v.Status == OK:
		v.Summary = base + ": contention unlikely"
	case pq < MinPerQuery:
		v.Summary = base + fmt.Sprintf(": under %.0f, so the count is off (it counts more than client round trips) or queries are pipelined or batched", MinPerQuery)
	case v.Status == Info:
		v.Summary = base + fmt.Sprintf(": a transaction of n statements needs at least %.0fn, so this may be contention or long transactions; with pg_stat_statements installed dbhost judges per statement", MinPerQuery)
	default:
		v.Summary = base + ": threads wait on each other; look at locks and latches (PostgreSQL: pg_stat_activity wait_event; InnoDB: SHOW ENGINE INNODB STATUS semaphores)"
	}
	if n := in.ThreadsCame + in.ThreadsWent; n > 0 {
		// Short-lived connections: their switches are lost with them.
		v.Summary += fmt.Sprintf(" (%d threads came or went during the interval and are not counted, so the figure is low)", n)
	}
	return v
}

// spinVerdict reminds that busy CPUs with few switches can still be
// contention: InnoDB mutexes and rw-locks spin before they sleep, burning
// CPU without a context switch. cores is CPU time used per second; few
// means switching costs under FewShare of it.
func spinVerdict(subject string, cores, switches float64, busy bool, c Capacity) (Verdict, bool) {
	if !busy || cores <= 0 || c.PerCore <= 0 {
		return Verdict{}, false
	}
	share := switches / (cores * c.PerCore)
	if share >= FewShare {
		return Verdict{}, false
	}
	return Verdict{ID: IDSpin, Subject: subject, Status: Info, Value: &share,
		Summary: fmt.Sprintf("busy (%.2f cores) with few switches (%s/s, %s of the capacity of the cores it uses): contention can hide in spinning", cores, human(switches), pct(share)),
		Reason:  "not every contention switches: InnoDB mutexes and rw-locks spin before they sleep, burning CPU without a context switch; look at spin rounds in SHOW ENGINE INNODB STATUS, or profile (perf top)"}, true
}

// human writes 1234567 as 1.23M.
func human(v float64) string {
	switch {
	case v >= 1e9:
		return fmt.Sprintf("%.2fG", v/1e9)
	case v >= 1e6:
		return fmt.Sprintf("%.2fM", v/1e6)
	case v >= 1e4:
		return fmt.Sprintf("%.1fK", v/1e3)
	case v >= 100:
		return fmt.Sprintf("%.0f", v)
	}
	return fmt.Sprintf("%.1f", v)
}

func pct(share float64) string {
	if share < 0.001 {
		return fmt.Sprintf("%.3f %%", share*100)
	}
	return fmt.Sprintf("%.1f %%", share*100)
}
