package facts

import (
	"context"
	"fmt"
	"path"
	"strconv"
	"strings"

	"github.com/dbhost/dbhost/internal/host"
)

// Cgroup is the control group of an instance and its limits.
type Cgroup struct {
	// Version is 1 or 2: the hierarchy the memory controller is in (a
	// hybrid host has cgroup2 mounted too, without controllers). Path is the
	// group's path in that hierarchy.
	Version int    `json:"version"`
	Path    string `json:"path"`
	// SystemdPath is the group in systemd's own hierarchy (name=systemd on
	// v1, the unified tree on v2): it names the unit a process runs in.
	SystemdPath string `json:"systemd_path,omitempty"`
	// MemoryMax (v2 memory.max, v1 memory.limit_in_bytes): "max" or bytes.
	// It is the lowest limit of the group and its ancestors: a parent's
	// limit binds its children.
	MemoryMax host.Reading `json:"memory_max"`
	// CPUMax is "quota period" in microseconds, or "max period" (v2
	// cpu.max; on v1 built from cpu.cfs_quota_us and cpu.cfs_period_us).
	CPUMax  host.Reading `json:"cpu_max"`
	PidsMax host.Reading `json:"pids_max"`
	Err     string       `json:"error,omitempty"`
}

// cgroupV1Unlimited is the smallest value a v1 limit file shows for "no
// limit" (PAGE_COUNTER_MAX times the page size, rounded); anything at or
// above it is no limit.
const cgroupV1Unlimited = 1 << 62

// MemoryLimit returns the memory limit in bytes, and false when there is
// none or it is unknown.
func (c Cgroup) MemoryLimit() (uint64, bool) {
	if !c.MemoryMax.OK() || c.MemoryMax.Value == "max" {
		return 0, false
	}
	n, err := strconv.ParseUint(c.MemoryMax.Value, 10, 64)
	if err != nil || n >= cgroupV1Unlimited {
		return 0, false
	}
	return n, true
}

// CPULimit returns the CPU quota in CPUs (1.5 = one and a half CPUs), and
// false when there is none or it is unknown.
func (c Cgroup) CPULimit() (float64, bool) {
	f := c.CPUMax.Fields()
	if !c.CPUMax.OK() || len(f) != 2 || f[0] == "max" {
		return 0, false
	}
	q, err1 := strconv.ParseUint(f[0], 10, 64)
	p, err2 := strconv.ParseUint(f[1], 10, 64)
	if err1 != nil || err2 != nil || q == 0 || p < cfsPeriodMin || p > cfsPeriodMax {
		return 0, false
	}
	return float64(q) / float64(p), true
}

// The kernel's bounds of a CFS period, in microseconds.
const cfsPeriodMin, cfsPeriodMax = 1000, 1000000

// Garbled says why the limits read from the control group are not values
// the kernel writes there (a corrupt snapshot, a file of something else),
// or "": then MemoryLimit and CPULimit mean what they say.
func (c Cgroup) Garbled() string {
	if r := c.MemoryMax; r.OK() && r.Value != "max" {
		if _, err := strconv.ParseUint(r.Value, 10, 64); err != nil {
			return fmt.Sprintf("%s holds %q, neither \"max\" nor a size", r.Source, r.Value)
		}
	}
	if r := c.CPUMax; r.OK() {
		f := r.Fields()
		ok := len(f) == 2
		if ok && f[0] != "max" && f[0] != "-1" {
			_, err := strconv.ParseUint(f[0], 10, 64)
			ok = err == nil
		}
		if ok {
			p, err := strconv.ParseUint(f[1], 10, 64)
			ok = err == nil && p >= cfsPeriodMin && p <= cfsPeriodMax
		}
		if !ok {
			return fmt.Sprintf("%s holds %q, not a CPU quota and period", r.Source, r.Value)
		}
	}
	return ""
}

// Unit is the systemd service that runs an instance, read from unit files
// and drop-ins on disk (PID 1 may not be systemd, so no D-Bus).
type Unit struct {
	Name string `json:"name"`
	// Alias is the unit's real name when Name is an alias symlink
	// (mysql.service → mariadb.service).
	Alias string `json:"alias,omitempty"`
	// Files are the unit file and its drop-ins in the order systemd reads
	// them.
	Files []string `json:"files"`
	// How the unit was matched: "cgroup" (the process runs in it) or
	// "installed" (the engine's packaged unit exists; the process does not
	// run under it now, so its settings apply at the next start by systemd).
	How string `json:"how"`
	// Masked: the unit file is a link to /dev/null.
	Masked bool `json:"masked,omitempty"`
	// Service holds the [Service] settings that dbhost judges (LimitNOFILE,
	// LimitNPROC, LimitMEMLOCK, LimitCORE, TasksMax, OOMScoreAdjust,
	// MemoryMax, MemoryLimit, MemoryHigh, CPUQuota, User, Group) as the unit
	// file and its drop-ins leave them, with file:line sources. A setting
	// the unit does not set is absent; Effective adds the defaults.
	Service map[string]UnitSetting `json:"service"`
	// Defaults are the manager's Default* settings from system.conf and
	// system.conf.d (DefaultLimitNOFILE...).
	Defaults map[string]UnitSetting `json:"defaults,omitempty"`
	Err      string                 `json:"error,omitempty"`

	text      string // the unit's files, to match an installed unit
	execStart string
}

