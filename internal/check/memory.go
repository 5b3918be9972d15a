package check

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/dbhost/dbhost/internal/engine"
	"github.com/dbhost/dbhost/internal/facts"
	"github.com/dbhost/dbhost/internal/fix"
	"github.com/dbhost/dbhost/internal/host"
)

func init() {
	Register(Check{
		ID:        "mem.swappiness",
		Title:     "vm.swappiness suits a database host",
		Problem:   "vm.swappiness does not suit a database host",
		Severity:  Warning,
		AppliesTo: []string{"host"},
		Doc: `Reads vm.swappiness. Databases manage their own caches; the default 60 lets
the kernel swap out database memory to keep page cache, and a swapped-out
buffer pool stalls queries on disk reads. 1 keeps swapping for real memory
pressure only (10 where a little swapping is wanted). 0 is not safer: on
kernels since 3.5 it can make the OOM killer fire before any swapping. Without any
active swap (/proc/swaps) the value is moot, as the kernel cannot page out anonymous
memory at all: the check passes and says so, and mem.swap (which wants some swap)
sets swappiness to 1 in the same fix.`,
		Refs:    []string{"https://docs.kernel.org/admin-guide/sysctl/vm.html#swappiness"},
		Sysctls: []string{"vm.swappiness"},
		Run:     checkSwappiness,
	})
	Register(Check{
		ID:        "mem.dirty",
		Title:     "Dirty page thresholds suit the host's RAM",
		Problem:   "Dirty page thresholds do not suit the host's RAM",
		Severity:  Warning,
		AppliesTo: []string{"host"},
		Doc: `Reads vm.dirty_ratio and vm.dirty_background_ratio, or their byte variants
vm.dirty_bytes and vm.dirty_background_bytes (a non-zero *_bytes replaces the
ratio), and turns both into bytes of MemTotal. (The kernel applies ratios to
"dirtyable" memory, free plus page cache, so the byte figures are upper bounds.)
Background writeback starts at the background threshold; writers are throttled near
dirty_ratio. The rule dbhost applies:
- hosts with 64 GiB of RAM or more: dirty at most 15 % and background at most 5 % of
  RAM (Red Hat suggests 10 / 3; byte values are better still on very large hosts).
  The defaults of 20 / 10 let tens of GB of dirty pages pile up and then flush in one
  long burst;
- smaller hosts: the kernel defaults (20 / 10) are acceptable, but not more: a raised
  background threshold delays writeback until a large backlog must be flushed at once;
- everywhere: the background threshold must be below the dirty threshold, otherwise
  the kernel silently uses half of the dirty threshold.
Measured effect: a write-heavy MySQL benchmark showed periodic throughput drops
caused by dirty-page flushing (visible as Dirty/Writeback in /proc/meminfo);
dirty_background_ratio=1 flattened them at a 2.8 % throughput cost. A host that
shows such periodic stalls benefits from a lower background threshold even when it
passes this check.`,
		Refs: []string{"https://docs.kernel.org/admin-guide/sysctl/vm.html#dirty-background-ratio",
			"https://access.redhat.com/solutions/16588"},
		Sysctls: []string{"vm.dirty_ratio", "vm.dirty_bytes", "vm.dirty_background_ratio", "vm.dirty_background_bytes"},
		Run:     checkDirty,
	})
	Register(Check{
		ID:        "mem.zone_reclaim",
		Title:     "vm.zone_reclaim_mode is 0",
		Problem:   "vm.zone_reclaim_mode is not 0",
		Severity:  Warning,
		AppliesTo: []string{"host", "numa"},
		Doc: `Reads vm.zone_reclaim_mode. With a non-zero mode the kernel reclaims page cache
(and with 2/4 writes out dirty pages or swaps) on the local NUMA node before it
allocates from another node that has free memory: a database then loses its cached
data and stalls on reclaim while memory sits free next door. MongoDB warns about it at
start-up; the kernel documentation recommends 0 for file servers and workloads whose
data does not fit one node. On a single-node host the setting changes little, but 0
is still the right value.`,
		Refs: []string{"https://docs.kernel.org/admin-guide/sysctl/vm.html#zone-reclaim-mode",
			"https://www.mongodb.com/docs/manual/administration/production-notes/#mongodb-and-numa-hardware"},
		Sysctls: []string{"vm.zone_reclaim_mode"},
		Run:     checkZoneReclaim,
	})
	Register(Check{
		ID:        "mem.swap",
		Title:     "The host has some swap",
		Problem:   "The host has no swap",
		Severity:  Warning,
		AppliesTo: []string{"host"},
		Doc: `Reads /proc/swaps. A database host should have a modest swap area even with
vm.swappiness 1: swap lets the kernel move cold anonymous pages (idle sessions,
forgotten allocations) out of the way under pressure, so memory pressure shows up as
a measurable slowdown instead of the OOM killer. With no swap, anonymous memory can
never be reclaimed; the kernel evicts page cache, then executable pages, thrashes,
and finally kills the largest process, usually the database. vm.swappiness 0 or 1
does not change this: it only decides how eagerly swap is used when there is some.`,
		Refs:    []string{"https://docs.kernel.org/admin-guide/mm/concepts.html#anonymous-memory"},
		Sysctls: []string{"vm.swappiness"},
		Run:     checkSwap,
	})
	Register(Check{
		ID:        "mem.min_free_kbytes",
		Title:     "vm.min_free_kbytes is within sane bounds",
		Problem:   "vm.min_free_kbytes is outside sane bounds",
		Severity:  Info,
		AppliesTo: []string{"host"},
		Doc: `Reads vm.min_free_kbytes, the reserve the kernel keeps free for atomic
allocations (network receive, interrupt handlers) and from which it derives the
kswapd watermarks. The kernel's own formula is 4 x sqrt(low memory in kB), clamped
to 128 kB..256 MiB (with THP enabled khugepaged raises it further to keep huge
page blocks free). Below about 80 % of that formula (dbhost computes it from
MemTotal, slightly above the kernel's own base) kswapd wakes too late, allocations
fall into direct reclaim and atomic allocations can fail ("page allocation failure"
in dmesg, dropped packets). Above 5 % of RAM the reserve is memory no database can
use, and reclaim starts early and often. The fix restores the kernel's formula.`,
		Refs:    []string{"https://docs.kernel.org/admin-guide/sysctl/vm.html#min-free-kbytes"},
		Sysctls: []string{"vm.min_free_kbytes"},
		Run:     checkMinFree,
	})
	Register(Check{
		ID:        "mem.max_map_count",
		Title:     "vm.max_map_count is high enough for MongoDB",
		Problem:   "vm.max_map_count is too low for MongoDB",
		Severity:  Warning,
		AppliesTo: []string{"mongodb"},
		Doc: `Reads vm.max_map_count, the number of memory areas one process may map. Each
MongoDB connection thread maps its own stack and guard page, so mongod needs about
two areas per connection; past the limit, mmap fails and mongod crashes. mongod
checks this at start-up (warning id 5123300 "vm.max_map_count is too low", added for
SERVER-51233): it wants at least 2 x its maximum number of connections, where that
maximum is net.maxIncomingConnections (default 1000000) capped at 80 % of the soft
open-files limit. dbhost computes the same figure from the running mongod's limits.`,
		Refs: []string{"https://jira.mongodb.org/browse/SERVER-51233",
			"https://github.com/mongodb/mongo/blob/master/src/mongo/db/startup_warnings_mongod.cpp",
			"https://docs.kernel.org/admin-guide/sysctl/vm.html#max-map-count"},
		Sysctls: []string{"vm.max_map_count"},
		Run:     checkMaxMapCount,
	})
}

