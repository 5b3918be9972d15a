package check_test

import (
	"strconv"
	"strings"
	"testing"

	"github.com/dbhost/dbhost/internal/budget"
	"github.com/dbhost/dbhost/internal/check"
	"github.com/dbhost/dbhost/internal/facts"
	"github.com/dbhost/dbhost/internal/host"
)

// only keeps one instance: the host becomes that server's alone.
func only(subject string) func(*facts.Facts) {
	return func(f *facts.Facts) { f.Instances = []*facts.Instance{instance(f, subject)} }
}

// ramMiB sets MemTotal.
func ramMiB(n uint64) func(*facts.Facts) { return meminfo(map[string]uint64{"MemTotal": n << 10}) }

// cgLimit puts an instance in a cgroup of version v with a memory limit.
func cgLimit(subject string, v int, bytes uint64) func(*facts.Facts) {
	return func(f *facts.Facts) {
		in := instance(f, subject)
		in.Cgroup.Version, in.Cgroup.Path = v, "/dbhost-test-"+subject
		in.Cgroup.MemoryMax = host.Reading{Value: strconv.FormatUint(bytes, 10), Source: "memory.max"}
	}
}

// hugePool reserves n pages of 2 MiB.
func hugePool(n int64) func(*facts.Facts) {
	return func(f *facts.Facts) {
		f.Memory.HugePages = []facts.HugePagePool{{SizeKB: 2048, Default: true, Total: n, Free: n}}
	}
}

// shareOf sets the user's shares (--budget).
func shareOf(spec string) func(*facts.Facts) {
	return func(f *facts.Facts) {
		sh, err := budget.Parse(spec)
		if err != nil {
			panic(err)
		}
		f.Budget = budget.Shares{Shares: sh, Source: "--budget"}
	}
}

