package check

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/dbhost/dbhost/internal/engine"
	"github.com/dbhost/dbhost/internal/facts"
	"github.com/dbhost/dbhost/internal/fix"
)

func init() {
	Register(Check{
		ID:        "mem.overcommit",
		Title:     "vm.overcommit_memory suits the databases on the host",
		Problem:   "vm.overcommit_memory does not suit the databases on the host",
		Severity:  Warning,
		AppliesTo: []string{"postgres", "redis", "mongodb"},
		Doc: `Reads vm.overcommit_memory (and overcommit_ratio/overcommit_kbytes, CommitLimit
and Committed_AS from /proc/meminfo). The engines want opposite things:
- PostgreSQL documents mode 2 (strict accounting): allocations beyond CommitLimit fail
  with an error in one session, instead of the OOM killer picking a process later; if
  it picks the postmaster, the whole server goes down (a killed backend makes the
  postmaster reset every session). Mode 2 needs overcommit_ratio (or
  overcommit_kbytes) sized so CommitLimit covers what the host commits, or ordinary
  allocations start failing.
- Redis wants mode 1: BGSAVE, BGREWRITEAOF and full replica syncs fork() the server,
  and the child is charged the parent's whole private memory although copy-on-write
  shares nearly all of it; under mode 2 (and sometimes 0) that fork fails and the
  snapshot is not written ("Can't save in background: fork: Cannot allocate memory").
- MongoDB 8.0+ on x86_64 and ARM64 sets mode 1 in its documented setup for the
  upgraded TCMalloc, together with THP always (see mem.thp.enabled).
The decision comes from the values in the facts (the planned ones when a plan is
judged): CommitLimit is computed from the settings (swap + (RAM - huge page pool) x
overcommit_ratio / 100, or overcommit_kbytes + swap), and the commitment is
Committed_AS plus what each database's settings commit beyond what it holds now
(caches in huge pages are not committed) plus a fork of the largest Redis that
persists. Mode 2 passes when CommitLimit covers that with 10 % to spare; the fix
sizes the ratio for it plus 15 % (never lowered). When no ratio up to 95 covers it,
dbhost recommends mode 0 with the postmaster protected (PostgreSQL alone) or, with
Redis, mode 1 with every postmaster at oom_score_adj -1000, and says why. When both
run on one host mode 1 is also acceptable when every postmaster runs with
oom_score_adj -1000, so the OOM killer cannot choose it.`,
		Refs: []string{"https://www.postgresql.org/docs/current/kernel-resources.html#LINUX-MEMORY-OVERCOMMIT",
			"https://redis.io/docs/latest/operate/oss_and_stack/management/admin/",
			"https://docs.kernel.org/mm/overcommit-accounting.html"},
		Sysctls: []string{"vm.overcommit_memory", "vm.overcommit_ratio", "vm.overcommit_kbytes"},
		Run:     checkOvercommit,
	})
	Register(Check{
		ID:        "mem.commit_limit",
		Title:     "Committed memory stays clear of CommitLimit under strict overcommit",
		Problem:   "Committed memory is close to CommitLimit under strict overcommit",
		Severity:  Warning,
		AppliesTo: []string{"host"},
		Doc: `Only with vm.overcommit_memory=2: compares Committed_AS with CommitLimit in
/proc/meminfo. In strict mode every malloc, mmap and fork that would push
Committed_AS past CommitLimit fails with ENOMEM, however much memory is actually free:
a database gets "out of memory" errors in sessions, cannot fork a worker or a
snapshot child. dbhost computes CommitLimit from the settings ((RAM - huge pages) x
overcommit_ratio / 100 + swap, or overcommit_kbytes + swap) and the commitment from
the planned values (see mem.overcommit), and flags less than 10 % headroom.`,
		Refs:    []string{"https://docs.kernel.org/mm/overcommit-accounting.html"},
		Sysctls: []string{"vm.overcommit_memory", "vm.overcommit_ratio", "vm.overcommit_kbytes"},
		Run:     checkCommitLimit,
	})
}