func checkSwappiness(f *facts.Facts) []Result {
	r := f.SysctlReading("vm.swappiness")
	ev := EvReading("vm.swappiness", r)
	v, why := r.IntIn(0, 200) // the kernel's range
	if why != "" {
		return []Result{UnknownR(SubjectHost, "cannot judge vm.swappiness: "+why, ev)}
	}
	if f.Memory.SwapsErr == "" && len(f.Memory.Swaps) == 0 {
		// Without swap the kernel cannot reclaim anonymous memory
		// (mm/vmscan.c scans only the file LRUs), whatever the value.
		tail := "It matters once swap is added; mem.swap's fix sets it to 1 with the swap."
		if v >= 1 && v <= 10 {
			tail = "When swap is added, this value already keeps swapping for real memory pressure."
		}
		return []Result{PassR(SubjectHost, fmt.Sprintf("vm.swappiness is %d and no swap is active: the kernel cannot page out anonymous memory and reclaims only page cache, so the value is moot. %s", v, tail),
			ev, Ev("swap areas", "none", "/proc/swaps"))}
	}
	switch {
	case v >= 1 && v <= 10:
		return []Result{PassR(SubjectHost, fmt.Sprintf("vm.swappiness is %d: the kernel swaps only under real memory pressure.", v), ev)}
	case v == 0:
		return []Result{FailR(SubjectHost,
			"vm.swappiness is 0: on kernels since 3.5 this can invoke the OOM killer instead of swapping, which kills the database rather than slowing it. Use 1.",
			sysctlFix(f, "Set vm.swappiness to 1", "vm.swappiness", "1"), ev)}
	}
	return []Result{FailR(SubjectHost,
		fmt.Sprintf("vm.swappiness is %d: the kernel will swap out database memory to keep page cache; a swapped-out buffer pool turns memory reads into disk reads and stalls the server. Use 1 (or 10 if some swapping is wanted).", v),
		sysctlFix(f, "Set vm.swappiness to 1", "vm.swappiness", "1"), ev)}
}

