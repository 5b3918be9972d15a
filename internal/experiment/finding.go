package experiment

import (
	"errors"
	"fmt"
	"path"
	"slices"
	"strings"

	"github.com/dbhost/dbhost/internal/check"
	"github.com/dbhost/dbhost/internal/fix"
	"github.com/dbhost/dbhost/internal/host"
	"github.com/dbhost/dbhost/internal/journal"
	"github.com/dbhost/dbhost/internal/knob"
)

// Arm names of an experiment on findings: the host as it is, and with the
// findings' runtime fixes.
const (
	FindingArmNow   = "now"
	FindingArmFixed = "fixed"
)

// Reader reads a kernel file's content (a *host.Host).
type Reader interface {
	ReadString(p string) (string, error)
}

// FindingPlan is what `experiment --finding` runs: two arms and the
// preset whose workload exercises the findings' domain.
type FindingPlan struct {
	IDs  []string
	Arms []Arm
	// Workload names the preset whose workload the experiment runs.
	Workload string
	Notes    []string
}

// findingWorkloads maps check IDs (longest matching prefix wins) to the
// preset whose workload exercises what the check judges; docs/experiment.md
// has the same table. An empty preset: no preset workload fits.
var findingWorkloads = []struct{ prefix, preset, why string }{
	{"mem.swappiness", "swappiness", ""},
	{"mem.swap", "swappiness", ""},
	{"mem.thp", "thp", ""},
	{"mem.hugepages", "hugepages", ""},
	{"mem.dirty", "dirty", ""},
	{"mem", "hugepages", ""},
	{"numa", "hugepages", ""},
	{"storage.scheduler", "scheduler", ""},
	{"storage.read_ahead", "readahead", ""},
	{"storage", "dirty", ""},
	{"net", "", "network findings need many short client connections, and no preset workload opens them (pgbench connects once per client)"},
	{"", "swappiness", ""},
}

// findingWorkload returns the preset whose workload suits a check.
func findingWorkload(id string) (preset string, err error) {
	for _, w := range findingWorkloads {
		if w.prefix == "" || id == w.prefix || strings.HasPrefix(id, w.prefix+".") {
			if w.preset == "" {
				return "", fmt.Errorf("%s: %s", id, w.why)
			}
			return w.preset, nil
		}
	}
	return "swappiness", nil
}

// PlanFindings builds the arms of an experiment on the failing findings
// with the given check IDs: "now" holds the current value (read through r)
// of every knob their runtime fixes change, "fixed" the fixes' values.
// It refuses an ID that is unknown, passes, could not be judged, or whose
// fix changes nothing at runtime, saying why.
func PlanFindings(r Reader, fds []check.Finding, ids []string) (*FindingPlan, error) {
	if len(ids) == 0 {
		return nil, errors.New("--finding: no check ID")
	}
	fp := &FindingPlan{}
	now := Arm{Name: FindingArmNow}
	fixed := Arm{Name: FindingArmFixed}
	set := map[string]string{}
	for _, id := range ids {
		id = strings.TrimSpace(id)
		if id == "" || slices.Contains(fp.IDs, id) {
			continue
		}
		if _, ok := check.Lookup(id); !ok {
			return nil, fmt.Errorf("--finding %s: no such check (see 'dbhost checks')", id)
		}
		var failing []check.Finding
		var statuses []string
		for _, fd := range fds {
			if fd.ID != id {
				continue
			}
			if fd.Status == check.Fail {
				failing = append(failing, fd)
			} else {
				statuses = append(statuses, fmt.Sprintf("%s on %s", fd.Status, fd.Subject))
			}
		}
		if len(failing) == 0 {
			if len(statuses) == 0 {
				return nil, fmt.Errorf("--finding %s: the check does not apply to this host (no finding)", id)
			}
			return nil, fmt.Errorf("--finding %s: nothing to fix: %s", id, strings.Join(statuses, ", "))
		}
		w, err := findingWorkload(id)
		if err != nil {
			return nil, fmt.Errorf("--finding %w", err)
		}
		if fp.Workload == "" {
			fp.Workload = w
		} else if w != fp.Workload {
			fp.Notes = append(fp.Notes, fmt.Sprintf("%s would run the %s preset's workload; the first finding's (%s) is used", id, w, fp.Workload))
		}
		for _, fd := range failing {
			settings, notes, err := runtimeSettings(r, fd)
			if err != nil {
				return nil, fmt.Errorf("--finding %s (%s): %w", id, fd.Subject, err)
			}
			fp.Notes = append(fp.Notes, notes...)
			for _, s := range settings {
				if v, ok := set[s.name]; ok {
					if v != s.fixed {
						return nil, fmt.Errorf("--finding %s: sets %s to %s, another finding to %s", id, s.name, s.fixed, v)
					}
					continue
				}
				set[s.name] = s.fixed
				now.Set = append(now.Set, knob.Setting{Name: s.name, Value: s.now})
				fixed.Set = append(fixed.Set, knob.Setting{Name: s.name, Value: s.fixed})
			}
		}
		fp.IDs = append(fp.IDs, id)
	}
	if len(fp.IDs) == 0 {
		return nil, errors.New("--finding: no check ID")
	}
	fp.Arms = []Arm{now, fixed}
	return fp, nil
}

// findingSetting is one knob of a fix: its name, current and fixed value.
type findingSetting struct{ name, now, fixed string }