// commitState is the kernel's commit accounting.
type commitState struct {
	mode, ratio, kbytes         int64
	limit, committed, ram, swap uint64
	hugetlb                     uint64
	ev                          []Evidence
}

// readCommit gathers the overcommit settings and counters, or why not.
func readCommit(f *facts.Facts) (commitState, string) {
	var c commitState
	var why [3]string
	var ev [3]Evidence
	c.mode, ev[0], why[0] = memSysctlCount(f, "vm.overcommit_memory")
	c.ratio, ev[1], why[1] = memSysctlCount(f, "vm.overcommit_ratio")
	c.kbytes, ev[2], why[2] = memSysctlCount(f, "vm.overcommit_kbytes")
	c.ev = ev[:]
	if why[0] == "" && c.mode > 2 {
		why[0] = fmt.Sprintf("mode %d is none of the kernel's 0, 1 and 2", c.mode)
	}
	if why[0] != "" {
		return c, "cannot read vm.overcommit_memory: " + why[0]
	}
	mi := f.Memory.Meminfo
	var ok2 [3]bool
	c.limit, ok2[0] = meminfoBytes(mi.CommitLimit)
	c.committed, ok2[1] = meminfoBytes(mi.CommittedAS)
	c.ram, ok2[2] = meminfoBytes(mi.MemTotal)
	c.swap, _ = meminfoBytes(mi.SwapTotal)
	c.hugetlb, _ = meminfoBytes(mi.Hugetlb)
	if !ok2[0] || !ok2[1] || !ok2[2] {
		return c, "cannot read CommitLimit/Committed_AS from /proc/meminfo: " + memOr(f.Memory.MeminfoErr, "fields missing")
	}
	c.ev = append(c.ev, Ev("CommitLimit", humanBytes(c.limit), "/proc/meminfo"))
	// Under mode 2 the limit follows the settings and the huge page pool:
	// computed from them, it is the limit of the host the facts describe
	// (the planned one, when a plan is judged).
	c.limit = c.limitAt(f, c.ratio, c.kbytes)
	c.ev = append(c.ev,
		Ev("CommitLimit under mode 2", humanBytes(c.limit), "SwapTotal + (MemTotal - huge page pool) x overcommit_ratio / 100, or overcommit_kbytes + SwapTotal"),
		Ev("Committed_AS", humanBytes(c.committed), "/proc/meminfo"),
		Ev("MemTotal", humanBytes(c.ram), "/proc/meminfo"),
		Ev("SwapTotal", humanBytes(c.swap), "/proc/meminfo"))
	return c, ""
}

// maxStrictRatio is the highest overcommit_ratio dbhost proposes: above
// it strict accounting lets the databases commit nearly all of RAM, and
// the kernel's own needs and page cache come under pressure; heuristic
// mode is then the safer choice.
const maxStrictRatio = 95

// strictHeadroom is the margin CommitLimit keeps above the planned
// commitment (mem.commit_limit fails under 10 %).
func strictHeadroom(need uint64) uint64 { return need + need*15/100 }

// limitAt is CommitLimit under mode 2 with the given settings, computed
// from them (the planned values) rather than read: swap plus
// overcommit_kbytes, or (RAM - huge page pool) x ratio / 100.
func (c commitState) limitAt(f *facts.Facts, ratio, kbytes int64) uint64 {
	if kbytes > 0 {
		return c.swap + uint64(kbytes)<<10
	}
	pool, _ := hugePool(f)
	return c.swap + (c.ram-min(c.ram, pool))*uint64(max(ratio, 0))/100
}