// ---- mem.dirty ----

// memLargeRAM is where the stricter dirty thresholds begin (knowledge.md §1).
const memLargeRAM = 64 * bGiB

// memDirtyLimit is one threshold: a ratio of RAM or, when Bytes is non-zero,
// an absolute size (the kernel uses whichever was written last and zeroes
// the other).
type memDirtyLimit struct {
	name  string // "dirty" or "background"
	ratio int64
	bytes int64
}

func (d memDirtyLimit) inBytes(ram uint64) uint64 {
	if d.bytes > 0 {
		return uint64(d.bytes)
	}
	return uint64(d.ratio) * ram / 100
}

func (d memDirtyLimit) String() string {
	if d.bytes > 0 {
		return fmt.Sprintf("vm.%s_bytes = %s", d.key(), humanBytes(uint64(d.bytes)))
	}
	return fmt.Sprintf("vm.%s_ratio = %d", d.key(), d.ratio)
}

func (d memDirtyLimit) key() string {
	if d.name == "background" {
		return "dirty_background"
	}
	return "dirty"
}

// sysctlFor names the parameter a fix should set: the variant in use.
func (d memDirtyLimit) sysctlFor(ram uint64, pctOfRAM int64) (string, string) {
	if d.bytes > 0 {
		return "vm." + d.key() + "_bytes", strconv.FormatUint(ram*uint64(pctOfRAM)/100/bMiB*bMiB, 10)
	}
	return "vm." + d.key() + "_ratio", strconv.FormatInt(pctOfRAM, 10)
}

