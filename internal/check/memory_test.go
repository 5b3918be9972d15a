package check_test

import (
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/dbhost/dbhost/internal/check"
	"github.com/dbhost/dbhost/internal/engine"
	"github.com/dbhost/dbhost/internal/facts"
	"github.com/dbhost/dbhost/internal/fix"
	"github.com/dbhost/dbhost/internal/fixture"
)

// The mem-* and numa-* fixtures are recorded (or derived, see
// tools/derive-memory) on a VM whose shared PostgreSQL (postgres:5432),
// MariaDB (mysql:3306) and Redis (redis:6379) always run; private servers
// get random ports.

// memFind returns the finding of a check for a subject, failing the test
// when there is none.
func memFind(t *testing.T, fixtureName, id, subject string) check.Finding {
	t.Helper()
	fd, ok := fixture.Find(t, fixtureName, id, subject)
	if !ok {
		t.Fatalf("%s: no %s finding for %s (have %v)", fixtureName, id, subject, fixture.Statuses(t, fixtureName, id))
	}
	return fd
}

// memWant asserts a finding's status and that its reason mentions every
// fragment.
func memWant(t *testing.T, fixtureName, id, subject string, st check.Status, fragments ...string) check.Finding {
	t.Helper()
	fd := memFind(t, fixtureName, id, subject)
	if fd.Status != st {
		t.Fatalf("%s %s %s: %s, want %s: %s", fixtureName, id, subject, fd.Status, st, fd.Reason)
	}
	for _, s := range fragments {
		if !strings.Contains(fd.Reason, s) {
			t.Errorf("%s %s %s: reason lacks %q: %s", fixtureName, id, subject, s, fd.Reason)
		}
	}
	if st == check.Fail && fd.Fix.Empty() {
		t.Errorf("%s %s %s: fail without a fix", fixtureName, id, subject)
	}
	return fd
}

// memPrivate names the one instance of an engine that is not the
// machine's shared one.
func memPrivate(t *testing.T, fixtureName string, e engine.Engine) string {
	t.Helper()
	shared := map[engine.Engine]string{engine.Postgres: "postgres:5432", engine.MySQL: "mysql:3306", engine.Redis: "redis:6379"}[e]
	var found []string
	for _, in := range fixture.Facts(t, fixtureName).ByEngine(e) {
		if in.Name() != shared {
			found = append(found, in.Name())
		}
	}
	if len(found) != 1 {
		t.Fatalf("%s: want one private %s, found %v", fixtureName, e, found)
	}
	return found[0]
}

func memSysctlValue(fx *fix.Fix, key string) string {
	if fx == nil {
		return ""
	}
	for _, kv := range fx.Sysctl {
		if kv.Key == key {
			return kv.Value
		}
	}
	return ""
}

func memSysfsValue(fx *fix.Fix, key string) string {
	if fx == nil {
		return ""
	}
	for _, kv := range fx.Sysfs {
		if kv.Key == key {
			return kv.Value
		}
	}
	return ""
}

const memHost = check.SubjectHost

func TestMemSwappiness(t *testing.T) {
	memWant(t, "mem-swappiness-1", "mem.swappiness", memHost, check.Pass)
	fd := memWant(t, "mem-swapfile", "mem.swappiness", memHost, check.Fail, "vm.swappiness is 60")
	if memSysctlValue(fd.Fix, "vm.swappiness") != "1" {
		t.Errorf("fix %+v", fd.Fix)
	}
	// Recorded without swap: 0 cannot make the kernel prefer the OOM
	// killer to a swap it does not have. mem.swap carries the setting.
	memWant(t, "mem-swappiness-0", "mem.swappiness", memHost, check.Pass, "moot")
	fd = memWant(t, "baseline", "mem.swap", memHost, check.Fail)
	if memSysctlValue(fd.Fix, "vm.swappiness") != "1" {
		t.Errorf("mem.swap on a host with swappiness 60: fix %+v", fd.Fix)
	}
	fd = memWant(t, "mem-swappiness-1", "mem.swap", memHost, check.Fail)
	if fd.Fix.Sysctl != nil {
		t.Errorf("mem.swap with swappiness 1 already: fix %+v", fd.Fix.Sysctl)
	}
	memWant(t, "mem-denied", "mem.swappiness", memHost, check.Unknown, "permission denied")
}

