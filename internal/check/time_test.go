package check_test

import (
	"testing"

	"github.com/dbhost/dbhost/internal/check"
)

func TestTimeSyncDaemon(t *testing.T) {
	fd := hxFind(t, "limits-nofile-1024", "time.sync_daemon", "host", check.Fail)
	hxHas(t, "reason", fd.Reason, "No time synchronisation daemon")
	if fd.Fix == nil || fd.Fix.Manual == "" {
		t.Errorf("fix %+v", fd.Fix)
	}
	fd = hxFind(t, "time-chrony", "time.sync_daemon", "host", check.Pass)
	hxHas(t, "reason", fd.Reason, "chronyd (pid")
	// In a container the daemon that keeps the shared clock is the host's.
	hxFind(t, "container-docker", "time.sync_daemon", "host", check.Unknown)
}

func TestTimeKernelSync(t *testing.T) {
	// No daemon: the kernel's maximum error sits at its 16 s cap.
	fd := hxFind(t, "limits-nofile-1024", "time.kernel_sync", "host", check.Fail)
	hxHas(t, "reason", fd.Reason, "STA_UNSYNC", "16 s cap", "no time daemon runs")
	// chronyd running but unable to reach a server.
	fd = hxFind(t, "time-chrony-nosource", "time.kernel_sync", "host", check.Fail)
	hxHas(t, "reason", fd.Reason, "chronyd runs but has not synchronised")
	// chronyd disciplining the clock (without rtcsync it leaves STA_UNSYNC
	// set, but keeps the errors small).
	fd = hxFind(t, "time-chrony", "time.kernel_sync", "host", check.Pass)
	hxHas(t, "reason", fd.Reason, "rtcsync")
	fd = hxFind(t, "time-unreadable", "time.kernel_sync", "host", check.Unknown)
	hxHas(t, "reason", fd.Reason, "adjtimex")
}

func TestTimeClocksource(t *testing.T) {
	fd := hxFind(t, "time-chrony", "time.clocksource", "host", check.Pass)
	hxHas(t, "reason", fd.Reason, "tsc")
	hxFind(t, "time-unreadable", "time.clocksource", "host", check.Unknown)
	fd = hxFind(t, "time-clocksource-hpet", "time.clocksource", "host", check.Fail)
	hxHas(t, "reason", fd.Reason, "hpet although tsc is available")
	if len(fd.Fix.Cmdline) != 1 || fd.Fix.Cmdline[0] != "clocksource=tsc" || len(fd.Fix.Runtime) == 0 {
		t.Errorf("fix %+v", fd.Fix)
	}
}