func checkDirty(f *facts.Facts) []Result {
	ram, ramEv, why := memTotal(f)
	if why != "" {
		return []Result{UnknownR(SubjectHost, why, ramEv)}
	}
	dr, ev1, why1 := memSysctlCount(f, "vm.dirty_ratio")
	db, ev2, why2 := memSysctlCount(f, "vm.dirty_bytes")
	br, ev3, why3 := memSysctlCount(f, "vm.dirty_background_ratio")
	bb, ev4, why4 := memSysctlCount(f, "vm.dirty_background_bytes")
	ev := []Evidence{ramEv, ev1, ev2, ev3, ev4}
	if why := firstNonEmpty(why1, why2, why3, why4); why != "" {
		return []Result{UnknownR(SubjectHost, "cannot read the dirty page thresholds: "+why, ev...)}
	}
	if dr > 100 || br > 100 {
		return []Result{UnknownR(SubjectHost, fmt.Sprintf("vm.dirty_ratio %d / vm.dirty_background_ratio %d: a percentage above 100 is not a value the kernel accepts", dr, br), ev...)}
	}
	if v, ok := meminfoBytes(f.Memory.Meminfo.Dirty); ok {
		ev = append(ev, Ev("Dirty", humanBytes(v), "/proc/meminfo"))
	}
	if v, ok := meminfoBytes(f.Memory.Meminfo.Writeback); ok {
		ev = append(ev, Ev("Writeback", humanBytes(v), "/proc/meminfo"))
	}
	dirty := memDirtyLimit{name: "dirty", ratio: dr, bytes: db}
	bg := memDirtyLimit{name: "background", ratio: br, bytes: bb}
	dB, bB := dirty.inBytes(ram), bg.inBytes(ram)
	maxDirty, maxBg, size := int64(20), int64(10), "below 64 GiB"
	fixDirty, fixBg := int64(20), int64(10)
	if ram >= memLargeRAM {
		maxDirty, maxBg, size = 15, 5, "64 GiB or more"
		fixDirty, fixBg = 10, 3 // Red Hat's values, inside the 15/5 bounds
	}
	state := fmt.Sprintf("%s (%s, %.1f %% of RAM) and %s (%s, %.1f %%)",
		dirty, humanBytes(dB), memPct(dB, ram), bg, humanBytes(bB), memPct(bB, ram))
	problems, changes := dirtyProblems(dirty, bg, ram, maxDirty, maxBg, fixDirty, fixBg)
	bench := "A write-heavy MySQL benchmark showed periodic throughput drops from dirty-page flushing (Dirty/Writeback in /proc/meminfo); dirty_background_ratio=1 flattened them at a 2.8 % throughput cost."
	if len(problems) == 0 {
		return []Result{PassR(SubjectHost, fmt.Sprintf("%s on a host with %s of RAM (%s: dirty at most %d %%, background at most %d %% and below dirty). %s If you see such periodic stalls, lower the background threshold further.",
			state, humanBytes(ram), size, maxDirty, maxBg, bench), ev...)}
	}
	fx := &fix.Fix{Summary: "Lower the dirty page thresholds", Sysctl: changes}
	return []Result{FailR(SubjectHost, fmt.Sprintf("%s on a host with %s of RAM: %s. Too much dirty data accumulates and is then flushed in long bursts that stall writers. %s",
		state, humanBytes(ram), strings.Join(problems, "; "), bench), memHostOnly(f, fx), ev...)}
}