func TestMemDirty(t *testing.T) {
	memWant(t, "mem-dirty-low", "mem.dirty", memHost, check.Pass, "vm.dirty_ratio = 10", "below 64 GiB", "2.8 %")
	fd := memWant(t, "mem-dirty-high", "mem.dirty", memHost, check.Fail, "above 20 % of RAM", "above 10 % of RAM", "2.8 %")
	if memSysctlValue(fd.Fix, "vm.dirty_ratio") != "20" || memSysctlValue(fd.Fix, "vm.dirty_background_ratio") != "10" {
		t.Errorf("fix %+v", fd.Fix.Sysctl)
	}
	fd = memWant(t, "mem-dirty-bg-equal", "mem.dirty", memHost, check.Fail, "kernel silently uses half")
	if len(fd.Fix.Sysctl) != 1 || memSysctlValue(fd.Fix, "vm.dirty_background_ratio") != "5" {
		t.Errorf("fix %+v", fd.Fix.Sysctl)
	}
	if _, ok := memEvidence(fd, "Dirty"); !ok {
		t.Error("no Dirty evidence")
	}
	memWant(t, "mem-denied", "mem.dirty", memHost, check.Unknown, "MemTotal")
}

func memEvidence(fd check.Finding, key string) (check.Evidence, bool) {
	for _, e := range fd.Evidence {
		if e.Key == key {
			return e, true
		}
	}
	return check.Evidence{}, false
}

func TestMemZoneReclaim(t *testing.T) {
	memWant(t, "mem-dirty-low", "mem.zone_reclaim", memHost, check.Pass, "single-node")
	fd := memWant(t, "mem-zone-reclaim-1", "mem.zone_reclaim", memHost, check.Fail, "is 1")
	if memSysctlValue(fd.Fix, "vm.zone_reclaim_mode") != "0" {
		t.Errorf("fix %+v", fd.Fix)
	}
	memWant(t, "mem-denied", "mem.zone_reclaim", memHost, check.Unknown, "permission denied")
}

func TestMemSwap(t *testing.T) {
	fd := memWant(t, "mem-swapfile", "mem.swap", memHost, check.Pass, "1 swap area")
	if _, ok := memEvidence(fd, "swap /var/tmp/dbhost-record.swap"); !ok {
		t.Errorf("evidence %+v", fd.Evidence)
	}
	fd = memWant(t, "mem-dirty-low", "mem.swap", memHost, check.Fail, "No swap", "vm.swappiness is 60", "OOM killer")
	if !strings.Contains(fd.Fix.Manual, "mkswap") || !strings.Contains(fd.Fix.Manual, "/etc/fstab") {
		t.Errorf("fix %+v", fd.Fix)
	}
	memWant(t, "mem-denied", "mem.swap", memHost, check.Unknown, "/proc/swaps")
}

func TestMemMinFree(t *testing.T) {
	memWant(t, "mem-dirty-low", "mem.min_free_kbytes", memHost, check.Pass, "67584")
	for _, name := range []string{"mem-minfree-low", "mem-minfree-high"} {
		fd := memWant(t, name, "mem.min_free_kbytes", memHost, check.Fail)
		if v := memSysctlValue(fd.Fix, "vm.min_free_kbytes"); v != "19872" {
			t.Errorf("%s: fix %q", name, v)
		}
	}
	memWant(t, "mem-minfree-low", "mem.min_free_kbytes", memHost, check.Fail, "below 80 %")
	memWant(t, "mem-minfree-high", "mem.min_free_kbytes", memHost, check.Fail, "above 5 % of RAM")
	memWant(t, "mem-denied", "mem.min_free_kbytes", memHost, check.Unknown)
}

func TestMemMaxMapCount(t *testing.T) {
	sub := fixture.Facts(t, "mongo-8").ByEngine(engine.MongoDB)[0].Name()
	memWant(t, "mongo-8", "mem.max_map_count", sub, check.Pass, "16000 connections")
	sub = fixture.Facts(t, "mem-mongo-maxmap").ByEngine(engine.MongoDB)[0].Name()
	fd := memWant(t, "mem-mongo-maxmap", "mem.max_map_count", sub, check.Fail, "30000", "5123300")
	if memSysctlValue(fd.Fix, "vm.max_map_count") != "32000" {
		t.Errorf("fix %+v", fd.Fix)
	}
	// No MongoDB, no finding.
	if st := fixture.Statuses(t, "mem-dirty-low", "mem.max_map_count"); len(st) != 0 {
		t.Errorf("without MongoDB: %v", st)
	}
}