// strictFix sizes mode 2 so that CommitLimit covers need with headroom:
// overcommit_kbytes when the host uses it, else overcommit_ratio (never
// lowered). It returns nil when no ratio up to maxStrictRatio does.
func (c commitState) strictFix(f *facts.Facts, need uint64) *fix.Fix {
	fx := &fix.Fix{Summary: "Use strict overcommit (mode 2) sized for what the host commits"}
	kv := []fix.KV{{Key: "vm.overcommit_memory", Value: "2"}}
	want := strictHeadroom(need)
	if c.kbytes > 0 {
		kb := memCeilDiv(want-min(want, c.swap), bKiB)
		if kb < uint64(c.kbytes) {
			kb = uint64(c.kbytes)
		}
		kv = append(kv, fix.KV{Key: "vm.overcommit_kbytes", Value: strconv.FormatUint(kb, 10)})
	} else {
		pool, _ := hugePool(f)
		base := c.ram - min(c.ram, pool)
		ratio := memCeilDiv((want-min(want, c.swap))*100, max(base, 1))
		if ratio > maxStrictRatio {
			return nil
		}
		ratio = max(ratio, uint64(c.ratio))
		kv = append(kv, fix.KV{Key: "vm.overcommit_ratio", Value: strconv.FormatUint(ratio, 10)})
	}
	fx.Sysctl = kv
	return memHostOnly(f, fx)
}

func checkOvercommit(f *facts.Facts) []Result {
	pgs, rds := f.ByEngine(engine.Postgres), f.ByEngine(engine.Redis)
	mdb := overcommitByTHP(f)
	if len(pgs) == 0 && len(rds) == 0 && len(mdb) == 0 {
		return nil
	}
	c, why := readCommit(f)
	if why != "" {
		return []Result{UnknownR(SubjectHost, why, c.ev...)}
	}
	var r Result
	switch {
	case len(pgs) > 0 && len(rds) > 0:
		r = overcommitBoth(f, c, pgs, rds)
	case len(pgs) > 0:
		r = overcommitPostgres(f, c, pgs)
	default:
		return []Result{overcommitOne(f, c, rds, mdb)}
	}
	if len(mdb) > 0 {
		// PostgreSQL and MongoDB 8 already disagree on THP itself
		// (mem.thp.enabled); the overcommit judgement keeps
		// PostgreSQL's documented mode and names the other wish.
		r.Reason += fmt.Sprintf(" MongoDB 8 (%s) asks for mode 1 as part of its THP setup; like its THP wish, that conflicts with PostgreSQL's, and dbhost keeps PostgreSQL's documented mode here (see mem.thp.enabled).", memNames(mdb))
	}
	return []Result{r}
}

// overcommitByTHP lists the instances whose documented THP setup also sets
// vm.overcommit_memory=1 (MongoDB 8 with its upgraded TCMalloc).
func overcommitByTHP(f *facts.Facts) []*facts.Instance {
	var out []*facts.Instance
	for _, in := range f.Instances {
		if in.Profile().THP(in.Instance, f.Manifest.Arch).Overcommit == 1 {
			out = append(out, in)
		}
	}
	return out
}

func memNames(ins []*facts.Instance) string {
	var s []string
	for _, in := range ins {
		s = append(s, in.Name())
	}
	return strings.Join(s, ", ")
}

// strictNeed is what CommitLimit must cover in mode 2, from the values in
// the facts (the planned ones when the planned host is judged): today's
// Committed_AS, plus what each database's settings commit beyond what it
// holds now (its fixed and connection memory outside huge pages, which
// are not committed, less its resident size), plus a fork of the largest
// Redis that persists. mem.overcommit and mem.commit_limit size their
// fixes with it, so the two agree.
func strictNeed(f *facts.Facts, c commitState) (uint64, string) {
	all, _, _, why := sizingAll(f)
	if why != "" {
		return c.committed, "Committed_AS " + humanBytes(c.committed)
	}
	var add, fork uint64
	var adds []string
	forkOf := ""
	for _, m := range all {
		if m.plan.Parts == nil {
			continue
		}
		planned := m.fixed + m.conns
		planned -= min(planned, m.huge)
		if extra := planned - min(planned, m.in.Mem.RSSBytes); extra > 0 {
			add += extra
			adds = append(adds, fmt.Sprintf("%s %s", m.in.Name(), humanBytes(extra)))
		}
		if m.fork > fork {
			fork, forkOf = m.fork, m.in.Name()
		}
	}
	need := c.committed + add + fork
	how := "Committed_AS " + humanBytes(c.committed)
	if add > 0 {
		how += " + what the databases' settings commit beyond what they hold now (" + strings.Join(adds, ", ") + ")"
	}
	if fork > 0 {
		how += fmt.Sprintf(" + a persistence fork of %s %s", forkOf, humanBytes(fork))
	}
	return need, how + " = " + humanBytes(need)
}

