package check

import (
	"fmt"
	"strings"

	"github.com/dbhost/dbhost/internal/engine"
	"github.com/dbhost/dbhost/internal/engine/postgres"
	"github.com/dbhost/dbhost/internal/facts"
	"github.com/dbhost/dbhost/internal/fix"
)

// Shares of the memory a server may plan with (its budget: RAM less the
// huge page pool and the other databases, capped by its cgroup limit).
const (
	// PostgreSQL's docs start shared_buffers at 25% of memory; above 40% is
	// unlikely to help, as PostgreSQL also relies on the OS cache. Below 10%
	// the server caches a fraction of what the host could.
	sbTarget, sbLow, sbHigh = 0.25, 0.10, 0.40
	// effective_cache_size: pgtune's 3/4 of memory; below a quarter the
	// planner underrates the cache.
	ecsTarget, ecsLow = 0.75, 0.25
	// InnoDB: a buffer pool under 10% of a dedicated host's memory wastes
	// it; the proposal is 60%, as container.limits proposes.
	bufPoolLow, bufPoolTarget = 0.10, 0.60
)

func init() {
	Register(Check{
		ID:        "mem.db_budget",
		Title:     "The databases' configured memory fits the host",
		Problem:   "The databases' configured memory does not fit the host",
		Severity:  Warning,
		AppliesTo: []string{"host", "postgres", "mysql", "mongodb", "redis"},
		Doc: `Divides one memory budget among the databases of the host and adds up what
each plans against its share. The budget: RAM (MemTotal) less what the other
processes and the kernel hold (MemTotal - MemAvailable - Hugetlb - the databases'
resident memory), less the explicit huge page pool no database maps or will map,
less an OS and page cache reserve (10% of RAM, 64 MiB to 4 GiB); the host's line
shows the arithmetic. Shares (docs/fix.md, "The memory budget"): the user's
(--budget redis:6379=4GiB,postgres:5432=40%, or DBHOST_BUDGET in
/etc/default/dbhost), else what each database holds now (twice that for a Redis
that persists: its fork) plus the rest by engine weight (PostgreSQL, MySQL,
MongoDB 2, Redis 1); a cgroup memory limit caps the shares of its databases at 90%
of it. What a database plans: its fixed memory (PostgreSQL shared_buffers and
maintenance_work_mem for each autovacuum worker; InnoDB's buffer pool and other
global buffers; Redis maxmemory; the WiredTiger cache, when unset the size MongoDB
picks), the worst case of its connections (PostgreSQL work_mem x max_connections x
3, pgtune's assumption; MySQL's per-thread buffers x max_connections, MySQLTuner's
"maximum possible memory") and a persisting Redis's fork headroom (up to
maxmemory). Fixed memory above the share is critical (once the caches fill, the OOM
killer kills a database); with connections, a warning. A share below the server's
minimum main cache is critical and no value is proposed. The fix sets the main cache
to the value its sizing check proposes, or says to lower connections or give a
larger share.`,
		Refs: []string{"https://www.postgresql.org/docs/current/runtime-config-resource.html", "https://dev.mysql.com/doc/refman/8.0/en/memory-use.html", "https://docs.kernel.org/admin-guide/mm/hugetlbpage.html", "https://docs.kernel.org/admin-guide/cgroup-v2.html#memory-interface-files"},
		Run:  checkDBBudget,
	})
	Register(Check{
		ID:        "pg.shared_buffers",
		Title:     "PostgreSQL shared_buffers is sized for the memory it has",
		Problem:   "PostgreSQL shared_buffers is not sized for the memory it has",
		Severity:  Info,
		AppliesTo: []string{"postgres"},
		Doc: `PostgreSQL's documentation starts shared_buffers at 25% of memory on a dedicated
server with 1 GB or more, and expects more than 40% rarely to help because PostgreSQL
also reads through the operating system's cache. The compiled-in default is 128MB
whatever the host: on a 23.5 GiB host that is 0.5%. dbhost judges shared_buffers
against its share of the host's memory budget (see mem.db_budget) and
flags it below 10% or above 40%, proposing 25% of the share, never below the
server's minimum of 128kB, in whole MB or kB as postgresql.conf accepts. When
shared_buffers lives in huge pages the pool must grow with it (mem.hugepages.postgres).
A restart applies it.`,
		Refs: []string{"https://www.postgresql.org/docs/current/runtime-config-resource.html#GUC-SHARED-BUFFERS"},
		Run:  checkPGSharedBuffers,
	})
	Register(Check{
		ID:        "pg.work_mem",
		Title:     "PostgreSQL work_mem times connections fits the memory left",
		Problem:   "PostgreSQL work_mem times connections exceeds the memory left",
		Severity:  Warning,
		AppliesTo: []string{"postgres"},
		Doc: `work_mem is allowed to each sort or hash operation of each query, and hash
operations get hash_mem_multiplier times it; a query can run several at once, and so
can every connection. dbhost takes pgtune's rule of three per connection:
work_mem x max_connections x 3 must fit what is left of its share (mem.db_budget)
after shared_buffers as planned (25% of the share when outside 10-40%) and
autovacuum's maintenance_work_mem. Above it is an OOM risk under load; the proposal is what is left divided by
max_connections x 3, never below PostgreSQL's minimum of 64kB (a value under it stops
the server from starting; timescaledb-tune once rendered 41kB). When even 64kB does
not fit, no value is proposed and the fix says to lower max_connections (a connection pooler such as PgBouncer
keeps few server connections). A reload applies it.`,
		Refs: []string{"https://www.postgresql.org/docs/current/runtime-config-resource.html#GUC-WORK-MEM", "https://www.postgresql.org/docs/current/runtime-config-resource.html#GUC-HASH-MEM-MULTIPLIER"},
		Run:  checkPGWorkMem,
	})
	Register(Check{
		ID:        "pg.effective_cache_size",
		Title:     "PostgreSQL effective_cache_size matches the memory it has",
		Problem:   "PostgreSQL effective_cache_size does not match the memory it has",
		Severity:  Info,
		AppliesTo: []string{"postgres"},
		Doc: `effective_cache_size allocates nothing: it tells the planner how much of the data
the cache (shared_buffers and the OS cache) holds, and so how cheap index scans are.
The default is 4GB whatever the host. Larger than the memory this server has, the
planner counts on cache that is not there and picks index scans that read from disk;
below a quarter of it, it underrates the cache and avoids index scans. dbhost flags
either and proposes 75% of the server's share of the host's memory budget
(pgtune's rule; see mem.db_budget).
A reload applies it.`,
		Refs: []string{"https://www.postgresql.org/docs/current/runtime-config-query.html#GUC-EFFECTIVE-CACHE-SIZE"},
		Run:  checkPGEffectiveCache,
	})
	Register(Check{
		ID:        "mysql.buffer_pool",
		Title:     "InnoDB's buffer pool is sized for the memory it has",
		Problem:   "InnoDB's buffer pool is not sized for the memory it has",
		Severity:  Warning,
		AppliesTo: []string{"mysql"},
		Doc: `The InnoDB buffer pool is the server's main cache. MySQL's documentation gives it
up to 80% of a dedicated server's memory (innodb_dedicated_server takes 75% above
4 GB); the rest is for connections, other buffers and the OS. dbhost judges it
against its share of the host's memory budget (see mem.db_budget): above
75% is a warning (with the per-connection buffers, an OOM risk); below 10% on a host
where it is the only database and no share is set, advice (the compiled-in default of 128M wastes a big
host; bigger is not always faster, so measure). The proposal is 60% of the share in
whole 128M chunks (innodb_buffer_pool_chunk_size), never below MySQL's minimum of 5M.`,
		Refs: []string{"https://dev.mysql.com/doc/refman/8.0/en/innodb-buffer-pool-resize.html", "https://dev.mysql.com/doc/refman/8.0/en/innodb-parameters.html#sysvar_innodb_buffer_pool_size", "https://mariadb.com/kb/en/innodb-buffer-pool/"},
		Run:  checkMySQLBufferPool,
	})
	Register(Check{
		ID:        "redis.maxmemory",
		Title:     "Redis has a memory bound that fits its share",
		Problem:   "Redis has no memory bound that fits its share",
		Severity:  Warning,
		AppliesTo: []string{"redis"},
		Doc: `maxmemory bounds Redis's dataset; 0, the default on 64-bit systems, is no bound:
Redis grows until the kernel's OOM killer picks a process, and on a host shared with
other databases that may be one of them. When the bound is reached, maxmemory-policy
decides: noeviction refuses writes with an error, allkeys-* evicts any key (a cache),
volatile-* only keys with a TTL. dbhost fails a Redis without maxmemory on a host with
other databases or in a cgroup with a memory limit (container.limits judges the limit
itself), and a maxmemory above what its share of the host's memory budget allows (see
mem.db_budget): half the share when RDB or AOF is on (a BGSAVE or AOF rewrite forks,
and copy-on-write may copy up to the data set), three quarters without (the rest is
fragmentation and buffers maxmemory does not count). The proposal is 90% of that. CONFIG SET maxmemory applies it at once;
the file keeps it.`,
		Refs: []string{"https://redis.io/docs/latest/develop/reference/eviction/", "https://redis.io/docs/latest/operate/oss_and_stack/management/admin/"},
		Run:  checkRedisMaxmemory,
	})
	Register(Check{
		ID:        "mongodb.wt_cache",
		Title:     "The WiredTiger cache fits the memory MongoDB has",
		Problem:   "The WiredTiger cache does not fit the memory MongoDB has",
		Severity:  Warning,
		AppliesTo: []string{"mongodb"},
		Doc: `WiredTiger's cache defaults to 50% of (memory - 1 GB), at least 256 MB. The memory
it starts from is the host's RAM for servers that do not read their cgroup's limit:
MongoDB before 4.0 under cgroup v1, and (dbhost assumes) before 7.0 under cgroup v2,
and whenever the version is unknown. A mongod in a container with a limit below the
host's RAM then sizes its cache for the host and is OOM-killed. dbhost computes the
cache (set, or the default the version picks) and flags it above 75% of its share
of the host's memory budget (see mem.db_budget), proposing WiredTiger's own rule
applied to the share (50% of (share - 1 GB)); below 0.25 GB's room nothing is
proposed. A restart applies it.`,
		Refs: []string{"https://www.mongodb.com/docs/manual/reference/configuration-options/#mongodb-setting-storage.wiredTiger.engineConfig.cacheSizeGB", "https://www.mongodb.com/docs/manual/core/wiredtiger/#memory-use"},
		Run:  checkMongoWTCache,
	})
}

