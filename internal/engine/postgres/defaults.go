package postgres

import (
	"github.com/dbhost/dbhost/internal/engine"
	"github.com/dbhost/dbhost/internal/host"
)

// compiledDefault is a setting's built-in value, used when neither the files
// nor the command line set it and the server cannot be asked. Only settings
// that checks judge are listed; since is the first major version the value
// applies to (the entry with the highest since not above the version wins).
type compiledDefault struct {
	name, value string
	since       int
}

var compiledDefaults = []compiledDefault{
	{"shared_buffers", "128MB", 0},
	{"huge_pages", "try", 0},
	{"huge_page_size", "0", 0},
	{"shared_memory_type", "mmap", 0},
	{"dynamic_shared_memory_type", "posix", 0},
	{"max_connections", "100", 0},
	{"random_page_cost", "4", 0},
	{"seq_page_cost", "1", 0},
	{"effective_io_concurrency", "1", 0},
	{"effective_io_concurrency", "16", 18},
	{"maintenance_io_concurrency", "10", 13},
	{"maintenance_io_concurrency", "16", 18},
	{"listen_addresses", "localhost", 0},
	{"port", "5432", 0},
	{"wal_level", "minimal", 0},
	{"wal_level", "replica", 10},
	{"effective_cache_size", "4GB", 0},
	{"work_mem", "4MB", 0},
	{"maintenance_work_mem", "64MB", 0},
	{"max_wal_size", "1GB", 0},
	{"wal_buffers", "-1", 0},
	{"fsync", "on", 0},
	{"full_page_writes", "on", 0},
	{"synchronous_commit", "on", 0},
	{"logging_collector", "off", 0},
	{"log_directory", "log", 10},
	{"log_directory", "pg_log", 0},
	// Debian's and RHEL's packages set /var/run/postgresql; upstream
	// builds use /tmp.
	{"unix_socket_directories", "/var/run/postgresql", 0},
}

// defaultsFor returns the compiled-in defaults for a major version. For an
// unknown version (0) it assumes 17, the last release before 18 changed
// some I/O defaults.
func defaultsFor(major int) map[string]string {
	if major == 0 {
		major = 17
	}
	out := map[string]string{}
	best := map[string]int{}
	for _, d := range compiledDefaults {
		if d.since > major {
			continue
		}
		if b, ok := best[d.name]; ok && b > d.since {
			continue
		}
		best[d.name] = d.since
		out[d.name] = d.value
	}
	return out
}

// redactValue hides the value of a password-bearing setting (and passwords
// inside connection strings) exactly as a snapshot's redaction does, so a
// live audit and an audit of its snapshot agree.
func redactValue(name, value string) string { return host.RedactValue(name, value) }

// applyDefaults fills settings no file or argument set.
func applyDefaults(in *engine.Instance, major int) {
	for name, v := range defaultsFor(major) {
		if _, ok := in.Setting(name); !ok {
			in.Set(name, v, "default")
		}
	}
}