// Recorded sides of each sizing check (size-* fixtures from
// tools/record/scenarios_sizing.go), then both sides of every threshold on
// the baseline host (23.5 GiB, the shared PostgreSQL 15, MariaDB and Redis)
// made the only database with 10 GiB of RAM: less the OS reserve (10 %),
// a budget of 9 GiB (9437184 kB) makes the arithmetic exact. A recorded
// server tuned for the whole host passes only with a share the user gives
// it: its neighbours have theirs.
func init() {
	const b = "baseline"
	const pg, my, rd = "postgres:5432", "mysql:3306", "redis:6379"
	const mg = "mongodb:39355"
	ram := ramMiB(10240)
	addCases(
		tcase{name: "recorded pass", base: "size-pg-tuned", mutate: shareOf("postgres:37531=17GiB"), id: "pg.shared_buffers", subject: "postgres:37531", want: check.Pass},
		tcase{name: "recorded fail", base: "size-shared", id: "pg.shared_buffers", subject: "postgres:33291", want: check.Fail, says: []string{"postgres:33291's share", "weight 2 of 10"}},
		tcase{name: "recorded pass", base: "size-pg-tuned", mutate: shareOf("postgres:37531=17GiB"), id: "pg.effective_cache_size", subject: "postgres:37531", want: check.Pass},
		tcase{name: "recorded fail", base: "size-shared", id: "pg.effective_cache_size", subject: "postgres:33291", want: check.Fail, says: []string{"more than the server has"}},
		tcase{name: "recorded pass", base: "size-pg-tuned", id: "pg.work_mem", subject: "postgres:37531", want: check.Pass},
		tcase{name: "recorded fail", base: "size-pg-workmem", id: "pg.work_mem", subject: "postgres:33343", want: check.Fail, says: []string{"x max_connections 500 x 3 = 1.5 TiB"}},
		tcase{name: "recorded pass", base: "size-pg-tuned", mutate: shareOf("postgres:37531=17GiB"), id: "mem.db_budget", subject: "postgres:37531", want: check.Pass},
		tcase{name: "recorded share", base: "size-pg-tuned", mutate: shareOf("postgres:37531=17GiB"), id: "mem.db_budget", subject: "host", want: check.Pass, says: []string{"as --budget sets it (postgres:37531=17GiB)"}},
		tcase{name: "recorded fail", base: "size-pg-workmem", id: "mem.db_budget", subject: "postgres:33343", want: check.Fail},
		tcase{name: "recorded pass", base: "baseline", id: "mysql.buffer_pool", subject: my, want: check.Pass, says: []string{"may be deliberate"}},
		tcase{name: "recorded fail", base: "size-shared", id: "mysql.buffer_pool", subject: "mysql:40287", want: check.Fail, says: []string{"over 75%"}},
		tcase{name: "recorded pass", base: "container-memlimit-ok", id: "redis.maxmemory", subject: "redis:38239", want: check.Pass},
		tcase{name: "recorded fail", base: "size-shared", id: "redis.maxmemory", subject: "redis:44819", want: check.Fail, says: []string{"another database"}},
		tcase{name: "recorded pass", base: "mongo-6", mutate: shareOf(mg + "=16GiB"), id: "mongodb.wt_cache", subject: mg, want: check.Pass},
		tcase{name: "recorded fail", base: "size-mongo-cache", id: "mongodb.wt_cache", subject: "mongodb:45197", want: check.Fail},

		// The baseline itself: 128 MB of shared_buffers is flagged, with
		// the budget's arithmetic and the share's rule.
		tcase{name: "baseline's 128MB", base: b, id: "pg.shared_buffers", subject: pg, want: check.Fail, says: []string{"1.5%", "other processes and the kernel", "OS and page cache reserve", "weight 2 of 5"}},

		// The user's share replaces the rule's: exact figures.
		tcase{name: "a share in bytes", base: b, mutate: all(shareOf(pg+"=1GiB"), setting(pg, "shared_buffers", "104857kB")), id: "pg.shared_buffers", subject: pg, want: check.Fail, says: []string{"of its share of 1.0 GiB", "under 10%"}},
		tcase{name: "a share in bytes", base: b, mutate: all(shareOf(pg+"=1GiB"), setting(pg, "shared_buffers", "104858kB")), id: "pg.shared_buffers", subject: pg, want: check.Pass},
		tcase{name: "a share naming no instance", base: b, mutate: shareOf("redis:9999=1GiB"), id: "mem.db_budget", subject: "host", want: check.Fail, says: []string{"redis:9999: no such instance on this host"}},

		// pg.shared_buffers between 10% and 40% of a 9 GiB budget.
		tcase{name: "under 10%", base: b, mutate: all(only(pg), ram, setting(pg, "shared_buffers", "943718kB")), id: "pg.shared_buffers", subject: pg, want: check.Fail, says: []string{"under 10%"}},
		tcase{name: "10%", base: b, mutate: all(only(pg), ram, setting(pg, "shared_buffers", "943719kB")), id: "pg.shared_buffers", subject: pg, want: check.Pass, says: []string{"only database"}},
		tcase{name: "40%", base: b, mutate: all(only(pg), ram, setting(pg, "shared_buffers", "3774873kB")), id: "pg.shared_buffers", subject: pg, want: check.Pass},
		tcase{name: "over 40%", base: b, mutate: all(only(pg), ram, setting(pg, "shared_buffers", "3774874kB")), id: "pg.shared_buffers", subject: pg, want: check.Fail, says: []string{"over 40%"}},
		tcase{name: "a cgroup limit shrinks the budget", base: b, mutate: all(only(pg), setting(pg, "shared_buffers", "256MB"), cgLimit(pg, 2, 512<<20)), id: "pg.shared_buffers", subject: pg, want: check.Fail, says: []string{"cgroup's memory limit 512.0 MiB"}},
		tcase{name: "a pool no database uses shrinks the budget", base: b, mutate: all(only(pg), ram, setting(pg, "huge_pages", "off"), setting(pg, "shared_buffers", "3774873kB"), hugePool(1)), id: "pg.shared_buffers", subject: pg, want: check.Fail, says: []string{"huge pages no database uses (pool 2.0 MiB, theirs 0 B) 2.0 MiB"}},
		tcase{name: "a pool PostgreSQL will use is its memory", base: b, mutate: all(only(pg), ram, setting(pg, "huge_pages", "try"), setting(pg, "shared_buffers", "3774873kB"), hugePool(100)), id: "pg.shared_buffers", subject: pg, want: check.Pass},

		// pg.work_mem: 9 GiB less shared_buffers 2 GiB and 3 x 64 MiB
		// maintenance_work_mem leaves 6976 MiB; / (100 x 3) = 23811.4 kB.
		tcase{name: "fits", base: b, mutate: all(only(pg), ram, setting(pg, "shared_buffers", "2GB"), setting(pg, "work_mem", "23811kB")), id: "pg.work_mem", subject: pg, want: check.Pass},
		tcase{name: "1 kB over", base: b, mutate: all(only(pg), ram, setting(pg, "shared_buffers", "2GB"), setting(pg, "work_mem", "23812kB")), id: "pg.work_mem", subject: pg, want: check.Fail, says: []string{"6.8 GiB left"}},
		tcase{name: "more connections", base: b, mutate: all(only(pg), ram, setting(pg, "shared_buffers", "2GB"), setting(pg, "work_mem", "23811kB"), setting(pg, "max_connections", "101")), id: "pg.work_mem", subject: pg, want: check.Fail},
		// shared_buffers outside 10-40% counts at its planned 25%: 2304 MiB.
		tcase{name: "beside the planned shared_buffers", base: b, mutate: all(only(pg), ram, setting(pg, "work_mem", "23811kB")), id: "pg.work_mem", subject: pg, want: check.Fail, says: []string{"6.6 GiB left"}},

		// pg.effective_cache_size between 25% and 100% of 9 GiB.
		tcase{name: "under 25%", base: b, mutate: all(only(pg), ram, setting(pg, "effective_cache_size", "2359295kB")), id: "pg.effective_cache_size", subject: pg, want: check.Fail, says: []string{"underrates"}},
		tcase{name: "25%", base: b, mutate: all(only(pg), ram, setting(pg, "effective_cache_size", "2359296kB")), id: "pg.effective_cache_size", subject: pg, want: check.Pass},
		tcase{name: "100%", base: b, mutate: all(only(pg), ram, setting(pg, "effective_cache_size", "9437184kB")), id: "pg.effective_cache_size", subject: pg, want: check.Pass},
		tcase{name: "over 100%", base: b, mutate: all(only(pg), ram, setting(pg, "effective_cache_size", "9437185kB")), id: "pg.effective_cache_size", subject: pg, want: check.Fail, says: []string{"more than the server has"}},

		// mem.db_budget: the baseline PostgreSQL plans 320 MiB fixed plus
		// 4 MiB x max_connections x 3: 741 connections fit 9 GiB, 742 not.
		tcase{name: "fits", base: b, mutate: all(only(pg), ram, setting(pg, "max_connections", "741")), id: "mem.db_budget", subject: pg, want: check.Pass, says: []string{"plans 9.0 GiB"}},
		tcase{name: "connections over", base: b, mutate: all(only(pg), ram, setting(pg, "max_connections", "742")), id: "mem.db_budget", subject: pg, want: check.Fail, says: []string{"every connection is busy"}},
		tcase{name: "fixed memory over", base: b, mutate: all(only(pg), ram, setting(pg, "shared_buffers", "9025MB")), id: "mem.db_budget", subject: pg, want: check.Fail, says: []string{"fixed memory alone"}},
		tcase{name: "others named", base: b, id: "mem.db_budget", subject: "host", want: check.Pass, says: []string{"postgres:5432's share", "mysql:3306's share", "redis:6379's share"}},
		tcase{name: "unbounded Redis", base: b, id: "mem.db_budget", subject: rd, want: check.Unknown, says: []string{"redis.maxmemory"}},
		tcase{name: "MemTotal unreadable", base: b, mutate: func(f *facts.Facts) { f.Memory.Meminfo.MemTotal = nil }, id: "mem.db_budget", subject: pg, want: check.Unknown, says: []string{"MemTotal"}},

		// mysql.buffer_pool: at most 75% of 9 GiB; at least 10% when alone.
		tcase{name: "75%", base: b, mutate: all(only(my), ram, setting(my, "innodb_buffer_pool_size", "7247757312")), id: "mysql.buffer_pool", subject: my, want: check.Pass},
		tcase{name: "over 75%", base: b, mutate: all(only(my), ram, setting(my, "innodb_buffer_pool_size", "7247757313")), id: "mysql.buffer_pool", subject: my, want: check.Fail, says: []string{"over 75%"}},
		tcase{name: "10% alone", base: b, mutate: all(only(my), ram, setting(my, "innodb_buffer_pool_size", "966367642")), id: "mysql.buffer_pool", subject: my, want: check.Pass},
		tcase{name: "under 10% alone", base: b, mutate: all(only(my), ram, setting(my, "innodb_buffer_pool_size", "966367641")), id: "mysql.buffer_pool", subject: my, want: check.Fail, says: []string{"only database"}},
		tcase{name: "under 10% in a cgroup", base: b, mutate: all(only(my), cgLimit(my, 1, 1<<30), setting(my, "innodb_buffer_pool_size", "107374182")), id: "mysql.buffer_pool", subject: my, want: check.Pass},

		// redis.maxmemory: without persistence three quarters of the
		// share (6.75 GiB of 9), with it half (4.5 GiB).
		tcase{name: "unbounded alone", base: b, mutate: only(rd), id: "redis.maxmemory", subject: rd, want: check.Pass},
		tcase{name: "unbounded in a cgroup", base: b, mutate: all(only(rd), cgLimit(rd, 2, 512<<20)), id: "redis.maxmemory", subject: rd, want: check.Fail},
		tcase{name: "three quarters", base: b, mutate: all(only(rd), ram, setting(rd, "save", ""), setting(rd, "maxmemory", "7247757312")), id: "redis.maxmemory", subject: rd, want: check.Pass, says: []string{"noeviction refuses writes"}},
		tcase{name: "over three quarters", base: b, mutate: all(only(rd), ram, setting(rd, "save", ""), setting(rd, "maxmemory", "7247757313")), id: "redis.maxmemory", subject: rd, want: check.Fail},
		tcase{name: "half with persistence", base: b, mutate: all(only(rd), ram, setting(rd, "appendonly", "yes"), setting(rd, "maxmemory", "4831838208")), id: "redis.maxmemory", subject: rd, want: check.Pass},
		tcase{name: "over half with persistence", base: b, mutate: all(only(rd), ram, setting(rd, "appendonly", "yes"), setting(rd, "maxmemory", "4831838209")), id: "redis.maxmemory", subject: rd, want: check.Fail, says: []string{"fork may copy up to the data set"}},
		tcase{name: "over its share", base: b, mutate: all(ram, setting(rd, "maxmemory", "4gb"), setting(rd, "maxmemory-policy", "allkeys-lru")), id: "redis.maxmemory", subject: rd, want: check.Fail, says: []string{"allkeys-lru evicts any key", "weight 1 of 5"}},

		// mongodb.wt_cache: the default follows the cgroup where the version
		// reads it, else the host's 23.5 GiB.
		tcase{name: "default, v1 limit read by 6.0", base: "mongo-6", mutate: all(only(mg), cgLimit(mg, 1, 2<<30)), id: "mongodb.wt_cache", subject: mg, want: check.Pass, says: []string{"cgroup's memory limit"}},
		tcase{name: "default, v1 limit ignored by 3.6", base: "mongo-6", mutate: all(only(mg), cgLimit(mg, 1, 2<<30), func(f *facts.Facts) { instance(f, mg).Version = "3.6.23" }), id: "mongodb.wt_cache", subject: mg, want: check.Fail, says: []string{"does not read a cgroup v1"}},
		tcase{name: "default, v2 limit, 6.0", base: "mongo-6", mutate: all(only(mg), cgLimit(mg, 2, 2<<30)), id: "mongodb.wt_cache", subject: mg, want: check.Fail},
		tcase{name: "default, v2 limit, 7.0", base: "mongo-6", mutate: all(only(mg), cgLimit(mg, 2, 2<<30), func(f *facts.Facts) { instance(f, mg).Version = "7.0.2" }), id: "mongodb.wt_cache", subject: mg, want: check.Pass},
		tcase{name: "set to 75%", base: "mongo-6", mutate: all(only(mg), ram, setting(mg, "storage.wiredTiger.engineConfig.cacheSizeGB", "6.75")), id: "mongodb.wt_cache", subject: mg, want: check.Pass},
		tcase{name: "set over 75%", base: "mongo-6", mutate: all(only(mg), ram, setting(mg, "storage.wiredTiger.engineConfig.cacheSizeGB", "6.76")), id: "mongodb.wt_cache", subject: mg, want: check.Fail},
	)
}

