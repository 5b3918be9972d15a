package mysql

import (
	"fmt"
	"strings"

	"github.com/dbhost/dbhost/internal/engine"
)

// bufferPoolMin is the smallest innodb_buffer_pool_size MySQL accepts
// (MariaDB's is smaller); the pool is sized in chunks of
// innodb_buffer_pool_chunk_size (128M by default), so proposals are
// rounded down to 128M where they can be.
const (
	bufferPoolMin   = 5 << 20
	bufferPoolChunk = 128 << 20
)

// memDefault is a buffer's compiled-in default for MySQL and MariaDB.
type memDefault struct {
	key, mysql, maria string
	perConn           bool
}

// The buffers MySQLTuner counts for "maximum possible memory": global ones
// the server keeps, and per-thread ones each connection may hold at once.
var memDefaults = []memDefault{
	{"innodb_log_buffer_size", "16M", "16M", false},
	{"key_buffer_size", "8M", "128M", false},
	{"query_cache_size", "0", "1M", false},
	{"aria_pagecache_buffer_size", "", "128M", false},
	{"read_buffer_size", "128K", "128K", true},
	{"read_rnd_buffer_size", "256K", "256K", true},
	{"sort_buffer_size", "256K", "2M", true},
	{"join_buffer_size", "256K", "256K", true},
	{"thread_stack", "1M", "292K", true},
}

// Memory follows MySQLTuner's "maximum possible memory usage": the buffer
// pool and the other global buffers, an in-memory temporary table, and the
// per-thread buffers times max_connections.
func (detector) Memory(in *engine.Instance) engine.MemoryPlan {
	maria := in.Flavor == FlavorMariaDB
	size := func(s engine.Setting) (uint64, bool) { return ParseSize(s.Value) }
	pool := engine.SettingPart(in, "innodb_buffer_pool_size", "128M", size)
	pool.Cache, pool.Min = true, bufferPoolMin
	pool.Format = formatPool
	parts := []engine.MemPart{pool}
	for _, d := range memDefaults {
		def := d.mysql
		if maria {
			def = d.maria
		}
		if _, set := in.Setting(d.key); !set && def == "" {
			continue
		}
		p := engine.SettingPart(in, d.key, def, size)
		p.PerConn = d.perConn
		parts = append(parts, p)
	}
	parts = append(parts, tmpTable(in, size))
	if binlogOn(in) {
		p := engine.SettingPart(in, "binlog_cache_size", "32K", size)
		p.PerConn, p.Why = true, "with the binary log on"
		parts = append(parts, p)
	}
	conns, known := in.Uint("max_connections", 151)
	plan := engine.MemoryPlan{Parts: parts, Conns: in.UintInput("max_connections", known, conns), N: conns, Factor: 1,
		FactorWhy: "each connection's thread may hold every per-thread buffer at once (MySQLTuner's maximum possible memory)"}
	return plan.Unknowable(engine.FilesGap(in))
}

// tmpTable is the largest in-memory temporary table: the smaller of
// tmp_table_size and max_heap_table_size.
func tmpTable(in *engine.Instance, size func(engine.Setting) (uint64, bool)) engine.MemPart {
	t := engine.SettingPart(in, "tmp_table_size", "16M", size)
	h := engine.SettingPart(in, "max_heap_table_size", "16M", size)
	if h.Known && (!t.Known || h.Bytes < t.Bytes) {
		t = h
	}
	t.Why = "the largest in-memory temporary table (the smaller of tmp_table_size and max_heap_table_size)"
	return t
}

func binlogOn(in *engine.Instance) bool {
	v := strings.ToUpper(strings.TrimSpace(in.SettingValue("log_bin")))
	return v != "" && v != "OFF" && v != "0"
}

// formatPool renders a buffer pool size: whole chunks of 128M where it is
// that large, else whole megabytes.
func formatPool(b uint64) string {
	if b >= bufferPoolChunk {
		b -= b % bufferPoolChunk
	}
	if b >= 1<<30 && b%(1<<30) == 0 {
		return fmt.Sprintf("%dG", b>>30)
	}
	return fmt.Sprintf("%dM", b>>20)
}
