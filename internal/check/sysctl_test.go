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
	// Which side is right is the reader's call: no "now" step applies the
	// files (pasting it would undo a deliberate runtime value), the manual
	// says how.
	if fd.Fix == nil || len(fd.Fix.Runtime) != 0 || !strings.Contains(fd.Fix.Manual, "sysctl --system") {
		t.Errorf("fix %+v", fd.Fix)
	}
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