// TestSizingNeverBelowMinimum: on a host too small for a server's minimum
// main cache, no value is proposed (timescaledb-tune once wrote work_mem
// = 41kB, which PostgreSQL refuses; a value below the share's room does
// not fit either) and mem.db_budget fails saying so. Where the minimum
// fits, work_mem stays at PostgreSQL's 64kB.
func TestSizingNeverBelowMinimum(t *testing.T) {
	const pg, my, rd = "postgres:5432", "mysql:3306", "redis:6379"
	cases := []struct {
		subject, id string
		mutate      func(*facts.Facts)
	}{
		{pg, "pg.shared_buffers", nil},
		{my, "mysql.buffer_pool", nil},
		{rd, "redis.maxmemory", setting(rd, "maxmemory", "1gb")},
	}
	for _, c := range cases {
		f := cloneFacts(t, "baseline")
		all(only(c.subject), func(f *facts.Facts) { v := uint64(256); f.Memory.Meminfo.MemTotal = &v })(f)
		if c.mutate != nil {
			c.mutate(f)
		}
		if got := proposals(f)[c.id+"/"+c.subject]; got != "" {
			t.Errorf("%s on a 256 kB host proposes %q, a value that cannot fit", c.id, got)
		}
		b, _ := check.Lookup("mem.db_budget")
		found := false
		for _, r := range b.Run(f) {
			if r.Subject == c.subject {
				found = r.Status == check.Fail && strings.Contains(r.Reason, "below what the server needs at least")
			}
		}
		if !found {
			t.Errorf("%s on a 256 kB host: mem.db_budget does not fail for the minimum", c.subject)
		}
	}
	// A 256 MiB host (a budget of 192 MiB) with 10000 connections: not
	// even work_mem's 64kB fits, so none is proposed, and the fix says to
	// lower max_connections.
	f := cloneFacts(t, "baseline")
	all(only(pg), ramMiB(256), setting(pg, "max_connections", "10000"))(f)
	if got := proposals(f); got["pg.work_mem/"+pg] != "" || got["pg.shared_buffers/"+pg] != "48MB" {
		t.Errorf("256 MiB host: %v", got)
	}
	c, _ := check.Lookup("pg.work_mem")
	if r := c.Run(f); len(r) != 1 || r[0].Fix == nil || !strings.Contains(r[0].Fix.Manual, "lower max_connections") {
		t.Errorf("256 MiB host with 10000 connections: %+v", r)
	}
	m := cloneFacts(t, "mongo-6")
	all(only("mongodb:39355"), ramMiB(64), setting("mongodb:39355", "storage.wiredTiger.engineConfig.cacheSizeGB", "1"))(m)
	if got := proposals(m)["mongodb.wt_cache/mongodb:39355"]; got != "" {
		t.Errorf("64 MiB MongoDB host proposes cacheSizeGB %q, below its 0.25 minimum's room", got)
	}
}

