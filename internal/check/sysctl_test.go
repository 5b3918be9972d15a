package check_test

import (
	"strings"
	"testing"

	"github.com/dbhost/dbhost/internal/check"
)

func TestSysctlDrift(t *testing.T) {
	// /etc/sysctl.d/99-dbhost-test.conf disagrees with the running values;
	// Debian's own 50-pid-max.conf too, since no systemd-sysctl ran at boot.
	fd := hxFind(t, "persist-files", "sysctl.drift", "host", check.Fail)
	hxHas(t, "reason", fd.Reason,
		"vm.swappiness is 60 now but sysctl.d sets 10 (/etc/sysctl.d/99-dbhost-test.conf:2)",
		"net.core.somaxconn is 4096 now but sysctl.d sets 8192",
		"net.ipv4.tcp_fin_timeout is 60 now but sysctl.d sets 30",
		"kernel.pid_max is 32768 now but sysctl.d sets 4194304 (/usr/lib/sysctl.d/50-pid-max.conf:16)")
	// Which side is right is the reader's call: nothing changes a parameter
	// no other check sets (pasting it would undo a deliberate runtime value
	// or make a moment's value permanent); the manual names both values and
	// the flags that choose. vm.swappiness and tcp_fin_timeout are what
	// mem.swap and net.fin_timeout set: their values, and the file read
	// after dbhost's that must change too.
	if fd.Fix == nil || strings.Contains(strings.Join(fd.Fix.Runtime, " "), "somaxconn") || strings.Contains(strings.Join(fd.Fix.Runtime, " "), "pid_max") {
		t.Errorf("fix %+v", fd.Fix)
	}
	hxHas(t, "manual", fd.Fix.Manual, "--keep-running NAME", "--keep-file NAME",
		"net.core.somaxconn (running 4096, next boot 8192 from /etc/sysctl.d/99-dbhost-test.conf:3)",
		"/etc/sysctl.d/99-dbhost-test.conf:2 (change its vm.swappiness line to 1: it is read after dbhost's file)")
	hxHas(t, "reason", fd.Reason, "mem.swap in this run sets 1: the fix persists 1, not the running value")
	hxFind(t, "persist-sysctl-match", "sysctl.drift", "host", check.Pass)
	// TuneD's profile is what the next boot applies where sysctl.d is
	// silent.
	fd = hxFind(t, "tuned-profile", "sysctl.drift", "host", check.Fail)
	hxHas(t, "reason", fd.Reason, "vm.swappiness is 60 now but TuneD profile dbhost-test-guest sets 30")
}

func TestSysctlDriftUnreadable(t *testing.T) {
	fd := hxFind(t, "persist-unreadable", "sysctl.drift", "host", check.Unknown)
	hxHas(t, "reason", fd.Reason, "permission denied")
}
