package check

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/dbhost/dbhost/internal/engine"
	"github.com/dbhost/dbhost/internal/engine/mysql"
	"github.com/dbhost/dbhost/internal/engine/postgres"
	"github.com/dbhost/dbhost/internal/facts"
	"github.com/dbhost/dbhost/internal/fix"
	"github.com/dbhost/dbhost/internal/host"
)

// pgLargeSharedBuffers is where huge_pages=off becomes worth a note: the
// page tables of every backend mapping that much memory with 4 kB pages
// cost real TLB misses (seed 000 benchmarked 64 GB).
const pgLargeSharedBuffers = 8 * bGiB

// hugeBench is the measured effect of huge pages for PostgreSQL (seed 000).
const hugeBench = "Measured: PostgreSQL 11 on 28 cores / 256 GB with shared_buffers 64 GB (pgbench, 3 runs x 30 min, median): the gain from huge pages grows with the number of clients and the database size as long as the database fits in shared_buffers, and 1 GB pages beat 2 MB and 4 kB pages at high client counts."

func init() {
	Register(Check{
		ID:        "mem.hugepages.postgres",
		Title:     "PostgreSQL's huge_pages setting has the huge pages it needs",
		Problem:   "PostgreSQL's huge_pages setting lacks the huge pages it needs",
		Severity:  Warning,
		AppliesTo: []string{"postgres"},
		Doc: `For each PostgreSQL instance compares huge_pages (on, try, off) with the
explicit huge page pool of the size it uses (huge_page_size, else the default
Hugepagesize) and with the number of pages its shared memory needs:
shared_memory_size_in_huge_pages where the server reports it (PostgreSQL 15+, the
figure "postgres -C shared_memory_size_in_huge_pages" prints), else the size of the
postmaster's main shared memory mapping in /proc/PID/maps rounded up to whole pages.
Whether the running server really uses huge pages is read from its mappings (a
hugetlb mapping) and HugetlbPages in /proc/PID/status.
- huge_pages=on without enough free pages: the server will not start again after a
  restart or reboot ("could not map anonymous shared memory"): critical.
- huge_pages=try without enough pages: PostgreSQL silently falls back to 4 kB pages.
- huge_pages=off with shared_buffers of 8 GB or more: advice (info).
- A pool that exists only at runtime: the next boot reserves what sysctl.d, TuneD,
  hugepages= on the kernel command line or an enabled boot unit (a service in
  /etc/systemd/system, an executable rc.local) sets, else the kernel default 0. Fewer
  pages than the server needs, for a server a systemd unit starts at boot
  (engine.Profile.Units/UnitStarts): with huge_pages=on it will not start after the
  reboot ("FATAL: could not map anonymous shared memory"): critical; with try it
  silently falls back to 4 kB pages: warning. A server started by hand (no unit) does
  not come back after a reboot: it passes with a note.
Measured effect (seed 000): PostgreSQL 11, 28 cores, 256 GB, shared_buffers 64 GB,
pgbench 3 x 30 min, median: the gain from huge pages grows with client count and
database size while the database fits in shared_buffers; 1 GB pages beat 2 MB at high
client counts; past shared_buffers throughput drops sharply. THP was off throughout.
The fix reserves the pages (vm.nr_hugepages, or the pool's nr_hugepages for a
non-default size, plus hugepagesz=/hugepages= on the command line for 1 GB pages)
with a 1 % margin and sets huge_pages=on. The page count covers the servers that
start at boot and the one judged; other servers started by hand are named, not
counted.`,
		Refs: []string{"https://www.postgresql.org/docs/current/kernel-resources.html#LINUX-HUGE-PAGES",
			"https://www.postgresql.org/docs/current/runtime-config-resource.html#GUC-HUGE-PAGES",
			"https://docs.kernel.org/admin-guide/mm/hugetlbpage.html"},
		Run: checkHugePagesPostgres,
	})
	Register(Check{
		ID:        "mem.hugepages.mysql",
		Title:     "MySQL/MariaDB large_pages has the huge pages it needs",
		Problem:   "MySQL/MariaDB large_pages lacks the huge pages it needs",
		Severity:  Warning,
		AppliesTo: []string{"mysql"},
		Doc: `For each MySQL/MariaDB instance with large_pages=ON: does the server really map
its buffer pool with huge pages (a hugetlb mapping in /proc/PID/maps, HugetlbPages in
status)? When the pool is too small InnoDB logs "Using conventional memory pool" and
runs on 4 kB pages with no other sign. Needed: innodb_buffer_pool_size in huge pages
plus 1 %. Current MySQL 8.0 and MariaDB 10.5+ allocate with mmap(MAP_HUGETLB), which
needs only free pages; MySQL 5.7 and MariaDB up to 10.4 use shmget(SHM_HUGETLB),
which also needs vm.hugetlb_shm_group or the memlock limit (see
mem.hugepages.shm_group and mem.hugepages.memlock). A server that maps its pages
from a pool the next boot does not reserve (see mem.hugepages.postgres), and that a
systemd unit starts at boot, fails: after the reboot it runs on 4 kB pages. Instances
without large_pages pass.`,
		Refs: []string{"https://dev.mysql.com/doc/refman/8.0/en/large-page-support.html",
			"https://mariadb.com/kb/en/server-system-variables/#large_pages"},
		Run: checkHugePagesMySQL,
	})
	Register(Check{
		ID:        "mem.hugepages.memlock",
		Title:     "The memlock limit allows System V huge page segments",
		Problem:   "The memlock limit is too low for System V huge page segments",
		Severity:  Warning,
		AppliesTo: []string{"mysql"},
		Doc: `Applies to database processes that use System V shared memory with
SHM_HUGETLB: an observed SysV segment backed by huge pages, or large_pages=ON on MySQL
before 8.0 or MariaDB before 10.5. The kernel lets such a process create the segment
only if it has CAP_IPC_LOCK, belongs to vm.hugetlb_shm_group, or (the obsolete
fallback) its memlock limit covers the segment. dbhost compares the running
process's "Max locked memory" with the segment size (the buffer pool) when its group
is not vm.hugetlb_shm_group. mmap(MAP_HUGETLB) users (PostgreSQL, MySQL 8.0, MariaDB
10.5+) are not subject to either and pass.`,
		Refs: []string{"https://docs.kernel.org/admin-guide/mm/hugetlbpage.html",
			"https://dev.mysql.com/doc/refman/5.7/en/large-page-support.html"},
		Sysctls: []string{"vm.hugetlb_shm_group"},
		Run:     checkHugePagesMemlock,
	})
	Register(Check{
		ID:        "mem.hugepages.shm_group",
		Title:     "vm.hugetlb_shm_group admits the database's group",
		Problem:   "vm.hugetlb_shm_group does not admit the database's group",
		Severity:  Warning,
		AppliesTo: []string{"mysql"},
		Doc: `Applies to the same System V SHM_HUGETLB users as mem.hugepages.memlock. The
documented way to let mysqld create huge page segments is vm.hugetlb_shm_group set to
its group ID; without it the kernel falls back to the memlock limit, logs that this is
obsolete, and refuses the segment when the limit is short. The fix sets the
parameter to the process's group.`,
		Refs: []string{"https://docs.kernel.org/admin-guide/sysctl/vm.html#hugetlb-shm-group",
			"https://dev.mysql.com/doc/refman/5.7/en/large-page-support.html"},
		Sysctls: []string{"vm.hugetlb_shm_group"},
		Run:     checkHugePagesShmGroup,
	})
	Register(Check{
		ID:        "mem.hugepages.unused",
		Title:     "Reserved huge pages are used",
		Problem:   "Reserved huge pages sit unused",
		Severity:  Info,
		AppliesTo: []string{"host"},
		Doc: `Reads every huge page pool (/sys/kernel/mm/hugepages/*: nr, free, reserved,
surplus) and reports reserved, used and free pages. Huge pages are taken out of
general memory when they are reserved: pages that no process maps or has reserved
are lost to the page cache, the buffer pools and everything else. More than 5 % of a
pool (and at least 64 MiB) free and unclaimed fails; when a database wants huge pages
but runs without them, the pages are not surplus, they are too few, and the finding
says so instead of proposing to release them. Only databases that start at boot (a
systemd unit starts them) count as waiting: a server started by hand from a temporary
directory is named in the evidence, and the pages it waits for count as surplus.`,
		Refs: []string{"https://docs.kernel.org/admin-guide/mm/hugetlbpage.html"},
		Run:  checkHugePagesUnused,
	})
	Register(Check{
		ID:        "mem.shm_limits",
		Title:     "kernel.shmmax and shmall fit the System V segments",
		Problem:   "kernel.shmmax or shmall is too small for the System V segments",
		Severity:  Info,
		AppliesTo: []string{"postgres", "mysql"},
		Doc: `For each database process with System V shared memory segments (its
/proc/PID/maps joined with /proc/sysvipc/shm for exact sizes): kernel.shmmax must be
at least the largest segment, kernel.shmall (in pages) at least all segments of the
host together, or the server cannot create them again at the next start. This matters
for PostgreSQL before 9.3, whose whole shared memory is one System V segment, and for
SysV huge page users; PostgreSQL 9.3+ keeps only a tiny SysV segment (an interlock)
and maps the rest with mmap.`,
		Refs: []string{"https://www.postgresql.org/docs/current/kernel-resources.html#SYSVIPC",
			"https://docs.kernel.org/admin-guide/sysctl/kernel.html#shmmax"},
		Sysctls: []string{"kernel.shmmax", "kernel.shmall"},
		Run:     checkShmLimits,
	})
}