func TestMemOvercommit(t *testing.T) {
	memWant(t, "mem-overcommit-2", "mem.overcommit", memHost, check.Pass, "PostgreSQL (postgres:5432) and Redis (redis:6379)", "Mode 2 is set")
	fd := memWant(t, "mem-overcommit-1", "mem.overcommit", memHost, check.Fail, "want opposite overcommit modes", "not protected from the OOM killer", "OOMScoreAdjust=-1000")
	if memSysctlValue(fd.Fix, "vm.overcommit_memory") != "2" || memSysctlValue(fd.Fix, "vm.overcommit_ratio") == "" {
		t.Errorf("fix %+v", fd.Fix.Sysctl)
	}
	fd = memWant(t, "mem-overcommit-redis-fork", "mem.overcommit", memHost, check.Fail, "BGSAVE fails")
	// The host uses overcommit_kbytes: the fix keeps that knob.
	if memSysctlValue(fd.Fix, "vm.overcommit_kbytes") == "" || memSysctlValue(fd.Fix, "vm.overcommit_ratio") != "" {
		t.Errorf("fix %+v", fd.Fix.Sysctl)
	}
	// The mode-0 hosts fail with the same single finding, never twice.
	if st := fixture.Statuses(t, "mem-dirty-low", "mem.overcommit"); len(st) != 1 || st[memHost] != check.Fail {
		t.Errorf("mode 0: %v", st)
	}
	memWant(t, "mem-denied", "mem.overcommit", memHost, check.Unknown, "permission denied")
}

func TestMemCommitLimit(t *testing.T) {
	memWant(t, "mem-overcommit-2", "mem.commit_limit", memHost, check.Pass, "Strict overcommit")
	memWant(t, "mem-dirty-low", "mem.commit_limit", memHost, check.Pass, "not enforced")
	fd := memWant(t, "mem-commit-near", "mem.commit_limit", memHost, check.Fail, "% of CommitLimit")
	// The scenario leaves under 10 % headroom; the exact figure depends on
	// what the VM committed when it was recorded.
	if m := regexp.MustCompile(`is (\d+) % of CommitLimit`).FindStringSubmatch(fd.Reason); m == nil {
		t.Errorf("no percentage in %q", fd.Reason)
	} else if p, _ := strconv.Atoi(m[1]); p < 90 {
		t.Errorf("commitment %d %% is not near the limit", p)
	}
	// The fix leaves at least 10 % headroom: Committed_AS + 25 %.
	if r, err := strconv.Atoi(memSysctlValue(fd.Fix, "vm.overcommit_ratio")); err != nil || r <= 50 || r > 100 {
		t.Errorf("fix %+v", fd.Fix.Sysctl)
	}
	memWant(t, "mem-denied", "mem.commit_limit", memHost, check.Unknown)
}

