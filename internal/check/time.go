package check

import (
	"fmt"
	"slices"
	"strings"

	"github.com/dbhost/dbhost/internal/facts"
	"github.com/dbhost/dbhost/internal/fix"
	"github.com/dbhost/dbhost/internal/textio"
)

// maxEstErrorUS is the kernel's estimated clock error above which
// time.kernel_sync fails: a disciplined clock is within a few milliseconds;
// 100 ms is far enough above that to flag only a clock nobody corrects.
const maxEstErrorUS = 100_000

func init() {
	Register(Check{
		ID:        "time.sync_daemon",
		Title:     "A time synchronisation daemon runs",
		Problem:   "No time synchronisation daemon runs",
		Severity:  Warning,
		AppliesTo: []string{"host"},
		Doc: `Looks in the process table for chronyd, ntpd (also ntpsec and OpenNTPD),
systemd-timesyncd, or ptp4l/phc2sys. Replicated databases and clusters compare
timestamps across nodes (replication lag, TTL expiry, log correlation, MongoDB's
cluster time); a free-running clock drifts by seconds a day. VM guest agents
(vmtoolsd, VBoxService) can also set the clock: with both active they fight, so let
only the NTP daemon set time.`,
		Refs: []string{"https://chrony-project.org/documentation.html"},
		Run:  checkSyncDaemon,
	})
	Register(Check{
		ID:        "time.kernel_sync",
		Title:     "The kernel clock is synchronised",
		Problem:   "The kernel clock is not synchronised",
		Severity:  Warning,
		AppliesTo: []string{"host"},
		Doc: `Asks the kernel with adjtimex(2) in read-only mode (no privilege needed, the clock
is not touched). A daemon that disciplines the clock keeps the kernel's maximum and
estimated errors small and usually clears STA_UNSYNC (chronyd leaves it set unless
rtcsync is configured). Nobody correcting the clock shows as the maximum error
growing by 500 µs a second up to its 16 s cap, STA_UNSYNC set and the state
TIME_ERROR. The check fails when the maximum error sits at the cap, or the estimated
error exceeds 100 ms. A daemon that runs
but cannot reach its servers shows up here, not in time.sync_daemon.`,
		Refs: []string{"https://man7.org/linux/man-pages/man2/adjtimex.2.html"},
		Run:  checkKernelSync,
	})
	Register(Check{
		ID:        "time.clocksource",
		Title:     "The clock source is fast to read",
		Problem:   "The clock source is slow to read",
		Severity:  Info,
		AppliesTo: []string{"host"},
		Doc: `Reads /sys/devices/system/clocksource/clocksource0/current_clocksource.
Databases read the clock constantly (statement timing, track_io_timing, timeouts).
With tsc or kvm-clock the vDSO answers gettimeofday/clock_gettime in user space in
tens of nanoseconds; xen, hpet and acpi_pm need a system call and a device read,
often a microsecond or more, which pg_test_timing shows and busy servers feel. When
tsc is available (available_clocksource) it is the fast choice.`,
		Refs: []string{"https://www.postgresql.org/docs/current/pgtesttiming.html", "https://docs.kernel.org/timers/timekeeping.html"},
		Run:  checkClocksource,
	})
}

func checkSyncDaemon(f *facts.Facts) []Result {
	var sync, guests []string
	for _, d := range f.TimeDaemons() {
		s := fmt.Sprintf("%s (pid %d)", d.Comm, d.PID)
		if d.Kind == "guest-tools" {
			guests = append(guests, s)
		} else {
			sync = append(sync, s)
		}
	}
	ev := []Evidence{Ev("time daemons", hostOr(strings.Join(sync, ", "), "none"), "process table")}
	if len(guests) > 0 {
		ev = append(ev, Ev("VM guest agents", strings.Join(guests, ", "), "process table"))
	}
	if len(f.Processes) == 0 {
		return []Result{UnknownR(SubjectHost, "the process table could not be read", ev...)}
	}
	if f.System.Container != "" && len(sync) == 0 {
		return []Result{UnknownR(SubjectHost, fmt.Sprintf("dbhost runs in a %s container, which shares the host's clock: the daemon that keeps it runs on the host, out of sight; time.kernel_sync reads the shared clock's state.", f.System.Container), ev...)}
	}
	fight := ""
	if len(guests) > 0 {
		fight = " " + strings.Join(guests, ", ") + " can also set the clock: with an NTP daemon running, turn the agent's time synchronisation off (VMware: tools.syncTime = false) so the two do not fight."
	}
	if len(sync) > 0 {
		return []Result{PassR(SubjectHost, "A time synchronisation daemon runs: "+strings.Join(sync, ", ")+" (whether it reaches its sources is time.kernel_sync's question)."+fight, ev...)}
	}
	why := "No time synchronisation daemon runs: the clock drifts freely (typically seconds a day), and nodes of a replicated database disagree about time (replication lag, TTL expiry, log correlation)."
	if len(guests) > 0 {
		why += " " + strings.Join(guests, ", ") + " may set the clock now and then, but steps it instead of slewing it."
	}
	return []Result{FailR(SubjectHost, why, &fix.Fix{Summary: "Run a time synchronisation daemon", Manual: syncDaemonAdvice(f)}, ev...)}
}

