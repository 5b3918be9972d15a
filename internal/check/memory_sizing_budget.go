package check

import (
	"fmt"
	"strings"

	"github.com/dbhost/dbhost/internal/engine"
	"github.com/dbhost/dbhost/internal/facts"
)

// The memory budget of a host and each database's share of it. Every
// database's configured memory comes from its profile (engine.Profile
// Memory); this file weighs it against RAM, the explicit huge page pool,
// the cgroup limit and the other databases on the host.

// dbMem is one database's configured memory.
type dbMem struct {
	in   *facts.Instance
	plan engine.MemoryPlan
	// fixed is what it keeps whatever the load outside the huge page pool;
	// conns the worst case its connections add.
	fixed, conns uint64
	// unbounded: a cache without a bound (Redis maxmemory 0), counted at
	// its resident size.
	unbounded bool
	// terms explain fixed and conns; unknown names parts not known.
	terms, unknown []string
	ev             []Evidence
}

// budget is the memory one database may plan with.
type budget struct {
	ram, pool, room uint64
	// limited: the cgroup limit, not the host, sets room.
	limited bool
	// how explains room ("RAM 23.5 GiB - ... = ..."); others names the
	// other databases' fixed memory.
	how    string
	others []string
	ev     []Evidence
}

// sizingPartEv is the evidence of a memory setting: observed (where), or
// the compiled-in default.
func sizingPartEv(p engine.MemPart) Evidence {
	v := p.Value
	if p.Known && p.Value != humanBytes(p.Bytes) {
		v += " (" + humanBytes(p.Bytes) + ")"
	}
	switch {
	case p.Unread != "":
		return Ev(p.Key, "not found", p.Unread)
	case p.Default():
		return Ev(p.Key, v+" (default)", "not set; the server's compiled-in default")
	case strings.HasPrefix(p.Source, "file:"):
		return Ev(p.Key, v, strings.TrimPrefix(p.Source, "file:")+" (configuration only: the running server was not asked)")
	}
	return Ev(p.Key, v, p.Source)
}

// sizingValue is a setting for a reason, marked when it is the default.
func sizingValue(p engine.MemPart) string {
	s := p.Key + " " + humanBytes(p.Bytes)
	if p.Unbounded {
		s = p.Key + " " + p.Value + " (no bound)"
	}
	if p.Default() {
		s += " (default)"
	}
	return s
}

// sizingOf sums one database's configured memory. ram and the cgroup give
// the size of a cache the server sizes for itself.
func sizingOf(in *facts.Instance, ram uint64) dbMem {
	m := dbMem{in: in, plan: in.Profile().Memory(in.Instance)}
	limit, _ := in.Cgroup.MemoryLimit()
	var perConn uint64
	var perTerms []string
	for _, p := range m.plan.Parts {
		if p.Hint {
			continue
		}
		m.ev = append(m.ev, sizingPartEv(p))
		switch {
		case p.Auto && p.AutoSize != nil:
			b, how := p.AutoSize(ram, limit, in.Cgroup.Version)
			m.fixed += b
			m.terms = append(m.terms, fmt.Sprintf("%s not set: the server takes %s = %s", p.Key, how, humanBytes(b)))
		case p.Unbounded:
			m.unbounded = true
			m.fixed += in.Mem.RSSBytes
			m.terms = append(m.terms, fmt.Sprintf("%s %s: no bound, counted at its resident %s", p.Key, p.Value, humanBytes(in.Mem.RSSBytes)))
		case !p.Known:
			m.unknown = append(m.unknown, p.Key)
		case p.Cache && in.Mem.UsesHugetlb():
			m.terms = append(m.terms, sizingValue(p)+" in explicit huge pages (counted in the pool)")
		case p.PerConn:
			perConn += p.Bytes
			perTerms = append(perTerms, sizingValue(p))
		case p.Times > 1:
			m.fixed += p.Total()
			m.terms = append(m.terms, fmt.Sprintf("%s x %d = %s (%s)", sizingValue(p), p.Times, humanBytes(p.Total()), p.Why))
		default:
			m.fixed += p.Bytes
			m.terms = append(m.terms, sizingValue(p))
		}
	}
	if perConn > 0 && m.plan.N > 0 {
		f := max(m.plan.Factor, 1)
		m.conns = perConn * m.plan.N * f
		m.ev = append(m.ev, Ev(m.plan.Conns.Name, m.plan.Conns.Value, m.plan.Conns.Source))
		factor := ""
		if f > 1 {
			factor = fmt.Sprintf(" x %d", f)
		}
		each := strings.Join(perTerms, " + ")
		if len(perTerms) > 1 {
			each += " = " + humanBytes(perConn)
		}
		m.terms = append(m.terms, fmt.Sprintf("per connection (%s) x %s %d%s = %s: %s", each, m.plan.Conns.Name, m.plan.N, factor, humanBytes(m.conns), m.plan.FactorWhy))
	}
	return m
}

