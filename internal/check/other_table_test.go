package check_test

import (
	"github.com/dbhost/dbhost/internal/check"
	"github.com/dbhost/dbhost/internal/engine"
	"github.com/dbhost/dbhost/internal/facts"
	"github.com/dbhost/dbhost/internal/host"
)

func clocksource(cur, avail string) func(*facts.Facts) {
	return func(f *facts.Facts) {
		f.Time.Clocksource = host.Reading{Value: cur, Source: "/sys/devices/system/clocksource/clocksource0/current_clocksource"}
		f.Time.Available = host.Reading{Value: avail, Source: "/sys/devices/system/clocksource/clocksource0/available_clocksource"}
	}
}

func mysqlUsers(subject string, users ...engine.MySQLUser) func(*facts.Facts) {
	return func(f *facts.Facts) { instance(f, subject).MySQL.Users = users }
}

func system(kernel, glibc string) func(*facts.Facts) {
	return func(f *facts.Facts) {
		if kernel != "" {
			f.System.Kernel.Value = kernel
		}
		if glibc != "" {
			f.System.Glibc.Value = glibc
		}
	}
}

// nodeShare gives an instance on the two-node host share (in thousandths)
// of its memory on node0, half of that node's RAM in all.
func nodeShare(subject string, perMille uint64) func(*facts.Facts) {
	return func(f *facts.Facts) {
		n0 := f.Memory.NUMA.Nodes[0].MemTotal
		top := n0 / 2
		instance(f, subject).Mem.NodeBytes = map[int]uint64{0: top, 1: top*1000/perMille - top}
	}
}

