package check_test

import (
	"strconv"

	"github.com/dbhost/dbhost/internal/check"
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

// The baseline's three servers each have nofile 20000 (sum 60000);
// PostgreSQL runs max_connections 100, so its tasks need 131.
func init() {
	const b, pg, my, rd = "baseline", "postgres:5432", "mysql:3306", "redis:6379"
	const nofile, nproc = host.LimitNofile, host.LimitNproc
	addCases(
		// limits.nofile: 64000 soft and hard, and what the engine needs.
		tcase{name: "64000", base: b, mutate: rlimit(pg, nofile, 64000, 64000), id: "limits.nofile", subject: pg, want: check.Pass},
		tcase{name: "soft 63999", base: b, mutate: rlimit(pg, nofile, 63999, 64000), id: "limits.nofile", subject: pg, want: check.Fail},
		tcase{name: "hard 63999", base: b, mutate: rlimit(pg, nofile, 64000, 63999), id: "limits.nofile", subject: pg, want: check.Fail},
		tcase{name: "MySQL needing 5 x 20000", base: b, mutate: all(setting(my, "max_connections", "20000"), rlimit(my, nofile, 100000, 100000)), id: "limits.nofile", subject: my, want: check.Pass},
		tcase{name: "MySQL needing 5 x 20000, one short", base: b, mutate: all(setting(my, "max_connections", "20000"), rlimit(my, nofile, 99999, 100000)), id: "limits.nofile", subject: my, want: check.Fail},
		tcase{name: "Redis needing maxclients + 32", base: b, mutate: all(setting(rd, "maxclients", "70000"), rlimit(rd, nofile, 70032, 70032)), id: "limits.nofile", subject: rd, want: check.Pass},
		tcase{name: "Redis needing maxclients + 32, one short", base: b, mutate: all(setting(rd, "maxclients", "70000"), rlimit(rd, nofile, 70031, 70032)), id: "limits.nofile", subject: rd, want: check.Fail},

		// limits.nproc: at least 64000 and finite.
		tcase{name: "64000", base: b, mutate: rlimit(pg, nproc, 64000, 64000), id: "limits.nproc", subject: pg, want: check.Pass},
		tcase{name: "63999", base: b, mutate: rlimit(pg, nproc, 63999, 64000), id: "limits.nproc", subject: pg, want: check.Fail},
		tcase{name: "unlimited", base: b, mutate: rlimit(pg, nproc, host.Unlimited, host.Unlimited), id: "limits.nproc", subject: pg, want: check.Fail},

		// limits.systemd_unit: LimitNOFILE and LimitNPROC of 64000, finite.
		tcase{name: "64000", base: b, mutate: all(unitSetting(my, "LimitNOFILE", "64000"), unitSetting(my, "LimitNPROC", "64000")), id: "limits.systemd_unit", subject: my, want: check.Pass},
		tcase{name: "nofile 63999", base: b, mutate: all(unitSetting(my, "LimitNOFILE", "63999"), unitSetting(my, "LimitNPROC", "64000")), id: "limits.systemd_unit", subject: my, want: check.Fail},
		tcase{name: "nproc infinity", base: b, mutate: all(unitSetting(my, "LimitNOFILE", "64000"), unitSetting(my, "LimitNPROC", "infinity")), id: "limits.systemd_unit", subject: my, want: check.Fail},

		// limits.file_max: above the sum of the servers' soft nofile.
		tcase{name: "sum + 1", base: b, mutate: sysctl("fs.file-max", "60001"), id: "limits.file_max", subject: check.SubjectHost, want: check.Pass},
		tcase{name: "the sum", base: b, mutate: sysctl("fs.file-max", "60000"), id: "limits.file_max", subject: check.SubjectHost, want: check.Fail},
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