// dirtyProblems says what is wrong with the dirty thresholds on a host with
// ram bytes, given the largest percentages allowed and those a fix sets,
// and the sysctls that fix them (the last change of a key is the one that
// holds).
func dirtyProblems(dirty, bg memDirtyLimit, ram uint64, maxDirty, maxBg, fixDirty, fixBg int64) (problems []string, fixes []fix.KV) {
	dB, bB := dirty.inBytes(ram), bg.inBytes(ram)
	type change struct{ key, value string }
	var changes []change
	dirtyOK := dB*100 <= uint64(maxDirty)*ram
	if !dirtyOK {
		problems = append(problems, fmt.Sprintf("the dirty threshold is above %d %% of RAM", maxDirty))
		k, v := dirty.sysctlFor(ram, fixDirty)
		changes = append(changes, change{k, v})
		dB = ram * uint64(fixDirty) / 100
	}
	if bB*100 > uint64(maxBg)*ram {
		problems = append(problems, fmt.Sprintf("the background threshold is above %d %% of RAM", maxBg))
		k, v := bg.sysctlFor(ram, fixBg)
		changes = append(changes, change{k, v})
		bB = ram * uint64(fixBg) / 100
	}
	if bB >= dB && dB > 0 {
		problems = append(problems, "the background threshold is not below the dirty threshold, so the kernel silently uses half of the dirty threshold instead")
		// Half of the dirty threshold, in the variant the host uses.
		half := dB / 2
		switch {
		case bg.bytes > 0:
			changes = append(changes, change{"vm.dirty_background_bytes", strconv.FormatUint(half/bMiB*bMiB, 10)})
		case dirty.bytes == 0:
			// Both are ratios: half of the (possibly corrected) dirty ratio.
			r := dirty.ratio
			if !dirtyOK {
				r = fixDirty
			}
			changes = append(changes, change{"vm.dirty_background_ratio", strconv.FormatInt(max(1, r/2), 10)})
		default:
			changes = append(changes, change{"vm.dirty_background_ratio", strconv.FormatUint(max(1, half*100/ram), 10)})
		}
	}
	seen := map[string]bool{}
	for i := len(changes) - 1; i >= 0; i-- { // the last change of a key is the one that holds
		if !seen[changes[i].key] {
			seen[changes[i].key] = true
			fixes = append([]fix.KV{{Key: changes[i].key, Value: changes[i].value}}, fixes...)
		}
	}
	return problems, fixes
}

// memFirstUnreadable returns the first evidence value that says unreadable.
func memFirstUnreadable(ev []Evidence) string {
	for _, e := range ev {
		if strings.HasPrefix(e.Value, "unreadable: ") {
			return strings.TrimPrefix(e.Value, "unreadable: ")
		}
	}
	return "unknown reason"
}

// ---- mem.zone_reclaim ----

func checkZoneReclaim(f *facts.Facts) []Result {
	r := f.SysctlReading("vm.zone_reclaim_mode")
	ev := EvReading("vm.zone_reclaim_mode", r)
	nodes := len(f.Memory.NUMA.Nodes)
	if !r.OK() && memNotPresent(r) {
		return []Result{PassR(SubjectHost, "The kernel has no vm.zone_reclaim_mode (built without NUMA support): it never reclaims per node.", ev)}
	}
	v, why := r.IntIn(0, 7) // a bit mask of three bits
	if why != "" {
		return []Result{UnknownR(SubjectHost, "cannot judge vm.zone_reclaim_mode: "+why, ev)}
	}
	where := "this single-node host"
	if nodes > 1 {
		where = fmt.Sprintf("this %d-node host", nodes)
	}
	if v == 0 {
		return []Result{PassR(SubjectHost, fmt.Sprintf("vm.zone_reclaim_mode is 0 on %s: the kernel allocates from another node before it reclaims cache on the local one.", where), ev)}
	}
	reason := fmt.Sprintf("vm.zone_reclaim_mode is %d on %s: the kernel reclaims page cache", v, where)
	if v&2 != 0 {
		reason += ", writes out dirty pages"
	}
	if v&4 != 0 {
		reason += ", swaps"
	}
	reason += " on the local node before it uses free memory on another node, so the database loses cached data and stalls on reclaim while memory sits idle elsewhere."
	if nodes <= 1 {
		reason += " On a single node the effect is small, but the value should still be 0 (it matters the day the host or VM gets a second node)."
	}
	return []Result{FailR(SubjectHost, reason, sysctlFix(f, "Set vm.zone_reclaim_mode to 0", "vm.zone_reclaim_mode", "0"), ev)}
}

// ---- mem.swap ----

