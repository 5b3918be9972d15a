package check

import (
	"fmt"
	"strings"

	"github.com/dbhost/dbhost/internal/engine"
	"github.com/dbhost/dbhost/internal/engine/postgres"
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
	// fork is the headroom a persistence fork needs (a Redis with RDB or
	// AOF on: copy-on-write may copy up to the data set), forkWhy why.
	fork    uint64
	forkWhy string
	// huge is the part of the explicit huge page pool this server maps or
	// will map (its shared memory when it asks for huge pages).
	huge uint64
	// terms explain fixed and conns; unknown names parts not known.
	terms, unknown []string
	ev             []Evidence
}

// budget is the memory one database may plan with: its share of the host
// budget (room).
type budget struct {
	ram, room uint64
	// limited: its cgroup's limit capped the share; user: the user set it.
	limited, user bool
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
func sizingOf(f *facts.Facts, in *facts.Instance, ram uint64) dbMem {
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
			m.fixed += p.Bytes
			m.terms = append(m.terms, sizingValue(p)+" (in explicit huge pages)")
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
	m.fork, m.forkWhy = forkHeadroom(in, m)
	if m.fork > 0 {
		m.terms = append(m.terms, fmt.Sprintf("fork headroom %s (%s)", humanBytes(m.fork), m.forkWhy))
	}
	m.huge = dbHugeBytes(f, in)
	return m
}

// redisPersists reports whether a Redis forks for persistence: RDB save
// rules or AOF. Unknown settings count as persisting (the default saves).
func redisPersists(in *facts.Instance) bool {
	if strings.EqualFold(in.SettingValue("appendonly"), "yes") {
		return true
	}
	s, ok := in.Setting("save")
	return !ok || strings.Trim(strings.TrimSpace(s.Value), `"'`) != ""
}

// forkHeadroom is the memory a Redis's BGSAVE or AOF rewrite child may
// copy: up to the data set (maxmemory, or the resident size without one).
func forkHeadroom(in *facts.Instance, m dbMem) (uint64, string) {
	if in.Engine != engine.Redis || !redisPersists(in) {
		return 0, ""
	}
	mm, _ := m.plan.MainCache()
	switch {
	case mm.Known && !mm.Unbounded:
		return mm.Bytes, "persistence on: a BGSAVE or AOF rewrite fork may copy up to maxmemory"
	default:
		return in.Mem.RSSBytes, "persistence on: a BGSAVE or AOF rewrite fork may copy up to its resident data"
	}
}

// dbHugeBytes is the memory of the explicit huge page pool the server maps
// or will map: PostgreSQL's shared memory when huge_pages asks for them
// (or dbhost advises them), InnoDB's buffer pool with large_pages, else
// what the process has faulted in. These pages are the database's memory,
// not the host's loss.
func dbHugeBytes(f *facts.Facts, in *facts.Instance) uint64 {
	if in.Engine == engine.Postgres {
		// pgPendingHuge covers huge_pages try and on, and off with
		// shared_buffers large enough that dbhost advises them.
		u, ok := pgPendingHuge(f, in)
		need, kb := u.need, u.poolKB
		if !ok && in.Mem.UsesHugetlb() {
			kb = pgPageKB(f, in)
			need, _, ok = pgHugeNeed(f, in, kb)
		}
		if ok {
			// The live figure may be the size before a planned
			// shared_buffers: never less than shared_buffers itself.
			sb, _ := postgres.Bytes(in.Instance, "shared_buffers")
			return max(uint64(need)*(uint64(kb)<<10), sb)
		}
	}
	if u, ok := mysqlPendingHuge(f, in); ok {
		return uint64(u.need) * (uint64(u.poolKB) << 10)
	}
	return in.Mem.HugetlbBytes
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
		all = append(all, sizingOf(f, in, ram))
	}
	return all, ram, ramEv, ""
}

// budgetFor is database i's share of the host budget hp.
func budgetFor(hp *hostPlan, all []dbMem, i int) budget {
	b := budget{ram: hp.ram, room: hp.share[i], limited: hp.capped[i], user: hp.user[i], ev: hp.ev}
	for j, o := range all {
		if j != i && o.plan.Parts != nil {
			b.others = append(b.others, o.in.Name())
		}
	}
	b.how = hp.how + "; " + hp.shareHow[i]
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
	var hp *hostPlan
	if why == "" {
		hp = planHost(f, all, ram, ramEv)
	}
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
		if r, ok := judge(sizingCase{all[i], budgetFor(hp, all, i)}); ok {
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

// roomText explains the memory the database may plan with: the host
// budget's arithmetic and its share.
func (c sizingCase) roomText() string {
	s := "Its share of the host's memory budget (mem.db_budget): " + c.b.how + "."
	if len(c.b.others) == 0 && !c.b.limited && !c.b.user {
		s = "The server is the only database on the host: " + c.b.how + "."
	}
	return s
}

// dedicated: the only database, sized by the rule alone (no cgroup limit,
// no share the user set).
func (c sizingCase) dedicated() bool {
	return len(c.b.others) == 0 && !c.b.limited && !c.b.user
}

// sizingUnknown says why a setting is not known.
func sizingUnknown(p engine.MemPart, in *facts.Instance) string {
	if p.Unread != "" {
		return p.Key + " is not known: " + p.Unread + "."
	}
	return p.Key + " is not known" + kernLiveWhy(in) + "."
}
