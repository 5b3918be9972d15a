package plan

import (
	"path"
	"strings"

	"github.com/dbhost/dbhost/internal/facts"
	"github.com/dbhost/dbhost/internal/fix"
	"github.com/dbhost/dbhost/internal/host"
)

// udevFile is where fix.Render writes queue attributes.
const udevFile = "/etc/udev/rules.d/" + fix.Name + ".rules"

// udev sets the planned queue attributes of the devices the storage facts
// hold (udevadm trigger applies the rule now) and adds dbhost's rules to
// the persisted ones in udev's order.
func (m *model) udev() {
	knobs := m.knobs()
	for _, it := range m.items {
		for _, u := range it.Fix.Udev {
			v, ok := knobs[path.Join("/sys/block", u.Device, u.Attr)]
			if !ok {
				m.note("%s: udev %s %s = %q not modelled: the files and commands refuse it", tag(it), u.Device, u.Attr, u.Value)
				continue
			}
			d := m.g.Storage.Devices[u.Device]
			if d == nil {
				m.note("%s: udev %s %s not modelled: device %s is not among the storage facts", tag(it), u.Device, u.Attr, u.Device)
				continue
			}
			if !setQueueAttr(d, u.Attr, v) {
				m.note("%s: udev %s %s not modelled: no fact holds that attribute", tag(it), u.Device, u.Attr)
			}
		}
	}
	if f, ok := m.file(udevFile); ok {
		installUdevRules(&m.g.Persist, f)
	}
}

// setQueueAttr writes one queue attribute of a device; false when the
// device facts do not hold it.
func setQueueAttr(d *facts.BlockDevice, attr, v string) bool {
	var r *host.Reading
	switch attr {
	case "queue/scheduler":
		d.Scheduler.Value, d.Scheduler.Err = selectChoice(d.Scheduler.Value, v), ""
		return true
	case "queue/read_ahead_kb", "bdi/read_ahead_kb":
		r = &d.ReadAheadKB
	case "queue/nr_requests":
		r = &d.NrRequests
	case "queue/rotational":
		r = &d.Rotational
	case "queue/write_cache":
		r = &d.WriteCache
	default:
		return false
	}
	r.Value, r.Err = v, ""
	return true
}

// installUdevRules puts the rendered rules among the persisted ones: rules
// files sorted by name (the same name in a later directory hidden).
func installUdevRules(p *facts.Persist, f fix.File) {
	ours := facts.ParseUdevRules(f.Path, []byte(f.Content))
	base := path.Base(f.Path)
	var out []facts.UdevRule
	placed := false
	for _, r := range p.Udev {
		if path.Base(r.File) == base {
			continue
		}
		if !placed && path.Base(r.File) > base {
			out, placed = append(out, ours...), true
		}
		out = append(out, r)
	}
	if !placed {
		out = append(out, ours...)
	}
	p.Udev = out
}

// mounts changes the options of the planned mounts, as fstab and a remount
// (or an unmount and mount) leave them: in the mount table and in each
// database path's view of its mount.
func (m *model) mounts() {
	for _, it := range m.items {
		for _, c := range it.Fix.Mount {
			n := 0
			for i := range m.g.Storage.Mounts {
				if m.g.Storage.Mounts[i].MountPoint == c.MountPoint {
					changeOptions(&m.g.Storage.Mounts[i], c)
					n++
				}
			}
			for _, in := range m.g.Instances {
				for _, ps := range in.Storage {
					if ps.Mount != nil && ps.Mount.MountPoint == c.MountPoint {
						changeOptions(ps.Mount, c)
						n++
					}
				}
			}
			if n == 0 {
				m.note("%s: mount options of %s not modelled: no such mount among the storage facts", tag(it), c.MountPoint)
			}
		}
	}
}

// atimeModes exclude each other: the kernel keeps one.
var atimeModes = []string{"noatime", "relatime", "strictatime"}

// changeOptions removes then adds options. Per-mount flags (the access
// time modes, ro/rw, nosuid, nodev, noexec) live in Options, the others
// where the filesystem shows them (SuperOptions, unless Options has them).
func changeOptions(mt *facts.Mount, c fix.MountChange) {
	for _, o := range c.Remove {
		k, v, hasV := strings.Cut(o, "=")
		for _, opts := range []map[string]string{mt.Options, mt.SuperOptions} {
			if cur, ok := opts[k]; ok && (!hasV || cur == v) {
				delete(opts, k)
			}
		}
	}
	for _, o := range c.Add {
		k, v, _ := strings.Cut(o, "=")
		if isAtime(k) {
			for _, a := range atimeModes {
				delete(mt.Options, a)
			}
		}
		opts := &mt.SuperOptions
		if perMount(k) || hasKey(mt.Options, k) {
			opts = &mt.Options
		}
		if *opts == nil {
			*opts = map[string]string{}
		}
		(*opts)[k] = v
	}
}

func isAtime(k string) bool {
	for _, a := range atimeModes {
		if a == k {
			return true
		}
	}
	return false
}

func perMount(k string) bool {
	switch k {
	case "ro", "rw", "nosuid", "nodev", "noexec", "nodiratime":
		return true
	}
	return isAtime(k)
}

func hasKey(m map[string]string, k string) bool {
	_, ok := m[k]
	return ok
}