func TestMemTHPEnabled(t *testing.T) {
	memWant(t, "mem-thp-never", "mem.thp.enabled", memHost, check.Pass, "PostgreSQL", "MariaDB", "disable-thp")
	fd := memWant(t, "mem-thp-always", "mem.thp.enabled", memHost, check.Fail, `"always"`, "PostgreSQL")
	if strings.Contains(fd.Reason, "Redis") {
		t.Errorf("Redis (disable-thp) named against always: %s", fd.Reason)
	}
	if memSysfsValue(fd.Fix, "/sys/kernel/mm/transparent_hugepage/enabled") != "never" || len(fd.Fix.Cmdline) != 1 || fd.Fix.Cmdline[0] != "transparent_hugepage=never" {
		t.Errorf("fix %+v", fd.Fix)
	}
	var tmpfiles bool
	for _, f := range fd.Fix.Files {
		tmpfiles = tmpfiles || (f.Path == "/etc/tmpfiles.d/60-dbhost.conf" && strings.Contains(f.Content, "w /sys/kernel/mm/transparent_hugepage/enabled - - - - never"))
	}
	if !tmpfiles {
		t.Errorf("no tmpfiles.d line in %+v", fd.Fix.Files)
	}
	// MongoDB 8 (wants always) next to PostgreSQL and MariaDB (never):
	// one finding that explains the conflict.
	fd = memWant(t, "mem-mongo8-thp", "mem.thp.enabled", memHost, check.Fail, "incompatible", "MongoDB 8.0.4", "PostgreSQL")
	if fd.Fix.Manual == "" || len(fd.Fix.Sysfs) != 0 {
		t.Errorf("conflict fix %+v", fd.Fix)
	}
	// MongoDB 6 wants never like the others.
	memWant(t, "mongo-6", "mem.thp.enabled", memHost, check.Fail, "MongoDB 6.0.10", "before 8.0")
	memWant(t, "mongo-nonroot", "mem.thp.enabled", memHost, check.Unknown, "version")
	memWant(t, "mem-denied", "mem.thp.enabled", memHost, check.Unknown, "permission denied")
}

func TestMemTHPDefrag(t *testing.T) {
	memWant(t, "mem-thp-never", "mem.thp.defrag", memHost, check.Pass, "has no effect")
	fd := memWant(t, "mem-thp-always", "mem.thp.defrag", memHost, check.Fail, `"always"`)
	if memSysfsValue(fd.Fix, "/sys/kernel/mm/transparent_hugepage/defrag") != "never" || len(fd.Fix.Cmdline) != 0 {
		t.Errorf("fix %+v", fd.Fix)
	}
	memWant(t, "mem-mongo8-thp", "mem.thp.defrag", memHost, check.Fail, "incompatible", "defer+madvise")
	memWant(t, "mem-denied", "mem.thp.defrag", memHost, check.Unknown)
}

func TestMemTHPKhugepaged(t *testing.T) {
	memWant(t, "mem-thp-always-ptes0", "mem.thp.khugepaged", memHost, check.Pass, "max_ptes_none is 0")
	memWant(t, "mem-thp-never", "mem.thp.khugepaged", memHost, check.Pass, `"never"`)
	fd := memWant(t, "mem-thp-always", "mem.thp.khugepaged", memHost, check.Fail, "511", "postgres:5432")
	if memSysfsValue(fd.Fix, "/sys/kernel/mm/transparent_hugepage/khugepaged/max_ptes_none") != "0" {
		t.Errorf("fix %+v", fd.Fix)
	}
	// MongoDB 8 asks for 0 whatever enabled is.
	sub := fixture.Facts(t, "mongo-8").ByEngine(engine.MongoDB)[0].Name()
	memWant(t, "mongo-8", "mem.thp.khugepaged", memHost, check.Fail, sub)
	memWant(t, "mem-mongo8-thp", "mem.thp.khugepaged", memHost, check.Pass)
	memWant(t, "mem-denied", "mem.thp.khugepaged", memHost, check.Unknown)
}

func TestMemTHPPersisted(t *testing.T) {
	memWant(t, "mem-thp-never-persisted", "mem.thp.persisted", memHost, check.Pass, "/etc/tmpfiles.d/dbhost-record-thp.conf")
	memWant(t, "mem-thp-unit", "mem.thp.persisted", memHost, check.Pass, "dbhost-record-disable-thp.service")
	memWant(t, "persist-swappiness-runtime", "mem.thp.persisted", memHost, check.Pass, "kernel's defaults")
	// Snapshots from before dbhost read the build configuration: the build
	// default of enabled is unknown, and so is whether a reboot changes it.
	memWant(t, "mem-dirty-low", "mem.thp.persisted", memHost, check.Unknown, "build default is unknown")
	fd := memWant(t, "mem-thp-never", "mem.thp.persisted", memHost, check.Fail, "runtime only")
	if memSysfsValue(fd.Fix, "/sys/kernel/mm/transparent_hugepage/enabled") != "never" || memSysfsValue(fd.Fix, "/sys/kernel/mm/transparent_hugepage/defrag") != "never" {
		t.Errorf("fix %+v", fd.Fix)
	}
	// defrag "always" only at runtime: the fix persists what the databases
	// want, not the running value.
	fd = memWant(t, "mem-thp-always", "mem.thp.persisted", memHost, check.Fail, "defrag")
	if memSysfsValue(fd.Fix, "/sys/kernel/mm/transparent_hugepage/defrag") != "never" {
		t.Errorf("fix %+v", fd.Fix)
	}
	memWant(t, "mem-denied", "mem.thp.persisted", memHost, check.Unknown)
}