// largestRedis is the resident size of the largest Redis (its fork's
// commit charge).
func largestRedis(f *facts.Facts) (uint64, *facts.Instance) {
	var fork uint64
	var big *facts.Instance
	for _, in := range f.ByEngine(engine.Redis) {
		if in.Mem.RSSBytes >= fork {
			fork, big = in.Mem.RSSBytes, in
		}
	}
	return fork, big
}

func overcommitPostgres(f *facts.Facts, c commitState, pgs []*facts.Instance) Result {
	need, how := strictNeed(f, c)
	if c.mode == 2 && c.limit >= need+need/10 {
		return PassR(SubjectHost, fmt.Sprintf("vm.overcommit_memory is 2 (strict), as PostgreSQL documents for %s: an allocation beyond CommitLimit fails in one session instead of the OOM killer taking the postmaster. CommitLimit %s covers the planned commitment (%s) with 10 %% to spare.",
			memNames(pgs), humanBytes(c.limit), how), c.ev...)
	}
	reason := fmt.Sprintf("vm.overcommit_memory is %d (%s): PostgreSQL (%s) documents mode 2, because with overcommit the kernel hands out memory it may not have and the OOM killer later ends a process; if it picks the postmaster the whole server stops, if it picks a backend the postmaster resets every session.",
		c.mode, overcommitName(c.mode), memNames(pgs))
	if c.mode == 2 {
		reason = fmt.Sprintf("vm.overcommit_memory is 2 (strict), but CommitLimit %s does not cover the planned commitment (%s) with 10 %% to spare: allocations and forks would fail with ENOMEM.", humanBytes(c.limit), how)
	}
	fx := c.strictFix(f, need)
	if fx == nil {
		return FailR(SubjectHost, reason+fmt.Sprintf(" But strict accounting cannot cover the planned commitment (%s) with overcommit_ratio at most %d: the databases would fail to allocate. dbhost recommends heuristic overcommit (mode 0) with the postmaster protected by oom_score_adj -1000 (see limits.oom_score_adj), or more swap or RAM so that mode 2 fits.", how, maxStrictRatio),
			heuristicFix(f, c), c.ev...)
	}
	return FailR(SubjectHost, reason+fmt.Sprintf(" The fix sizes CommitLimit for the planned commitment (%s) plus 15 %%.", how), fx, c.ev...)
}

// heuristicFix is mode 0 with the postmaster protected: what dbhost
// proposes when strict accounting cannot cover the plan.
func heuristicFix(f *facts.Facts, c commitState) *fix.Fix {
	fx := &fix.Fix{Summary: "Use heuristic overcommit (mode 0) and protect the postmaster", Manual: "Start every postmaster with OOMScoreAdjust=-1000 (systemd drop-in) and PG_OOM_ADJUST_VALUE=0 for its children; or add swap so that mode 2 can cover what the host commits."}
	if c.mode != 0 {
		fx.Sysctl = []fix.KV{{Key: "vm.overcommit_memory", Value: "0"}}
		return memHostOnly(f, fx)
	}
	return fx
}