func checkSwap(f *facts.Facts) []Result {
	m := f.Memory
	if m.SwapsErr != "" {
		return []Result{UnknownR(SubjectHost, "cannot read the active swap areas: "+m.SwapsErr, Ev("/proc/swaps", "unreadable: "+m.SwapsErr, "/proc/swaps"))}
	}
	sw := f.SysctlReading("vm.swappiness")
	ev := []Evidence{EvReading("vm.swappiness", sw)}
	if len(m.Swaps) > 0 {
		var total, used uint64
		for _, s := range m.Swaps {
			total += uint64(s.SizeKB) << 10
			used += uint64(s.UsedKB) << 10
			ev = append(ev, Ev("swap "+s.Filename, fmt.Sprintf("%s %s, %s used, priority %d", s.Type, humanBytes(uint64(s.SizeKB)<<10), humanBytes(uint64(s.UsedKB)<<10), s.Priority), "/proc/swaps"))
		}
		return []Result{PassR(SubjectHost, fmt.Sprintf("%d swap area(s), %s in total, %s in use: under memory pressure the kernel can move cold anonymous pages out instead of killing a process.", len(m.Swaps), humanBytes(total), humanBytes(used)), ev...)}
	}
	ev = append(ev, Ev("swap areas", "none", "/proc/swaps"))
	reason := "No swap is active. Anonymous memory (buffer pools, shared_buffers, Redis data, session memory) can then never be paged out: under memory pressure the kernel drops page cache, then the code pages of running programs, thrashes, and finally the OOM killer ends the largest process, usually the database."
	if v, why := sw.IntIn(0, 200); why == "" {
		switch {
		case v <= 1:
			reason += fmt.Sprintf(" vm.swappiness is %d: that only decides how reluctantly existing swap is used (1: only under real pressure); without swap there is nothing to use, so the low setting protects nothing and the host goes straight from pressure to OOM kills.", v)
		default:
			reason += fmt.Sprintf(" vm.swappiness is %d, but without swap it has no effect.", v)
		}
	}
	ram, _ := m.MemTotal()
	size := min(max(ram/8, bGiB), 8*bGiB) / bGiB * bGiB
	fx := &fix.Fix{Summary: "Add a swap file", Manual: fmt.Sprintf(
		"Create and enable a swap file of about %s (swap is for pressure relief, not for running out of RAM): "+
			"fallocate -l %dG /swapfile && chmod 600 /swapfile && mkswap /swapfile && swapon /swapfile; "+
			"then add the line \"/swapfile none swap sw 0 0\" to /etc/fstab. Keep vm.swappiness at 1.", memHumanSize(size), size/bGiB)}
	if v, why := sw.IntIn(1, 10); why != "" || v < 1 || v > 10 {
		// Swap added under swappiness 60 is swap the buffer pools go to:
		// set the two together (mem.swappiness is moot until then).
		fx.Sysctl = []fix.KV{{Key: "vm.swappiness", Value: "1"}}
		fx.Manual = strings.Replace(fx.Manual, "Keep vm.swappiness at 1.", "Set vm.swappiness to 1 with it (the sysctl of this fix), so that the new swap is used only under real pressure.", 1)
	}
	return []Result{FailR(SubjectHost, reason, memHostOnly(f, fx), ev...)}
}

// ---- mem.min_free_kbytes ----

// kernelMinFree is the kernel's default: 4 x sqrt(lowmem kB), clamped to
// 128 kB .. 256 MiB (mm/page_alloc.c, calculate_min_free_kbytes).
func kernelMinFree(memKB uint64) uint64 {
	return min(max(4*memIsqrt(memKB), 128), 262144)
}

