package check_test

import (
	"strings"
	"testing"

	"github.com/dbhost/dbhost/internal/check"
	"github.com/dbhost/dbhost/internal/fixture"
)

// The machine's shared instances, present in every recording.
var hxShared = map[string]bool{"postgres:5432": true, "mysql:3306": true, "redis:6379": true}

// hxPrivate returns the subject of the private instance of an engine
// ("postgres") that a scenario started next to the shared ones.
func hxPrivate(t *testing.T, name, engine string) string {
	t.Helper()
	for _, in := range fixture.Facts(t, name).Instances {
		if string(in.Engine) == engine && !hxShared[in.Name()] {
			return in.Name()
		}
	}
	t.Fatalf("%s: no private %s instance", name, engine)
	return ""
}

// hxFind returns a finding and checks its status.
func hxFind(t *testing.T, name, id, subject string, want check.Status) check.Finding {
	t.Helper()
	fd, ok := fixture.Find(t, name, id, subject)
	if !ok {
		t.Fatalf("%s: no %s finding for %s", name, id, subject)
	}
	if fd.Status != want {
		t.Fatalf("%s: %s %s is %s, want %s: %s", name, id, subject, fd.Status, want, fd.Reason)
	}
	return fd
}

// hxHas fails unless every fragment is in s.
func hxHas(t *testing.T, what, s string, frags ...string) {
	t.Helper()
	for _, f := range frags {
		if !strings.Contains(s, f) {
			t.Errorf("%s lacks %q:\n%s", what, f, s)
		}
	}
}

func hxEvidence(fd check.Finding, key string) (check.Evidence, bool) {
	for _, e := range fd.Evidence {
		if e.Key == key {
			return e, true
		}
	}
	return check.Evidence{}, false
}

func TestLimitsNofile(t *testing.T) {
	pg := hxPrivate(t, "limits-nofile-1024", "postgres")
	fd := hxFind(t, "limits-nofile-1024", "limits.nofile", pg, check.Fail)
	hxHas(t, "reason", fd.Reason, "soft limit 1024 is below 64000", "hard limit 1024")
	if fd.Fix == nil || len(fd.Fix.Limits) != 2 || fd.Fix.Limits[0].Domain != "postgres" || fd.Fix.Limits[0].Value != "64000" {
		t.Errorf("fix limits: %+v", fd.Fix)
	}
	if len(fd.Fix.Runtime) == 0 || !strings.Contains(strings.Join(fd.Fix.Runtime, "\n"), "prlimit --pid") {
		t.Errorf("runtime: %v", fd.Fix.Runtime)
	}
	// The shared MariaDB runs with 20000 and its packaged unit exists: the
	// fix carries a drop-in for mariadb.service too.
	my := hxFind(t, "limits-nofile-1024", "limits.nofile", "mysql:3306", check.Fail)
	if len(my.Fix.Dropins) != 1 || my.Fix.Dropins[0].Unit != "mariadb.service" || my.Fix.Dropins[0].Key != "LimitNOFILE" {
		t.Errorf("mysql drop-in: %+v", my.Fix.Dropins)
	}
	hxHas(t, "mysql reason", my.Reason, "hard limit is what counts")

	pg = hxPrivate(t, "limits-nofile-65536", "postgres")
	fd = hxFind(t, "limits-nofile-65536", "limits.nofile", pg, check.Pass)
	hxHas(t, "reason", fd.Reason, "65536", "max_files_per_process")

	hxFind(t, "limits-unreadable", "limits.nofile", pg, check.Unknown)
}

func TestLimitsNproc(t *testing.T) {
	low := hxPrivate(t, "limits-nproc-low", "postgres")
	fd := hxFind(t, "limits-nproc-low", "limits.nproc", low, check.Fail)
	hxHas(t, "reason", fd.Reason, "4096 processes and threads (hard 4096)")
	if len(fd.Fix.Limits) != 2 || fd.Fix.Limits[0].Item != "nproc" || fd.Fix.Limits[0].Value != "64000" {
		t.Errorf("fix %+v", fd.Fix.Limits)
	}
	fd = hxFind(t, "limits-nofile-1024", "limits.nproc", "redis:6379", check.Pass)
	hxHas(t, "root note", fd.Reason, "does not enforce this limit")
	pg := hxPrivate(t, "limits-unreadable", "postgres")
	hxFind(t, "limits-unreadable", "limits.nproc", pg, check.Unknown)
}