func TestMemHugePagesPostgres(t *testing.T) {
	const id = "mem.hugepages.postgres"
	sub := memPrivate(t, "mem-hugepages-pg-try0", engine.Postgres)
	fd := memWant(t, "mem-hugepages-pg-try0", id, sub, check.Fail, "huge_pages = try", "4 kB pages", "1 GB pages beat 2 MB")
	if _, ok := memEvidence(fd, "shared_memory_size_in_huge_pages"); !ok {
		t.Errorf("no shared_memory_size_in_huge_pages evidence: %+v", fd.Evidence)
	}
	if v := memSysctlValue(fd.Fix, "vm.nr_hugepages"); v == "" || v == "0" {
		t.Errorf("fix %+v", fd.Fix)
	}
	if len(fd.Fix.Config) != 1 || fd.Fix.Config[0].Key != "huge_pages" || fd.Fix.Config[0].Value != "on" || !fd.Fix.Config[0].Restart {
		t.Errorf("config fix %+v", fd.Fix.Config)
	}
	// Its page count also covers the shared server, which wants pages too.
	if !strings.Contains(fd.Reason, "also covers postgres:5432") {
		t.Errorf("reason: %s", fd.Reason)
	}
	// huge_pages=off with 8 GB of shared_buffers: advice, sized for it.
	sub = memPrivate(t, "mem-hugepages-pg-off-large", engine.Postgres)
	fd = memWant(t, "mem-hugepages-pg-off-large", id, sub, check.Fail, "huge_pages = off with shared_buffers 8.0 GiB", "TLB")
	if fd.Severity != check.Info {
		t.Errorf("severity %s", fd.Severity)
	}
	if n, _ := strconv.Atoi(memSysctlValue(fd.Fix, "vm.nr_hugepages")); n < 4096 {
		t.Errorf("fix %+v", fd.Fix)
	}
	// ALTER SYSTEM huge_pages=on pending a restart, no pages: the restart
	// will fail.
	sub = memPrivate(t, "mem-hugepages-pg-pending", engine.Postgres)
	fd = memWant(t, "mem-hugepages-pg-pending", id, sub, check.Fail, "huge_pages = on", "could not map anonymous shared memory")
	if fd.Severity != check.Critical {
		t.Errorf("severity %s", fd.Severity)
	}
	if n, _ := strconv.Atoi(memSysctlValue(fd.Fix, "vm.nr_hugepages")); n < 256 {
		t.Errorf("fix %+v", fd.Fix)
	}
	sub = memPrivate(t, "mem-hugepages-pg-on", engine.Postgres)
	fd = memWant(t, "mem-hugepages-pg-on", id, sub, check.Pass, "runs with huge pages")
	if ev, ok := memEvidence(fd, "hugetlb mapping"); !ok || !strings.Contains(ev.Value, "/anon_hugepage") {
		t.Errorf("evidence %+v", fd.Evidence)
	}
	memWant(t, "mem-denied", id, "postgres:5432", check.Unknown, "huge page pools")
	// As nobody the postmaster's mappings are unreadable, and the pool has
	// pages it could be using.
	memWant(t, "mem-nonroot", id, memPrivate(t, "mem-nonroot", engine.Postgres), check.Unknown, "permission denied")
}

func TestMemHugePagesMySQL(t *testing.T) {
	const id = "mem.hugepages.mysql"
	memWant(t, "mem-hugepages-pg-on", id, "mysql:3306", check.Pass, "large_pages is OFF")
	sub := memPrivate(t, "mem-hugepages-mariadb", engine.MySQL)
	memWant(t, "mem-hugepages-mariadb", id, sub, check.Pass, "maps its buffer pool with huge pages")
	sub = memPrivate(t, "mem-hugepages-mariadb-nopages", engine.MySQL)
	fd := memWant(t, "mem-hugepages-mariadb-nopages", id, sub, check.Fail, "conventional memory", "needs 130")
	if v := memSysctlValue(fd.Fix, "vm.nr_hugepages"); v == "" {
		t.Errorf("fix %+v", fd.Fix)
	}
	memWant(t, "mem-nonroot", id, memPrivate(t, "mem-nonroot", engine.MySQL), check.Unknown, "permission denied")
}