// runtimeSettings maps the runtime part of a finding's fix (fix.Knobs)
// onto experiment knobs, and refuses a fix that has none, or that needs
// what an experiment cannot do (a database's configuration, a change on a
// container's host).
func runtimeSettings(r Reader, fd check.Finding) ([]findingSetting, []string, error) {
	fx := fd.Fix
	if fx == nil {
		return nil, nil, errors.New("the finding proposes no fix")
	}
	if fx.HostOnly {
		return nil, nil, errors.New("the fix must be made on the container's host (kernel settings are not namespaced)")
	}
	if len(fx.Config) > 0 {
		var keys []string
		restart := false
		for _, c := range fx.Config {
			keys = append(keys, c.Key+"="+c.Value)
			restart = restart || c.Restart
		}
		why := "the fix changes the database's own configuration (" + strings.Join(keys, ", ") + ")"
		if restart {
			why += ", which needs a restart"
		}
		return nil, nil, errors.New(why + "; test it on that server with --pg/--mysql and --arm 'pg.NAME=VALUE' or 'mysql.NAME=VALUE'")
	}
	ks := fix.Knobs(fx)
	if len(ks) == 0 {
		return nil, nil, fmt.Errorf("the fix cannot be applied at runtime: %s", persistentParts(fx))
	}
	var out []findingSetting
	for _, k := range ks {
		name, value, err := knobFor(k)
		if err != nil {
			return nil, nil, err
		}
		content, err := r.ReadString(k.Path)
		if err != nil {
			return nil, nil, fmt.Errorf("%s: the current value cannot be read: %s", k.Path, host.Explain(err))
		}
		cur := journal.Current(content)
		if strings.HasPrefix(name, "disk.") {
			cur = path.Base(path.Dir(path.Dir(k.Path))) + "=" + cur
		}
		if _, err := knob.Parse(name + "=" + quoteValue(cur)); err != nil {
			return nil, nil, err
		}
		out = append(out, findingSetting{name: name, now: cur, fixed: value})
	}
	var notes []string
	if rest := persistentParts(fx); rest != "" {
		notes = append(notes, fmt.Sprintf("%s: the experiment tests the runtime change only; %s is not part of it", fd.ID, rest))
	}
	return out, notes, nil
}

func quoteValue(v string) string {
	if strings.ContainsAny(v, " \t,") {
		return `"` + v + `"`
	}
	return v
}

// persistentParts describes the parts of a fix that are not runtime knobs.
func persistentParts(fx *fix.Fix) string {
	var parts []string
	if len(fx.Cmdline) > 0 {
		parts = append(parts, "the kernel command line ("+strings.Join(fx.Cmdline, " ")+", needs a reboot)")
	}
	if len(fx.Mount) > 0 {
		var m []string
		for _, c := range fx.Mount {
			m = append(m, c.MountPoint)
		}
		parts = append(parts, "mount options of "+strings.Join(m, ", ")+" (/etc/fstab and a remount)")
	}
	if len(fx.Limits) > 0 || len(fx.Dropins) > 0 {
		parts = append(parts, "process limits or unit settings (they take effect when the service restarts)")
	}
	if len(fx.Config) > 0 {
		parts = append(parts, "database configuration")
	}
	if fx.Restart != nil {
		parts = append(parts, "a server restart ("+fx.Restart.Why+")")
	}
	if fx.Manual != "" {
		parts = append(parts, "a manual change ("+strings.TrimSuffix(fx.Manual, ".")+")")
	}
	if len(parts) == 0 && len(fx.Runtime) > 0 {
		parts = append(parts, "commands to run by hand ("+strings.Join(fx.Runtime, "; ")+")")
	}
	return strings.Join(parts, "; ")
}

// knobFor maps a runtime kernel change onto an experiment knob: a sysctl,
// thp.*, hugepages.SIZE, or disk.ATTR for one device ("vda=VALUE").
func knobFor(k fix.Knob) (name, value string, err error) {
	p := path.Clean(k.Path)
	switch {
	case strings.HasPrefix(p, "/proc/sys/"):
		rest := strings.TrimPrefix(p, "/proc/sys/")
		name = strings.ReplaceAll(rest, "/", ".")
		if strings.Contains(rest, ".") {
			name = rest // a component holds a dot (eth0.100): the slash form
		}
		value = k.Value
	case p == "/sys/kernel/mm/transparent_hugepage/enabled" || p == "/sys/kernel/mm/transparent_hugepage/defrag":
		name, value = "thp."+path.Base(p), k.Value
	case strings.HasPrefix(p, host.HugePagesRoot+"/") && path.Base(p) == "nr_hugepages":
		kb, ok := host.HugePageSizeKB(path.Base(path.Dir(p)))
		if !ok {
			return "", "", fmt.Errorf("%s: not a huge page pool", p)
		}
		name, value = "hugepages."+hugeName(kb), k.Value
	case strings.HasPrefix(p, "/sys/block/") && path.Base(path.Dir(p)) == "queue" && strings.Count(p, "/") == 5:
		dev := path.Base(path.Dir(path.Dir(p)))
		name, value = "disk."+path.Base(p), dev+"="+k.Value
	default:
		return "", "", fmt.Errorf("%s: no experiment knob sets it (sysctls, thp.enabled, thp.defrag, hugepages.SIZE and disk.ATTR do)", p)
	}
	if _, err := knob.Parse(name + "=" + quoteValue(value)); err != nil {
		return "", "", err
	}
	return name, value, nil
}

// hugeName writes a huge page size in kB as knob names do (2M, 1G).
func hugeName(kb uint64) string {
	switch {
	case kb%(1<<20) == 0:
		return fmt.Sprintf("%dG", kb>>20)
	case kb%(1<<10) == 0:
		return fmt.Sprintf("%dM", kb>>10)
	}
	return fmt.Sprintf("%dK", kb)
}