// ---- shared helpers ----

// poolFor returns the pool of a page size (0: default) with its evidence.
func poolFor(f *facts.Facts, sizeKB int) (facts.HugePagePool, Evidence, string) {
	if f.Memory.HugePagesErr != "" {
		return facts.HugePagePool{}, Ev("huge page pools", "unreadable: "+f.Memory.HugePagesErr, "/sys/kernel/mm/hugepages"), "cannot read the huge page pools: " + f.Memory.HugePagesErr
	}
	p, ok := f.Memory.Pool(sizeKB)
	if !ok {
		what := "the default size"
		if sizeKB > 0 {
			what = memPoolName(sizeKB)
		}
		return p, Ev("huge page pool", "none of "+what, "/sys/kernel/mm/hugepages"), "the kernel has no huge page pool of " + what
	}
	src := host.HugePagesDir(uint64(p.SizeKB))
	if p.Err != "" {
		return p, Ev("huge page pool "+memPoolName(p.SizeKB), "unreadable: "+p.Err, src), "cannot read the " + memPoolName(p.SizeKB) + " pool: " + p.Err
	}
	return p, Ev("huge page pool "+memPoolName(p.SizeKB), poolText(p), src), ""
}

func poolText(p facts.HugePagePool) string {
	return fmt.Sprintf("%d reserved, %d free, %d promised to mappings, %d surplus, %d available", p.Total, p.Free, p.Reserved, p.Surplus, p.Available())
}

// poolFix sets a pool to total pages: vm.nr_hugepages for the default size,
// the pool's own file otherwise (with the boot-time parameters, which 1 GiB
// pages need because memory fragments after boot).
func poolFix(f *facts.Facts, p facts.HugePagePool, total int64, summary string) *fix.Fix {
	fx := &fix.Fix{Summary: summary}
	v := strconv.FormatInt(total, 10)
	if p.Default {
		fx.Sysctl = []fix.KV{{Key: "vm.nr_hugepages", Value: v}}
	} else {
		fx.Sysfs = []fix.KV{{Key: host.HugePagesDir(uint64(p.SizeKB)) + "/nr_hugepages", Value: v}}
		if p.SizeKB >= 1<<20 {
			fx.Cmdline = []string{fmt.Sprintf("hugepagesz=%dG", p.SizeKB>>20), "hugepages=" + v}
		}
	}
	return memHostOnly(f, fx)
}

// hugeMargin is the small reserve added to a page count.
func hugeMargin(n int64) int64 { return max(1, (n+99)/100) }

// hugeUser is an instance that wants huge pages but does not have them yet.
// advised: it does not ask for them (huge_pages=off) but dbhost advises
// them (large shared_buffers), so fixes size the pool for it too.
type hugeUser struct {
	in      *facts.Instance
	poolKB  int
	need    int64
	advised bool
	// persists: something starts the instance at boot (persistWhy says
	// what, or why not). Page counts in fixes cover only these: a server
	// started by hand from a temporary directory does not come back.
	persists   bool
	persistWhy string
}

// pendingHugeUsers lists the instances that want huge pages of a pool but
// run without them, with the pages each needs.
func pendingHugeUsers(f *facts.Facts) []hugeUser {
	var out []hugeUser
	for _, in := range f.Instances {
		if in.Mem.UsesHugetlb() {
			continue
		}
		u, ok := pgPendingHuge(f, in)
		if !ok {
			u, ok = mysqlPendingHuge(f, in)
		}
		if ok {
			u.persists, u.persistWhy = instancePersists(in)
			out = append(out, u)
		}
	}
	return out
}

// instancePersists says whether something starts the instance at boot: a
// packaged cluster's start.conf, else the systemd unit it runs in or the
// engine's packaged unit that names it (engine.Profile.Units/UnitStarts).
// The reason says which, or why not.
func instancePersists(in *facts.Instance) (bool, string) {
	if sc := in.StartConf; sc != nil {
		// A packaged cluster: its start.conf decides what the boot does,
		// whichever unit runs it.
		switch {
		case sc.Note != "":
			return false, fmt.Sprintf("%s cannot be believed (%s), so dbhost does not count it as starting at boot", sc.File, sc.Note)
		case sc.Value == "auto":
			return true, fmt.Sprintf("%s says auto: the cluster starts at boot", persistedWhere(*sc))
		default:
			return false, fmt.Sprintf("%s says %s: the cluster does not start at boot", persistedWhere(*sc), sc.Value)
		}
	}
	if in.Unit != nil && !in.Unit.Masked {
		how := "it runs in that unit"
		if in.Unit.How == "installed" {
			how = "the unit's files name this server"
		}
		return true, fmt.Sprintf("systemd unit %s starts it at boot (%s)", in.Unit.Name, how)
	}
	why := "no systemd unit or packaged service starts it at boot: it was started by hand"
	if in.DataDir != "" {
		why += " (data directory " + in.DataDir + ")"
	}
	return false, why + " and does not come back after a reboot"
}

// poolMatch reports whether a user's pages come from pool p.
func (u hugeUser) poolMatch(p facts.HugePagePool) bool {
	return u.poolKB == p.SizeKB || (u.poolKB == 0 && p.Default)
}

