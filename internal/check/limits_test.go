package check_test

import (
	"reflect"
	"strings"
	"testing"

	"github.com/dbhost/dbhost/internal/check"
	"github.com/dbhost/dbhost/internal/fix"
	"github.com/dbhost/dbhost/internal/fixture"
	"github.com/dbhost/dbhost/internal/host"
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

// TestLimitsNofile: each server is judged by what its own configuration
// needs, not by a flat 64000.
func TestLimitsNofile(t *testing.T) {
	// max_files_per_process 4000 under a limit of 1024: PostgreSQL only
	// probes the limit at start, so the fix needs a restart, says so, and
	// offers no prlimit.
	pg := hxPrivate(t, "limits-pg-files-short", "postgres")
	fd := hxFind(t, "limits-pg-files-short", "limits.nofile", pg, check.Fail)
	hxHas(t, "reason", fd.Reason, "soft limit 1024 is below 4000", "hard limit 1024", "max_files_per_process 4000", "lowers what it keeps open")
	if fd.Fix == nil || len(fd.Fix.Limits) != 2 || fd.Fix.Limits[0].Domain != "postgres" || fd.Fix.Limits[0].Value != "4096" {
		t.Fatalf("fix limits: %+v", fd.Fix)
	}
	if fd.Fix.Restart == nil || len(fd.Fix.Runtime) != 0 {
		t.Errorf("restart %+v, runtime %q: PostgreSQL needs a restart and nothing else", fd.Fix.Restart, fd.Fix.Runtime)
	}
	hxHas(t, "manual", fd.Fix.Manual, "RESTART NEEDED", "set_max_safe_fds", "maintenance window")

	// The default 1000 fits a limit of 1024 (the flat rule failed it).
	pg = hxPrivate(t, "limits-nofile-1024", "postgres")
	fd = hxFind(t, "limits-nofile-1024", "limits.nofile", pg, check.Pass)
	hxHas(t, "reason", fd.Reason, "may open 1024 files", "max_files_per_process 1000")

	// MariaDB and Redis at 20000 have what their configuration asks for;
	// the reason shows the arithmetic.
	my := hxFind(t, "limits-nofile-1024", "limits.nofile", "mysql:3306", check.Pass)
	hxHas(t, "mysql reason", my.Reason, "10 + max_connections 151 + extra_max_connections 1 + 2 x table_open_cache 2000 = 4162", "= 4162 descriptors")
	rd := hxFind(t, "limits-nofile-1024", "limits.nofile", "redis:6379", check.Pass)
	hxHas(t, "redis reason", rd.Reason, "maxclients 10000 + 32 reserved = 10032")

	pg = hxPrivate(t, "limits-nofile-65536", "postgres")
	fd = hxFind(t, "limits-nofile-65536", "limits.nofile", pg, check.Pass)
	hxHas(t, "reason", fd.Reason, "65536", "max_files_per_process")

	// MongoDB's documented floor.
	mg := hxPrivate(t, "mongo-6", "mongodb")
	fd = hxFind(t, "mongo-6", "limits.nofile", mg, check.Fail)
	hxHas(t, "mongo reason", fd.Reason, "soft limit 20000 is below 64000", "recommended ulimit settings")

	hxFind(t, "limits-unreadable", "limits.nofile", hxPrivate(t, "limits-unreadable", "postgres"), check.Unknown)
}

// TestLimitsNofileFixOrder: the fix of a server that takes up a raised
// limit while running is prlimit, not a restart; where PID 1 is not
// systemd (every recorded host) no systemctl step is offered.
func TestLimitsNofileFixOrder(t *testing.T) {
	f := cloneFacts(t, "baseline")
	in := instance(f, "mysql:3306")
	in.Limits[host.LimitNofile] = host.Rlimit{Soft: 1024, Hard: 1024}
	var fd check.Finding
	for _, x := range check.Run(f, check.Selector{Only: []string{"limits.nofile"}}) {
		if x.Subject == "mysql:3306" {
			fd = x
		}
	}
	if fd.Status != check.Fail {
		t.Fatalf("mysql at 1024: %s: %s", fd.Status, fd.Reason)
	}
	if fd.Fix.Restart != nil {
		t.Errorf("MariaDB takes up a raised limit while running, yet the fix restarts it: %+v", fd.Fix.Restart)
	}
	for _, systemd := range []bool{false, true} {
		ctx := fix.ContextFrom(f)
		ctx.Systemd = systemd
		got := fix.RuntimeCommands(fd.Fix, ctx)
		want := []string{"prlimit --pid 3798 --nofile=5120:5120"}
		if systemd {
			want = append([]string{"systemctl daemon-reload"}, want...)
		}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("systemd %v: now %q, want %q", systemd, got, want)
		}
		steps := fix.Steps(fd.Fix, ctx)
		if strings.Contains(steps, "PID 1 is not systemd") == systemd {
			t.Errorf("systemd %v: steps %q", systemd, steps)
		}
	}
}