// UnitSetting is one effective unit setting.
type UnitSetting struct {
	Value  string `json:"value"`
	Source string `json:"source"`
}

// ProcReading is a value read for one process.
type ProcReading struct {
	PID     int          `json:"pid"`
	Comm    string       `json:"comm,omitempty"`
	Reading host.Reading `json:"reading"`
}

// maxChildren caps how many worker processes' values are read: a few show
// the pattern, thousands of backends would only slow the scan.
const maxChildren = 16

func init() {
	registerInstance("process", gatherInstanceProcess)
}

// gatherInstanceProcess reads limits, OOM score, cgroup, unit and security
// labels of an instance's main process.
func gatherInstanceProcess(_ context.Context, h *host.Host, f *Facts, in *Instance) {
	if l, err := h.Limits(in.PID); err != nil {
		in.LimitsErr = host.Explain(err)
	} else {
		in.Limits = l
	}
	in.OOMScore = h.Read(procFile(in.PID, "oom_score_adj"))
	in.Label = h.Read(procFile(in.PID, "attr/current"))
	for _, p := range f.Processes {
		if p.PPID == in.PID && len(in.ChildOOM) < maxChildren {
			in.ChildOOM = append(in.ChildOOM, ProcReading{PID: p.PID, Comm: p.Comm, Reading: h.Read(procFile(p.PID, "oom_score_adj"))})
		}
	}
	in.Cgroup = gatherCgroup(h, in.PID)
	in.Unit = findInstanceUnit(h, in)
	if in.DataDir != "" {
		in.DataLabel = xattrReading(h, in.DataDir, "security.selinux")
	}
}

// xattrReading reads an extended attribute as a Reading.
func xattrReading(h *host.Host, p, attr string) host.Reading {
	r := host.Reading{Source: "getxattr " + attr + " " + p}
	v, err := h.Getxattr(p, attr)
	if err != nil {
		r.Err = host.Explain(err)
		return r
	}
	r.Value = v
	return r
}

// cgroupMount is where one hierarchy is mounted in dbhost's view.
type cgroupMount struct {
	point, root string
}

// cgroupMounts maps v1 controllers ("memory", "cpu", "pids",
// "name=systemd") and "v2" to their mounts, from dbhost's own mountinfo:
// the files dbhost reads are the ones in its own mount namespace.
func cgroupMounts(h *host.Host) (map[string]cgroupMount, error) {
	mounts, err := h.SelfMountInfo()
	if err != nil {
		return nil, err
	}
	out := map[string]cgroupMount{}
	for _, m := range mounts {
		cm := cgroupMount{point: m.MountPoint, root: m.Root}
		switch m.FSType {
		case "cgroup2":
			if _, ok := out["v2"]; !ok {
				out["v2"] = cm
			}
		case "cgroup":
			for k, v := range m.SuperOptions {
				key := k
				if k == "name" {
					key = "name=" + v
				}
				if _, ok := out[key]; !ok {
					out[key] = cm
				}
			}
		}
	}
	return out, nil
}

// groupDir maps a process's cgroup path to its directory under the mount.
func groupDir(m cgroupMount, p string) string {
	if m.root != "/" && strings.HasPrefix(p, m.root) {
		p = strings.TrimPrefix(p, m.root)
	}
	return path.Join(m.point, p)
}