// pgPendingHuge: a PostgreSQL that asks for huge pages (try or on), or
// has large shared_buffers and huge_pages=off.
func pgPendingHuge(f *facts.Facts, in *facts.Instance) (hugeUser, bool) {
	if in.Engine != engine.Postgres {
		return hugeUser{}, false
	}
	mode, _ := pgHugeMode(in)
	sb, _ := postgres.Bytes(in.Instance, "shared_buffers")
	advised := mode == "off"
	if advised && sb < pgLargeSharedBuffers {
		return hugeUser{}, false
	}
	kb := pgPageKB(f, in)
	need, _, ok := pgHugeNeed(f, in, kb)
	return hugeUser{in: in, poolKB: kb, need: need, advised: advised}, ok
}

// mysqlPendingHuge: a MySQL with large_pages on.
func mysqlPendingHuge(f *facts.Facts, in *facts.Instance) (hugeUser, bool) {
	if in.Engine != engine.MySQL {
		return hugeUser{}, false
	}
	if on, _ := mysqlLargePages(in); !on {
		return hugeUser{}, false
	}
	kb := f.Memory.DefaultHugePageKB()
	need, _, ok := mysqlNeed(in, kb)
	return hugeUser{in: in, poolKB: kb, need: need}, ok
}

// poolTarget is the nr_hugepages that leaves every pending user of the pool
// that persists its pages, with a margin; 0 when the pool already has
// enough. Every finding about a persistent server proposes the same figure,
// so `dbhost fix` merges them cleanly. A transient server (started by hand)
// is counted only in its own finding (self), whose fix must remedy it.
func poolTarget(f *facts.Facts, p facts.HugePagePool, self *facts.Instance) int64 {
	var need int64
	for _, u := range pendingHugeUsers(f) {
		if (u.persists || u.in == self) && u.poolMatch(p) {
			need += u.need
		}
	}
	if need <= p.Available() {
		return 0
	}
	return p.Total + need - p.Available() + hugeMargin(need)
}

// othersWaiting names the other instances a pool target also covers, and
// those it leaves out because they do not persist (self included).
func othersWaiting(f *facts.Facts, p facts.HugePagePool, self *facts.Instance) string {
	var ws, transient []string
	for _, u := range pendingHugeUsers(f) {
		if !u.poolMatch(p) {
			continue
		}
		if !u.persists && u.in != self {
			transient = append(transient, fmt.Sprintf("%s (wants %d; %s)", u.in.Name(), u.need, u.persistWhy))
			continue
		}
		if u.in != self {
			w := fmt.Sprintf("%s, which wants %d", u.in.Name(), u.need)
			if u.advised {
				w = fmt.Sprintf("%s, which needs %d once it follows dbhost's advice to use huge pages", u.in.Name(), u.need)
			}
			ws = append(ws, w)
		}
	}
	out := ""
	if len(ws) > 0 {
		out = " The page count in the fix also covers " + strings.Join(ws, " and ") + "."
	}
	if len(transient) > 0 {
		out += " The page count in the fix does not count " + strings.Join(transient, " and ") + "."
	}
	return out
}

// bootPool is the number of pages the next boot reserves in pool p:
// vm.nr_hugepages from sysctl.d, TuneD or hugepages= on the kernel command
// line for the default size, hugepagesz=SIZE hugepages=N for another; with
// nothing set, 0. known is false when dbhost cannot tell (a sysctl.d file is
// unreadable, or dbhost runs in a container whose host boots the kernel).
func bootPool(f *facts.Facts, p facts.HugePagePool) (int64, Evidence, bool) {
	key := "next boot: " + memPoolName(p.SizeKB) + " pages"
	switch {
	case f.System.Container != "":
		return 0, Ev(key, "unknown: dbhost runs in a container, the host's boot reserves the pages", "container"), false
	case f.Persist.SysctlErr != "":
		return 0, Ev(key, "unknown: "+f.Persist.SysctlErr, "sysctl.d"), false
	}
	if u, ok := bootUnitPages(f, p); ok {
		if u.Value == "" {
			return 0, Ev(key, "unknown: "+thpWhere(u)+" reserves huge pages at boot, but "+memOr(u.Note, "not as a literal count"), thpWhere(u)), false
		}
		n, err := strconv.ParseInt(u.Value, 10, 64)
		if err != nil {
			return 0, Ev(key, fmt.Sprintf("unknown: %q is not a page count", u.Value), thpWhere(u)), false
		}
		return n, Ev(key, u.Value, thpWhere(u)), true
	}
	if p.Default {
		if bv, ok := nextBootSysctl(f, "vm.nr_hugepages"); ok {
			n, err := strconv.ParseInt(bv.Value, 10, 64)
			if err != nil || bv.Raw {
				return 0, Ev(key, fmt.Sprintf("unknown: vm.nr_hugepages is set to %q", bv.Value), bv.Source), false
			}
			return n, Ev(key, bv.Value, bv.Source), true
		}
	} else if v, src, ok := cmdlineHugePages(f, p.SizeKB, false); ok {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			return 0, Ev(key, fmt.Sprintf("unknown: hugepages=%q", v), src), false
		}
		return n, Ev(key, v, src), true
	}
	return 0, Ev(key, "0 (kernel default: no sysctl.d file, TuneD profile, kernel command line or enabled boot unit reserves them)", "Documentation/admin-guide/mm/hugetlbpage.rst"), true
}

// bootUnitPages is the last boot unit or rc.local line that reserves pages
// of pool p; those run after sysctl.d, so their count wins.
func bootUnitPages(f *facts.Facts, p facts.HugePagePool) (facts.Persisted, bool) {
	own := fmt.Sprintf("hugepages-%dkB", p.SizeKB)
	var last facts.Persisted
	found := false
	for _, u := range f.Persist.HugePagesBoot {
		if u.Key == own || (p.Default && u.Key == "vm.nr_hugepages") {
			last, found = u, true
		}
	}
	return last, found
}

// cmdlineHugePages is the hugepages= the next boot's kernel command line
// gives a pool: the GRUB configuration's where it sets one, else the
// running command line's. A hugepages= counts for the pool of the
// hugepagesz= before it, or (none before it) the default pool.
func cmdlineHugePages(f *facts.Facts, sizeKB int, isDefault bool) (value, source string, ok bool) {
	running := make([]facts.Persisted, 0, len(f.System.Cmdline))
	for _, a := range f.System.Cmdline {
		if a == "--" {
			break // what follows goes to init
		}
		running = append(running, facts.Persisted{Key: a, File: "/proc/cmdline"})
	}
	for _, args := range [][]facts.Persisted{f.Persist.GrubArgs, running} {
		if v, src, ok := hugePagesArg(args, sizeKB, isDefault); ok {
			return v, src, true
		}
	}
	return "", "", false
}

func hugePagesArg(args []facts.Persisted, sizeKB int, isDefault bool) (value, source string, found bool) {
	cur := -1 // -1: no hugepagesz= yet
	for _, a := range args {
		k, v, _ := strings.Cut(a.Key, "=")
		switch k {
		case "hugepagesz":
			cur = -2
			if b, err := memParseSize(v); err == nil {
				cur = int(b >> 10)
			}
		case "hugepages":
			if cur == sizeKB || (cur == -1 && isDefault) {
				value, source, found = v, persistedWhere(a)+" hugepages="+v, true
			}
		}
	}
	return value, source, found
}

// memParseSize reads a kernel size argument: "2M", "1G", "2048K".
func memParseSize(v string) (uint64, error) {
	mult := uint64(1)
	switch strings.ToUpper(v[len(v)-min(1, len(v)):]) {
	case "K":
		mult = bKiB
	case "M":
		mult = bMiB
	case "G":
		mult = bGiB
	}
	if mult > 1 {
		v = v[:len(v)-1]
	}
	n, err := strconv.ParseUint(v, 10, 64)
	return n * mult, err
}

