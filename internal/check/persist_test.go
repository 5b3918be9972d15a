package check_test

import (
	"slices"
	"strings"
	"testing"

	"github.com/dbhost/dbhost/internal/check"
	"github.com/dbhost/dbhost/internal/engine"
	"github.com/dbhost/dbhost/internal/facts"
	"github.com/dbhost/dbhost/internal/fix"
)

// TestKernelDefaultsCoverCatalog: the kernel defaults table has an entry for
// every parameter the catalog reads (check.Check.Sysctls), and no entry for
// one it does not, each with its source.
func TestKernelDefaultsCoverCatalog(t *testing.T) {
	read := check.Sysctls()
	table := facts.KernelDefaultNames()
	for _, n := range table {
		if !slices.Contains(read, n) {
			t.Errorf("kernel default for %s, which no check reads", n)
		}
		d, _, _ := facts.KernelDefaultFor(n, "6.1.0")
		if !strings.HasPrefix(d.Doc, "Documentation/") && !strings.HasPrefix(d.Doc, "include/") {
			t.Errorf("%s: source %q is not a kernel source file", n, d.Doc)
		}
	}
	for _, n := range read {
		if !slices.Contains(table, n) {
			t.Errorf("%s is read by the catalog but has no kernel default entry (a value, or why it is not comparable)", n)
		}
	}
}

// TestSysctlDriftRuntimeOnly: vm.swappiness=1 set with sysctl -w and in no
// sysctl.d file reboots to 60. mem.swappiness passes on the running value,
// yet sysctl.drift fails. Unasked, its fix changes nothing and asks: a
// moment's value is never made permanent. --keep-running persists 1;
// --keep-file sets 60 now and persists nothing.
func TestSysctlDriftRuntimeOnly(t *testing.T) {
	const fx = "persist-swappiness-runtime"
	memWant(t, fx, "mem.swappiness", memHost, check.Pass)
	fd := memWant(t, fx, "sysctl.drift", memHost, check.Fail,
		"vm.swappiness is 1 now, but nothing persists it: the next boot gives 60 (kernel default, Documentation/admin-guide/sysctl/vm.rst")
	if len(fd.Fix.Sysctl) != 0 || len(fd.Fix.SysctlNow) != 0 || len(fd.Fix.Files) != 0 || len(fd.Fix.Runtime) != 0 {
		t.Errorf("unasked, the fix changes something: %+v", fd.Fix)
	}
	for _, s := range []string{"vm.swappiness (running 1, next boot 60 from the kernel's default", "--keep-running NAME", "--keep-file NAME"} {
		if !strings.Contains(fd.Fix.Manual, s) {
			t.Errorf("manual lacks %q: %s", s, fd.Fix.Manual)
		}
	}
	// Values the kernel computes at boot are named, not judged.
	ev, ok := memEvidence(fd, "not comparable with a kernel default")
	if !ok || !strings.Contains(ev.Value, "vm.min_free_kbytes") {
		t.Errorf("evidence %+v", fd.Evidence)
	}

	fd = driftKept(t, fx, map[string]string{"vm.swappiness": "running"})
	if v := memSysctlValue(fd.Fix, "vm.swappiness"); v != "1" || !strings.Contains(fd.Reason, "(--keep-running: the fix persists 1)") {
		t.Errorf("--keep-running: persists %q: %s", v, fd.Reason)
	}
	if !slices.ContainsFunc(fd.Fix.Files, func(f fix.File) bool {
		return strings.HasPrefix(f.Path, "/etc/sysctl.d/") && strings.Contains(f.Content, "vm.swappiness = 1")
	}) {
		t.Errorf("--keep-running: no sysctl.d file keeps vm.swappiness = 1: %+v", fd.Fix.Files)
	}
	if strings.Contains(fd.Fix.Manual, "vm.swappiness (running") {
		t.Errorf("--keep-running: still asks: %s", fd.Fix.Manual)
	}

	fd = driftKept(t, fx, map[string]string{"vm.swappiness": "file"})
	if len(fd.Fix.Sysctl) != 0 || len(fd.Fix.Files) != 0 || !slices.Equal(fd.Fix.SysctlNow, []fix.KV{{Key: "vm.swappiness", Value: "60"}}) ||
		!slices.Contains(fd.Fix.Runtime, "sysctl -w vm.swappiness=60") || !strings.Contains(fd.Reason, "(--keep-file: the fix sets vm.swappiness back to 60 now, persisting nothing)") {
		t.Errorf("--keep-file: %s: %+v", fd.Reason, fd.Fix)
	}
	// The same value in /etc/sysctl.d (and pid_max as its file says):
	// nothing is lost.
	memWant(t, "persist-swappiness-persisted", "sysctl.drift", memHost, check.Pass, "hold the kernel's default")
}

// driftKept judges sysctl.drift on a recorded host with the user's
// --keep-running / --keep-file answers, its fix completed as audit shows it.
func driftKept(t *testing.T, name string, keep map[string]string) check.Finding {
	t.Helper()
	f := cloneFacts(t, name)
	f.SysctlKeep = keep
	fds := check.Run(f, check.Selector{Only: []string{"sysctl.drift"}})
	check.RenderFixes(fds, fix.ContextFrom(f))
	if len(fds) != 1 || fds[0].Status != check.Fail {
		t.Fatalf("%s with %v: %+v", name, keep, fds)
	}
	return fds[0]
}