// hugePool is the explicit huge page pool: memory nothing but huge page
// users can have.
func hugePool(f *facts.Facts) (uint64, []Evidence) {
	var pool uint64
	var ev []Evidence
	for _, p := range f.Memory.HugePages {
		if p.Total > 0 {
			pool += uint64(p.Total) * p.Bytes()
			ev = append(ev, Ev("huge page pool "+memPoolName(p.SizeKB), fmt.Sprintf("%d pages (%s)", p.Total, humanBytes(uint64(p.Total)*p.Bytes())), fmt.Sprintf("/sys/kernel/mm/hugepages/hugepages-%dkB/nr_hugepages", p.SizeKB)))
		}
	}
	return pool, ev
}

// sizingAll returns every database's configured memory, or why the host's
// memory is unknown.
func sizingAll(f *facts.Facts) ([]dbMem, uint64, Evidence, string) {
	ram, ramEv, why := memTotal(f)
	if why != "" {
		return nil, 0, ramEv, why
	}
	var all []dbMem
	for _, in := range f.Instances {
		all = append(all, sizingOf(in, ram))
	}
	return all, ram, ramEv, ""
}

// budgetFor is the memory database i may plan with: RAM less the huge page
// pool and the other databases' fixed memory, capped by its cgroup limit.
func budgetFor(f *facts.Facts, all []dbMem, i int, ram uint64, ramEv Evidence) budget {
	pool, poolEv := hugePool(f)
	b := budget{ram: ram, pool: pool, ev: append([]Evidence{ramEv}, poolEv...)}
	room := ram
	how := []string{"RAM " + humanBytes(ram)}
	if pool > 0 {
		room -= min(pool, room)
		how = append(how, "the huge page pool "+humanBytes(pool))
	}
	for j, o := range all {
		if j == i || o.plan.Parts == nil {
			continue
		}
		name := fmt.Sprintf("%s %s", o.in.Name(), humanBytes(o.fixed))
		if o.unbounded {
			name += " (no maxmemory: its resident size)"
		}
		if len(o.unknown) > 0 {
			name += " (" + strings.Join(o.unknown, ", ") + " not known)"
		}
		b.others = append(b.others, name)
		how = append(how, name)
		room -= min(o.fixed, room)
	}
	b.how = strings.Join(how, " - ") + " = " + humanBytes(room)
	if limit, ok := all[i].in.Cgroup.MemoryLimit(); ok && limit < room {
		room, b.limited = limit, true
		b.how = fmt.Sprintf("its cgroup's memory limit %s (below %s)", humanBytes(limit), b.how)
		b.ev = append(b.ev, EvReading("cgroup memory limit", all[i].in.Cgroup.MemoryMax))
		// Databases in the same group share its limit.
		for j, o := range all {
			if j != i && o.plan.Parts != nil && o.in.Cgroup.Path == all[i].in.Cgroup.Path {
				room -= min(o.fixed, room)
				b.how += fmt.Sprintf(" - %s %s in the same cgroup", o.in.Name(), humanBytes(o.fixed))
			}
		}
		b.how += " = " + humanBytes(room)
	}
	b.room = room
	return b
}

// sizingCase is one database with its budget, ready to judge.
type sizingCase struct {
	m dbMem
	b budget
}

// eachSizing calls judge for every database of engine e (all engines when
// e is "") with a memory plan, or reports why the host's memory is
// unknown.
func eachSizing(f *facts.Facts, e engine.Engine, judge func(c sizingCase) (Result, bool)) []Result {
	all, ram, ramEv, why := sizingAll(f)
	var out []Result
	for i, in := range f.Instances {
		if e != "" && in.Engine != e {
			continue
		}
		if why != "" {
			out = append(out, UnknownR(in.Name(), why, ramEv))
			continue
		}
		if all[i].plan.Parts == nil {
			continue
		}
		if r, ok := judge(sizingCase{all[i], budgetFor(f, all, i, ram, ramEv)}); ok {
			out = append(out, r)
		}
	}
	return out
}

// ev is the case's evidence: the settings, then the host's memory.
func (c sizingCase) ev(extra ...Evidence) []Evidence {
	out := append(append([]Evidence{}, extra...), c.m.ev...)
	return append(out, c.b.ev...)
}

// roomText explains the memory the database may plan with.
func (c sizingCase) roomText() string {
	s := "The memory this server may plan with: " + c.b.how + "."
	if len(c.b.others) == 0 && !c.b.limited {
		s = "The server is the only database on the host: it may plan with " + c.b.how + "."
	}
	return s
}

// sizingUnknown says why a setting is not known.
func sizingUnknown(p engine.MemPart, in *facts.Instance) string {
	if p.Unread != "" {
		return p.Key + " is not known: " + p.Unread + "."
	}
	return p.Key + " is not known" + kernLiveWhy(in) + "."
}