// gatherCgroup reads the memory, CPU and task limits of a process's
// control groups.
func gatherCgroup(h *host.Host, pid int) Cgroup {
	var c Cgroup
	cgs, err := h.Cgroups(pid)
	if err != nil {
		c.Err = host.Explain(err)
		return c
	}
	mounts, err := cgroupMounts(h)
	if err != nil {
		c.Err = host.Explain(err)
		return c
	}
	v1 := map[string]string{} // controller → path
	v2, hasV2 := "", false
	for _, g := range cgs {
		if g.HierarchyID == 0 && len(g.Controllers) == 0 {
			v2, hasV2 = g.Path, true
			continue
		}
		for _, ctl := range g.Controllers {
			v1[ctl] = g.Path
		}
	}
	if p, ok := v1["name=systemd"]; ok {
		c.SystemdPath = p
	} else if hasV2 {
		c.SystemdPath = v2
	}
	mem, memV1 := v1["memory"]
	mm, mountV1 := mounts["memory"]
	m2, mountV2 := mounts["v2"]
	switch {
	case memV1 && mountV1:
		c.Version, c.Path = 1, mem
		dir := groupDir(mm, mem)
		c.MemoryMax = lowestLimit(h, mm.point, dir, "memory.limit_in_bytes")
		if cp, ok := v1["cpu"]; ok {
			if cm, ok := mounts["cpu"]; ok {
				c.CPUMax = cpuV1(h, groupDir(cm, cp))
			}
		}
		if pp, ok := v1["pids"]; ok {
			if pm, ok := mounts["pids"]; ok {
				c.PidsMax = h.Read(path.Join(groupDir(pm, pp), "pids.max"))
			}
		}
	case hasV2 && mountV2:
		c.Version, c.Path = 2, v2
		dir := groupDir(m2, v2)
		c.MemoryMax = lowestLimit(h, m2.point, dir, "memory.max")
		c.CPUMax = h.Read(path.Join(dir, "cpu.max"))
		c.PidsMax = h.Read(path.Join(dir, "pids.max"))
	default:
		c.Err = "no cgroup memory controller found in /proc/self/mountinfo"
	}
	// The root group has no limit files: no limit applies there.
	for _, r := range []*host.Reading{&c.MemoryMax, &c.CPUMax, &c.PidsMax} {
		if r.Source == "" {
			*r = host.Missing("", "no cgroup controller for this limit")
		} else if !r.OK() && strings.HasSuffix(r.Err, "not present on this host") {
			r.Value, r.Err = "max", ""
		}
	}
	return c
}

// lowestLimit reads a limit file in dir and each ancestor up to the mount
// point and returns the lowest one: a parent's limit binds its children.
func lowestLimit(h *host.Host, top, dir, file string) host.Reading {
	var best host.Reading
	var bestN uint64
	found := false
	for d := dir; ; d = path.Dir(d) {
		r := h.Read(path.Join(d, file))
		if !found && best.Source == "" {
			best = r // report the group's own file when nothing is lower
		}
		if r.OK() {
			if n, err := strconv.ParseUint(r.Value, 10, 64); err == nil && n < cgroupV1Unlimited && (!found || n < bestN) {
				best, bestN, found = r, n, true
			}
		}
		if d == top || d == "/" || d == "." {
			break
		}
	}
	return best
}

// cpuV1 turns cpu.cfs_quota_us and cpu.cfs_period_us into cpu.max form.
func cpuV1(h *host.Host, dir string) host.Reading {
	q := h.Read(path.Join(dir, "cpu.cfs_quota_us"))
	if !q.OK() {
		return q
	}
	p := h.Read(path.Join(dir, "cpu.cfs_period_us"))
	if !p.OK() {
		return p
	}
	v := q.Value
	if strings.HasPrefix(v, "-") {
		v = "max"
	}
	return host.Reading{Value: v + " " + p.Value, Source: q.Source + " + cpu.cfs_period_us"}
}

// unitFromCgroup returns the service a cgroup path is in
// ("/system.slice/postgresql@15-main.service" → "postgresql@15-main.service").
func unitFromCgroup(p string) string {
	parts := strings.Split(p, "/")
	for i := len(parts) - 1; i >= 0; i-- {
		if strings.HasSuffix(parts[i], ".service") {
			return parts[i]
		}
	}
	return ""
}

// findInstanceUnit finds the systemd service of an instance: the one it runs
// in, or else the engine's packaged unit when its files describe this
// instance.
func findInstanceUnit(h *host.Host, in *Instance) *Unit {
	if name := unitFromCgroup(in.Cgroup.SystemdPath); name != "" {
		if u, ok := loadUnit(h, name); ok {
			u.How = "cgroup"
			return u
		}
		return &Unit{Name: name, How: "cgroup", Service: map[string]UnitSetting{}, Err: "unit file not found on disk"}
	}
	for _, name := range packagedUnits(in) {
		u, ok := loadUnit(h, name)
		if !ok || !installedFor(u, in) {
			continue
		}
		u.How = "installed"
		return u
	}
	return nil
}

// packagedUnits lists the unit names distributions ship for an engine.
func packagedUnits(in *Instance) []string { return in.Profile().Units(in.Instance) }

// installedFor decides whether a packaged unit, which the process does not
// run under now, is the one that would start this instance. A private
// server started by hand (another config file, another data directory) must
// not be judged by the distribution's unit.
func installedFor(u *Unit, in *Instance) bool {
	if u.Masked {
		return false
	}
	// Debian's postgresql.service is an umbrella that runs /bin/true.
	if strings.HasSuffix(u.execStart, "/bin/true") {
		return false
	}
	if starts, decided := in.Profile().UnitStarts(in.Instance, u.Name, u.Mentions); decided {
		return starts
	}
	for _, c := range in.ConfigFiles {
		if u.Mentions(c) {
			return true
		}
	}
	return false
}