// sizingFix sets one setting of the case's instance.
func sizingFix(c sizingCase, summary, key, value string, restart bool) *fix.Fix {
	in := c.m.in
	return &fix.Fix{Summary: summary, Config: []fix.ConfigChange{{Instance: in.Name(), Engine: string(in.Engine), Key: key, Value: value, Restart: restart}}}
}

// pgSizingFix sets a PostgreSQL setting, and says what to remove when the
// command line, ALTER SYSTEM or a later file would override the snippet.
func pgSizingFix(c sizingCase, summary, key, value string, restart bool) *fix.Fix {
	fx := sizingFix(c, summary, key, value, restart)
	in := c.m.in
	p := in.Profile()
	snippet, _ := p.ConfigSnippet(engine.Snippet{Instance: in.Name(), Dir: in.IncludeDir, File: p.MainConfig(in.Instance), Name: fix.ConfigName})
	if by, ok := postgres.SnippetOverridden(in.Instance, key, snippet); ok {
		fx.Manual = fmt.Sprintf("%s is also set by %s, which PostgreSQL reads after %s: remove it there, or the snippet has no effect.", key, by, snippet)
	}
	return fx
}

// cacheRule is the engine's rule for its main cache in the share: the
// target a fix proposes, the largest size that passes, and the rule in
// words.
func (c sizingCase) cacheRule() (target, ceiling uint64, rule string) {
	if r, ok := cacheRules[c.m.in.Engine]; ok {
		return r(c, c.b.room)
	}
	return 0, c.b.room, ""
}