// persistPoolFix keeps a pool at least as large as it runs now (and as the
// pending persistent users need) across reboots.
func persistPoolFix(f *facts.Facts, p facts.HugePagePool) *fix.Fix {
	return poolFix(f, p, max(p.Total, poolTarget(f, p, nil)), "Persist the huge page pool so that it exists after a reboot")
}

// pgBootShort judges what a reboot leaves a PostgreSQL that asks for huge
// pages (on or try) and whose pool suffices now: short when the next boot
// reserves too few for a server that starts at boot. For a server started
// by hand, note says what a start after a reboot would meet.
func pgBootShort(f *facts.Facts, in *facts.Instance, mode string, pool facts.HugePagePool, need int64, ev []Evidence) (r Result, short bool, note string) {
	boot, bootEv, known := bootPool(f, pool)
	if !known {
		return Result{}, false, " What the next boot reserves is " + bootEv.Value + "."
	}
	persists, why := instancePersists(in)
	if boot >= need {
		return Result{}, false, fmt.Sprintf(" The next boot reserves %d pages (%s), enough for the %d it needs.", boot, bootEv.Source, need)
	}
	if !persists {
		return Result{}, false, fmt.Sprintf(" The pool exists only at runtime (the next boot gives %d pages, %s), but %s; a start by hand after a reboot would need the pages reserved first.", boot, bootEv.Source, why)
	}
	ev = append(ev, bootEv, Ev("starts at boot", "yes", why))
	desc := memInstDesc(in)
	lost := fmt.Sprintf("the %s pool it needs (%d pages, %d reserved now) exists only at runtime: the next boot gives %d pages (%s)", memPoolName(pool.SizeKB), need, pool.Total, boot, bootEv.Source)
	fx := persistPoolFix(f, pool)
	if mode == "try" {
		return FailR(in.Name(), fmt.Sprintf("%s has huge_pages = try, and %s; after a reboot PostgreSQL silently falls back to 4 kB pages.", desc, lost), fx, ev...), true, ""
	}
	r = FailR(in.Name(), fmt.Sprintf("%s has huge_pages = on, and %s; PostgreSQL with huge_pages=on refuses to start then (FATAL: could not map anonymous shared memory). %s%s, so the server stays down after the next reboot.", desc, lost, strings.ToUpper(why[:1]), why[1:]), fx, ev...)
	r.Severity = Critical
	return r, true, ""
}

// ---- mem.hugepages.postgres ----

// pgHugeMode returns huge_pages normalised to on/off/try, with evidence.
func pgHugeMode(in *facts.Instance) (string, Evidence) {
	v, ev := memSettingEv(in, "huge_pages", "try")
	v = strings.ToLower(strings.Trim(strings.TrimSpace(v), `'"`))
	if v == "try" {
		return v, ev
	}
	if on, ok := memOnOff(v); ok {
		if on {
			return "on", ev
		}
		return "off", ev
	}
	return v, ev
}

// pgPageKB is the huge page size PostgreSQL asks for: huge_page_size
// (PostgreSQL 14+) or the default size.
func pgPageKB(f *facts.Facts, in *facts.Instance) int {
	if b, ok := postgres.Bytes(in.Instance, "huge_page_size"); ok && b > 0 {
		return int(b >> 10)
	}
	return f.Memory.DefaultHugePageKB()
}

// pgHugeNeed returns how many pages of sizeKB PostgreSQL's shared memory needs,
// and where that figure comes from.
func pgHugeNeed(f *facts.Facts, in *facts.Instance, sizeKB int) (int64, Evidence, bool) {
	if sizeKB <= 0 {
		return 0, Evidence{}, false
	}
	page := uint64(sizeKB) << 10
	if s, ok := in.Setting("shared_memory_size_in_huge_pages"); ok {
		if n, err := strconv.ParseInt(strings.TrimSpace(s.Value), 10, 64); err == nil && n > 0 {
			return n, Ev("shared_memory_size_in_huge_pages", s.Value, memOr(s.Source, in.SettingsSource)), true
		}
	}
	if b, ok := postgres.Bytes(in.Instance, "shared_memory_size"); ok && b > 0 {
		s, _ := in.Setting("shared_memory_size")
		return int64(memCeilDiv(b, page)), Ev("shared_memory_size", s.Value+orUnit(s.Unit), memOr(s.Source, in.SettingsSource)), true
	}
	seg, ok := pgMainSegment(in)
	if !ok {
		return 0, Evidence{}, false
	}
	return int64(memCeilDiv(seg.Size, page)), Ev("postmaster shared memory mapping", fmt.Sprintf("%s %s (%s pages)", seg.Path, humanBytes(seg.Size), memPoolName(seg.PageSizeKB)), fmt.Sprintf("/proc/%d/maps", in.PID)), true
}

func orUnit(u string) string {
	if u == "" {
		return ""
	}
	return " (unit " + u + ")"
}

// pgMainSegment is the postmaster's main shared memory: its largest
// anonymous shared or hugetlb mapping.
func pgMainSegment(in *facts.Instance) (facts.Segment, bool) {
	var best facts.Segment
	found := false
	for _, s := range in.Mem.Shared {
		if (s.Kind == facts.SegAnon || s.Kind == facts.SegHugetlb || s.Kind == facts.SegSysV) && (!found || s.Size > best.Size) {
			best, found = s, true
		}
	}
	return best, found
}

func checkHugePagesPostgres(f *facts.Facts) []Result { return eachOf(f, engine.Postgres, judgePGHuge) }

func judgePGHuge(f *facts.Facts, in *facts.Instance) Result {
	subj := in.Name()
	desc := memInstDesc(in)
	mode, modeEv := pgHugeMode(in)
	ev := []Evidence{modeEv}
	sb, sbKnown := postgres.Bytes(in.Instance, "shared_buffers")
	if s, ok := in.Setting("shared_buffers"); ok {
		ev = append(ev, Ev("shared_buffers", s.Value+orUnit(s.Unit), memOr(s.Source, in.SettingsSource)))
	}
	kb := pgPageKB(f, in)
	if s, ok := in.Setting("huge_page_size"); ok {
		ev = append(ev, Ev("huge_page_size", s.Value+orUnit(s.Unit), memOr(s.Source, in.SettingsSource)))
	}
	if s, ok := in.Setting("huge_pages_status"); ok {
		ev = append(ev, Ev("huge_pages_status", s.Value, memOr(s.Source, in.SettingsSource)))
	}
	using, useEv, useKnown := pgUsesHuge(in)
	ev = append(ev, useEv...)
	if mode != "on" && mode != "off" && mode != "try" {
		return UnknownR(subj, fmt.Sprintf("%s has huge_pages = %q, which dbhost does not understand.", desc, mode), ev...)
	}
	pool, poolEv, poolWhy := poolFor(f, kb)
	ev = append(ev, poolEv)
	need, needEv, needKnown := pgHugeNeed(f, in, kb)
	if needKnown {
		ev = append(ev, needEv, Ev("huge pages needed", strconv.FormatInt(need, 10), "computed"))
	}
	if mode == "off" {
		if !sbKnown || sb < pgLargeSharedBuffers {
			return PassR(subj, fmt.Sprintf("%s has huge_pages = off with shared_buffers %s: below 8 GB the page-table and TLB savings of huge pages are small.", desc, humanBytes(sb)), ev...)
		}
		r := FailR(subj, fmt.Sprintf("%s has huge_pages = off with shared_buffers %s: every backend maps that memory with 4 kB pages, which costs page-table memory and TLB misses. %s", desc, humanBytes(sb), hugeBench),
			pgHugeFix(f, in, pool, poolWhy, need, needKnown), ev...)
		r.Severity = Info
		return r
	}
	if !useKnown && poolWhy == "" && pool.Total == 0 && pool.Overcommit == 0 {
		// An empty pool: whatever its mappings say, it cannot be using
		// huge pages of this size.
		useKnown = true
	}
	if !useKnown {
		return UnknownR(subj, fmt.Sprintf("cannot tell whether %s uses huge pages: %s", desc, memOr(in.Mem.SharedErr, "no shared memory mapping found")), ev...)
	}
	c := pgHugeCase{f: f, in: in, subj: subj, desc: desc, mode: mode, kb: kb, ev: ev, pool: pool, poolWhy: poolWhy, need: need, needKnown: needKnown}
	if using {
		return c.using()
	}
	return c.notUsing()
}