// TestHugePagesRebootCritical: a PostgreSQL a unit starts at boot, with
// huge_pages=on, mapping a pool set only at runtime, does not start after
// a reboot.
func TestHugePagesRebootCritical(t *testing.T) {
	const fx = "persist-hugepages-runtime-pg-on"
	sub := memPrivate(t, fx, engine.Postgres)
	fd := memWant(t, fx, "mem.hugepages.postgres", sub, check.Fail, "exists only at runtime: the next boot gives 0 pages",
		"FATAL: could not map anonymous shared memory", "postgresql-15.service starts it at boot")
	if fd.Severity != check.Critical {
		t.Errorf("severity %s", fd.Severity)
	}
	// The fix keeps the running pool across reboots, grown by what the
	// machine's PostgreSQL (started by its unit, huge_pages=try) waits for:
	// 275 + 72 - 1 available + 1 % = 347.
	if v := memSysctlValue(fd.Fix, "vm.nr_hugepages"); v != "347" {
		t.Errorf("fix %+v", fd.Fix)
	}
	sub = memPrivate(t, "persist-hugepages-persisted-pg-on", engine.Postgres)
	memWant(t, "persist-hugepages-persisted-pg-on", "mem.hugepages.postgres", sub, check.Pass, "The next boot reserves 275 pages (/etc/sysctl.d/99-dbhost-record-persist.conf:2)")
	// The same pool beside a server started by hand (mem-hugepages-pg-on):
	// nothing restarts it at boot, so the reboot breaks nothing.
	sub = memPrivate(t, "mem-hugepages-pg-on", engine.Postgres)
	memWant(t, "mem-hugepages-pg-on", "mem.hugepages.postgres", sub, check.Pass, "exists only at runtime", "started by hand")
	// sysctl.drift says the same of vm.nr_hugepages.
	memWant(t, fx, "sysctl.drift", memHost, check.Fail, "vm.nr_hugepages is 275 now, but nothing persists it")
}

// TestHugePagesTransientNotCounted: 275 pages idle while a transient
// PostgreSQL (started by hand from a temporary directory) waits for 274 and
// the machine's PostgreSQL (started by its unit) for 72. The fix keeps the
// persistent server's 72 + 1 % only, and says whom it does not count.
func TestHugePagesTransientNotCounted(t *testing.T) {
	const fx = "persist-hugepages-transient"
	sub := memPrivate(t, fx, engine.Postgres)
	fd := memWant(t, fx, "mem.hugepages.unused", memHost, check.Fail, "postgres:5432 needs 72", "202 pages", "Not counted as waiting: "+sub+": started by hand")
	if strings.Contains(fd.Reason, sub+" needs") {
		t.Errorf("the transient server is counted: %s", fd.Reason)
	}
	if v := memSysctlValue(fd.Fix, "vm.nr_hugepages"); v != "73" {
		t.Errorf("fix keeps %q pages, want 73: %+v", v, fd.Fix)
	}
	ev, ok := memEvidence(fd, "not counted: "+sub)
	if !ok || !strings.Contains(ev.Value, "started by hand") {
		t.Errorf("evidence %+v", fd.Evidence)
	}
	// With a unit that starts it, the transient server's need counts.
	f := cloneFacts(t, fx)
	instance(f, sub).Unit = instance(f, "postgres:5432").Unit
	chk, _ := check.Lookup("mem.hugepages.unused")
	rs := chk.Run(f)
	if len(rs) != 1 || rs[0].Status != check.Fail || !strings.Contains(rs[0].Reason, "not because they are surplus") {
		t.Errorf("%+v", rs)
	}
}

// TestSysctlDriftDefersToOtherFixes: kernel.shmmax=32 set at runtime only
// is below PostgreSQL's segment (mem.shm_limits fails): the drift fix must
// not persist 32, it persists what mem.shm_limits restores, and says so.
// That check wins over the user's --keep-running or --keep-file too.
func TestSysctlDriftDefersToOtherFixes(t *testing.T) {
	const restored = "18446744073692774399"
	fd := memWant(t, "mem-shmmax-small", "sysctl.drift", memHost, check.Fail, "kernel.shmmax is 32 now",
		"mem.shm_limits in this run sets "+restored+": the fix persists "+restored+", not the running value")
	if v := memSysctlValue(fd.Fix, "kernel.shmmax"); v != restored {
		t.Errorf("drift persists kernel.shmmax=%q: %+v", v, fd.Fix)
	}
	for _, keep := range []string{"running", "file"} {
		fd = driftKept(t, "mem-shmmax-small", map[string]string{"kernel.shmmax": keep})
		if v := memSysctlValue(fd.Fix, "kernel.shmmax"); v != restored || len(fd.Fix.SysctlNow) != 0 ||
			!strings.Contains(fd.Reason, "--keep-"+keep+" kernel.shmmax is not followed, mem.shm_limits wins") {
			t.Errorf("--keep-%s: persists %q, now %v: %s", keep, v, fd.Fix.SysctlNow, fd.Reason)
		}
	}
	// Where no other check objects, nothing is persisted unasked.
	fd = memWant(t, "persist-swappiness-runtime", "sysctl.drift", memHost, check.Fail)
	if strings.Contains(fd.Reason, "in this run sets") || len(fd.Fix.Sysctl) != 0 {
		t.Errorf("reason: %s, fix %+v", fd.Reason, fd.Fix)
	}
}