func TestLimitsNproc(t *testing.T) {
	low := hxPrivate(t, "limits-pg-nproc-short", "postgres")
	fd := hxFind(t, "limits-pg-nproc-short", "limits.nproc", low, check.Fail)
	hxHas(t, "reason", fd.Reason, "soft limit 100 is below 131", "= 131")
	if len(fd.Fix.Limits) != 2 || fd.Fix.Limits[0].Item != "nproc" || fd.Fix.Limits[0].Value != "1024" {
		t.Errorf("fix %+v", fd.Fix.Limits)
	}
	// 4096 is more than the 51 tasks of a server with max_connections 20.
	ok := hxPrivate(t, "limits-nproc-low", "postgres")
	fd = hxFind(t, "limits-nproc-low", "limits.nproc", ok, check.Pass)
	hxHas(t, "reason", fd.Reason, "4096 processes and threads (hard 4096)", "= 51")
	fd = hxFind(t, "limits-nofile-1024", "limits.nproc", "redis:6379", check.Pass)
	hxHas(t, "root note", fd.Reason, "does not enforce the process limit", "moot")
	pg := hxPrivate(t, "limits-unreadable", "postgres")
	hxFind(t, "limits-unreadable", "limits.nproc", pg, check.Unknown)
}

func TestLimitsSystemdUnit(t *testing.T) {
	// A drop-in gives mariadb.service 2048 files and 128 tasks; MariaDB
	// needs 4162 and 215.
	fd := hxFind(t, "limits-pg-files-short", "limits.systemd_unit", "mysql:3306", check.Fail)
	hxHas(t, "reason", fd.Reason, "LimitNOFILE=2048", "below the 4162", "LimitNPROC=128", "below the 215", "99-dbhost-test.conf")
	want := map[string]string{"LimitNOFILE": "5120", "LimitNPROC": "1024"}
	for _, d := range fd.Fix.Dropins {
		if d.Unit != "mariadb.service" || want[d.Key] != d.Value {
			t.Errorf("drop-in %+v", d)
		}
	}
	hasDropin := false
	for _, f := range fd.Fix.Files {
		if f.Path == "/etc/systemd/system/mariadb.service.d/60-dbhost.conf" && strings.Contains(f.Content, "LimitNOFILE=5120") {
			hasDropin = true
		}
	}
	if !hasDropin {
		t.Errorf("no drop-in file rendered: %+v", fd.Fix.Files)
	}
	hxHas(t, "manual", fd.Fix.Manual, "PID 1 is not systemd here, so no systemctl step is offered")
	// Debian's template unit sets no LimitNOFILE: systemd's default soft
	// 1024 holds the default max_files_per_process 1000.
	fd = hxFind(t, "limits-unit-dropin", "limits.systemd_unit", "postgres:5432", check.Pass)
	hxHas(t, "reason", fd.Reason, "1000 open files")
	fd = hxFind(t, "limits-unit-dropin", "limits.systemd_unit", "mysql:3306", check.Pass)
	if e, ok := hxEvidence(fd, "LimitNOFILE"); !ok || e.Value != "65536" || !strings.HasPrefix(e.Source, "/etc/systemd/system/mariadb.service.d/99-dbhost-test.conf") {
		t.Errorf("evidence %+v", fd.Evidence)
	}
	// A private server is not judged by the distribution's unit.
	if _, ok := fixture.Find(t, "limits-nofile-1024", "limits.systemd_unit", hxPrivate(t, "limits-nofile-1024", "postgres")); ok {
		t.Error("the private PostgreSQL was matched to a packaged unit")
	}
}

func TestLimitsFileMax(t *testing.T) {
	// Each PostgreSQL process may hold max_files_per_process: the host-wide
	// need is that times its processes.
	fd := hxFind(t, "limits-nofile-1024", "limits.file_max", "host", check.Pass)
	hxHas(t, "reason", fd.Reason, "postgres:5432 1000 per process (need) x 131 processes = 131000", "redis:6379 10032 (need)")
	fd = hxFind(t, "limits-filemax-low", "limits.file_max", "host", check.Fail)
	hxHas(t, "reason", fd.Reason, "fs.file-max (50000)", "x 131 processes")
	if len(fd.Fix.Sysctl) != 1 || fd.Fix.Sysctl[0].Key != "fs.file-max" {
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