// cacheRules are the engines' rules for their main cache in a share of
// room bytes.
var cacheRules = map[engine.Engine]func(c sizingCase, room uint64) (uint64, uint64, string){
	engine.Postgres: func(_ sizingCase, room uint64) (uint64, uint64, string) {
		return uint64(sbTarget * float64(room)), uint64(sbHigh * float64(room)), "25% of the share"
	},
	engine.MySQL: func(_ sizingCase, room uint64) (uint64, uint64, string) {
		return uint64(bufPoolTarget * float64(room)), uint64(cacheShareMax * float64(room)), "60% of the share in 128M chunks"
	},
	engine.Redis: func(c sizingCase, room uint64) (uint64, uint64, string) {
		ceiling, rule := room*3/4, "90% of three quarters of the share (the rest: fragmentation and buffers maxmemory does not count)"
		if redisPersists(c.m.in) {
			ceiling, rule = room/2, "90% of half the share (the other half: a BGSAVE or AOF rewrite fork may copy the data set)"
		}
		return ceiling * 9 / 10, ceiling, rule
	},
	engine.MongoDB: func(c sizingCase, room uint64) (uint64, uint64, string) {
		var target uint64
		if wt, _ := c.m.plan.MainCache(); wt.AutoSize != nil {
			target, _ = wt.AutoSize(room, 0, 0)
		}
		return target, uint64(cacheShareMax * float64(room)), "WiredTiger's rule, 50% of (share - 1 GB), at least 0.25 GB"
	},
}

