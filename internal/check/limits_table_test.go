package check_test

import (
	"strconv"

	"github.com/dbhost/dbhost/internal/check"
	"github.com/dbhost/dbhost/internal/engine"
	"github.com/dbhost/dbhost/internal/facts"
	"github.com/dbhost/dbhost/internal/host"
)

// rlimit sets an instance's effective limit (/proc/PID/limits).
func rlimit(subject, item string, soft, hard uint64) func(*facts.Facts) {
	return func(f *facts.Facts) {
		in := instance(f, subject)
		if in.Limits == nil {
			in.Limits = host.Limits{}
		}
		in.Limits[item] = host.Rlimit{Soft: soft, Hard: hard}
	}
}

// unitSetting sets a [Service] setting of an instance's unit.
func unitSetting(subject, key, value string) func(*facts.Facts) {
	return func(f *facts.Facts) {
		u := instance(f, subject).Unit
		if u.Service == nil {
			u.Service = map[string]facts.UnitSetting{}
		}
		u.Service[key] = facts.UnitSetting{Value: value, Source: "table case"}
	}
}

// unset removes a setting, so that the engine's default applies.
func unset(subject, name string) func(*facts.Facts) {
	return func(f *facts.Facts) { delete(instance(f, subject).Settings, engine.NormalizeName(name)) }
}

// settingFrom sets a setting as read from a configuration file.
func settingFrom(subject, name, value, source string) func(*facts.Facts) {
	return func(f *facts.Facts) { instance(f, subject).Set(name, value, source) }
}

func oomScore(subject string, postmaster int, children ...int) func(*facts.Facts) {
	return func(f *facts.Facts) {
		in := instance(f, subject)
		in.OOMScore = host.Reading{Value: strconv.Itoa(postmaster), Source: "/proc/PID/oom_score_adj"}
		in.ChildOOM = nil
		for i, c := range children {
			in.ChildOOM = append(in.ChildOOM, facts.ProcReading{PID: 1000 + i, Comm: "postgres", Reading: host.Reading{Value: strconv.Itoa(c), Source: "/proc/PID/oom_score_adj"}})
		}
	}
}

