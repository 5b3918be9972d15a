package facts

import (
	"context"

	"github.com/dbhost/dbhost/internal/host"
)

// Cgroup is the control group of an instance and its limits.
type Cgroup struct {
	// Version is 1 or 2; Path is the group's path in its hierarchy.
	Version int    `json:"version"`
	Path    string `json:"path"`
	// MemoryMax (v2 memory.max, v1 memory.limit_in_bytes): "max" or bytes.
	MemoryMax host.Reading `json:"memory_max"`
	// CPUMax (v2 cpu.max "quota period", v1 cfs_quota_us/cfs_period_us).
	CPUMax  host.Reading `json:"cpu_max"`
	PidsMax host.Reading `json:"pids_max"`
	Err     string       `json:"error,omitempty"`
}

// Unit is the systemd service that runs an instance, read from unit files
// and drop-ins on disk (PID 1 may not be systemd, so no D-Bus).
type Unit struct {
	Name string `json:"name"`
	// Files are the unit file and its drop-ins in the order systemd reads
	// them.
	Files []string `json:"files"`
	// How the unit was matched: "cgroup" (the process runs in it) or
	// "installed" (the engine's packaged unit exists; not running under
	// systemd now).
	How string `json:"how"`
	// Service holds the effective [Service] settings that dbhost judges
	// (LimitNOFILE, LimitNPROC, LimitMEMLOCK, TasksMax, OOMScoreAdjust,
	// MemoryMax...), with file:line sources.
	Service map[string]UnitSetting `json:"service"`
}

// UnitSetting is one effective unit setting.
type UnitSetting struct {
	Value  string `json:"value"`
	Source string `json:"source"`
}

func init() {
	wantSysctl("fs.file-max", "fs.nr_open", "kernel.pid_max", "kernel.threads-max")
	registerInstance("process", gatherInstanceProcess)
}

// gatherInstanceProcess reads limits, OOM score, cgroup, unit and security
// label of an instance's main process.
func gatherInstanceProcess(_ context.Context, h *host.Host, f *Facts, in *Instance) {
	if l, err := h.Limits(in.PID); err != nil {
		in.LimitsErr = host.Explain(err)
	} else {
		in.Limits = l
	}
	in.OOMScore = h.Read(procFile(in.PID, "oom_score_adj"))
	in.Label = h.Read(procFile(in.PID, "attr/current"))
}