func TestMemHugePagesMemlockAndShmGroup(t *testing.T) {
	sub := memPrivate(t, "mem-hugepages-mariadb", engine.MySQL)
	// MariaDB 10.11 maps its buffer pool with mmap(MAP_HUGETLB).
	memWant(t, "mem-hugepages-mariadb", "mem.hugepages.memlock", sub, check.Pass, "mmap(MAP_HUGETLB)")
	memWant(t, "mem-hugepages-mariadb", "mem.hugepages.shm_group", sub, check.Pass, "mmap(MAP_HUGETLB)")
	// Derived: the same buffer pool as System V SHM_HUGETLB segments.
	sub = memPrivate(t, "mem-hugepages-sysv", engine.MySQL)
	fd := memWant(t, "mem-hugepages-sysv", "mem.hugepages.memlock", sub, check.Fail, "/SYSV00000000", "EPERM")
	if len(fd.Fix.Dropins)+len(fd.Fix.Limits) == 0 {
		t.Errorf("fix %+v", fd.Fix)
	}
	fd = memWant(t, "mem-hugepages-sysv", "mem.hugepages.shm_group", sub, check.Fail, "vm.hugetlb_shm_group is 0")
	gid := ""
	for _, in := range fixture.Facts(t, "mem-hugepages-sysv").ByEngine(engine.MySQL) {
		if in.Name() == sub {
			gid = strconv.Itoa(in.GID)
		}
	}
	if memSysctlValue(fd.Fix, "vm.hugetlb_shm_group") != gid {
		t.Errorf("fix %+v, gid %s", fd.Fix, gid)
	}
	sub = memPrivate(t, "mem-hugepages-sysv-group", engine.MySQL)
	memWant(t, "mem-hugepages-sysv-group", "mem.hugepages.memlock", sub, check.Pass, "does not consult the memlock limit")
	memWant(t, "mem-hugepages-sysv-group", "mem.hugepages.shm_group", sub, check.Pass)
	// Instances without huge pages get no finding.
	if st := fixture.Statuses(t, "mem-dirty-low", "mem.hugepages.memlock"); len(st) != 0 {
		t.Errorf("without huge pages: %v", st)
	}
}

func TestMemHugePagesUnused(t *testing.T) {
	const id = "mem.hugepages.unused"
	memWant(t, "mem-dirty-low", id, memHost, check.Pass, "No explicit huge pages")
	memWant(t, "mem-hugepages-pg-on", id, memHost, check.Pass, "mapped or promised")
	fd := memWant(t, "mem-hugepages-unused", id, memHost, check.Fail, "2 of 2 pages of 1 GiB", "lost")
	if memSysfsValue(fd.Fix, "/sys/kernel/mm/hugepages/hugepages-1048576kB/nr_hugepages") != "0" {
		t.Errorf("fix %+v", fd.Fix)
	}
	// Idle pages that a database is waiting for are not surplus.
	fd = memWant(t, "mem-hugepages-mariadb", id, memHost, check.Fail, "not because they are surplus", "postgres:5432 needs 72")
	if len(fd.Fix.Sysctl) != 0 || fd.Fix.Manual == "" {
		t.Errorf("fix %+v", fd.Fix)
	}
	memWant(t, "mem-denied", id, memHost, check.Unknown)
}

func TestMemShmLimits(t *testing.T) {
	const id = "mem.shm_limits"
	memWant(t, "mem-dirty-low", id, "postgres:5432", check.Pass, "interlock")
	fd := memWant(t, "mem-shmmax-small", id, "postgres:5432", check.Fail, "kernel.shmmax (32 bytes)", "56 bytes")
	if memSysctlValue(fd.Fix, "kernel.shmmax") != "18446744073692774399" {
		t.Errorf("fix %+v", fd.Fix)
	}
	memWant(t, "mem-denied", id, "postgres:5432", check.Unknown)
	memWant(t, "mem-nonroot", id, "postgres:5432", check.Unknown, "permission denied")
}