// overcommitOne judges a host whose databases all want mode 1: Redis for
// its fork, MongoDB 8 as part of its documented THP setup.
func overcommitOne(f *facts.Facts, c commitState, rds, mdb []*facts.Instance) Result {
	var wants, whys, names []string
	if len(rds) > 0 {
		wants = append(wants, "Redis ("+memNames(rds)+")")
		names = append(names, "Redis")
		why := "Redis forks for BGSAVE, AOF rewrites and full replica syncs, and the child is charged the parent's whole memory although copy-on-write shares it; "
		if c.mode == 2 {
			why += "in strict mode that fork fails once CommitLimit is short, and the snapshot is not written (\"Can't save in background: fork: Cannot allocate memory\")"
		} else {
			why += "the heuristic mode refuses the fork when the dataset is large compared with free memory, and Redis logs a warning about it at start-up"
		}
		whys = append(whys, why)
	}
	if len(mdb) > 0 {
		wants = append(wants, "MongoDB 8 ("+memNames(mdb)+")")
		names = append(names, "MongoDB 8")
		whys = append(whys, "MongoDB's documented setup for its upgraded TCMalloc sets mode 1 together with THP always, defrag defer+madvise and max_ptes_none 0 (the allocator reserves address space well ahead of use, which the other modes may refuse)")
	}
	who := strings.Join(wants, " and ")
	if c.mode == 1 {
		return PassR(SubjectHost, fmt.Sprintf("vm.overcommit_memory is 1, as needed by %s: %s.", who, strings.Join(whys, "; ")), c.ev...)
	}
	reason := fmt.Sprintf("vm.overcommit_memory is %d (%s), but mode 1 is needed by %s: %s.", c.mode, overcommitName(c.mode), who, strings.Join(whys, "; "))
	return FailR(SubjectHost, reason, sysctlFix(f, "Set vm.overcommit_memory to 1 for "+strings.Join(names, " and "), "vm.overcommit_memory", "1"), c.ev...)
}

// overcommitBoth weighs PostgreSQL's need for mode 2 against Redis's fork,
// from the planned commitment.
func overcommitBoth(f *facts.Facts, c commitState, pgs, rds []*facts.Instance) Result {
	fork, big := largestRedis(f)
	ev := append([]Evidence{}, c.ev...)
	if big != nil {
		ev = append(ev, Ev("largest Redis resident size", humanBytes(fork), fmt.Sprintf("/proc/%d/smaps_rollup (%s)", big.PID, big.Name())))
	}
	both := fmt.Sprintf("PostgreSQL (%s) and Redis (%s) share this host and want opposite overcommit modes: PostgreSQL documents 2 so the OOM killer never takes the postmaster; Redis wants 1 so the fork for BGSAVE, AOF rewrite and replica syncs, charged the parent's whole memory, cannot fail.", memNames(pgs), memNames(rds))
	need, how := strictNeed(f, c)
	protected, unprotected := oomProtected(pgs)
	switch c.mode {
	case 2:
		if c.limit >= need+need/10 {
			return PassR(SubjectHost, both+fmt.Sprintf(" Mode 2 is set and CommitLimit (%s) covers the planned commitment (%s, a Redis fork included) with 10 %% to spare, so both get what they need.", humanBytes(c.limit), how), ev...)
		}
		fx := c.strictFix(f, need)
		if fx == nil {
			return FailR(SubjectHost, both+fmt.Sprintf(" Mode 2 is set, but no overcommit_ratio up to %d makes CommitLimit cover the planned commitment (%s): BGSAVE and allocations will fail. Use mode 1 for Redis's fork and protect the postmaster with oom_score_adj -1000 instead.", maxStrictRatio, how),
				&fix.Fix{Summary: "Use mode 1 and protect the postmaster", Sysctl: []fix.KV{{Key: "vm.overcommit_memory", Value: "1"}}, Manual: "Start every postmaster with OOMScoreAdjust=-1000 (see limits.oom_score_adj).", HostOnly: f.System.Container != ""}, ev...)
		}
		return FailR(SubjectHost, both+fmt.Sprintf(" Mode 2 is set, but CommitLimit (%s) does not cover the planned commitment (%s) with 10 %% to spare: the next BGSAVE fails with \"Cannot allocate memory\". Raise the limit so both fit.", humanBytes(c.limit), how), fx, ev...)
	case 1:
		if len(unprotected) == 0 {
			return PassR(SubjectHost, both+fmt.Sprintf(" Mode 1 is set for Redis, and every postmaster (%s) runs with oom_score_adj -1000, so the OOM killer cannot choose it: the trade-off is resolved in Redis's favour with PostgreSQL protected.", memNames(protected)), ev...)
		}
	}
	reason := both + fmt.Sprintf(" vm.overcommit_memory is %d (%s)", c.mode, overcommitName(c.mode))
	if c.mode == 1 {
		reason += fmt.Sprintf(" and the postmaster of %s is not protected from the OOM killer (oom_score_adj is not -1000)", memNames(unprotected))
	}
	fx := c.strictFix(f, need)
	if fx == nil {
		return FailR(SubjectHost, reason+fmt.Sprintf(". Strict accounting cannot cover the planned commitment (%s) with overcommit_ratio at most %d: keep mode 1 for Redis's fork and start every postmaster with OOMScoreAdjust=-1000.", how, maxStrictRatio),
			&fix.Fix{Summary: "Protect the postmaster", Sysctl: []fix.KV{{Key: "vm.overcommit_memory", Value: "1"}}, Manual: "Start every postmaster with OOMScoreAdjust=-1000 (see limits.oom_score_adj).", HostOnly: f.System.Container != ""}, ev...)
	}
	reason += fmt.Sprintf(". The planned commitment fits strict accounting: %s, and CommitLimit sized 15 %% above it keeps PostgreSQL's strict accounting while the fork still fits (Redis will still log its start-up warning about overcommit_memory). The alternative is mode 1 with the postmaster protected by OOMScoreAdjust=-1000.", how)
	return FailR(SubjectHost, reason, fx, ev...)
}