// pgHugeCase is what judgePGHuge read of a PostgreSQL instance whose huge
// page use is known and whose huge_pages is on or try.
type pgHugeCase struct {
	f          *facts.Facts
	in         *facts.Instance
	subj, desc string
	mode       string // huge_pages: on or try
	kb         int    // the huge page size it would use
	ev         []Evidence
	pool       facts.HugePagePool
	poolWhy    string // why the pool cannot be judged
	need       int64  // pages its shared memory needs
	needKnown  bool
}

// using judges an instance mapped from the pool: will the next boot still
// reserve enough?
func (c pgHugeCase) using() Result {
	reason := fmt.Sprintf("%s runs with huge pages (huge_pages = %s): its shared memory is mapped from the %s pool.", c.desc, c.mode, memPoolName(c.kb))
	if c.poolWhy != "" || !c.needKnown {
		return UnknownR(c.subj, reason+" dbhost cannot tell whether the next boot reserves enough pages: "+memOr(c.poolWhy, "the pages it needs are unknown"), c.ev...)
	}
	r, short, note := pgBootShort(c.f, c.in, c.mode, c.pool, c.need, c.ev)
	if short {
		return r
	}
	return PassR(c.subj, reason+note, c.ev...)
}

// notUsing judges an instance asking for huge pages that runs without
// them: try fell back, or on was set after it started.
func (c pgHugeCase) notUsing() Result {
	if c.poolWhy != "" {
		if strings.HasPrefix(c.poolWhy, "cannot read") {
			return UnknownR(c.subj, c.poolWhy, c.ev...)
		}
		r := FailR(c.subj, fmt.Sprintf("%s has huge_pages = %s, but %s.", c.desc, c.mode, c.poolWhy),
			&fix.Fix{Summary: "Use a huge page size the kernel offers", Config: []fix.ConfigChange{{Instance: c.subj, Engine: string(c.in.Engine), Key: "huge_page_size", Value: "0", Restart: true}}}, c.ev...)
		if c.mode == "on" {
			r.Severity = Critical
		}
		return r
	}
	if !c.needKnown {
		return UnknownR(c.subj, fmt.Sprintf("%s runs without huge pages (huge_pages = %s), but dbhost cannot tell how many it would need, so it cannot judge the pool: %s", c.desc, c.mode, memOr(c.in.Mem.SharedErr, "no shared memory mapping found")), c.ev...)
	}
	avail := c.pool.Available()
	enough := avail >= c.need
	switch {
	case c.mode == "try" && !enough:
		return FailR(c.subj, fmt.Sprintf("%s has huge_pages = try, but the %s pool has %d pages available and its shared memory needs %d: PostgreSQL silently fell back to 4 kB pages. %s%s", c.desc, memPoolName(c.kb), avail, c.need, hugeBench, othersWaiting(c.f, c.pool, c.in)),
			pgHugeFix(c.f, c.in, c.pool, "", c.need, true), c.ev...)
	case c.mode == "try":
		return FailR(c.subj, fmt.Sprintf("%s has huge_pages = try and runs without huge pages, although the %s pool now has %d pages available of the %d it needs (reserved after the server started): restart it with huge_pages = on to use them and to fail loudly if they are ever missing.", c.desc, memPoolName(c.kb), avail, c.need),
			pgHugeFix(c.f, c.in, c.pool, "", c.need, true), c.ev...)
	case !enough:
		r := FailR(c.subj, fmt.Sprintf("%s has huge_pages = on but does not use huge pages (the setting changed after it started), and the %s pool has %d pages available of the %d it needs: the next restart or reboot fails with \"could not map anonymous shared memory\" and the server stays down.%s", c.desc, memPoolName(c.kb), avail, c.need, othersWaiting(c.f, c.pool, c.in)),
			pgHugeFix(c.f, c.in, c.pool, "", c.need, true), c.ev...)
		r.Severity = Critical
		return r
	}
	if r, short, _ := pgBootShort(c.f, c.in, c.mode, c.pool, c.need, c.ev); short {
		r.Reason += " (It runs without huge pages now: the setting changed after it started.)"
		return r
	}
	return FailR(c.subj, fmt.Sprintf("%s has huge_pages = on but runs without huge pages (the setting changed after it started); the %s pool has the %d pages it needs, so a restart will use them.", c.desc, memPoolName(c.kb), c.need),
		&fix.Fix{Summary: "Restart PostgreSQL to use huge pages", Manual: "Restart " + c.subj + " (a reload is not enough: shared memory is mapped at start)."}, c.ev...)
}

// pgUsesHuge reports whether the postmaster maps huge pages: PostgreSQL
// 17's huge_pages_status when read live, else its mappings and status.
func pgUsesHuge(in *facts.Instance) (bool, []Evidence, bool) {
	var ev []Evidence
	if seg, ok := in.Mem.Largest(facts.SegHugetlb); ok {
		ev = append(ev, Ev("hugetlb mapping", fmt.Sprintf("%s %s", seg.Path, humanBytes(seg.Size)), fmt.Sprintf("/proc/%d/maps", in.PID)))
	}
	if in.Mem.HugetlbBytes > 0 {
		ev = append(ev, Ev("HugetlbPages", humanBytes(in.Mem.HugetlbBytes), fmt.Sprintf("/proc/%d/status", in.PID)))
	}
	if in.Mem.UsesHugetlb() {
		return true, ev, true
	}
	if s, ok := in.Setting("huge_pages_status"); ok && strings.EqualFold(s.Value, "on") {
		return true, ev, true
	}
	if in.Mem.SharedErr != "" {
		ev = append(ev, Ev("shared memory mappings", "unreadable: "+in.Mem.SharedErr, fmt.Sprintf("/proc/%d/maps", in.PID)))
		return false, ev, false
	}
	if seg, ok := pgMainSegment(in); ok {
		ev = append(ev, Ev("postmaster shared memory", fmt.Sprintf("%s %s in %s pages", seg.Path, humanBytes(seg.Size), memPoolName(seg.PageSizeKB)), fmt.Sprintf("/proc/%d/maps", in.PID)))
	}
	return false, ev, true
}