// belowMin reports a share too small for the server's minimum main cache:
// no value fits, so no value is proposed (mem.db_budget fails).
func (c sizingCase) belowMin(p engine.MemPart) (Result, bool) {
	_, ceiling, _ := c.cacheRule()
	if p.Min <= ceiling {
		return Result{}, false
	}
	text := fmt.Sprintf("Its share of %s is below what the server needs at least: %s cannot go below %s, and more than %s of this share does not fit (mem.db_budget fails). %s", humanBytes(c.b.room), p.Key, humanBytes(p.Min), humanBytes(ceiling), c.roomText())
	fx := &fix.Fix{Summary: "Give " + c.m.in.Name() + " a larger share of memory", Manual: "No " + p.Key + " fits its share: give it a larger share (--budget " + c.m.in.Name() + "=SIZE, or DBHOST_BUDGET in /etc/default/dbhost), move a database elsewhere, or add memory."}
	return FailR(c.m.in.Name(), text, fx, c.ev()...), true
}

func checkDBBudget(f *facts.Facts) []Result {
	out := budgetHost(f)
	return append(out, eachSizing(f, "", func(c sizingCase) (Result, bool) {
		subj, m := c.m.in.Name(), c.m
		cache, _ := m.plan.MainCache()
		switch {
		case m.unbounded:
			return UnknownR(subj, fmt.Sprintf("%s has %s: nothing bounds its memory, so its need cannot be added up (redis.maxmemory judges it).", memInstDesc(m.in), sizingValue(cache)), c.ev()...), true
		case !cache.Known && !cache.Auto:
			return UnknownR(subj, memInstDesc(m.in)+": "+sizingUnknown(cache, m.in), c.ev()...), true
		}
		if r, low := c.belowMin(cache); low {
			r.Severity = Critical
			return r, true
		}
		total := m.fixed + m.conns + m.fork
		text := fmt.Sprintf("%s plans %s: %s. %s", memInstDesc(m.in), humanBytes(total), strings.Join(m.terms, "; "), c.roomText())
		if len(m.unknown) > 0 {
			text += " Not counted (unknown): " + strings.Join(m.unknown, ", ") + "."
		}
		if total <= c.b.room {
			return PassR(subj, text, c.ev()...), true
		}
		r := FailR(subj, text+fmt.Sprintf(" At the worst case it needs %s more than its share: when every connection is busy, the kernel's OOM killer kills a database.", humanBytes(total-c.b.room)), budgetFix(c, cache, total), c.ev()...)
		if m.fixed+m.fork > c.b.room {
			r.Severity = Critical
			r.Reason = text + fmt.Sprintf(" Its fixed memory alone is %s more than its share: once its caches fill, the kernel's OOM killer kills a database.", humanBytes(m.fixed+m.fork-c.b.room))
		}
		return r, true
	})...)
}