func TestLimitsSystemdUnit(t *testing.T) {
	// The shared PostgreSQL cluster 15/main has Debian's template unit,
	// which sets no LimitNOFILE: systemd's default 1024 applies, whatever
	// limits.d says.
	fd := hxFind(t, "limits-unit-dropin", "limits.systemd_unit", "postgres:5432", check.Fail)
	hxHas(t, "reason", fd.Reason, "systemd built-in default", "1024", "99-dbhost-test.conf", "limits.d applies to PAM logins only", "postgresql@15-main.service")
	if len(fd.Fix.Dropins) == 0 || fd.Fix.Dropins[0].Unit != "postgresql@15-main.service" || fd.Fix.Dropins[0].Value != "64000" {
		t.Errorf("drop-in %+v", fd.Fix.Dropins)
	}
	hasDropin := false
	for _, f := range fd.Fix.Files {
		if f.Path == "/etc/systemd/system/postgresql@15-main.service.d/60-dbhost.conf" && strings.Contains(f.Content, "LimitNOFILE=64000") {
			hasDropin = true
		}
	}
	if !hasDropin {
		t.Errorf("no drop-in file rendered: %+v", fd.Fix.Files)
	}
	// The temporary drop-in raises mariadb.service's packaged 32768.
	fd = hxFind(t, "limits-unit-dropin", "limits.systemd_unit", "mysql:3306", check.Pass)
	if e, ok := hxEvidence(fd, "LimitNOFILE"); !ok || e.Value != "65536" || !strings.HasPrefix(e.Source, "/etc/systemd/system/mariadb.service.d/99-dbhost-test.conf") {
		t.Errorf("evidence %+v", fd.Evidence)
	}
	fd = hxFind(t, "limits-nofile-1024", "limits.systemd_unit", "mysql:3306", check.Fail)
	hxHas(t, "reason", fd.Reason, "LimitNOFILE=32768", "mariadb.service", "PID 1 is not systemd")
	// A private server is not judged by the distribution's unit.
	if _, ok := fixture.Find(t, "limits-nofile-1024", "limits.systemd_unit", hxPrivate(t, "limits-nofile-1024", "postgres")); ok {
		t.Error("the private PostgreSQL was matched to a packaged unit")
	}
}

func TestLimitsFileMax(t *testing.T) {
	fd := hxFind(t, "limits-nofile-1024", "limits.file_max", "host", check.Pass)
	hxHas(t, "reason", fd.Reason, "61024")
	fd = hxFind(t, "limits-filemax-low", "limits.file_max", "host", check.Fail)
	hxHas(t, "reason", fd.Reason, "fs.file-max (50000)", "(60000)")
	if len(fd.Fix.Sysctl) != 1 || fd.Fix.Sysctl[0].Value != "131072" {
		t.Errorf("fix %+v", fd.Fix.Sysctl)
	}
	hxFind(t, "limits-unreadable", "limits.file_max", "host", check.Unknown)
}

func TestLimitsOOMScoreAdj(t *testing.T) {
	pg := hxPrivate(t, "limits-pg-oom-protected", "postgres")
	hxFind(t, "limits-pg-oom-protected", "limits.oom_score_adj", pg, check.Pass)
	// The shared cluster was started by hand, unprotected.
	fd := hxFind(t, "limits-pg-oom-protected", "limits.oom_score_adj", "postgres:5432", check.Fail)
	hxHas(t, "reason", fd.Reason, "oom_score_adj 0")
	var env bool
	for _, d := range fd.Fix.Dropins {
		env = env || (d.Key == "Environment" && strings.Contains(d.Value, "PG_OOM_ADJUST_VALUE=0"))
	}
	if !env {
		t.Errorf("fix lacks PG_OOM_ADJUST_*: %+v", fd.Fix.Dropins)
	}
	fd = hxFind(t, "limits-pg-oom-children", "limits.oom_score_adj", pg, check.Fail)
	hxHas(t, "reason", fd.Reason, "so are its children", "PG_OOM_ADJUST_FILE")
	hxFind(t, "limits-unreadable", "limits.oom_score_adj", pg, check.Unknown)
}

func TestLimitsTasksMax(t *testing.T) {
	fd := hxFind(t, "limits-unit-dropin", "limits.tasks_max", "mysql:3306", check.Fail)
	hxHas(t, "reason", fd.Reason, "TasksMax=64", "215")
	if len(fd.Fix.Dropins) != 1 || fd.Fix.Dropins[0].Key != "TasksMax" || fd.Fix.Dropins[0].Value != "1024" {
		t.Errorf("fix %+v", fd.Fix.Dropins)
	}
	fd = hxFind(t, "limits-nofile-1024", "limits.tasks_max", "mysql:3306", check.Pass)
	hxHas(t, "reason", fd.Reason, "TasksMax=99%")
	fd = hxFind(t, "limits-nofile-1024", "limits.tasks_max", "postgres:5432", check.Pass)
	hxHas(t, "reason", fd.Reason, "TasksMax=15%", "4915")
}

func hxStatuses(t *testing.T, name, id string) map[string]check.Status {
	t.Helper()
	return fixture.Statuses(t, name, id)
}