// pgHugeFix reserves the pages (when short) and sets huge_pages=on.
func pgHugeFix(f *facts.Facts, in *facts.Instance, pool facts.HugePagePool, poolWhy string, need int64, needKnown bool) *fix.Fix {
	fx := &fix.Fix{Summary: "Reserve huge pages for PostgreSQL and set huge_pages=on"}
	if poolWhy == "" && needKnown {
		target := poolTarget(f, pool, in)
		if target > 0 {
			pf := poolFix(f, pool, target, "")
			fx.Sysctl, fx.Sysfs, fx.Cmdline, fx.HostOnly = pf.Sysctl, pf.Sysfs, pf.Cmdline, pf.HostOnly
		}
	}
	fx.Config = []fix.ConfigChange{{Instance: in.Name(), Engine: string(in.Engine), Key: "huge_pages", Value: "on", Restart: true}}
	return fx
}

// ---- mem.hugepages.mysql ----

func mysqlLargePages(in *facts.Instance) (bool, Evidence) {
	v, ev := memSettingEv(in, "large_pages", "OFF")
	on, _ := memOnOff(v)
	return on, ev
}

// mysqlNeed is the buffer pool in huge pages plus 1 %.
func mysqlNeed(in *facts.Instance, kb int) (int64, Evidence, bool) {
	b, ok := mysql.Bytes(in.Instance, "innodb_buffer_pool_size")
	if !ok || kb <= 0 {
		return 0, Evidence{}, false
	}
	s, _ := in.Setting("innodb_buffer_pool_size")
	n := int64(memCeilDiv(b, uint64(kb)<<10))
	return n + hugeMargin(n), Ev("innodb_buffer_pool_size", s.Value, memOr(s.Source, in.SettingsSource)), true
}

// mysqlUsesSysV: MySQL before 8.0 and MariaDB before 10.5 allocate large
// pages with shmget(SHM_HUGETLB); later versions use mmap(MAP_HUGETLB).
func mysqlUsesSysV(in *facts.Instance) bool {
	if in.Version == "" {
		return false
	}
	if mysql.IsMariaDB(in.Instance) {
		return !engine.VersionAtLeast(in.Version, "10.5")
	}
	return !engine.VersionAtLeast(in.Version, "8.0")
}

func checkHugePagesMySQL(f *facts.Facts) []Result {
	var out []Result
	for _, in := range f.ByEngine(engine.MySQL) {
		subj, desc := in.Name(), memInstDesc(in)
		on, lpEv := mysqlLargePages(in)
		ev := []Evidence{lpEv}
		if !on {
			out = append(out, PassR(subj, desc+" does not use large pages (large_pages is OFF): its buffer pool is ordinary memory, nothing to reserve.", ev...))
			continue
		}
		kb := f.Memory.DefaultHugePageKB()
		using, useEv, known := pgUsesHuge(in)
		ev = append(ev, useEv...)
		if using {
			out = append(out, mysqlUsingHuge(f, in, kb, ev))
			continue
		}
		pool, poolEv, poolWhy := poolFor(f, 0)
		if !known && !(poolWhy == "" && pool.Total == 0 && pool.Overcommit == 0) {
			// Unreadable mappings, and a pool it could be using.
			out = append(out, UnknownR(subj, "cannot tell whether "+desc+" maps huge pages: "+in.Mem.SharedErr, append(ev, poolEv)...))
			continue
		}
		ev = append(ev, poolEv)
		need, needEv, needOK := mysqlNeed(in, kb)
		if needOK {
			ev = append(ev, needEv, Ev("huge pages needed", strconv.FormatInt(need, 10), "buffer pool / page size + 1 %"))
		}
		if poolWhy != "" || !needOK {
			out = append(out, UnknownR(subj, fmt.Sprintf("%s has large_pages = ON but runs without huge pages; dbhost cannot size the fix: %s", desc, memOr(poolWhy, "innodb_buffer_pool_size unknown")), ev...))
			continue
		}
		reason := fmt.Sprintf("%s has large_pages = ON but its buffer pool is not in huge pages: InnoDB fell back to conventional memory (its log says \"Using conventional memory pool\") and runs on 4 kB pages without any other sign.", desc)
		fx := &fix.Fix{Summary: "Reserve huge pages for the InnoDB buffer pool and restart"}
		if avail := pool.Available(); avail < need {
			reason += fmt.Sprintf(" The %s pool has %d pages available; the buffer pool needs %d.%s", memPoolName(pool.SizeKB), avail, need, othersWaiting(f, pool, in))
			target := poolTarget(f, pool, in)
			pf := poolFix(f, pool, target, "")
			fx.Sysctl, fx.Sysfs, fx.Cmdline, fx.HostOnly = pf.Sysctl, pf.Sysfs, pf.Cmdline, pf.HostOnly
		} else {
			reason += fmt.Sprintf(" The %s pool now has the %d pages it needs (reserved after the server started).", memPoolName(pool.SizeKB), need)
		}
		if mysqlUsesSysV(in) {
			reason += " This version allocates them with shmget(SHM_HUGETLB): see mem.hugepages.shm_group and mem.hugepages.memlock too."
		}
		fx.Manual = "Restart " + subj + " so InnoDB maps the buffer pool with huge pages."
		out = append(out, FailR(subj, reason, fx, ev...))
	}
	return out
}

// mysqlUsingHuge judges a MySQL that maps huge pages now by what the next
// boot reserves: too few and InnoDB silently falls back to 4 kB pages.
func mysqlUsingHuge(f *facts.Facts, in *facts.Instance, kb int, ev []Evidence) Result {
	subj, desc := in.Name(), memInstDesc(in)
	pass := fmt.Sprintf("%s has large_pages = ON and maps its buffer pool with huge pages.", desc)
	pool, poolEv, poolWhy := poolFor(f, 0)
	need, needEv, needOK := mysqlNeed(in, kb)
	if poolWhy != "" || !needOK {
		return PassR(subj, pass, ev...)
	}
	boot, bootEv, known := bootPool(f, pool)
	ev = append(ev, poolEv, needEv, bootEv)
	if !known || boot >= need {
		return PassR(subj, pass, ev...)
	}
	if persists, why := instancePersists(in); !persists {
		return PassR(subj, fmt.Sprintf("%s The pool exists only at runtime (the next boot gives %d pages), but %s.", pass, boot, why), ev...)
	}
	return FailR(subj, fmt.Sprintf("%s The %s pool it needs (%d pages with a 1 %% margin, %d reserved now) exists only at runtime: the next boot gives %d pages (%s), and InnoDB then silently runs on 4 kB pages (\"Using conventional memory pool\").", pass, memPoolName(pool.SizeKB), need, pool.Total, boot, bootEv.Source),
		persistPoolFix(f, pool), ev...)
}

// ---- mem.hugepages.memlock / shm_group ----

// sysvHugeUser describes an instance that creates SHM_HUGETLB segments: the
// observed segment (if any) and the size it needs.
type sysvHugeUser struct {
	in   *facts.Instance
	size uint64
	how  string
}

// sysvHugeUsers lists instances that use System V huge page segments, and
// the large-page instances that do not (mmap), for the pass reasons.
func sysvHugeUsers(f *facts.Facts) (users []sysvHugeUser, mmapUsers []*facts.Instance) {
	for _, in := range f.Instances {
		var seg facts.Segment
		found := false
		for _, s := range in.Mem.Shared {
			if s.Kind == facts.SegHugetlb && s.SysV != 0 && s.Size > seg.Size {
				seg, found = s, true
			}
		}
		if found {
			users = append(users, sysvHugeUser{in, seg.Size, fmt.Sprintf("maps System V huge page segment %s (%s)", strings.TrimSuffix(seg.Path, " (deleted)"), humanBytes(seg.Size))})
			continue
		}
		if in.Engine != engine.MySQL {
			if in.Mem.UsesHugetlb() {
				mmapUsers = append(mmapUsers, in)
			}
			continue
		}
		if on, _ := mysqlLargePages(in); !on {
			continue
		}
		if mysqlUsesSysV(in) {
			b, _ := mysql.Bytes(in.Instance, "innodb_buffer_pool_size")
			users = append(users, sysvHugeUser{in, b, "has large_pages = ON and this version allocates them with shmget(SHM_HUGETLB)"})
			continue
		}
		mmapUsers = append(mmapUsers, in)
	}
	return users, mmapUsers
}