// The baseline's three servers each have nofile 20000. PostgreSQL needs
// max_files_per_process (1000) per process and runs 131 tasks at
// max_connections 100; MariaDB asks for 10 + 151 + 1 + 2 x 2000 = 4162
// descriptors and runs 215 tasks; Redis needs maxclients 10000 + 32. The
// host-wide sum is 1000 x 131 + 4162 + 10032 = 145194.
func init() {
	const b, pg, my, rd = "baseline", "postgres:5432", "mysql:3306", "redis:6379"
	const nofile, nproc = host.LimitNofile, host.LimitNproc
	mg := "mongodb:39355"
	addCases(
		// limits.nofile: what each engine's configuration needs.
		tcase{name: "PostgreSQL 1000 at 1000", base: b, mutate: rlimit(pg, nofile, 1000, 1000), id: "limits.nofile", subject: pg, want: check.Pass},
		tcase{name: "PostgreSQL 1000, soft 999", base: b, mutate: rlimit(pg, nofile, 999, 1000), id: "limits.nofile", subject: pg, want: check.Fail},
		tcase{name: "PostgreSQL 1000, hard 999", base: b, mutate: rlimit(pg, nofile, 1000, 999), id: "limits.nofile", subject: pg, want: check.Fail},
		tcase{name: "PostgreSQL 1000 at 4096 (the flat rule failed it)", base: b, mutate: rlimit(pg, nofile, 4096, 4096), id: "limits.nofile", subject: pg, want: check.Pass,
			says: []string{"max_files_per_process 1000"}},
		tcase{name: "PostgreSQL 5000 at 4096", base: b, mutate: all(setting(pg, "max_files_per_process", "5000"), rlimit(pg, nofile, 4096, 4096)), id: "limits.nofile", subject: pg, want: check.Fail,
			says: []string{"below 5000"}},
		tcase{name: "PostgreSQL default shown as default", base: b, mutate: all(unset(pg, "max_files_per_process"), rlimit(pg, nofile, 999, 999)), id: "limits.nofile", subject: pg, want: check.Fail,
			says: []string{"max_files_per_process 1000 (default)"}},
		tcase{name: "MySQL needing 5 x 20001", base: b, mutate: all(setting(my, "max_connections", "20000"), rlimit(my, nofile, 100005, 100005)), id: "limits.nofile", subject: my, want: check.Pass},
		tcase{name: "MySQL needing 5 x 20001, one short", base: b, mutate: all(setting(my, "max_connections", "20000"), rlimit(my, nofile, 100004, 100005)), id: "limits.nofile", subject: my, want: check.Fail,
			says: []string{"5 x connections = 100005", "lowers table_open_cache and max_connections"}},
		tcase{name: "MySQL 4162 at 4162", base: b, mutate: rlimit(my, nofile, 4162, 4162), id: "limits.nofile", subject: my, want: check.Pass},
		tcase{name: "MySQL 4162 at 4161", base: b, mutate: rlimit(my, nofile, 4161, 4161), id: "limits.nofile", subject: my, want: check.Fail,
			says: []string{"= 4162 descriptors"}},
		tcase{name: "MySQL open_files_limit from a file counts", base: b, mutate: all(settingFrom(my, "open_files_limit", "30000", "/etc/mysql/my.cnf:3"), rlimit(my, nofile, 20000, 20000)), id: "limits.nofile", subject: my, want: check.Fail,
			says: []string{"open_files_limit 30000"}},
		tcase{name: "Redis maxclients 100000 at 65536", base: b, mutate: all(setting(rd, "maxclients", "100000"), rlimit(rd, nofile, 65536, 65536)), id: "limits.nofile", subject: rd, want: check.Fail,
			says: []string{"maxclients 100000 + 32 reserved = 100032"}},
		tcase{name: "Redis maxclients 100000 at 100032", base: b, mutate: all(setting(rd, "maxclients", "100000"), rlimit(rd, nofile, 100032, 100032)), id: "limits.nofile", subject: rd, want: check.Pass},
		tcase{name: "Redis maxclients 100000, soft 100031", base: b, mutate: all(setting(rd, "maxclients", "100000"), rlimit(rd, nofile, 100031, 100032)), id: "limits.nofile", subject: rd, want: check.Fail},
		tcase{name: "Redis default shown as default", base: b, mutate: all(unset(rd, "maxclients"), rlimit(rd, nofile, 10032, 10032)), id: "limits.nofile", subject: rd, want: check.Pass,
			says: []string{"maxclients 10000 (default) + 32 reserved = 10032"}},
		// A server that lowered its setting at start to fit a small limit
		// reports the lowered value live; the file still asks for more at
		// the next start, so the need is the configured value.
		tcase{name: "Redis lowered maxclients to fit 1024", base: b, mutate: all(settingFrom(rd, "maxclients", "10000", "/etc/redis/redis.conf:7"), setting(rd, "maxclients", "992"), rlimit(rd, nofile, 1024, 1024)), id: "limits.nofile", subject: rd, want: check.Fail,
			says: []string{"maxclients 10000 (/etc/redis/redis.conf:7; the server runs with 992", "= 10032 descriptors"}},
		tcase{name: "Redis live value equal to the file", base: b, mutate: all(settingFrom(rd, "maxclients", "992", "/etc/redis/redis.conf:7"), setting(rd, "maxclients", "992"), rlimit(rd, nofile, 1024, 1024)), id: "limits.nofile", subject: rd, want: check.Pass},
		tcase{name: "MySQL lowered max_connections to fit", base: b, mutate: all(settingFrom(my, "max_connections", "5000", "/etc/mysql/my.cnf:4"), setting(my, "max_connections", "151"), rlimit(my, nofile, 4162, 4162)), id: "limits.nofile", subject: my, want: check.Fail,
			says: []string{"max_connections 5000 (/etc/mysql/my.cnf:4; the server runs with 151"}},
		tcase{name: "MongoDB 64000", base: "mongo-6", mutate: rlimit(mg, nofile, 64000, 64000), id: "limits.nofile", subject: mg, want: check.Pass},
		tcase{name: "MongoDB 63999", base: "mongo-6", mutate: rlimit(mg, nofile, 63999, 64000), id: "limits.nofile", subject: mg, want: check.Fail},

		// limits.nproc: the tasks at max_connections, finite.
		tcase{name: "131", base: b, mutate: rlimit(pg, nproc, 131, 131), id: "limits.nproc", subject: pg, want: check.Pass},
		tcase{name: "130", base: b, mutate: rlimit(pg, nproc, 130, 131), id: "limits.nproc", subject: pg, want: check.Fail},
		tcase{name: "unlimited", base: b, mutate: rlimit(pg, nproc, host.Unlimited, host.Unlimited), id: "limits.nproc", subject: pg, want: check.Fail},
		// Moot for a server running as root: the kernel does not enforce
		// it for uid 0 (the shared Redis runs as root).
		tcase{name: "root, 100", base: "baseline", mutate: rlimit("redis:6379", nproc, 100, 100), id: "limits.nproc", subject: "redis:6379", want: check.Pass, says: []string{"moot", "security.db_as_root"}},
		tcase{name: "root, unlimited", base: "baseline", mutate: rlimit("redis:6379", nproc, host.Unlimited, host.Unlimited), id: "limits.nproc", subject: "redis:6379", want: check.Pass, says: []string{"moot"}},
		tcase{name: "same Redis as its own user, 100", base: "baseline", mutate: all(rlimit("redis:6379", nproc, 100, 100), func(f *facts.Facts) { instance(f, "redis:6379").UID = 999 }), id: "limits.nproc", subject: "redis:6379", want: check.Fail},
		tcase{name: "MongoDB without maxIncomingConnections 64000", base: "mongo-6", mutate: rlimit(mg, nproc, 64000, 64000), id: "limits.nproc", subject: mg, want: check.Pass},
		tcase{name: "MongoDB without maxIncomingConnections 63999", base: "mongo-6", mutate: rlimit(mg, nproc, 63999, 63999), id: "limits.nproc", subject: mg, want: check.Fail},

		// limits.systemd_unit: the same needs, in the unit.
		tcase{name: "4162 and 215", base: b, mutate: all(unitSetting(my, "LimitNOFILE", "4162"), unitSetting(my, "LimitNPROC", "215")), id: "limits.systemd_unit", subject: my, want: check.Pass},
		tcase{name: "nofile 4161", base: b, mutate: all(unitSetting(my, "LimitNOFILE", "4161"), unitSetting(my, "LimitNPROC", "215")), id: "limits.systemd_unit", subject: my, want: check.Fail},
		tcase{name: "nproc 214", base: b, mutate: all(unitSetting(my, "LimitNOFILE", "4162"), unitSetting(my, "LimitNPROC", "214")), id: "limits.systemd_unit", subject: my, want: check.Fail},
		tcase{name: "nproc infinity", base: b, mutate: all(unitSetting(my, "LimitNOFILE", "64000"), unitSetting(my, "LimitNPROC", "infinity")), id: "limits.systemd_unit", subject: my, want: check.Fail},
		tcase{name: "limits.d does not reach the unit", base: "limits-unit-dropin", mutate: setting(pg, "max_files_per_process", "4000"), id: "limits.systemd_unit", subject: pg, want: check.Fail,
			says: []string{"below the 4000", "limits.d applies to PAM logins only"}},

		// limits.file_max: above what the servers may open together.
		tcase{name: "sum + 1", base: b, mutate: sysctl("fs.file-max", "145195"), id: "limits.file_max", subject: check.SubjectHost, want: check.Pass},
		tcase{name: "the sum", base: b, mutate: sysctl("fs.file-max", "145194"), id: "limits.file_max", subject: check.SubjectHost, want: check.Fail},
		tcase{name: "PostgreSQL's soft limit below its need counts", base: b, mutate: all(rlimit(pg, nofile, 500, 500), sysctl("fs.file-max", "145194")), id: "limits.file_max", subject: check.SubjectHost, want: check.Pass,
			says: []string{"500 per process (soft limit) x 131 processes = 65500"}},
		tcase{name: "-1 is no value", base: b, mutate: sysctl("fs.file-max", "-1"), id: "limits.file_max", subject: check.SubjectHost, want: check.Unknown},

		// limits.oom_score_adj: the postmaster below 0, its children not.
		tcase{name: "postmaster 0", base: b, mutate: oomScore(pg, 0, 0), id: "limits.oom_score_adj", subject: pg, want: check.Fail},
		tcase{name: "postmaster -1, children 0", base: b, mutate: oomScore(pg, -1, 0), id: "limits.oom_score_adj", subject: pg, want: check.Pass},
		tcase{name: "postmaster -1000, a child -1", base: b, mutate: oomScore(pg, -1000, 0, -1), id: "limits.oom_score_adj", subject: pg, want: check.Fail},
		tcase{name: "-1001 is no value", base: b, mutate: oomScore(pg, -1001, 0), id: "limits.oom_score_adj", subject: pg, want: check.Unknown},

		// limits.tasks_max: what max_connections needs.
		tcase{name: "131", base: b, mutate: unitSetting(pg, "TasksMax", "131"), id: "limits.tasks_max", subject: pg, want: check.Pass},
		tcase{name: "130", base: b, mutate: unitSetting(pg, "TasksMax", "130"), id: "limits.tasks_max", subject: pg, want: check.Fail},
	)
}