// budgetHost is the host's finding: the budget's arithmetic and every
// share, or why the user's shares were not used.
func budgetHost(f *facts.Facts) []Result {
	all, ram, ramEv, why := sizingAll(f)
	if why != "" || len(all) == 0 {
		return nil
	}
	hp := planHost(f, all, ram, ramEv)
	var shares []string
	for i, m := range all {
		if m.plan.Parts != nil {
			shares = append(shares, hp.shareHow[i])
		}
	}
	if len(shares) == 0 {
		return nil
	}
	text := "The host's memory budget for its databases: " + hp.how + ". Shares: " + strings.Join(shares, "; ") + "."
	if hp.userErr != "" {
		return []Result{FailR(SubjectHost, text+" The shares the user gave are not used: "+hp.userErr+".",
			&fix.Fix{Summary: "Correct the memory shares", Manual: "Name each database as dbhost does (see the Databases list), and keep the shares within the budget: " + hp.userErr}, hp.ev...)}
	}
	return []Result{PassR(SubjectHost, text, hp.ev...)}
}

// budgetFix sets the main cache to the engine's target in the share when
// that makes the server fit (the same value its sizing check proposes), or
// asks for fewer connections or more memory.
func budgetFix(c sizingCase, cache engine.MemPart, total uint64) *fix.Fix {
	lower := "Or lower " + c.m.plan.Conns.Name + " and the per-connection buffers (a connection pooler keeps few server connections), or give the server a larger share (--budget) or more memory."
	if c.m.plan.Conns.Name == "" {
		lower = "Or give the server a larger share (--budget) or more memory."
	}
	size := cache.Bytes
	if cache.Auto && cache.AutoSize != nil {
		size, _ = cache.AutoSize(c.b.ram, 0, 0)
		size = min(size, c.m.fixed)
	}
	target, _, rule := c.cacheRule()
	want := cache.Clamp(target)
	k := uint64(1)
	if c.m.fork > 0 {
		k = 2 // the fork headroom shrinks with maxmemory
	}
	if want >= size || cache.Format == nil || total-min(total, (size-want)*k) > c.b.room {
		return &fix.Fix{Summary: "Lower " + c.m.in.Name() + "'s memory", Manual: "Its main cache at " + rule + " still leaves it above its share. " + lower}
	}
	v := cache.Propose(target)
	fx := sizingFix(c, fmt.Sprintf("Set %s to %s (%s)", cache.Key, v, rule), cache.Key, v, c.m.in.Engine != engine.Redis)
	if c.m.in.Engine == engine.Redis {
		fx.Runtime = []string{redisCLI(c.m.in) + " CONFIG SET maxmemory " + v}
	}
	fx.Manual = lower
	return fx
}

// pct is a as a share of b.
func pct(a, b uint64) float64 { return memPct(a, b) / 100 }

// pgPlannedSB is shared_buffers as pg.shared_buffers leaves it: as it is
// within 10-40% of the share, else its target.
func pgPlannedSB(c sizingCase) uint64 {
	sb, _ := c.m.plan.MainCache()
	if !sb.Known {
		return 0
	}
	if share := pct(sb.Bytes, c.b.room); share >= sbLow && share <= sbHigh {
		return sb.Bytes
	}
	return sb.Clamp(uint64(sbTarget * float64(c.b.room)))
}

