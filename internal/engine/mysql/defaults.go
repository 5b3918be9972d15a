package mysql

import (
	"strconv"

	"github.com/dbhost/dbhost/internal/engine"
	"github.com/dbhost/dbhost/internal/host"
)

// applyDefaults fills, for a server read from files only, the compiled-in
// defaults of the settings dbhost's checks judge, where neither the option
// files nor the command line set them. They depend on flavor and version:
// the defaults moved over the years (innodb_flush_method became O_DIRECT in
// MariaDB 10.6 and MySQL 8.4; symbolic links went off in MySQL 8.0.2).
func applyDefaults(in *engine.Instance, lim host.Limits) {
	maria := in.Flavor == FlavorMariaDB
	v := in.Version
	at := func(min string) bool { return v != "" && engine.VersionAtLeast(v, min) }
	def := func(name, value string) {
		if _, ok := in.Setting(name); !ok {
			in.Set(name, value, "default")
		}
	}
	def("port", "3306")
	def("innodb_buffer_pool_size", "134217728")
	def("max_connections", "151")
	def("innodb_page_size", "16384")
	def("innodb_doublewrite", "ON")
	def("innodb_flush_log_at_trx_commit", "1")
	def("innodb_numa_interleave", "OFF")
	def("innodb_use_native_aio", "ON")
	def("large_pages", "OFF")
	def("memlock", "OFF")
	def("skip_name_resolve", "OFF")
	def("skip_networking", "OFF")
	def("skip_grant_tables", "OFF")
	def("tmpdir", "/tmp")
	def("innodb_log_group_home_dir", "./")
	def("max_binlog_size", "1073741824")
	def("wsrep_provider", "none")

	switch {
	case maria:
		def("bind_address", "") // empty: every interface
		def("symbolic_links", "ON")
		def("log_bin", "OFF")
		def("sync_binlog", "0")
		def("wsrep_on", "OFF")
		def("table_open_cache", "2000")
		if v != "" {
			def("innodb_flush_method", pick(at("10.6"), "O_DIRECT", "fsync"))
			def("innodb_log_file_size", pick(at("10.5"), "100663296", "50331648"))
		}
	default: // MySQL, Percona Server, Percona XtraDB Cluster
		def("bind_address", "*")
		def("wsrep_on", pick(in.Flavor == FlavorPXC, "ON", "OFF"))
		if v != "" {
			def("symbolic_links", pick(at("8.0.2"), "OFF", "ON"))
			def("log_bin", pick(at("8.0"), "ON", "OFF"))
			def("sync_binlog", pick(at("5.7.7"), "1", "0"))
			def("table_open_cache", pick(at("8.0"), "4000", "2000"))
			def("innodb_flush_method", pick(at("8.4"), "O_DIRECT", "fsync"))
			if at("8.0.30") {
				def("innodb_redo_log_capacity", "104857600")
			} else {
				def("innodb_log_file_size", "50331648")
			}
		}
	}

	// InnoDB's I/O budget: 200 IOPS until MySQL 8.4 raised it to 10000;
	// the maximum is 2000 or twice the capacity.
	ioc := pick(!maria && at("8.4"), "10000", "200")
	def("innodb_io_capacity", ioc)
	if c, ok := intSetting(in, "innodb_io_capacity"); ok {
		def("innodb_io_capacity_max", strconv.Itoa(max(2*c, pickInt(!maria && at("8.4"), 0, 2000))))
	}

	// back_log is autosized: MySQL 8.0 uses max_connections; MariaDB and
	// older MySQL 50 + max_connections/5, at most 900.
	if mc, ok := intSetting(in, "max_connections"); ok {
		if bl, set := intSetting(in, "back_log"); !set || bl < 0 {
			if !maria && at("8.0") {
				in.Set("back_log", strconv.Itoa(mc), "default")
			} else if maria || v != "" {
				in.Set("back_log", strconv.Itoa(min(50+mc/5, 900)), "default")
			}
		}
		// open_files_limit: the server asks for the largest of
		// 10 + max_connections + 2 * table_open_cache and 5 * max_connections,
		// keeps a higher soft limit it already has, and cannot exceed the
		// hard limit.
		if toc, ok := intSetting(in, "table_open_cache"); ok {
			if _, set := in.Setting("open_files_limit"); !set {
				want := uint64(max(10+mc+2*toc, 5*mc))
				if l, ok := lim[host.LimitNofile]; ok {
					switch {
					case l.Soft >= want:
						want = l.Soft
					case l.Hard < want:
						want = l.Hard
					}
				}
				in.Set("open_files_limit", strconv.FormatUint(want, 10), "default")
			}
		}
	}
}

func pick(cond bool, a, b string) string {
	if cond {
		return a
	}
	return b
}

func pickInt(cond bool, a, b int) int {
	if cond {
		return a
	}
	return b
}

// intSetting reads an integer setting (sizes with suffixes included).
func intSetting(in *engine.Instance, name string) (int, bool) {
	s, ok := in.Setting(name)
	if !ok {
		return 0, false
	}
	if n, err := strconv.Atoi(s.Value); err == nil {
		return n, true
	}
	if b, ok := ParseSize(s.Value); ok {
		return int(b), true
	}
	return 0, false
}
