package mysql

import (
	"testing"

	"github.com/dbhost/dbhost/internal/engine"
)

// TestMemoryPlan: MySQLTuner's terms with each flavor's defaults, the
// binary log cache only with the binary log, proposals in 128M chunks and
// never under 5M.
func TestMemoryPlan(t *testing.T) {
	in := &engine.Instance{Engine: engine.MySQL, Flavor: FlavorMariaDB, SettingsSource: "live"}
	in.Set("innodb_buffer_pool_size", "1073741824", "live")
	in.Set("max_connections", "200", "live")
	in.Set("tmp_table_size", "64M", "live")
	in.Set("max_heap_table_size", "32M", "live")
	plan := detector{}.Memory(in)
	pool, _ := plan.MainCache()
	if pool.Bytes != 1<<30 || pool.Default() || plan.N != 200 || plan.Factor != 1 {
		t.Errorf("pool %+v, %d connections", pool, plan.N)
	}
	if s, _ := plan.Part("sort_buffer_size"); s.Bytes != 2<<20 || !s.Default() || !s.PerConn {
		t.Errorf("MariaDB sort_buffer_size %+v", s)
	}
	if tmp, _ := plan.Part("max_heap_table_size"); tmp.Bytes != 32<<20 {
		t.Errorf("temporary table %+v: the smaller of the two", tmp)
	}
	if _, ok := plan.Part("binlog_cache_size"); ok {
		t.Error("binlog_cache_size counted without the binary log")
	}
	in.Set("log_bin", "ON", "live")
	if _, ok := (detector{}).Memory(in).Part("binlog_cache_size"); !ok {
		t.Error("binlog_cache_size not counted with the binary log")
	}
	for b, want := range map[uint64]string{1: "5M", 100 << 20: "100M", 200 << 20: "128M", 13900 << 20: "13824M", 2 << 30: "2G"} {
		if got := pool.Propose(b); got != want {
			t.Errorf("Propose(%d) = %q, want %q", b, got, want)
		}
	}
}