func checkPGSharedBuffers(f *facts.Facts) []Result {
	return eachSizing(f, engine.Postgres, func(c sizingCase) (Result, bool) {
		sb, _ := c.m.plan.MainCache()
		subj := c.m.in.Name()
		if !sb.Known {
			return UnknownR(subj, sizingUnknown(sb, c.m.in), c.ev()...), true
		}
		share := pct(sb.Bytes, c.b.room)
		text := fmt.Sprintf("%s is %.1f%% of its share of %s. %s", sizingValue(sb), 100*share, humanBytes(c.b.room), c.roomText())
		if share >= sbLow && share <= sbHigh {
			return PassR(subj, text, c.ev()...), true
		}
		if r, low := c.belowMin(sb); low {
			return r, true
		}
		want := uint64(sbTarget * float64(c.b.room))
		v := sb.Propose(want)
		why := " That is under 10%: the server caches a fraction of what the host could hold, and reads the rest through the OS cache (copied once more per read)."
		if share > sbHigh {
			why = " That is over 40%: PostgreSQL also relies on the OS cache, and the memory left for connections, sorts and the OS shrinks."
		}
		if c.m.in.Mem.UsesHugetlb() {
			why += " It lives in explicit huge pages: resize the pool with it (mem.hugepages.postgres)."
		}
		fx := pgSizingFix(c, fmt.Sprintf("Set shared_buffers to %s (25%% of its share of %s, at least 128kB)", v, humanBytes(c.b.room)), "shared_buffers", v, true)
		return FailR(subj, text+why, fx, c.ev()...), true
	})
}

func checkPGWorkMem(f *facts.Facts) []Result {
	return eachSizing(f, engine.Postgres, func(c sizingCase) (Result, bool) {
		subj, m := c.m.in.Name(), c.m
		wm, _ := m.plan.Part("work_mem")
		if !wm.Known || m.plan.N == 0 {
			return UnknownR(subj, sizingUnknown(wm, m.in), c.ev()...), true
		}
		// The fixed memory with shared_buffers as the plan leaves it, so
		// that work_mem fits beside the planned cache.
		sb, _ := m.plan.MainCache()
		fixed := m.fixed - min(m.fixed, sb.Bytes) + pgPlannedSB(c)
		left := c.b.room - min(fixed, c.b.room)
		ops := m.plan.N * max(m.plan.Factor, 1)
		text := fmt.Sprintf("%s x %s %d x %d = %s at worst (%s), against %s left after the server's fixed memory (%s, with shared_buffers as planned) of its share of %s. %s",
			sizingValue(wm), m.plan.Conns.Name, m.plan.N, max(m.plan.Factor, 1), humanBytes(m.conns), m.plan.FactorWhy, humanBytes(left), humanBytes(fixed), humanBytes(c.b.room), c.roomText())
		if m.conns <= left {
			return PassR(subj, text, c.ev()...), true
		}
		want := left / ops
		v := wm.Propose(want)
		if wm.Clamp(want)*ops > left {
			// No value fits: propose none (mem.db_budget fails too).
			fx := &fix.Fix{Summary: "Lower max_connections of " + subj, Manual: fmt.Sprintf("Even %s per operation, PostgreSQL's minimum, does not fit %s connections in %s: lower max_connections (a pooler such as PgBouncer keeps few server connections), give the server a larger share (--budget) or more memory.", v, m.plan.Conns.Value, humanBytes(left))}
			return FailR(subj, text+" Even the minimum work_mem does not fit.", fx, c.ev()...), true
		}
		fx := pgSizingFix(c, fmt.Sprintf("Set work_mem to %s (%s / (%d x %d), at least 64kB)", v, humanBytes(left), m.plan.N, max(m.plan.Factor, 1)), "work_mem", v, false)
		return FailR(subj, text+" Under load, sorts and hashes of busy connections can exhaust memory and the OOM killer ends a backend, which restarts every connection of the server.", fx, c.ev()...), true
	})
}

