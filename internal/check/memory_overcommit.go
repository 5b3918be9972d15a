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
When both run on one host dbhost reports one finding that explains the trade-off:
mode 2 is acceptable when CommitLimit leaves room for Committed_AS plus the largest
Redis resident size (the fork's charge); mode 1 is acceptable when every postmaster
runs with oom_score_adj -1000, so the OOM killer cannot choose it.`,
		Refs: []string{"https://www.postgresql.org/docs/current/kernel-resources.html#LINUX-MEMORY-OVERCOMMIT",
			"https://redis.io/docs/latest/operate/oss_and_stack/management/admin/",
			"https://docs.kernel.org/mm/overcommit-accounting.html"},
		Sysctls: []string{"vm.overcommit_memory", "vm.overcommit_ratio", "vm.overcommit_kbytes"},
		Run:     checkOvercommit,
	})
	Register(Check{
		ID:        "mem.commit_limit",
		Title:     "Committed memory stays clear of CommitLimit under strict overcommit",
		Severity:  Warning,
		AppliesTo: []string{"host"},
		Doc: `Only with vm.overcommit_memory=2: compares Committed_AS with CommitLimit in
/proc/meminfo. In strict mode every malloc, mmap and fork that would push
Committed_AS past CommitLimit fails with ENOMEM, however much memory is actually free:
a database gets "out of memory" errors in sessions, cannot fork a worker or a
snapshot child. dbhost flags less than 10 % headroom. CommitLimit is
(RAM - huge pages) x overcommit_ratio / 100 + swap, or overcommit_kbytes + swap.`,
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
	c.ev = append(c.ev,
		Ev("CommitLimit", humanBytes(c.limit), "/proc/meminfo"),
		Ev("Committed_AS", humanBytes(c.committed), "/proc/meminfo"),
		Ev("MemTotal", humanBytes(c.ram), "/proc/meminfo"),
		Ev("SwapTotal", humanBytes(c.swap), "/proc/meminfo"))
	return c, ""
}

// strictFix sizes mode 2 so that CommitLimit covers need: overcommit_kbytes
// when the host uses it, else overcommit_ratio (never lowered). It returns
// nil when even 100 % of RAM plus swap would not cover need.
func (c commitState) strictFix(f *facts.Facts, need uint64) *fix.Fix {
	fx := &fix.Fix{Summary: "Use strict overcommit (mode 2) sized for what the host commits"}
	kv := []fix.KV{{Key: "vm.overcommit_memory", Value: "2"}}
	if c.kbytes > 0 {
		kb := memCeilDiv(need-min(need, c.swap), bKiB)
		if kb < uint64(c.kbytes) {
			kb = uint64(c.kbytes)
		}
		kv = append(kv, fix.KV{Key: "vm.overcommit_kbytes", Value: strconv.FormatUint(kb, 10)})
	} else {
		base := c.ram - min(c.ram, c.hugetlb)
		ratio := memCeilDiv((need-min(need, c.swap))*100, max(base, 1))
		if ratio > 100 {
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

// strictNeed is what CommitLimit must cover in mode 2: what the host commits
// today plus a quarter for growth (new sessions, work_mem), and at least
// that plus the fork of the largest Redis plus 10 %. mem.overcommit and
// mem.commit_limit size their fixes with it, so the two agree.
func strictNeed(f *facts.Facts, c commitState) uint64 {
	fork, _ := largestRedis(f)
	withFork := c.committed + fork
	return max(c.committed+c.committed/4, withFork+withFork/10)
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
	if c.mode == 2 {
		return PassR(SubjectHost, fmt.Sprintf("vm.overcommit_memory is 2 (strict), as PostgreSQL documents for %s: an allocation beyond CommitLimit fails in one session instead of the OOM killer taking the postmaster. CommitLimit %s, committed %s (see mem.commit_limit for the headroom).",
			memNames(pgs), humanBytes(c.limit), humanBytes(c.committed)), c.ev...)
	}
	reason := fmt.Sprintf("vm.overcommit_memory is %d (%s): PostgreSQL (%s) documents mode 2, because with overcommit the kernel hands out memory it may not have and the OOM killer later ends a process; if it picks the postmaster the whole server stops, if it picks a backend the postmaster resets every session.",
		c.mode, overcommitName(c.mode), memNames(pgs))
	need := strictNeed(f, c)
	fx := c.strictFix(f, need)
	if fx == nil {
		return FailR(SubjectHost, reason+fmt.Sprintf(" But the host already commits %s, more than RAM plus swap: mode 2 would make allocations fail. Protect the postmaster with oom_score_adj -1000 instead (see limits.oom_score_adj) or add RAM or swap.", humanBytes(c.committed)),
			&fix.Fix{Summary: "Protect the postmaster instead of strict overcommit", Manual: "Start the postmaster with OOMScoreAdjust=-1000 (systemd drop-in) and PG_OOM_ADJUST_VALUE=0 for its children; or add swap so that mode 2 can cover what the host commits."}, c.ev...)
	}
	return FailR(SubjectHost, reason+fmt.Sprintf(" The fix sizes CommitLimit for today's Committed_AS (%s) plus 25 %% so that ordinary allocations keep working.", humanBytes(c.committed)), fx, c.ev...)
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

// overcommitBoth weighs PostgreSQL's need for mode 2 against Redis's fork.
func overcommitBoth(f *facts.Facts, c commitState, pgs, rds []*facts.Instance) Result {
	fork, big := largestRedis(f)
	ev := append([]Evidence{}, c.ev...)
	if big != nil {
		ev = append(ev, Ev("largest Redis resident size", humanBytes(fork), fmt.Sprintf("/proc/%d/smaps_rollup (%s)", big.PID, big.Name())))
	}
	both := fmt.Sprintf("PostgreSQL (%s) and Redis (%s) share this host and want opposite overcommit modes: PostgreSQL documents 2 so the OOM killer never takes the postmaster; Redis wants 1 so the fork for BGSAVE, AOF rewrite and replica syncs, charged the parent's whole memory, cannot fail.", memNames(pgs), memNames(rds))
	need := c.committed + fork
	need += need / 10
	fixNeed := strictNeed(f, c)
	protected, unprotected := oomProtected(pgs)
	switch c.mode {
	case 2:
		if c.limit >= need {
			return PassR(SubjectHost, both+fmt.Sprintf(" Mode 2 is set and CommitLimit (%s) covers what the host commits (%s) plus a fork of the largest Redis (%s) with 10 %% to spare, so both get what they need.", humanBytes(c.limit), humanBytes(c.committed), humanBytes(fork)), ev...)
		}
		fx := c.strictFix(f, fixNeed)
		if fx == nil {
			return FailR(SubjectHost, both+fmt.Sprintf(" Mode 2 is set, but CommitLimit (%s) cannot cover committed memory plus a Redis fork (%s) even at 100 %% of RAM: BGSAVE will fail. Use mode 1 and protect the postmaster with oom_score_adj -1000 instead.", humanBytes(c.limit), humanBytes(need)),
				&fix.Fix{Summary: "Use mode 1 and protect the postmaster", Sysctl: []fix.KV{{Key: "vm.overcommit_memory", Value: "1"}}, Manual: "Start every postmaster with OOMScoreAdjust=-1000 (see limits.oom_score_adj).", HostOnly: f.System.Container != ""}, ev...)
		}
		return FailR(SubjectHost, both+fmt.Sprintf(" Mode 2 is set, but CommitLimit (%s) does not cover committed memory (%s) plus a fork of the largest Redis (%s): its next BGSAVE fails with \"Cannot allocate memory\". Raise the limit so both fit.", humanBytes(c.limit), humanBytes(c.committed), humanBytes(fork)), fx, ev...)
	case 1:
		if len(unprotected) == 0 {
			return PassR(SubjectHost, both+fmt.Sprintf(" Mode 1 is set for Redis, and every postmaster (%s) runs with oom_score_adj -1000, so the OOM killer cannot choose it: the trade-off is resolved in Redis's favour with PostgreSQL protected.", memNames(protected)), ev...)
		}
	}
	reason := both + fmt.Sprintf(" vm.overcommit_memory is %d (%s)", c.mode, overcommitName(c.mode))
	if c.mode == 1 {
		reason += fmt.Sprintf(" and the postmaster of %s is not protected from the OOM killer (oom_score_adj is not -1000)", memNames(unprotected))
	}
	fx := c.strictFix(f, fixNeed)
	if fx == nil {
		return FailR(SubjectHost, reason+". Mode 2 cannot cover committed memory plus a Redis fork on this host: keep mode 1 and start every postmaster with OOMScoreAdjust=-1000.",
			&fix.Fix{Summary: "Protect the postmaster", Sysctl: []fix.KV{{Key: "vm.overcommit_memory", Value: "1"}}, Manual: "Start every postmaster with OOMScoreAdjust=-1000 (see limits.oom_score_adj).", HostOnly: f.System.Container != ""}, ev...)
	}
	reason += fmt.Sprintf(". dbhost proposes mode 2 with CommitLimit sized for what the host commits (%s) plus a fork of the largest Redis (%s) and 10 %%: PostgreSQL gets strict accounting and the fork still fits (Redis will still log its start-up warning about overcommit_memory). The alternative is mode 1 with the postmaster protected by OOMScoreAdjust=-1000.", humanBytes(c.committed), humanBytes(fork))
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
	used := memPct(c.committed, c.limit)
	if c.limit > 0 && c.committed*10 < c.limit*9 {
		return []Result{PassR(SubjectHost, fmt.Sprintf("Strict overcommit: Committed_AS %s is %.0f %% of CommitLimit %s, leaving %s for new allocations and forks.", humanBytes(c.committed), used, humanBytes(c.limit), humanBytes(c.limit-c.committed)), c.ev...)}
	}
	need := strictNeed(f, c)
	reason := fmt.Sprintf("Strict overcommit: Committed_AS %s is %.0f %% of CommitLimit %s. Every allocation, mmap or fork that would pass the limit fails with ENOMEM however much memory is free: sessions get \"out of memory\" errors and background workers or snapshot children cannot start.", humanBytes(c.committed), used, humanBytes(c.limit))
	fx := c.strictFix(f, need)
	if fx == nil {
		return []Result{FailR(SubjectHost, reason+" The host commits more than RAM plus swap could back: add swap or RAM, or leave strict mode.",
			&fix.Fix{Summary: "Add swap or leave strict overcommit", Manual: "Add swap (CommitLimit includes it) or RAM; or set vm.overcommit_memory to 0 and protect the postmaster with OOMScoreAdjust=-1000."}, c.ev...)}
	}
	fx.Summary = "Raise CommitLimit to leave headroom"
	return []Result{FailR(SubjectHost, reason+" The fix raises CommitLimit to today's commitment plus 25 % (and room for a fork of the largest Redis, if any).", fx, c.ev...)}
}