func checkMinFree(f *facts.Facts) []Result {
	ram, ramEv, why := memTotal(f)
	if why != "" {
		return []Result{UnknownR(SubjectHost, why, ramEv)}
	}
	v, ev, why := memSysctlCount(f, "vm.min_free_kbytes")
	evs := []Evidence{ev, ramEv}
	if why != "" {
		return []Result{UnknownR(SubjectHost, "cannot read vm.min_free_kbytes: "+why, evs...)}
	}
	formula := kernelMinFree(ram / bKiB)
	low := formula * 8 / 10
	high := ram / bKiB * 5 / 100
	evs = append(evs, Ev("kernel formula 4*sqrt(MemTotal kB)", strconv.FormatUint(formula, 10)+" kB", "computed"))
	cur := uint64(v)
	switch {
	case cur < low:
		return []Result{FailR(SubjectHost, fmt.Sprintf("vm.min_free_kbytes is %d kB, below 80 %% of the kernel's own formula (%d kB for %s): kswapd starts reclaiming too late, allocations fall into direct reclaim (latency spikes) and atomic allocations such as network receive buffers can fail.", cur, formula, humanBytes(ram)),
			sysctlFix(f, "Restore vm.min_free_kbytes to the kernel's formula", "vm.min_free_kbytes", strconv.FormatUint(formula, 10)), evs...)}
	case cur > high:
		return []Result{FailR(SubjectHost, fmt.Sprintf("vm.min_free_kbytes is %d kB (%s), above 5 %% of RAM (%d kB): that memory is held back from every process including the database, and the watermarks derived from it make the kernel reclaim early and often.", cur, humanBytes(cur*bKiB), high),
			sysctlFix(f, "Restore vm.min_free_kbytes to the kernel's formula", "vm.min_free_kbytes", strconv.FormatUint(formula, 10)), evs...)}
	}
	note := ""
	if cur > formula {
		note = " (above the base formula, as khugepaged sets it when THP is enabled, or as set by hand)"
	}
	return []Result{PassR(SubjectHost, fmt.Sprintf("vm.min_free_kbytes is %d kB%s: between 80 %% of the kernel's formula (%d kB) and 5 %% of RAM (%d kB).", cur, note, low, high), evs...)}
}

// ---- mem.max_map_count ----

// mongoDefaultMaxConns is net.maxIncomingConnections' default.
const mongoDefaultMaxConns = 1000000

func checkMaxMapCount(f *facts.Facts) []Result {
	var out []Result
	for _, in := range f.ByEngine(engine.MongoDB) {
		subj := in.Name()
		cur, curEv, why := memSysctlCount(f, "vm.max_map_count")
		if why != "" {
			out = append(out, UnknownR(subj, "cannot read vm.max_map_count: "+why, curEv))
			continue
		}
		maxIn := uint64(mongoDefaultMaxConns)
		v, inEv := memSettingEv(in, "net.maxIncomingConnections", strconv.Itoa(mongoDefaultMaxConns))
		if n, err := strconv.ParseUint(strings.TrimSpace(v), 10, 64); err == nil && n > 0 {
			maxIn = n
		}
		ev := []Evidence{curEv, inEv}
		nofile, ok := in.Limits[host.LimitNofile]
		if !ok {
			out = append(out, UnknownR(subj, "cannot read the open-files limit of "+memInstDesc(in)+", which caps mongod's connections: "+memOr(in.LimitsErr, "no \"Max open files\" line"), ev...))
			continue
		}
		ev = append(ev, Ev("nofile (soft)", host.FormatLimit(nofile.Soft), fmt.Sprintf("/proc/%d/limits", in.PID)))
		maxConns := maxIn
		if nofile.Soft != host.Unlimited {
			maxConns = min(maxIn, nofile.Soft*8/10)
		}
		need := 2 * maxConns
		ev = append(ev, Ev("mongod max connections", strconv.FormatUint(maxConns, 10), "min(net.maxIncomingConnections, 80% of nofile)"))
		if uint64(cur) >= need {
			out = append(out, PassR(subj, fmt.Sprintf("vm.max_map_count is %d, at least 2 x mongod's maximum of %d connections (%d).", cur, maxConns, need), ev...))
			continue
		}
		out = append(out, FailR(subj, fmt.Sprintf("vm.max_map_count is %d, below 2 x mongod's maximum of %d connections (%d): each connection thread maps its stack and guard page, and when the process runs out of map areas mmap fails and mongod aborts. mongod logs the startup warning \"vm.max_map_count is too low\" (id 5123300) for this.", cur, maxConns, need),
			sysctlFix(f, "Raise vm.max_map_count for MongoDB", "vm.max_map_count", strconv.FormatUint(need, 10)), ev...))
	}
	return out
}