func checkPGEffectiveCache(f *facts.Facts) []Result {
	return eachSizing(f, engine.Postgres, func(c sizingCase) (Result, bool) {
		subj := c.m.in.Name()
		ecs, _ := c.m.plan.Part("effective_cache_size")
		if !ecs.Known {
			return UnknownR(subj, sizingUnknown(ecs, c.m.in), c.ev(sizingPartEv(ecs))...), true
		}
		share := pct(ecs.Bytes, c.b.room)
		text := fmt.Sprintf("%s is %.0f%% of its share of %s. %s", sizingValue(ecs), 100*share, humanBytes(c.b.room), c.roomText())
		if share >= ecsLow && share <= 1 {
			return PassR(subj, text, c.ev(sizingPartEv(ecs))...), true
		}
		why := " It is under a quarter of it: the planner underrates the cache and avoids index scans that would be served from memory."
		if share > 1 {
			why = " It is more than the server has: the planner counts on cache that is not there and picks index scans that read from disk."
		}
		v := ecs.Propose(uint64(ecsTarget * float64(c.b.room)))
		fx := pgSizingFix(c, fmt.Sprintf("Set effective_cache_size to %s (75%% of its share of %s)", v, humanBytes(c.b.room)), "effective_cache_size", v, false)
		return FailR(subj, text+why, fx, c.ev(sizingPartEv(ecs))...), true
	})
}

func checkMySQLBufferPool(f *facts.Facts) []Result {
	return eachSizing(f, engine.MySQL, func(c sizingCase) (Result, bool) {
		subj := c.m.in.Name()
		pool, _ := c.m.plan.MainCache()
		if !pool.Known {
			return UnknownR(subj, sizingUnknown(pool, c.m.in), c.ev()...), true
		}
		share := pct(pool.Bytes, c.b.room)
		text := fmt.Sprintf("%s is %.1f%% of its share of %s. %s", sizingValue(pool), 100*share, humanBytes(c.b.room), c.roomText())
		dedicated := c.dedicated()
		fail := share > cacheShareMax || (dedicated && share < bufPoolLow)
		if !fail {
			if !dedicated {
				text += " With other databases on the host, a cgroup limit or a share the user set, a small pool may be deliberate: only above 75% is it judged."
			}
			return PassR(subj, text, c.ev()...), true
		}
		if r, low := c.belowMin(pool); low {
			return r, true
		}
		v := pool.Propose(uint64(bufPoolTarget * float64(c.b.room)))
		fx := myConfigFix(c.m.in, fmt.Sprintf("Set %s to %s (60%% of its share of %s in 128M chunks, at least 5M)", pool.Key, v, humanBytes(c.b.room)), true, pool.Key, v)
		// SQL is a manual step (the shell "now" steps cannot run it); the
		// pool resizes online in chunks.
		fx.Manual = strings.TrimSpace(fmt.Sprintf("To resize the running server too (online, chunk by chunk), run in the mysql client as an administrator: SET GLOBAL %s = %d; ", pool.Key, pool.Clamp(uint64(bufPoolTarget*float64(c.b.room)))) + fx.Manual)
		if share > cacheShareMax {
			return FailR(subj, text+" That is over 75%: with the per-connection buffers and the OS, the host runs out of memory when connections get busy (mem.db_budget adds it up).", fx, c.ev()...), true
		}
		r := FailR(subj, text+" That is under 10% on a host where it is the only database: InnoDB reads from disk what memory could hold. Bigger is not always faster; measure the change (dbhost experiment).", fx, c.ev()...)
		r.Severity = Info
		return r, true
	})
}

// redisPolicy explains what maxmemory-policy does when the bound is hit.
func redisPolicy(in *facts.Instance) (string, Evidence) {
	v, ev := memSettingEv(in, "maxmemory-policy", "noeviction")
	switch {
	case v == "noeviction":
		return "At the bound, noeviction refuses writes with an OOM error (right for data that must not vanish).", ev
	case strings.HasPrefix(v, "allkeys-"):
		return "At the bound, " + v + " evicts any key (right for a cache).", ev
	case strings.HasPrefix(v, "volatile-"):
		return "At the bound, " + v + " evicts only keys with a TTL and refuses writes when none is left.", ev
	}
	return "maxmemory-policy is " + v + ".", ev
}

