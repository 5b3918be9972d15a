package check

import (
	"fmt"
	"sort"
	"strings"

	shares "github.com/dbhost/dbhost/internal/budget"
	"github.com/dbhost/dbhost/internal/engine"
	"github.com/dbhost/dbhost/internal/facts"
)

// One memory budget for all the databases of a host, and each one's share
// (docs/fix.md, "The memory budget"). The budget and the shares depend only
// on facts a plan does not change (RAM, the other processes, the huge
// pages the databases do not use, what each database holds now, the
// user's shares), so that the values proposed from them still pass when
// the checks judge the planned host.

// Engine weights for the memory left after each database's floor: the
// disk-backed engines turn memory into fewer reads, so they get twice the
// weight of Redis, whose floor already holds its whole data set.
var engineWeight = map[engine.Engine]uint64{
	engine.Postgres: 2, engine.MySQL: 2, engine.MongoDB: 2, engine.Redis: 1,
}

// osReserve is what the budget leaves the kernel and the page cache of
// files that are not the databases': 10 % of RAM, at least 64 MiB, at
// most 4 GiB.
func osReserve(ram uint64) uint64 { return min(max(ram/10, 64*bMiB), 4*bGiB, ram) }

// cgroupUsable is the part of a cgroup memory limit its databases may
// plan with: the group is also charged for its page cache.
func cgroupUsable(limit uint64) uint64 { return limit - limit/10 }

// hostPlan is the host's memory budget and every database's share of it,
// by instance index.
type hostPlan struct {
	ram, others, foreign, reserve, total uint64
	// how is the budget's arithmetic ("RAM 23.5 GiB - ... = 20.1 GiB").
	how string
	ev  []Evidence
	// share, shareHow, capped, user: each database's share, how it was
	// reached, whether its cgroup capped it, whether the user set it.
	share    []uint64
	shareHow []string
	capped   []bool
	user     []bool
	// userErr says why the user's shares were not used.
	userErr string
}

// budgetGrain is the step in which what processes hold now is counted
// (rounded up): resident memory moves by megabytes from one audit to the
// next, and a proposal must not move with it (a saved plan would differ
// from the apply's, and any process's allocation would nudge the servers'
// sizes).
const budgetGrain = 64 * bMiB

func grain(b uint64) uint64 { return (b + budgetGrain - 1) / budgetGrain * budgetGrain }

// othersUse is the memory the host's other processes and the kernel hold:
// MemTotal - MemAvailable, less the huge page pool (its pages are never
// available) and less the databases' resident memory.
func othersUse(f *facts.Facts, ram uint64) (uint64, Evidence) {
	mi := f.Memory.Meminfo
	if mi.MemAvailable == nil {
		return 0, Ev("other processes", "not counted", "/proc/meminfo has no MemAvailable")
	}
	avail := *mi.MemAvailable << 10
	var hugetlb uint64
	if mi.Hugetlb != nil {
		hugetlb = *mi.Hugetlb << 10
	} else {
		hugetlb, _ = hugePool(f)
	}
	used := ram - min(ram, avail)
	used -= min(used, hugetlb)
	var db uint64
	for _, in := range f.Instances {
		db += in.Mem.RSSBytes
	}
	others := grain(used - min(used, db))
	return others, Ev("other processes and the kernel", humanBytes(others),
		fmt.Sprintf("/proc/meminfo MemTotal - MemAvailable %s - Hugetlb %s - the databases' resident memory %s (smaps_rollup)", humanBytes(avail), humanBytes(hugetlb), humanBytes(db)))
}

// planHost computes the host budget and the shares.
func planHost(f *facts.Facts, all []dbMem, ram uint64, ramEv Evidence) *hostPlan {
	hp := &hostPlan{ram: ram, ev: []Evidence{ramEv}}
	n := len(all)
	hp.share, hp.shareHow, hp.capped, hp.user = make([]uint64, n), make([]string, n), make([]bool, n), make([]bool, n)
	var oev Evidence
	hp.others, oev = othersUse(f, ram)
	hp.ev = append(hp.ev, oev)
	pool, poolEv := hugePool(f)
	var dbHuge uint64
	for _, m := range all {
		dbHuge += m.huge
	}
	hp.foreign = pool - min(pool, dbHuge)
	hp.ev = append(hp.ev, poolEv...)
	hp.reserve = osReserve(ram)
	left := ram
	how := []string{"RAM " + humanBytes(ram)}
	sub := func(what string, b uint64) {
		if b == 0 {
			return
		}
		left -= min(left, b)
		how = append(how, what+" "+humanBytes(b))
	}
	sub("other processes and the kernel", hp.others)
	if pool > 0 {
		sub(fmt.Sprintf("huge pages no database uses (pool %s, theirs %s)", humanBytes(pool), humanBytes(min(pool, dbHuge))), hp.foreign)
	}
	sub("OS and page cache reserve (10 % of RAM, 64 MiB to 4 GiB)", hp.reserve)
	hp.total = left
	hp.how = strings.Join(how, " - ") + " = " + humanBytes(left) + " for the databases"
	hp.divide(f, all)
	return hp
}