func init() {
	const h = check.SubjectHost
	const b, my = "baseline", "mysql:3306"
	root := func(host string) engine.MySQLUser {
		return engine.MySQLUser{User: "root", Host: host, Plugins: []string{"unix_socket"}}
	}
	addCases(
		// time.clocksource: a fast one, or a slow one when nothing faster
		// is offered; a virtual machine with tsc available should use it.
		tcase{name: "tsc", base: b, mutate: clocksource("tsc", "tsc kvm-clock hpet acpi_pm"), id: "time.clocksource", subject: h, want: check.Pass},
		tcase{name: "hpet although tsc is offered", base: b, mutate: clocksource("hpet", "tsc hpet acpi_pm"), id: "time.clocksource", subject: h, want: check.Fail},
		tcase{name: "hpet, nothing faster", base: b, mutate: clocksource("hpet", "hpet acpi_pm"), id: "time.clocksource", subject: h, want: check.Pass},
		tcase{name: "empty", base: b, mutate: clocksource("", "tsc hpet"), id: "time.clocksource", subject: h, want: check.Unknown},
		tcase{name: "not offered", base: b, mutate: clocksource("junk", "tsc hpet"), id: "time.clocksource", subject: h, want: check.Unknown},
		tcase{name: "unknown to dbhost", base: b, mutate: clocksource("junk", "junk"), id: "time.clocksource", subject: h, want: check.Unknown},

		// time.kernel_sync: an estimated error of at most 100 ms.
		tcase{name: "100 ms", base: "time-chrony", mutate: func(f *facts.Facts) { f.Time.Kernel.EstErrorUS = 100_000 }, id: "time.kernel_sync", subject: h, want: check.Pass},
		tcase{name: "100.001 ms", base: "time-chrony", mutate: func(f *facts.Facts) { f.Time.Kernel.EstErrorUS = 100_001 }, id: "time.kernel_sync", subject: h, want: check.Fail},

		// kernel.mongodb_minimum: Linux 2.6.36 and glibc 2.13.
		tcase{name: "2.6.36 and 2.13", base: "mongo-8", mutate: system("2.6.36", "2.13"), id: "kernel.mongodb_minimum", subject: "mongodb:39101", want: check.Pass},
		tcase{name: "2.6.35", base: "mongo-8", mutate: system("2.6.35", "2.13"), id: "kernel.mongodb_minimum", subject: "mongodb:39101", want: check.Fail},
		tcase{name: "glibc 2.12", base: "mongo-8", mutate: system("2.6.36", "2.12"), id: "kernel.mongodb_minimum", subject: "mongodb:39101", want: check.Fail},

		// kernel.glibc_collation: glibc 2.28 or later for non-C databases.
		tcase{name: "2.27", base: "pg-collation-mismatch", mutate: system("", "2.27"), id: "kernel.glibc_collation", subject: "postgres:35419", want: check.Fail},

		// MySQL hardening.
		tcase{name: "an anonymous account", base: b, mutate: mysqlUsers(my, root("localhost"), engine.MySQLUser{User: "", Host: "localhost", Plugins: []string{"mysql_native_password"}}), id: "mysql.hardening.anonymous_users", subject: my, want: check.Fail},
		tcase{name: "named accounts", base: b, mutate: mysqlUsers(my, root("localhost"), engine.MySQLUser{User: "app", Host: "10.%", Plugins: []string{"mysql_native_password"}}), id: "mysql.hardening.anonymous_users", subject: my, want: check.Pass},
		tcase{name: "root from anywhere", base: b, mutate: mysqlUsers(my, root("localhost"), root("%")), id: "mysql.hardening.remote_root", subject: my, want: check.Fail},
		tcase{name: "root from ::1", base: b, mutate: mysqlUsers(my, root("localhost"), root("::1"), root("127.0.0.1")), id: "mysql.hardening.remote_root", subject: my, want: check.Pass},
		tcase{name: "an empty password", base: b, mutate: mysqlUsers(my, engine.MySQLUser{User: "app", Host: "localhost", EmptyPassword: true, Plugins: []string{"mysql_native_password"}}), id: "mysql.hardening.empty_passwords", subject: my, want: check.Fail},
		tcase{name: "socket login, no password", base: b, mutate: mysqlUsers(my, root("localhost")), id: "mysql.hardening.empty_passwords", subject: my, want: check.Pass},
		tcase{name: "a test database", base: b, mutate: func(f *facts.Facts) { instance(f, my).MySQL.Databases = []string{"mysql", "test"} }, id: "mysql.hardening.test_db", subject: my, want: check.Fail},
		tcase{name: "no test database", base: b, mutate: func(f *facts.Facts) { instance(f, my).MySQL.Databases = []string{"mysql", "testing"} }, id: "mysql.hardening.test_db", subject: my, want: check.Pass},
		tcase{name: "skip-grant-tables", base: b, mutate: setting(my, "skip_grant_tables", "ON"), id: "mysql.hardening.skip_grant_tables", subject: my, want: check.Fail},
		tcase{name: "off, listening on the network", base: b, mutate: all(setting(my, "skip_name_resolve", "OFF"), listenOn(my, "0.0.0.0")), id: "mysql.hardening.skip_name_resolve", subject: my, want: check.Fail},
		tcase{name: "off, loopback only", base: b, mutate: setting(my, "skip_name_resolve", "OFF"), id: "mysql.hardening.skip_name_resolve", subject: my, want: check.Pass},
		tcase{name: "symbolic links off", base: b, mutate: setting(my, "symbolic_links", "OFF"), id: "mysql.hardening.symbolic_links", subject: my, want: check.Pass},
		tcase{name: "fsync", base: b, mutate: setting(my, "innodb_flush_method", "fsync"), id: "mysql.flush_method", subject: my, want: check.Fail},
		tcase{name: "O_DIRECT_NO_FSYNC", base: b, mutate: setting(my, "innodb_flush_method", "O_DIRECT_NO_FSYNC"), id: "mysql.flush_method", subject: my, want: check.Pass},

		// redis.persistence: an AOF is fsynced (everysec or always).
		tcase{name: "appendfsync everysec", base: "redis-open", mutate: setting("redis:43709", "appendfsync", "everysec"), id: "redis.persistence", subject: "redis:43709", want: check.Pass},
		tcase{name: "appendfsync no", base: "redis-open", mutate: setting("redis:43709", "appendfsync", "no"), id: "redis.persistence", subject: "redis:43709", want: check.Fail},

		// mongodb.storage_engine: WiredTiger.
		tcase{name: "mmapv1", base: "mongo-8", mutate: func(f *facts.Facts) { instance(f, "mongodb:39101").Mongo.StorageEngine = "mmapv1" }, id: "mongodb.storage_engine", subject: "mongodb:39101", want: check.Fail},

		// numa.imbalance: 80 % of a process's memory on one node (that is
		// a quarter or more of the node) while another node is free.
		tcase{name: "79.9 %", base: "numa-2node", mutate: nodeShare("redis:39037", 799), id: "numa.imbalance", subject: "redis:39037", want: check.Pass},
		tcase{name: "80 %", base: "numa-2node", mutate: nodeShare("redis:39037", 800), id: "numa.imbalance", subject: "redis:39037", want: check.Fail},

		// pg.config_errors and pg.settings_source.
		tcase{name: "an include loop", base: b, mutate: func(f *facts.Facts) {
			in := instance(f, "postgres:5432")
			in.ConfigErrors = append(in.ConfigErrors, "include loop: /etc/postgresql/15/main/conf.d/a.conf includes itself")
		}, id: "pg.config_errors", subject: "postgres:5432", want: check.Fail},
		tcase{name: "settings from files", base: b, mutate: func(f *facts.Facts) {
			in := instance(f, "postgres:5432")
			in.SettingsSource, in.LiveErr = "files", "peer authentication failed"
		}, id: "pg.settings_source", subject: "postgres:5432", want: check.Fail},

		// sysctl.drift: the running value is the persisted one.
		tcase{name: "pid_max as persisted", base: b, mutate: sysctl("kernel.pid_max", "4194304"), id: "sysctl.drift", subject: h, want: check.Pass},
		tcase{name: "pid_max one less", base: b, mutate: sysctl("kernel.pid_max", "4194303"), id: "sysctl.drift", subject: h, want: check.Fail},
		tcase{name: "nothing parses", base: b, mutate: func(f *facts.Facts) {
			f.Persist.Sysctl = nil
			f.Persist.SysctlSkipped = []string{"/etc/sysctl.d/99-x.conf:1"}
		}, id: "sysctl.drift", subject: h, want: check.Unknown},
	)
}