// oomProtected splits postmasters by whether oom_score_adj is -1000.
func oomProtected(pgs []*facts.Instance) (yes, no []*facts.Instance) {
	for _, in := range pgs {
		if v, why := in.OOMScore.IntIn(-1000, 1000); why == "" && v <= -1000 {
			yes = append(yes, in)
		} else {
			no = append(no, in)
		}
	}
	return yes, no
}

func overcommitName(mode int64) string {
	switch mode {
	case 0:
		return "heuristic overcommit"
	case 1:
		return "always overcommit"
	case 2:
		return "strict accounting"
	}
	return "unknown mode"
}

func checkCommitLimit(f *facts.Facts) []Result {
	c, why := readCommit(f)
	if why != "" {
		return []Result{UnknownR(SubjectHost, why, c.ev...)}
	}
	if c.mode != 2 {
		return []Result{PassR(SubjectHost, fmt.Sprintf("vm.overcommit_memory is %d (%s): CommitLimit is not enforced, so Committed_AS (%s) cannot make allocations fail.", c.mode, overcommitName(c.mode), humanBytes(c.committed)), c.ev...)}
	}
	need, how := strictNeed(f, c)
	used := memPct(need, c.limit)
	if c.limit > 0 && need*10 < c.limit*9 {
		return []Result{PassR(SubjectHost, fmt.Sprintf("Strict overcommit: the planned commitment (%s) is %.0f %% of CommitLimit %s, leaving %s for new allocations and forks.", how, used, humanBytes(c.limit), humanBytes(c.limit-need)), c.ev...)}
	}
	reason := fmt.Sprintf("Strict overcommit: the planned commitment (%s) is %.0f %% of CommitLimit %s. Every allocation, mmap or fork that would pass the limit fails with ENOMEM however much memory is free: sessions get \"out of memory\" errors and background workers or snapshot children cannot start.", how, used, humanBytes(c.limit))
	fx := c.strictFix(f, need)
	if fx == nil {
		return []Result{FailR(SubjectHost, reason+fmt.Sprintf(" No overcommit_ratio up to %d covers it: add swap or RAM, or leave strict mode (mem.overcommit says which mode).", maxStrictRatio),
			&fix.Fix{Summary: "Add swap or leave strict overcommit", Manual: "Add swap (CommitLimit includes it) or RAM; or set vm.overcommit_memory to 0 and protect the postmaster with OOMScoreAdjust=-1000."}, c.ev...)}
	}
	fx.Summary = "Raise CommitLimit to leave headroom"
	return []Result{FailR(SubjectHost, reason+" The fix raises CommitLimit to the planned commitment plus 15 %.", fx, c.ev...)}
}