func TestMemNUMABalancing(t *testing.T) {
	memWant(t, "mem-dirty-low", "mem.numa_balancing", memHost, check.Pass, "single NUMA node")
	memWant(t, "numa-2node-interleave", "mem.numa_balancing", memHost, check.Pass, "2-node")
	fd := memWant(t, "numa-2node", "mem.numa_balancing", memHost, check.Fail, "is 1 on this 2-node host")
	if memSysctlValue(fd.Fix, "kernel.numa_balancing") != "0" {
		t.Errorf("fix %+v", fd.Fix)
	}
	memWant(t, "mem-denied", "mem.numa_balancing", memHost, check.Unknown)
}

func TestNUMAInterleave(t *testing.T) {
	const id = "numa.interleave"
	memWant(t, "mem-dirty-low", id, "mysql:3306", check.Pass, "single-node")
	memWant(t, "numa-2node-interleave", id, "mysql:3306", check.Pass, "interleave:0-1")
	fd := memWant(t, "numa-2node", id, "mysql:3306", check.Fail, "innodb_numa_interleave = OFF")
	if len(fd.Fix.Config) != 1 || fd.Fix.Config[0].Key != "innodb_numa_interleave" || fd.Fix.Config[0].Value != "ON" {
		t.Errorf("fix %+v", fd.Fix)
	}
	// PostgreSQL and Redis have no interleave setting to judge.
	if st := fixture.Statuses(t, "numa-2node", id); len(st) != 1 {
		t.Errorf("subjects %v", st)
	}
	sub := fixture.Facts(t, "mongo-8").ByEngine(engine.MongoDB)[0].Name()
	memWant(t, "mongo-8", id, sub, check.Pass, "single-node")
	memWant(t, "mem-denied", id, "mysql:3306", check.Unknown)
}

func TestNUMAImbalance(t *testing.T) {
	const id = "numa.imbalance"
	sub := memPrivate(t, "numa-2node", engine.Redis)
	fd := memWant(t, "numa-2node", id, sub, check.Fail, "100 % of its", "node1 has 9.0 GiB free")
	if fd.Fix.Manual == "" || !strings.Contains(fd.Fix.Manual, "numactl --interleave=all") {
		t.Errorf("fix %+v", fd.Fix)
	}
	// Small processes on the same node are no problem.
	memWant(t, "numa-2node", id, "postgres:5432", check.Pass)
	memWant(t, "numa-2node-interleave", id, memPrivate(t, "numa-2node-interleave", engine.Redis), check.Pass, "50 %")
	memWant(t, "mem-dirty-low", id, "redis:6379", check.Pass, "single-node")
	memWant(t, "mem-denied", id, "redis:6379", check.Unknown)
}

// TestMemHugePagesSurplusBesideWaiting: 3000 pages reserved while one
// database waits for 72 of them. The pages beyond its need (and the ones
// in use) are surplus and the fix keeps only those.
func TestMemHugePagesSurplusBesideWaiting(t *testing.T) {
	const id = "mem.hugepages.unused"
	chk, _ := check.Lookup(id)
	grow := func(f *facts.Facts) {
		for i := range f.Memory.HugePages {
			if p := &f.Memory.HugePages[i]; p.SizeKB == 2048 {
				p.Total, p.Free, p.Reserved = 3000, 2999, 114
			}
		}
	}
	f := cloneFacts(t, "mem-hugepages-mariadb")
	grow(f)
	rs := chk.Run(f)
	if len(rs) != 1 || rs[0].Status != check.Fail || !strings.Contains(rs[0].Reason, "postgres:5432 needs 72") || !strings.Contains(rs[0].Reason, "2812 pages") {
		t.Fatalf("%+v", rs)
	}
	// Keep what is in use (1 mapped + 114 promised) and the 72 + 1 % the
	// waiting server needs.
	if v := memSysctlValue(rs[0].Fix, "vm.nr_hugepages"); v != "188" {
		t.Errorf("nr_hugepages %q, want 188: %+v", v, rs[0].Fix)
	}

}
