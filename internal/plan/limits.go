package plan

import (
	"path"
	"strconv"
	"strings"

	"github.com/dbhost/dbhost/internal/facts"
	"github.com/dbhost/dbhost/internal/fix"
	"github.com/dbhost/dbhost/internal/host"
)

// limitsFile is where fix.Render writes pam_limits lines.
const limitsFile = "/etc/security/limits.d/" + fix.Name + ".conf"

// limitNames maps pam_limits and prlimit items to /proc/PID/limits names.
var limitNames = map[string]string{
	"nofile":  host.LimitNofile,
	"nproc":   host.LimitNproc,
	"memlock": host.LimitMemlock,
	"core":    host.LimitCore,
	"as":      host.LimitAS,
}

// unitLimitItems maps systemd Limit settings to pam_limits items.
var unitLimitItems = map[string]string{
	"LimitNOFILE": "nofile", "LimitNPROC": "nproc", "LimitMEMLOCK": "memlock", "LimitCORE": "core", "LimitAS": "as",
}

// limitLines installs dbhost's limits.d file in pam_limits' order
// (limits.conf, then limits.d by name). It changes no running process: a
// service started by systemd never reads it, a login does (see restarts).
func (m *model) limitLines() {
	f, ok := m.file(limitsFile)
	if !ok {
		return
	}
	ours := facts.ParseLimitsConf(f.Path, []byte(f.Content))
	var out []facts.LimitEntry
	placed := false
	for _, e := range m.g.Persist.Limits {
		if e.File == f.Path {
			continue
		}
		if !placed && strings.HasPrefix(e.File, "/etc/security/limits.d/") && path.Base(e.File) > path.Base(f.Path) {
			out, placed = append(out, ours...), true
		}
		out = append(out, e)
	}
	if !placed {
		out = append(out, ours...)
	}
	m.g.Persist.Limits = out
}

// rlimits sets the limits prlimit changes on running processes.
func (m *model) rlimits() {
	for _, it := range m.items {
		for _, rl := range it.Fix.Rlimits {
			in := m.byPID(rl.PID)
			name, known := limitNames[rl.Item]
			if in == nil || !known {
				m.note("%s: prlimit --pid %d --%s not modelled: no server with that PID or no such limit", tag(it), rl.PID, rl.Item)
				continue
			}
			setLimit(in, name, rl.Soft, rl.Hard)
		}
	}
}

func (m *model) byPID(pid int) *facts.Instance {
	for _, in := range m.g.Instances {
		if in.PID == pid {
			return in
		}
	}
	return nil
}

// setLimit sets one limit of a server's process.
func setLimit(in *facts.Instance, name string, soft, hard uint64) {
	if in.Limits == nil {
		in.Limits = host.Limits{}
	}
	l := in.Limits[name]
	l.Soft, l.Hard = soft, hard
	in.Limits[name] = l
}

// dropinDir is the drop-in directory fix.Render writes a unit's file into.
func dropinFile(unit string) string {
	return "/etc/systemd/system/" + unit + ".d/" + fix.Name + ".conf"
}

// dropins adds each planned unit setting to the unit of the servers it
// starts; the servers are restarted for it to take effect (see restarts),
// except TasksMax, which systemctl set-property applies to the running
// unit too.
func (m *model) dropins() {
	for _, it := range m.items {
		for _, d := range it.Fix.Dropins {
			ins := m.unitServers(d.Unit)
			if len(ins) == 0 {
				m.note("%s: %s=%s for unit %s not modelled: no server runs under or is started by it", tag(it), d.Key, d.Value, d.Unit)
				continue
			}
			if _, ok := m.file(dropinFile(d.Unit)); !ok || d.Section != "Service" {
				m.note("%s: [%s] %s=%s for unit %s not modelled: the drop-in refuses it or is not about the service", tag(it), d.Section, d.Key, d.Value, d.Unit)
				continue
			}
			for _, in := range ins {
				setUnitSetting(in.Unit, d.Unit, d.Key, d.Value)
				if d.Key == "TasksMax" && in.Unit.How == "cgroup" {
					m.setPidsMax(in)
					continue
				}
				m.markRestart(in, "its unit "+d.Unit+" gets "+d.Key+"=")
			}
		}
	}
}

// unitServers are the servers whose unit (or its alias) is unit.
func (m *model) unitServers(unit string) []*facts.Instance {
	var out []*facts.Instance
	for _, in := range m.g.Instances {
		if in.Unit != nil && !in.Unit.Masked && (in.Unit.Name == unit || in.Unit.Alias == unit) {
			out = append(out, in)
		}
	}
	return out
}

// setUnitSetting records a drop-in assignment: a later drop-in wins, so
// dbhost's file name decides only against other drop-ins; the model puts it
// last, as 60-dbhost sorts after the packaged ones (an admin's 99-* would
// still win, which the model does not see).
func setUnitSetting(u *facts.Unit, unit, key, value string) {
	file := dropinFile(unit)
	if u.Service == nil {
		u.Service = map[string]facts.UnitSetting{}
	}
	u.Service[key] = facts.UnitSetting{Value: value, Source: file}
	for _, f := range u.Files {
		if f == file {
			return
		}
	}
	u.Files = append(u.Files, file)
}

// setPidsMax applies TasksMax to the running unit's cgroup (pids.max).
func (m *model) setPidsMax(in *facts.Instance) {
	s, ok := in.Unit.Effective("TasksMax")
	if !ok {
		return
	}
	pm, _ := m.g.SysctlReading("kernel.pid_max").Count()
	tm, _ := m.g.SysctlReading("kernel.threads-max").Count()
	kmax := uint64(max(min(pm, tm), 0))
	if pm <= 0 || tm <= 0 {
		kmax = uint64(max(pm, tm, 0))
	}
	n, ok := facts.ParseTasksMax(s.Value, kmax)
	if !ok {
		return
	}
	v := "max"
	if n != host.Unlimited {
		v = strconv.FormatUint(n, 10)
	}
	in.Cgroup.PidsMax.Value, in.Cgroup.PidsMax.Err = v, ""
}