// divide gives each database its share: the user's, then by the rule:
// a floor of what it holds now (its resident memory; twice that for a
// Redis that forks for persistence), and the rest by engine weight. A
// cgroup memory limit caps the shares of the databases in it; what it
// frees goes to the others by weight.
func (hp *hostPlan) divide(f *facts.Facts, all []dbMem) {
	idx := map[string]int{}
	var names []string
	for i, m := range all {
		if m.plan.Parts != nil {
			idx[m.in.Name()] = i
			names = append(names, m.in.Name())
		}
	}
	rest := hp.total
	if sh := f.Budget.Shares; len(sh) > 0 {
		matched, err := shares.Match(sh, names)
		if err == nil {
			err = shares.Check(sh, names, hp.total)
		}
		if err != nil {
			hp.userErr = fmt.Sprintf("%v (from %s); dbhost ignores the shares and divides by its rule", err, memOr(f.Budget.Source, "the user"))
		} else {
			for k, s := range sh {
				i := idx[matched[k]]
				hp.share[i], hp.user[i] = s.Of(hp.total), true
				hp.shareHow[i] = fmt.Sprintf("%s's share %s, as %s sets it (%s)", matched[k], humanBytes(hp.share[i]), memOr(f.Budget.Source, "the user"), s.String())
				rest -= min(rest, hp.share[i])
			}
		}
	}
	var ruled []int
	for _, i := range idx {
		if !hp.user[i] {
			ruled = append(ruled, i)
		}
	}
	sort.Ints(ruled)
	floors := make([]uint64, len(all))
	var sumFloor, sumW uint64
	for _, i := range ruled {
		floors[i] = grain(all[i].in.Mem.RSSBytes)
		if all[i].fork > 0 {
			floors[i] *= 2
		}
		sumFloor += floors[i]
		sumW += engineWeight[all[i].in.Engine]
	}
	for _, i := range ruled {
		w := engineWeight[all[i].in.Engine]
		if sumFloor >= rest {
			hp.share[i] = mulDiv(rest, floors[i], max(sumFloor, 1))
			hp.shareHow[i] = fmt.Sprintf("%s's share %s: what it holds now (%s) leaves nothing to divide, so the %s left are shared in proportion to it", all[i].in.Name(), humanBytes(hp.share[i]), humanBytes(floors[i]), humanBytes(rest))
			continue
		}
		extra := mulDiv(rest-sumFloor, w, sumW)
		hp.share[i] = floors[i] + extra
		hp.shareHow[i] = fmt.Sprintf("%s's share %s = what it holds now %s%s + weight %d of %d (%s) of the %s left after what every database holds now",
			all[i].in.Name(), humanBytes(hp.share[i]), humanBytes(floors[i]), forkFloorNote(all[i]), w, sumW, engineName(all[i].in.Engine), humanBytes(rest-sumFloor))
	}
	hp.capCgroups(all, ruled)
}

// capCgroups caps the shares of databases in a cgroup with a memory limit
// below their shares, and gives what that frees to the uncapped databases
// of the rule by weight.
func (hp *hostPlan) capCgroups(all []dbMem, ruled []int) {
	groups := map[string][]int{}
	limits := map[string]uint64{}
	for i, m := range all {
		if m.plan.Parts == nil {
			continue
		}
		if l, ok := m.in.Cgroup.MemoryLimit(); ok {
			groups[m.in.Cgroup.Path] = append(groups[m.in.Cgroup.Path], i)
			limits[m.in.Cgroup.Path] = l
		}
	}
	paths := make([]string, 0, len(groups))
	for p := range groups {
		paths = append(paths, p)
	}
	sort.Strings(paths)
	var freed uint64
	for _, p := range paths {
		usable := cgroupUsable(limits[p])
		var sum uint64
		for _, i := range groups[p] {
			sum += hp.share[i]
		}
		if sum <= usable {
			continue
		}
		freed += sum - usable
		for _, i := range groups[p] {
			was := hp.share[i]
			hp.share[i] = mulDiv(usable, was, max(sum, 1))
			hp.capped[i] = true
			hp.shareHow[i] = fmt.Sprintf("%s; capped to %s by its cgroup's memory limit %s (90 %% of it: the group is also charged for its page cache%s)", hp.shareHow[i], humanBytes(hp.share[i]), humanBytes(limits[p]), sharedGroup(all, groups[p], i))
		}
	}
	var open []int
	var sumW uint64
	for _, i := range ruled {
		if _, limited := all[i].in.Cgroup.MemoryLimit(); !limited {
			open = append(open, i)
			sumW += engineWeight[all[i].in.Engine]
		}
	}
	for _, i := range open {
		if freed == 0 {
			break
		}
		add := mulDiv(freed, engineWeight[all[i].in.Engine], sumW)
		hp.share[i] += add
		hp.shareHow[i] += fmt.Sprintf(", + %s its weight gets of the %s that cgroup limits left over", humanBytes(add), humanBytes(freed))
	}
}

// sharedGroup names the other databases sharing a cgroup's limit.
func sharedGroup(all []dbMem, group []int, self int) string {
	var o []string
	for _, j := range group {
		if j != self {
			o = append(o, all[j].in.Name())
		}
	}
	if len(o) == 0 {
		return ""
	}
	return ", shared with " + strings.Join(o, ", ")
}

func forkFloorNote(m dbMem) string {
	if m.fork == 0 {
		return ""
	}
	return " (its resident size twice: persistence forks)"
}

var engineNames = map[engine.Engine]string{engine.Postgres: "PostgreSQL", engine.MySQL: "MySQL", engine.MongoDB: "MongoDB", engine.Redis: "Redis"}

func engineName(e engine.Engine) string { return memOr(engineNames[e], string(e)) }

// mulDiv is a*b/c without overflow for memory sizes.
func mulDiv(a, b, c uint64) uint64 {
	if c == 0 {
		return 0
	}
	return uint64(float64(a) * float64(b) / float64(c))
}