// proposals runs the sizing checks and returns each failure's proposed
// value by check/subject.
func proposals(f *facts.Facts) map[string]string {
	out := map[string]string{}
	for _, id := range []string{"pg.work_mem", "pg.shared_buffers", "pg.effective_cache_size", "mysql.buffer_pool", "redis.maxmemory", "mongodb.wt_cache", "mem.db_budget"} {
		c, _ := check.Lookup(id)
		for _, r := range c.Run(f) {
			if r.Status == check.Fail && r.Fix != nil && len(r.Fix.Config) > 0 {
				out[id+"/"+r.Subject] = r.Fix.Config[0].Value
			}
		}
	}
	return out
}

// TestSizingFixNamesOverride: work_mem given on the command line wins over
// any file, so the fix says to remove it there.
func TestSizingFixNamesOverride(t *testing.T) {
	c, _ := check.Lookup("pg.work_mem")
	for _, r := range c.Run(cloneFacts(t, "size-pg-workmem")) {
		if r.Subject != "postgres:33343" {
			continue
		}
		// 2MB: its share beside the recording's other databases.
		if r.Fix == nil || len(r.Fix.Config) != 1 || r.Fix.Config[0].Value != "2MB" || !strings.Contains(r.Fix.Manual, "command line (-c work_mem=...)") {
			t.Errorf("fix %+v", r.Fix)
		}
		return
	}
	t.Error("no result for postgres:33343")
}