func mmapPass(in *facts.Instance, what string) Result {
	return PassR(in.Name(), memInstDesc(in)+" allocates huge pages with mmap(MAP_HUGETLB) (PostgreSQL, MySQL 8.0, MariaDB 10.5+), which "+what+" does not restrict: only System V SHM_HUGETLB segments are subject to it.")
}

func shmGroup(f *facts.Facts) (int64, Evidence, bool) {
	v, ev, why := memSysctlCount(f, "vm.hugetlb_shm_group")
	return v, ev, why == ""
}

func checkHugePagesMemlock(f *facts.Facts) []Result {
	users, mm := sysvHugeUsers(f)
	var out []Result
	for _, in := range mm {
		out = append(out, mmapPass(in, "the memlock limit"))
	}
	for _, u := range users {
		subj, desc := u.in.Name(), memInstDesc(u.in)
		grp, grpEv, grpOK := shmGroup(f)
		ev := []Evidence{grpEv, Ev("process group", strconv.Itoa(u.in.GID), fmt.Sprintf("/proc/%d/status", u.in.PID))}
		if grpOK && grp != 0 && int(grp) == u.in.GID {
			out = append(out, PassR(subj, fmt.Sprintf("%s %s; its group %d is vm.hugetlb_shm_group, so the kernel does not consult the memlock limit.", desc, u.how, u.in.GID), ev...))
			continue
		}
		lim, ok := u.in.Limits[host.LimitMemlock]
		if !ok {
			out = append(out, UnknownR(subj, "cannot read the memlock limit of "+desc+": "+memOr(u.in.LimitsErr, "no \"Max locked memory\" line"), ev...))
			continue
		}
		ev = append(ev, Ev("memlock (soft)", host.FormatLimit(lim.Soft), fmt.Sprintf("/proc/%d/limits", u.in.PID)))
		if lim.Soft == host.Unlimited || (u.size > 0 && lim.Soft >= u.size) {
			out = append(out, PassR(subj, fmt.Sprintf("%s %s; its memlock limit (%s) covers the segment (%s). (vm.hugetlb_shm_group is the cleaner way: see mem.hugepages.shm_group.)", desc, u.how, host.FormatLimit(lim.Soft), humanBytes(u.size)), ev...))
			continue
		}
		fx := &fix.Fix{Summary: "Allow " + subj + " to lock its huge page segment"}
		if u.in.User != "" && u.in.UID != 0 {
			fx.Limits = []fix.LimitLine{{Domain: u.in.User, Type: "soft", Item: "memlock", Value: "unlimited"}, {Domain: u.in.User, Type: "hard", Item: "memlock", Value: "unlimited"}}
		}
		if unit := memUnit(u.in); unit != "" {
			fx.Dropins = []fix.Dropin{{Unit: unit, Section: "Service", Key: "LimitMEMLOCK", Value: "infinity"}}
		}
		rl := fix.Rlimit{PID: u.in.PID, Item: "memlock", Soft: fix.Unlimited, Hard: fix.Unlimited}
		fx.Runtime, fx.Rlimits = []string{rl.Command()}, []fix.Rlimit{rl}
		out = append(out, FailR(subj, fmt.Sprintf("%s %s, but its group %d is not vm.hugetlb_shm_group and its memlock limit (%s) is below the segment (%s): the kernel refuses shmget(SHM_HUGETLB) with EPERM and the server falls back to 4 kB pages (or fails to start).", desc, u.how, u.in.GID, host.FormatLimit(lim.Soft), humanBytes(u.size)), fx, ev...))
	}
	return out
}

// memUnit is the systemd unit for a drop-in, if the instance has one.
func memUnit(in *facts.Instance) string {
	if in.Unit != nil {
		return in.Unit.Name
	}
	return ""
}

func checkHugePagesShmGroup(f *facts.Facts) []Result {
	users, mm := sysvHugeUsers(f)
	var out []Result
	for _, in := range mm {
		out = append(out, mmapPass(in, "vm.hugetlb_shm_group"))
	}
	for _, u := range users {
		subj, desc := u.in.Name(), memInstDesc(u.in)
		grp, grpEv, ok := shmGroup(f)
		ev := []Evidence{grpEv, Ev("process group", strconv.Itoa(u.in.GID), fmt.Sprintf("/proc/%d/status", u.in.PID))}
		if !ok {
			out = append(out, UnknownR(subj, "cannot read vm.hugetlb_shm_group: "+strings.TrimPrefix(grpEv.Value, "unreadable: "), ev...))
			continue
		}
		if grp != 0 && int(grp) == u.in.GID {
			out = append(out, PassR(subj, fmt.Sprintf("%s %s; vm.hugetlb_shm_group is its group %d, which lets it create huge page segments.", desc, u.how, grp), ev...))
			continue
		}
		out = append(out, FailR(subj, fmt.Sprintf("%s %s, but vm.hugetlb_shm_group is %d, not its group %d: the kernel then falls back to the obsolete memlock accounting (and logs that it is obsolete) or refuses the segment.", desc, u.how, grp, u.in.GID),
			sysctlFix(f, "Let the database's group create huge page segments", "vm.hugetlb_shm_group", strconv.Itoa(u.in.GID)), ev...))
	}
	return out
}

// ---- mem.hugepages.unused ----

