package contention

import (
	"encoding/binary"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/dbhost/dbhost/internal/host"
)

// cpuCounter reads a cumulative context-switch count per CPU. /proc/stat
// only has the host's total (ctxt).
type cpuCounter interface {
	read() (map[int]uint64, error)
	source() string
	close()
}

// Where per-CPU figures come from.
const (
	perfSource      = "perf_event_open PERF_COUNT_SW_CONTEXT_SWITCHES per CPU"
	schedstatSource = "/proc/schedstat per CPU (timeslices + idle entries, approximate)"
	averagedSource  = "averaged, per-CPU counters unavailable: "
)

// openCPUCounters opens the best per-CPU source: software perf counters
// (live system; root, CAP_PERFMON or perf_event_paranoid <= 0), else
// /proc/schedstat. Without either it says why, and figures are averaged.
func openCPUCounters(h *host.Host) (cpuCounter, string) {
	var why []string
	if h.System() {
		cpus, err := onlineCPUs(h)
		if err == nil {
			var p *perfCounters
			p, err = openPerf(cpus)
			if err == nil {
				return p, ""
			}
		}
		why = append(why, perfWhy(h, err))
	} else {
		why = append(why, "perf counters need the live system")
	}
	if _, err := readSchedstat(h); err == nil {
		return schedstatCounter{h}, ""
	} else {
		why = append(why, host.Explain(err))
	}
	return nil, strings.Join(why, "; ")
}

// onlineCPUs lists the CPUs /proc/stat has a line for.
func onlineCPUs(h *host.Host) ([]int, error) {
	st, err := h.KernelStat()
	if err != nil {
		return nil, err
	}
	cpus := make([]int, 0, len(st.CPU))
	for c := range st.CPU {
		cpus = append(cpus, int(c))
	}
	sort.Ints(cpus)
	if len(cpus) == 0 {
		return nil, errors.New("/proc/stat lists no CPU")
	}
	return cpus, nil
}

// perfWhy explains a failed perf_event_open, with the knob that decides it.
func perfWhy(h *host.Host, err error) string {
	msg := "perf_event_open: " + err.Error()
	if host.IsPermission(err) {
		p := h.ReadSysctl("kernel.perf_event_paranoid")
		msg = fmt.Sprintf("perf_event_open: permission denied (kernel.perf_event_paranoid = %s; needs root, CAP_PERFMON or paranoid <= 0)", p.Value)
	}
	if errors.Is(err, unix.ENOENT) || errors.Is(err, unix.ENOSYS) {
		msg = "perf_event_open: this kernel has no software perf events"
	}
	return msg
}

// perfCounters are one software counter per CPU, counting every context
// switch on that CPU (pid -1) since it was opened: the same event that
// feeds /proc/stat's ctxt.
type perfCounters struct {
	fds map[int]int
}

func openPerf(cpus []int) (*perfCounters, error) {
	p := &perfCounters{fds: map[int]int{}}
	for _, c := range cpus {
		attr := unix.PerfEventAttr{
			Type:   unix.PERF_TYPE_SOFTWARE,
			Config: unix.PERF_COUNT_SW_CONTEXT_SWITCHES,
			Size:   uint32(unsafe.Sizeof(unix.PerfEventAttr{})),
		}
		fd, err := unix.PerfEventOpen(&attr, -1, c, -1, unix.PERF_FLAG_FD_CLOEXEC)
		if err != nil {
			p.close()
			return nil, err
		}
		p.fds[c] = fd
	}
	return p, nil
}

func (p *perfCounters) read() (map[int]uint64, error) {
	out := make(map[int]uint64, len(p.fds))
	var buf [8]byte
	for c, fd := range p.fds {
		n, err := unix.Read(fd, buf[:])
		if err != nil {
			return nil, fmt.Errorf("reading the perf counter of CPU %d: %w", c, err)
		}
		if n != len(buf) {
			return nil, fmt.Errorf("reading the perf counter of CPU %d: short read", c)
		}
		out[c] = binary.NativeEndian.Uint64(buf[:])
	}
	return out, nil
}

func (p *perfCounters) source() string { return perfSource }

func (p *perfCounters) close() {
	for c, fd := range p.fds {
		unix.Close(fd)
		delete(p.fds, c)
	}
}

// schedstatCounter reads /proc/schedstat (CONFIG_SCHEDSTATS kernels).
type schedstatCounter struct{ h *host.Host }

func (s schedstatCounter) read() (map[int]uint64, error) { return readSchedstat(s.h) }
func (s schedstatCounter) source() string                { return schedstatSource }
func (s schedstatCounter) close()                        {}

// readSchedstat returns, per CPU, the timeslices run (switches to a task)
// plus the times schedule() left the CPU idle (switches to idle): together
// close to the switches /proc/stat counts. Versions 15 to 17 share the
// cpu line's first nine fields.
func readSchedstat(h *host.Host) (map[int]uint64, error) {
	b, err := h.ReadFile("/proc/schedstat")
	if err != nil {
		return nil, err
	}
	return parseSchedstat(string(b))
}

func parseSchedstat(s string) (map[int]uint64, error) {
	out := map[int]uint64{}
	version := 0
	for _, ln := range strings.Split(s, "\n") {
		f := strings.Fields(ln)
		if len(f) == 0 {
			continue
		}
		if f[0] == "version" && len(f) > 1 {
			version, _ = strconv.Atoi(f[1])
			continue
		}
		id, ok := strings.CutPrefix(f[0], "cpu")
		if !ok {
			continue
		}
		cpu, err := strconv.Atoi(id)
		if err != nil || len(f) < 10 {
			return nil, fmt.Errorf("/proc/schedstat: cannot parse %q", ln)
		}
		idle, err1 := strconv.ParseUint(f[4], 10, 64)
		slices, err2 := strconv.ParseUint(f[9], 10, 64)
		if err1 != nil || err2 != nil {
			return nil, fmt.Errorf("/proc/schedstat: cannot parse %q", ln)
		}
		out[cpu] = idle + slices
	}
	if version < 15 || version > 17 {
		return nil, fmt.Errorf("/proc/schedstat: version %d is not understood (15 to 17 are)", version)
	}
	if len(out) == 0 {
		return nil, errors.New("/proc/schedstat lists no CPU")
	}
	return out, nil
}