func syncDaemonAdvice(f *facts.Facts) string {
	like := f.System.OSID + " " + f.System.OSLike
	switch {
	case strings.Contains(like, "debian") || strings.Contains(like, "ubuntu"):
		return "apt-get install chrony (or systemctl enable --now systemd-timesyncd), then check with chronyc tracking."
	case strings.Contains(like, "rhel") || strings.Contains(like, "fedora") || strings.Contains(like, "suse"):
		return "Install chrony and systemctl enable --now chronyd, then check with chronyc tracking."
	}
	return "Install and enable chrony (or ntpd, or systemd-timesyncd), then check with chronyc tracking."
}

func checkKernelSync(f *facts.Facts) []Result {
	t := f.Time
	if t.KernelErr != "" {
		return []Result{UnknownR(SubjectHost, "cannot read the kernel clock state: "+t.KernelErr)}
	}
	k := t.Kernel
	ev := []Evidence{
		Ev("state", adjtimexState(k.State), "adjtimex(2)"),
		Ev("status", adjtimexStatus(k.Status), "adjtimex(2)"),
		Ev("estimated error", fmt.Sprintf("%d µs", k.EstErrorUS), "adjtimex(2)"),
		Ev("maximum error", fmt.Sprintf("%d µs", k.MaxErrorUS), "adjtimex(2)"),
		Ev("offset", fmt.Sprintf("%d µs", k.OffsetUS), "adjtimex(2)"),
	}
	daemons := "no time daemon runs"
	var names []string
	for _, d := range f.TimeDaemons() {
		if d.Kind != "guest-tools" {
			names = append(names, d.Comm)
		}
	}
	if len(names) > 0 {
		daemons = strings.Join(names, ", ") + " runs but has not synchronised the clock: check that it reaches its servers (chronyc sources -v; UDP port 123 open)"
	}
	fx := &fix.Fix{Summary: "Let a time daemon discipline the clock", Manual: syncDaemonAdvice(f)}
	if len(names) > 0 {
		fx.Manual = "Check " + strings.Join(names, ", ") + ": chronyc sources -v or timedatectl timesync-status show whether it reaches a server; open UDP port 123 or configure a reachable server."
	}
	if !k.Disciplined() {
		return []Result{FailR(SubjectHost, fmt.Sprintf("The kernel reports the clock unsynchronised (%s) and its maximum error has reached the %.0f s cap: %s.", adjtimexStatus(k.Status), float64(facts.MaxErrorLimitUS)/1e6, daemons), fx, ev...)}
	}
	if k.EstErrorUS > maxEstErrorUS {
		return []Result{FailR(SubjectHost, fmt.Sprintf("The clock is disciplined, but the kernel estimates its error at %.1f ms, above %d ms: the time source is poor or far away.", float64(k.EstErrorUS)/1000, maxEstErrorUS/1000), fx, ev...)}
	}
	note := ""
	if !k.Synced() {
		note = " STA_UNSYNC is still set, as chronyd leaves it without the rtcsync directive (so that the kernel does not copy the time to the hardware clock), but the daemon keeps the maximum error small."
	}
	return []Result{PassR(SubjectHost, fmt.Sprintf("A daemon disciplines the kernel clock: estimated error %d µs, maximum error %d µs.%s", k.EstErrorUS, k.MaxErrorUS, note), ev...)}
}

func adjtimexState(s int) string {
	names := map[int]string{0: "TIME_OK", 1: "TIME_INS", 2: "TIME_DEL", 3: "TIME_OOP", 4: "TIME_WAIT", 5: "TIME_ERROR"}
	if n, ok := names[s]; ok {
		return fmt.Sprintf("%d (%s)", s, n)
	}
	return fmt.Sprint(s)
}