func checkHugePagesUnused(f *facts.Facts) []Result {
	m := f.Memory
	if m.HugePagesErr != "" {
		if strings.Contains(m.HugePagesErr, "not present") {
			return []Result{PassR(SubjectHost, "The kernel has no explicit huge pages (no /sys/kernel/mm/hugepages): nothing reserved.")}
		}
		return []Result{UnknownR(SubjectHost, "cannot read the huge page pools: "+m.HugePagesErr)}
	}
	var ev []Evidence
	var problems, notCounted []string
	pending := pendingHugeUsers(f)
	fx := &fix.Fix{Summary: "Release huge pages nobody uses"}
	total := int64(0)
	for _, p := range m.HugePages {
		src := host.HugePagesDir(uint64(p.SizeKB))
		if p.Err != "" {
			return []Result{UnknownR(SubjectHost, "cannot read the "+memPoolName(p.SizeKB)+" pool: "+p.Err, Ev("pool "+memPoolName(p.SizeKB), "unreadable: "+p.Err, src))}
		}
		ev = append(ev, Ev("pool "+memPoolName(p.SizeKB), fmt.Sprintf("%d reserved (%s), %d used, %d free, %d promised to mappings", p.Total, humanBytes(uint64(p.Total)*p.Bytes()), p.Used(), p.Free, p.Reserved), src))
		total += p.Total
		idle := p.Free - p.Reserved
		if p.Total == 0 || idle*20 <= p.Total || uint64(idle)*p.Bytes() < 64*bMiB {
			continue // within a 5 % margin, or less than 64 MiB
		}
		// Idle pages a database waits for are not surplus; those beyond
		// its need are.
		waiting, transient, need, wev := poolWaiters(pending, p.SizeKB)
		ev = append(ev, wev...)
		notCounted = append(notCounted, transient...)
		surplus := idle - need
		if len(waiting) > 0 && (surplus*20 <= p.Total || uint64(max(surplus, 0))*p.Bytes() < 64*bMiB) {
			problems = append(problems, fmt.Sprintf("%d of %d pages of %s (%s) are idle, but not because they are surplus: %s and runs without huge pages (too few pages, or reserved after it started; see its huge pages check)", idle, p.Total, memPoolName(p.SizeKB), humanBytes(uint64(idle)*p.Bytes()), strings.Join(waiting, ", ")))
			fx.Manual = "Do not release these pages: give the waiting database enough pages and restart it (see mem.hugepages.postgres / mem.hugepages.mysql)."
			continue
		}
		if len(waiting) > 0 {
			keep := p.Total - idle + need
			problems = append(problems, fmt.Sprintf("%d of %d pages of %s are idle; %s (with a 1%% margin: %d pages) and runs without huge pages, so %d pages (%s) are surplus: that memory is lost to the page cache, the buffer pools and everything else", idle, p.Total, memPoolName(p.SizeKB), strings.Join(waiting, ", "), need, surplus, humanBytes(uint64(surplus)*p.Bytes())))
			pf := poolFix(f, p, keep, "")
			fx.Sysctl = append(fx.Sysctl, pf.Sysctl...)
			fx.Sysfs = append(fx.Sysfs, pf.Sysfs...)
			fx.HostOnly = pf.HostOnly
			fx.Manual = "Keep the pages the waiting database needs, then restart it so that it maps them (see mem.hugepages.postgres / mem.hugepages.mysql)."
			continue
		}
		problems = append(problems, fmt.Sprintf("%d of %d pages of %s (%s) are neither mapped nor promised to any process: that memory is lost to the page cache, the buffer pools and everything else", idle, p.Total, memPoolName(p.SizeKB), humanBytes(uint64(idle)*p.Bytes())))
		keep := p.Total - idle
		if keep > 0 {
			keep += hugeMargin(keep)
		}
		pf := poolFix(f, p, keep, "")
		fx.Sysctl = append(fx.Sysctl, pf.Sysctl...)
		fx.Sysfs = append(fx.Sysfs, pf.Sysfs...)
		fx.HostOnly = pf.HostOnly
	}
	if len(problems) == 0 {
		if total == 0 {
			return []Result{PassR(SubjectHost, "No explicit huge pages are reserved.", ev...)}
		}
		return []Result{PassR(SubjectHost, "The reserved huge pages are mapped or promised to processes (at most a small margin is idle).", ev...)}
	}
	reason := strings.Join(problems, "; ") + "."
	if len(notCounted) > 0 {
		reason += " Not counted as waiting: " + strings.Join(notCounted, ", ") + ": started by hand, nothing starts them at boot (see evidence)."
	}
	return []Result{FailR(SubjectHost, reason, fx, ev...)}
}

// poolWaiters are the instances waiting for pages of a pool (sizeKB):
// those something starts at boot, with the pages they need (plus the
// margin), and those started by hand, not counted (with the evidence why).
func poolWaiters(pending []hugeUser, sizeKB int) (waiting, transient []string, need int64, ev []Evidence) {
	for _, u := range pending {
		if u.poolKB != sizeKB || u.advised {
			continue
		}
		if !u.persists {
			ev = append(ev, Ev("not counted: "+u.in.Name(), fmt.Sprintf("wants %d pages of %s, but %s", u.need, memPoolName(sizeKB), u.persistWhy), "instance"))
			transient = append(transient, u.in.Name())
			continue
		}
		waiting = append(waiting, fmt.Sprintf("%s needs %d", u.in.Name(), u.need))
		need += u.need
	}
	if need > 0 {
		need += hugeMargin(need)
	}
	return waiting, transient, need, ev
}

// ---- mem.shm_limits ----

func checkShmLimits(f *facts.Facts) []Result {
	var out []Result
	shmmax, maxEv, okMax := memSysctlUint(f, "kernel.shmmax")
	shmall, allEv, okAll := memSysctlUint(f, "kernel.shmall")
	var hostTotal uint64
	for _, s := range f.Memory.SysV {
		hostTotal += s.Size
	}
	for _, in := range f.Instances {
		var largest facts.Segment
		n := 0
		for _, s := range in.Mem.Shared {
			if s.SysV != 0 || strings.HasPrefix(s.Path, "/SYSV") {
				n++
				if s.Size > largest.Size {
					largest = s
				}
			}
		}
		if n == 0 {
			// PostgreSQL always keeps a System V segment; MySQL only with
			// SysV large pages.
			on, _ := mysqlLargePages(in)
			sysvUser := in.Engine == engine.Postgres || (in.Engine == engine.MySQL && on && mysqlUsesSysV(in))
			if in.Mem.SharedErr != "" && sysvUser {
				out = append(out, UnknownR(in.Name(), "cannot read the shared memory mappings of "+memInstDesc(in)+": "+in.Mem.SharedErr))
			}
			continue
		}
		subj, desc := in.Name(), memInstDesc(in)
		ev := []Evidence{maxEv, allEv, Ev("largest System V segment", fmt.Sprintf("%s %d bytes", strings.TrimSuffix(largest.Path, " (deleted)"), largest.Size), "/proc/sysvipc/shm"),
			Ev("System V segments on the host", humanBytes(hostTotal), "/proc/sysvipc/shm")}
		if !okMax || !okAll {
			out = append(out, UnknownR(subj, "cannot read kernel.shmmax/shmall: "+memFirstUnreadable(ev[:2]), ev...))
			continue
		}
		pageBytes := uint64(4096)
		var problems []string
		fx := &fix.Fix{Summary: "Restore the kernel's System V shared memory limits"}
		if shmmax < largest.Size {
			problems = append(problems, fmt.Sprintf("kernel.shmmax (%d bytes) is below its largest segment (%d bytes)", shmmax, largest.Size))
			fx.Sysctl = append(fx.Sysctl, fix.KV{Key: "kernel.shmmax", Value: "18446744073692774399"})
		}
		if shmall < memCeilDiv(hostTotal, pageBytes) {
			problems = append(problems, fmt.Sprintf("kernel.shmall (%d pages) is below the %d pages of System V memory on the host", shmall, memCeilDiv(hostTotal, pageBytes)))
			fx.Sysctl = append(fx.Sysctl, fix.KV{Key: "kernel.shmall", Value: "18446744073692774399"})
		}
		if len(problems) == 0 {
			what := "its System V segments"
			if in.Engine == engine.Postgres && engine.VersionAtLeast(in.Version, "9.3") {
				what = "its small System V interlock segment (PostgreSQL 9.3+ maps its shared memory with mmap)"
			}
			out = append(out, PassR(subj, fmt.Sprintf("kernel.shmmax (%d) and kernel.shmall (%d pages) leave room for %s: %s can create them again at its next start.", shmmax, shmall, what, desc), ev...))
			continue
		}
		out = append(out, FailR(subj, fmt.Sprintf("%s: %s. The segments exist now, but at its next start shmget fails (EINVAL/ENOSPC) and the server does not start (\"could not create shared memory segment\"). The kernel's defaults (since 3.16) are effectively unlimited.", desc, strings.Join(problems, "; ")),
			memHostOnly(f, fx), ev...))
	}
	return out
}