func checkRedisMaxmemory(f *facts.Facts) []Result {
	return eachSizing(f, engine.Redis, func(c sizingCase) (Result, bool) {
		subj := c.m.in.Name()
		mm, _ := c.m.plan.MainCache()
		policy, pev := redisPolicy(c.m.in)
		ev := c.ev(pev)
		if !mm.Known {
			return UnknownR(subj, sizingUnknown(mm, c.m.in), ev...), true
		}
		target, ceiling, rule := c.cacheRule()
		shared := len(c.b.others) > 0 || c.b.limited || c.b.user
		switch {
		case mm.Unbounded && !shared:
			return PassR(subj, fmt.Sprintf("maxmemory is %s (no bound), and Redis is the only database on the host without a cgroup limit or a share the user set: only Redis itself is at stake. %s", mm.Value, c.roomText()), ev...), true
		case !mm.Unbounded && mm.Bytes <= ceiling:
			return PassR(subj, fmt.Sprintf("%s fits its share of %s (at most %s: %s). %s %s", sizingValue(mm), humanBytes(c.b.room), humanBytes(ceiling), ceilingWhy(c), c.roomText(), policy), ev...), true
		}
		if r, low := c.belowMin(mm); low {
			return r, true
		}
		v := mm.Propose(target)
		fx := sizingFix(c, fmt.Sprintf("Set maxmemory to %s (%s of %s)", v, rule, humanBytes(c.b.room)), "maxmemory", v, false)
		fx.Runtime = []string{redisCLI(c.m.in) + " CONFIG SET maxmemory " + v}
		if mm.Unbounded {
			return FailR(subj, fmt.Sprintf("maxmemory is %s: Redis grows until the kernel's OOM killer picks a process, and on this host that may be another database. %s", mm.Value, c.roomText()), fx, ev...), true
		}
		return FailR(subj, fmt.Sprintf("%s is more than its share of %s allows (at most %s: %s): the bound comes after the OOM killer. %s %s", sizingValue(mm), humanBytes(c.b.room), humanBytes(ceiling), ceilingWhy(c), c.roomText(), policy), fx, ev...), true
	})
}

// ceilingWhy says why a Redis may use only part of its share.
func ceilingWhy(c sizingCase) string {
	if redisPersists(c.m.in) {
		return "half of it, as persistence is on and a BGSAVE or AOF rewrite fork may copy up to the data set"
	}
	return "three quarters of it, for fragmentation and buffers maxmemory does not count"
}

func checkMongoWTCache(f *facts.Facts) []Result {
	return eachSizing(f, engine.MongoDB, func(c sizingCase) (Result, bool) {
		subj := c.m.in.Name()
		wt, _ := c.m.plan.MainCache()
		size, how := wt.Bytes, "set"
		if wt.Auto && wt.AutoSize != nil {
			limit, _ := c.m.in.Cgroup.MemoryLimit()
			size, how = wt.AutoSize(c.b.ram, limit, c.m.in.Cgroup.Version)
			how = "not set, so the server takes " + how
		} else if !wt.Known {
			return UnknownR(subj, sizingUnknown(wt, c.m.in), c.ev()...), true
		}
		text := fmt.Sprintf("The WiredTiger cache is %s (%s), %.0f%% of its share of %s. %s", humanBytes(size), how, memPct(size, c.b.room), humanBytes(c.b.room), c.roomText())
		if float64(size) <= cacheShareMax*float64(c.b.room) {
			return PassR(subj, text, c.ev()...), true
		}
		if r, low := c.belowMin(wt); low {
			return r, true
		}
		want, _, _ := c.cacheRule()
		v := wt.Propose(want)
		fx := sizingFix(c, fmt.Sprintf("Set %s to %s (50%% of (its share of %s - 1 GB), at least 0.25)", wt.Key, v, humanBytes(c.b.room)), wt.Key, v, true)
		return FailR(subj, text+" That is over 75%: MongoDB also needs memory for connections and aggregation beyond the cache, and the server is OOM-killed when the cache fills.", fx, c.ev()...), true
	})
}