func adjtimexStatus(st int) string {
	bits := []struct {
		bit  int
		name string
	}{{0x1, "STA_PLL"}, {0x2, "STA_PPSFREQ"}, {0x4, "STA_PPSTIME"}, {0x8, "STA_FLL"}, {0x10, "STA_INS"}, {0x20, "STA_DEL"},
		{0x40, "STA_UNSYNC"}, {0x80, "STA_FREQHOLD"}, {0x2000, "STA_NANO"}, {0x4000, "STA_MODE"}, {0x8000, "STA_CLK"}}
	var names []string
	for _, b := range bits {
		if st&b.bit != 0 {
			names = append(names, b.name)
		}
	}
	if len(names) == 0 {
		return fmt.Sprintf("%#x", st)
	}
	return fmt.Sprintf("%#x %s", st, strings.Join(names, "|"))
}

// clocksourceName is what a clock source's name looks like (tsc, kvm-clock,
// arch_sys_counter, hyperv_clocksource_tsc_page).
var clocksourceName = textio.LazyRegexp(`^[a-z][a-z0-9_-]*$`)

// fastClocksources are read by the vDSO in user space, without a system
// call: the x86 TSC and paravirtual clocks, the Arm generic timer, the
// PowerPC time base, the s390 TOD clock, the RISC-V timer.
var fastClocksources = map[string]bool{"tsc": true, "kvm-clock": true, "hyperv_clocksource_tsc_page": true, "arch_sys_counter": true,
	"timebase": true, "tod": true, "riscv_clocksource": true}

// slowClocksources need a system call and a device read per clock read.
var slowClocksources = map[string]bool{"xen": true, "hpet": true, "acpi_pm": true, "jiffies": true}

func checkClocksource(f *facts.Facts) []Result {
	cur, avail := f.Time.Clocksource, f.Time.Available
	ev := []Evidence{EvReading("current_clocksource", cur), EvReading("available_clocksource", avail)}
	if !cur.OK() {
		return []Result{UnknownR(SubjectHost, "cannot read the clock source: "+cur.Err, ev...)}
	}
	if !clocksourceName.MatchString(cur.Value) || (avail.OK() && !slices.Contains(avail.Fields(), cur.Value)) {
		return []Result{UnknownR(SubjectHost, fmt.Sprintf("%s holds %q, which is not a clock source the kernel offers (available: %q)", cur.Source, cur.Value, avail.Value), ev...)}
	}
	if !slowClocksources[cur.Value] && !fastClocksources[cur.Value] {
		return []Result{UnknownR(SubjectHost, fmt.Sprintf("dbhost does not know the clock source %q, so it cannot tell whether reading it needs a system call.", cur.Value), ev...)}
	}
	if !slowClocksources[cur.Value] {
		return []Result{PassR(SubjectHost, fmt.Sprintf("The clock source is %s: clock reads are served by the vDSO without a system call.", cur.Value), ev...)}
	}
	hasTSC := false
	for _, a := range avail.Fields() {
		if a == "tsc" {
			hasTSC = true
		}
	}
	if !hasTSC {
		return []Result{PassR(SubjectHost, fmt.Sprintf("The clock source is %s, which is slow to read (a system call per read), but the kernel offers nothing faster here (available: %s).", cur.Value, hostOr(avail.Value, "unknown")), ev...)}
	}
	why := fmt.Sprintf("The clock source is %s although tsc is available: every clock read is a system call and a device access (often a microsecond or more instead of tens of nanoseconds), which databases pay on every timed statement and I/O.", cur.Value)
	const path = "/sys/devices/system/clocksource/clocksource0/current_clocksource"
	if f.System.Hypervisor == "" {
		why += " On bare metal the kernel usually falls back from tsc because it found the TSC unstable (dmesg: \"Marking clocksource 'tsc' as unstable\"); check that before switching."
		return []Result{FailR(SubjectHost, why, &fix.Fix{Summary: "Check why tsc is not used", Manual: "Look for \"clocksource\" in dmesg; if the TSC is reliable, boot with clocksource=tsc (and tsc=reliable)."}, ev...)}
	}
	fx := &fix.Fix{Summary: "Use the tsc clock source", Cmdline: []string{"clocksource=tsc"}, Runtime: []string{"echo tsc > " + path}, HostOnly: f.System.Container != ""}
	return []Result{FailR(SubjectHost, why+" This is a virtual machine ("+f.System.Hypervisor+"): with an invariant TSC, which current hypervisors expose, tsc is safe and fast.", fx, ev...)}
}
