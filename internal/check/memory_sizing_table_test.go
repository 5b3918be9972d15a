package check_test

import (
	"strconv"
	"strings"
	"testing"

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

// Recorded sides of each sizing check (size-* fixtures from
// tools/record/scenarios_sizing.go), then both sides of every threshold on
// the baseline host (23.5 GiB, the shared PostgreSQL 15, MariaDB and Redis)
// made the only database with a chosen RAM: a budget of 1 GiB makes the
// arithmetic exact.
func init() {
	const b = "baseline"
	const pg, my, rd = "postgres:5432", "mysql:3306", "redis:6379"
	const mg = "mongodb:39355"
	addCases(
		tcase{name: "recorded pass", base: "size-pg-tuned", id: "pg.shared_buffers", subject: "postgres:37531", want: check.Pass},
		tcase{name: "recorded fail", base: "size-shared", id: "pg.shared_buffers", subject: "postgres:33291", want: check.Fail, says: []string{"mysql:40287 20.3 GiB"}},
		tcase{name: "recorded pass", base: "size-pg-tuned", id: "pg.effective_cache_size", subject: "postgres:37531", want: check.Pass},
		tcase{name: "recorded fail", base: "size-shared", id: "pg.effective_cache_size", subject: "postgres:33291", want: check.Fail, says: []string{"more than the server has"}},
		tcase{name: "recorded pass", base: "size-pg-tuned", id: "pg.work_mem", subject: "postgres:37531", want: check.Pass},
		tcase{name: "recorded fail", base: "size-pg-workmem", id: "pg.work_mem", subject: "postgres:33343", want: check.Fail, says: []string{"x max_connections 500 x 3 = 1.5 TiB"}},
		tcase{name: "recorded pass", base: "size-pg-tuned", id: "mem.db_budget", subject: "postgres:37531", want: check.Pass},
		tcase{name: "recorded fail", base: "size-pg-workmem", id: "mem.db_budget", subject: "postgres:33343", want: check.Fail},
		tcase{name: "recorded pass", base: "baseline", id: "mysql.buffer_pool", subject: my, want: check.Pass, says: []string{"may be deliberate"}},
		tcase{name: "recorded fail", base: "size-shared", id: "mysql.buffer_pool", subject: "mysql:40287", want: check.Fail, says: []string{"over 75%"}},
		tcase{name: "recorded pass", base: "container-memlimit-ok", id: "redis.maxmemory", subject: "redis:38239", want: check.Pass},
		tcase{name: "recorded fail", base: "size-shared", id: "redis.maxmemory", subject: "redis:44819", want: check.Fail, says: []string{"another database"}},
		tcase{name: "recorded pass", base: "mongo-6", id: "mongodb.wt_cache", subject: mg, want: check.Pass},
		tcase{name: "recorded fail", base: "size-mongo-cache", id: "mongodb.wt_cache", subject: "mongodb:45197", want: check.Fail},

		// The baseline itself: 128 MB of shared_buffers on 23.5 GiB is
		// flagged, with the other databases named in the budget.
		tcase{name: "baseline's 128MB", base: b, id: "pg.shared_buffers", subject: pg, want: check.Fail, says: []string{"0.5%", "mysql:3306", "redis:6379"}},

		// pg.shared_buffers between 10% and 40% of a 1 GiB budget.
		tcase{name: "under 10%", base: b, mutate: all(only(pg), ramMiB(1024), setting(pg, "shared_buffers", "104857kB")), id: "pg.shared_buffers", subject: pg, want: check.Fail, says: []string{"under 10%"}},
		tcase{name: "10%", base: b, mutate: all(only(pg), ramMiB(1024), setting(pg, "shared_buffers", "104858kB")), id: "pg.shared_buffers", subject: pg, want: check.Pass, says: []string{"only database"}},
		tcase{name: "40%", base: b, mutate: all(only(pg), ramMiB(1024), setting(pg, "shared_buffers", "419430kB")), id: "pg.shared_buffers", subject: pg, want: check.Pass},
		tcase{name: "over 40%", base: b, mutate: all(only(pg), ramMiB(1024), setting(pg, "shared_buffers", "419431kB")), id: "pg.shared_buffers", subject: pg, want: check.Fail, says: []string{"over 40%"}},
		tcase{name: "a cgroup limit shrinks the budget", base: b, mutate: all(only(pg), setting(pg, "shared_buffers", "256MB"), cgLimit(pg, 2, 512<<20)), id: "pg.shared_buffers", subject: pg, want: check.Fail, says: []string{"cgroup's memory limit 512.0 MiB"}},
		tcase{name: "the huge page pool shrinks the budget", base: b, mutate: all(only(pg), ramMiB(1024), setting(pg, "shared_buffers", "419430kB"), hugePool(1)), id: "pg.shared_buffers", subject: pg, want: check.Fail, says: []string{"huge page pool 2.0 MiB"}},

		// pg.work_mem: 1 GiB less shared_buffers 128 MiB and 3 x 64 MiB
		// maintenance_work_mem leaves 704 MiB; / (100 x 3) = 2402.99 kB.
		tcase{name: "fits", base: b, mutate: all(only(pg), ramMiB(1024), setting(pg, "work_mem", "2402kB")), id: "pg.work_mem", subject: pg, want: check.Pass},
		tcase{name: "1 kB over", base: b, mutate: all(only(pg), ramMiB(1024), setting(pg, "work_mem", "2403kB")), id: "pg.work_mem", subject: pg, want: check.Fail, says: []string{"704.0 MiB left"}},
		tcase{name: "more connections", base: b, mutate: all(only(pg), ramMiB(1024), setting(pg, "work_mem", "2402kB"), setting(pg, "max_connections", "101")), id: "pg.work_mem", subject: pg, want: check.Fail},

		// pg.effective_cache_size between 25% and 100% of 1 GiB.
		tcase{name: "under 25%", base: b, mutate: all(only(pg), ramMiB(1024), setting(pg, "effective_cache_size", "262143kB")), id: "pg.effective_cache_size", subject: pg, want: check.Fail, says: []string{"underrates"}},
		tcase{name: "25%", base: b, mutate: all(only(pg), ramMiB(1024), setting(pg, "effective_cache_size", "262144kB")), id: "pg.effective_cache_size", subject: pg, want: check.Pass},
		tcase{name: "100%", base: b, mutate: all(only(pg), ramMiB(1024), setting(pg, "effective_cache_size", "1048576kB")), id: "pg.effective_cache_size", subject: pg, want: check.Pass},
		tcase{name: "over 100%", base: b, mutate: all(only(pg), ramMiB(1024), setting(pg, "effective_cache_size", "1048577kB")), id: "pg.effective_cache_size", subject: pg, want: check.Fail, says: []string{"more than the server has"}},

		// mem.db_budget: the baseline PostgreSQL plans 320 MiB fixed plus
		// 4 MiB x 100 x 3 = 1200 MiB for connections.
		tcase{name: "fits", base: b, mutate: all(only(pg), ramMiB(1520)), id: "mem.db_budget", subject: pg, want: check.Pass, says: []string{"plans 1.5 GiB"}},
		tcase{name: "connections over", base: b, mutate: all(only(pg), ramMiB(1519)), id: "mem.db_budget", subject: pg, want: check.Fail, says: []string{"every connection is busy"}},
		tcase{name: "fixed memory over", base: b, mutate: all(only(pg), ramMiB(319)), id: "mem.db_budget", subject: pg, want: check.Fail, says: []string{"fixed memory alone"}},
		tcase{name: "huge page pool", base: b, mutate: all(only(pg), ramMiB(1524), hugePool(2)), id: "mem.db_budget", subject: pg, want: check.Pass},
		tcase{name: "huge page pool over", base: b, mutate: all(only(pg), ramMiB(1524), hugePool(3)), id: "mem.db_budget", subject: pg, want: check.Fail},
		tcase{name: "others named", base: b, id: "mem.db_budget", subject: pg, want: check.Pass, says: []string{"mysql:3306 417.0 MiB", "redis:6379"}},
		tcase{name: "unbounded Redis", base: b, id: "mem.db_budget", subject: rd, want: check.Unknown, says: []string{"redis.maxmemory"}},
		tcase{name: "MemTotal unreadable", base: b, mutate: func(f *facts.Facts) { f.Memory.Meminfo.MemTotal = nil }, id: "mem.db_budget", subject: pg, want: check.Unknown, says: []string{"MemTotal"}},

		// mysql.buffer_pool: at most 75% of 1 GiB; at least 10% when alone.
		tcase{name: "75%", base: b, mutate: all(only(my), ramMiB(1024), setting(my, "innodb_buffer_pool_size", "805306368")), id: "mysql.buffer_pool", subject: my, want: check.Pass},
		tcase{name: "over 75%", base: b, mutate: all(only(my), ramMiB(1024), setting(my, "innodb_buffer_pool_size", "805306369")), id: "mysql.buffer_pool", subject: my, want: check.Fail, says: []string{"over 75%"}},
		tcase{name: "10% alone", base: b, mutate: all(only(my), ramMiB(1024), setting(my, "innodb_buffer_pool_size", "107374183")), id: "mysql.buffer_pool", subject: my, want: check.Pass},
		tcase{name: "under 10% alone", base: b, mutate: all(only(my), ramMiB(1024), setting(my, "innodb_buffer_pool_size", "107374182")), id: "mysql.buffer_pool", subject: my, want: check.Fail, says: []string{"only database"}},
		tcase{name: "under 10% in a cgroup", base: b, mutate: all(only(my), cgLimit(my, 1, 1<<30), setting(my, "innodb_buffer_pool_size", "107374182")), id: "mysql.buffer_pool", subject: my, want: check.Pass},

		// redis.maxmemory.
		tcase{name: "unbounded alone", base: b, mutate: only(rd), id: "redis.maxmemory", subject: rd, want: check.Pass},
		tcase{name: "unbounded in a cgroup", base: b, mutate: all(only(rd), cgLimit(rd, 2, 512<<20)), id: "redis.maxmemory", subject: rd, want: check.Fail},
		tcase{name: "the whole budget", base: b, mutate: all(only(rd), ramMiB(1024), setting(rd, "maxmemory", "1073741824")), id: "redis.maxmemory", subject: rd, want: check.Pass, says: []string{"noeviction refuses writes"}},
		tcase{name: "over the budget", base: b, mutate: all(only(rd), ramMiB(1024), setting(rd, "maxmemory", "1073741825")), id: "redis.maxmemory", subject: rd, want: check.Fail},
		tcase{name: "over its share", base: b, mutate: all(ramMiB(1024), setting(rd, "maxmemory", "1gb"), setting(rd, "maxmemory-policy", "allkeys-lru")), id: "redis.maxmemory", subject: rd, want: check.Fail, says: []string{"allkeys-lru evicts any key", "postgres:5432"}},

		// mongodb.wt_cache: the default follows the cgroup where the version
		// reads it, else the host's 23.5 GiB.
		tcase{name: "default, v1 limit read by 6.0", base: "mongo-6", mutate: all(only(mg), cgLimit(mg, 1, 2<<30)), id: "mongodb.wt_cache", subject: mg, want: check.Pass, says: []string{"cgroup's memory limit"}},
		tcase{name: "default, v1 limit ignored by 3.6", base: "mongo-6", mutate: all(only(mg), cgLimit(mg, 1, 2<<30), func(f *facts.Facts) { instance(f, mg).Version = "3.6.23" }), id: "mongodb.wt_cache", subject: mg, want: check.Fail, says: []string{"does not read a cgroup v1"}},
		tcase{name: "default, v2 limit, 6.0", base: "mongo-6", mutate: all(only(mg), cgLimit(mg, 2, 2<<30)), id: "mongodb.wt_cache", subject: mg, want: check.Fail},
		tcase{name: "default, v2 limit, 7.0", base: "mongo-6", mutate: all(only(mg), cgLimit(mg, 2, 2<<30), func(f *facts.Facts) { instance(f, mg).Version = "7.0.2" }), id: "mongodb.wt_cache", subject: mg, want: check.Pass},
		tcase{name: "set to 75%", base: "mongo-6", mutate: all(only(mg), ramMiB(4096), setting(mg, "storage.wiredTiger.engineConfig.cacheSizeGB", "3")), id: "mongodb.wt_cache", subject: mg, want: check.Pass},
		tcase{name: "set over 75%", base: "mongo-6", mutate: all(only(mg), ramMiB(4096), setting(mg, "storage.wiredTiger.engineConfig.cacheSizeGB", "3.01")), id: "mongodb.wt_cache", subject: mg, want: check.Fail},
	)
}

// TestSizingNeverBelowMinimum: on hosts too small for any sensible value,
// every proposal is the server's minimum, written in a unit it accepts
// (timescaledb-tune once wrote work_mem = 41kB, which PostgreSQL refuses).
func TestSizingNeverBelowMinimum(t *testing.T) {
	const pg, my, rd = "postgres:5432", "mysql:3306", "redis:6379"
	cases := []struct {
		subject string
		mutate  func(*facts.Facts)
		want    map[string]string
	}{
		// A 256 kB host: a quarter is 64kB, under shared_buffers' 128kB;
		// nothing is left for work_mem.
		{pg, nil, map[string]string{"pg.shared_buffers": "128kB", "pg.work_mem": "64kB", "pg.effective_cache_size": "192kB"}},
		{my, nil, map[string]string{"mysql.buffer_pool": "5M"}},
		{rd, setting(rd, "maxmemory", "1gb"), map[string]string{"redis.maxmemory": "1mb"}},
	}
	for _, c := range cases {
		f := cloneFacts(t, "baseline")
		all(only(c.subject), func(f *facts.Facts) { v := uint64(256); f.Memory.Meminfo.MemTotal = &v })(f)
		if c.mutate != nil {
			c.mutate(f)
		}
		got := proposals(f)
		for id, v := range c.want {
			if got[id+"/"+c.subject] != v {
				t.Errorf("%s on a 256 kB host proposes %q, want %q (all: %v)", id, got[id+"/"+c.subject], v, got)
			}
		}
	}
	// A 256 MiB host with 10000 connections: work_mem stays at 64kB and
	// the fix says to lower max_connections.
	f := cloneFacts(t, "baseline")
	all(only(pg), ramMiB(256), setting(pg, "max_connections", "10000"))(f)
	if got := proposals(f); got["pg.work_mem/"+pg] != "64kB" || got["pg.shared_buffers/"+pg] != "64MB" {
		t.Errorf("256 MiB host: %v", got)
	}
	c, _ := check.Lookup("pg.work_mem")
	if r := c.Run(f); len(r) != 1 || r[0].Fix == nil || !strings.Contains(r[0].Fix.Manual, "lower max_connections") {
		t.Errorf("256 MiB host with 10000 connections: %+v", r)
	}
	m := cloneFacts(t, "mongo-6")
	all(only("mongodb:39355"), ramMiB(64), setting("mongodb:39355", "storage.wiredTiger.engineConfig.cacheSizeGB", "1"))(m)
	if got := proposals(m)["mongodb.wt_cache/mongodb:39355"]; got != "0.25" {
		t.Errorf("64 MiB MongoDB host proposes cacheSizeGB %q, want 0.25", got)
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
		if r.Fix == nil || len(r.Fix.Config) != 1 || r.Fix.Config[0].Value != "15MB" || !strings.Contains(r.Fix.Manual, "command line (-c work_mem=...)") {
			t.Errorf("fix %+v", r.Fix)
		}
		return
	}
	t.Error("no result for postgres:33343")
}
