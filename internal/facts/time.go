package facts

import (
	"context"
	"encoding/json"

	"golang.org/x/sys/unix"

	"github.com/dbhost/dbhost/internal/engine"
	"github.com/dbhost/dbhost/internal/host"
)

// Time describes clock synchronisation. The daemons come from the process
// table: see Facts.TimeDaemons.
type Time struct {
	// Kernel is the adjtimex(2) state.
	Kernel    Adjtimex `json:"kernel"`
	KernelErr string   `json:"kernel_error,omitempty"`
	// Clocksource is the current clock source (tsc, kvm-clock, xen, hpet).
	Clocksource host.Reading `json:"clocksource"`
	// Available lists the clock sources the kernel could use.
	Available host.Reading `json:"available_clocksource"`
}

// Adjtimex is the kernel clock discipline state.
type Adjtimex struct {
	// State is the return value: 0 TIME_OK, 5 TIME_ERROR (unsynchronised).
	State  int `json:"state"`
	Status int `json:"status"` // STA_* flags
	// MaxErrorUS and EstErrorUS are the kernel's maximum and estimated
	// error, microseconds.
	MaxErrorUS int64 `json:"max_error_us"`
	EstErrorUS int64 `json:"est_error_us"`
	// OffsetUS is the remaining phase offset being corrected, microseconds
	// (converted from nanoseconds when STA_NANO is set).
	OffsetUS int64 `json:"offset_us"`
}

// Kernel clock status bits and states (linux/timex.h).
const (
	StaPLL    = 0x0001
	StaUnsync = 0x0040
	StaNano   = 0x2000
	TimeError = 5
)

// Synced reports whether the kernel considers the clock synchronised
// (STA_UNSYNC clear and state not TIME_ERROR).
func (a Adjtimex) Synced() bool { return a.Status&StaUnsync == 0 && a.State != TimeError }

// MaxErrorLimitUS is the kernel's cap on the maximum error (NTP_PHASE_LIMIT,
// 16 s): it adds 500 µs per second nobody corrects the clock, and at the cap
// it sets STA_UNSYNC.
const MaxErrorLimitUS = 16_000_000

// Disciplined reports whether a daemon keeps the clock: the kernel says
// synchronised, or its maximum error is kept below the cap. chronyd without
// rtcsync leaves STA_UNSYNC set on purpose (so that the kernel does not copy
// the time to the RTC every 11 minutes) but keeps maxerror small.
func (a Adjtimex) Disciplined() bool { return a.Synced() || a.MaxErrorUS < MaxErrorLimitUS }

// TimeDaemon is a running process that keeps or fights the clock.
type TimeDaemon struct {
	PID  int    `json:"pid"`
	Comm string `json:"comm"`
	// Kind: "ntp" (disciplines the clock from network time), "ptp"
	// (hardware clock), "guest-tools" (hypervisor agents that may also set
	// the clock).
	Kind string `json:"kind"`
}

// timeDaemons maps process names to their kind. ntpsec's daemon is also
// called ntpd; openntpd's is ntpd too.
var timeDaemons = map[string]string{
	"chronyd": "ntp", "ntpd": "ntp", "systemd-timesyn": "ntp", "systemd-timesyncd": "ntp",
	"openntpd": "ntp", "timemaster": "ptp", "ptp4l": "ptp", "phc2sys": "ptp",
	"vmtoolsd": "guest-tools", "VBoxService": "guest-tools", "qemu-ga": "guest-tools",
	"hv_kvp_daemon": "guest-tools", "google_guest_ag": "guest-tools",
}

// TimeDaemons lists the running time-related processes from the process
// table. (The process table is read in parallel with host gatherers, so this
// is derived from it rather than gathered.)
func (f *Facts) TimeDaemons() []TimeDaemon {
	var out []TimeDaemon
	for _, p := range f.Processes {
		if k, ok := timeDaemons[p.Comm]; ok {
			out = append(out, TimeDaemon{PID: p.PID, Comm: p.Comm, Kind: k})
		}
	}
	return out
}

func init() { registerHost(DomainTime, gatherTime) }

func gatherTime(_ context.Context, h *host.Host, f *Facts) {
	t := &f.Time
	t.Clocksource = h.Read("/sys/devices/system/clocksource/clocksource0/current_clocksource")
	t.Available = h.Read("/sys/devices/system/clocksource/clocksource0/available_clocksource")
	b, err := h.Probe("adjtimex", readAdjtimex)
	if err != nil {
		t.KernelErr = "adjtimex: " + host.Explain(err)
		return
	}
	if err := json.Unmarshal(b, &t.Kernel); err != nil {
		t.KernelErr = "adjtimex: " + err.Error()
	}
}

// readAdjtimex asks the kernel for its clock state. Modes is zero, so the
// call only reads: it never adjusts the clock and needs no privilege.
func readAdjtimex() ([]byte, error) {
	var tx unix.Timex // Modes == 0: read only
	state, err := unix.Adjtimex(&tx)
	if err != nil {
		return nil, err
	}
	a := Adjtimex{State: state, Status: int(tx.Status), MaxErrorUS: int64(tx.Maxerror), EstErrorUS: int64(tx.Esterror)}
	a.OffsetUS = int64(tx.Offset)
	if tx.Status&StaNano != 0 {
		a.OffsetUS /= 1000
	}
	return json.Marshal(a)
}

// processesByComm lists the processes with one of the command names.
func processesByComm(ps []engine.Process, names ...string) []engine.Process {
	var out []engine.Process
	for _, p := range ps {
		for _, n := range names {
			if p.Comm == n {
				out = append(out, p)
			}
		}
	}
	return out
}
