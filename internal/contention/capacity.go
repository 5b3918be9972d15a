package contention

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/dbhost/dbhost/internal/host"
	"github.com/dbhost/dbhost/internal/safefile"
)

// DefaultStateFile holds the last probe of this host.
const DefaultStateFile = "/var/lib/dbhost/contention-probe.json"

// AssumedPerCore is the capacity assumed without a probe: one 56-thread
// host switched about 35 million times a second in total under a
// threads/mutex ping-pong, some 500 thousand per logical core.
const AssumedPerCore = 500_000

// Capacity is how many context switches per second one logical core can do
// when it does nothing else: what the per-core rate is judged against.
type Capacity struct {
	PerCore float64 `json:"per_core_per_second"`
	// Source is "probe" (measured here by --probe) or "assumed".
	Source string `json:"source"`
	// Measured, Kernel, CPUModel and CPUs describe the probe.
	Measured  *time.Time `json:"measured,omitempty"`
	Kernel    string     `json:"kernel,omitempty"`
	CPUModel  string     `json:"cpu_model,omitempty"`
	CPUs      int        `json:"cpus,omitempty"`
	StateFile string     `json:"state_file,omitempty"`
	// Stale says why the probe may not describe this host any more (another
	// kernel or CPU count); it is still used.
	Stale string `json:"stale,omitempty"`
	// Note is the label shown next to the figure.
	Note string `json:"note"`
}

// Assumed is the capacity used when no probe can be read; why says so.
func Assumed(why string) Capacity {
	return Capacity{PerCore: AssumedPerCore, Source: "assumed",
		Note: fmt.Sprintf("assumed %s switches/s per core (a typical server measured with a threads ping-pong), not measured on this host: %s; run 'dbhost contention --probe'", human(AssumedPerCore), why)}
}

// stateVersion is the state file's format version.
const stateVersion = 1

// LoadCapacity reads the probe stored in file and compares it with the
// host now. A missing or unreadable file gives the assumed capacity.
func LoadCapacity(h *host.Host, file string) Capacity {
	b, err := os.ReadFile(file)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return Assumed("no probe stored in " + file)
		}
		return Assumed(host.Explain(err))
	}
	var p ProbeResult
	if err := json.Unmarshal(b, &p); err != nil || p.Version != stateVersion || p.PerCore <= 0 {
		return Assumed(file + " does not hold a probe result this dbhost understands")
	}
	m := p.Measured
	c := Capacity{PerCore: p.PerCore, Source: "probe", Measured: &m, Kernel: p.Kernel, CPUModel: p.CPUModel, CPUs: p.CPUs, StateFile: file}
	c.Stale = staleness(h, p)
	c.Note = fmt.Sprintf("measured on this host by --probe on %s: %s switches/s per core", p.Measured.Local().Format("2006-01-02 15:04"), human(p.PerCore))
	if c.Stale != "" {
		c.Note += " (stale: " + c.Stale + "; run --probe again)"
	}
	return c
}

// staleness says why a probe may not hold for the host now.
func staleness(h *host.Host, p ProbeResult) string {
	var why []string
	if k := h.Read("/proc/sys/kernel/osrelease"); k.OK() && p.Kernel != "" && k.Value != p.Kernel {
		why = append(why, fmt.Sprintf("measured on kernel %s, running %s", p.Kernel, k.Value))
	}
	if n, err := onlineCPUs(h); err == nil && p.CPUs > 0 && len(n) != p.CPUs {
		why = append(why, fmt.Sprintf("measured with %d CPUs, %d online now", p.CPUs, len(n)))
	}
	if m := cpuModel(h); m != "" && p.CPUModel != "" && m != p.CPUModel {
		why = append(why, fmt.Sprintf("measured on a %s, running on a %s", p.CPUModel, m))
	}
	return strings.Join(why, "; ")
}

func cpuModel(h *host.Host) string {
	info, err := h.CPUInfo()
	if err != nil || len(info) == 0 {
		return ""
	}
	return strings.TrimSpace(info[0].ModelName)
}

// SaveProbe stores a probe result atomically, readable by everyone (it
// holds no secret): mode 0644 in a 0755 directory.
func SaveProbe(file string, p *ProbeResult) error {
	dir := filepath.Dir(file)
	if _, err := os.Stat(dir); errors.Is(err, fs.ErrNotExist) {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return err
		}
		if err := os.Chmod(dir, 0o755); err != nil { // whatever the umask
			return err
		}
	}
	return safefile.Write(file, 0o644, func(w io.Writer) error {
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		return enc.Encode(p)
	})
}
