package plan

import (
	"fmt"
	"sort"
	"strings"

	"github.com/dbhost/dbhost/internal/facts"
	"github.com/dbhost/dbhost/internal/fix"
)

// Model returns the host as it would be after the plan items: a deep copy of
// f with every planned value where the checks read it, and notes naming
// each part of the plan it could not model (and why). f is never changed.
//
// The plan is taken as applied in full: the files fix --out renders are
// installed (as fix.Render writes them, so that a later file that overrides
// one of dbhost's values still wins), the runtime values set (the first
// value a setting is given, as the files and fix --apply keep it), manual
// steps left to a person are not done (they are named in the notes), and
// every server a changed setting, a unit drop-in or a fix's restart
// concerns is restarted. Steps run in the order the apply-now commands take:
// files and kernel values first, then limits, then restarts.
func Model(f *facts.Facts, items []fix.Item) (*facts.Facts, []string) {
	m := &model{g: f.Clone(), obs: f, items: usable(items), ctx: fix.ContextFrom(f), restart: map[*facts.Instance][]string{}}
	m.files = fix.Render(m.ctx, m.items)
	m.memBefore = memoryBase(m.g)
	m.sysctls()
	m.sysfs()
	m.udev()
	m.mounts()
	m.cmdline()
	m.limitLines()
	m.rlimits()
	m.dropins()
	m.settings()
	m.restarts()
	m.memoryAfter()
	m.leftOut()
	return m.g, m.sortedNotes()
}

// model is the planned host being built: g is the copy changed, obs the
// observed facts, files what fix.Render writes for the items.
type model struct {
	g, obs *facts.Facts
	items  []fix.Item
	ctx    fix.Context
	files  []fix.File
	// restart holds the servers taken as restarted, with why.
	restart map[*facts.Instance][]string
	// memBefore is the memory the kernel's accounting started from.
	memBefore memBase
	notes     []string
}

// usable keeps the items that carry a fix.
func usable(items []fix.Item) []fix.Item {
	var out []fix.Item
	for _, it := range items {
		if it.Fix != nil {
			out = append(out, it)
		}
	}
	return out
}

func (m *model) note(format string, a ...any) { m.notes = append(m.notes, fmt.Sprintf(format, a...)) }

func (m *model) sortedNotes() []string {
	seen := map[string]bool{}
	var out []string
	for _, n := range m.notes {
		if !seen[n] {
			seen[n] = true
			out = append(out, n)
		}
	}
	sort.Strings(out)
	return out
}

// tag names an item in notes: "ID (subject)".
func tag(it fix.Item) string {
	if it.Subject == "" || it.Subject == "host" {
		return it.ID
	}
	return it.ID + " (" + it.Subject + ")"
}

// instance finds a server by the name findings and config changes use.
func (m *model) instance(name string) *facts.Instance {
	for _, in := range m.g.Instances {
		if in.Name() == name {
			return in
		}
	}
	return nil
}

// file returns the rendered file at path, if the plan writes one.
func (m *model) file(path string) (fix.File, bool) {
	for _, f := range m.files {
		if f.Path == path {
			return f, true
		}
	}
	return fix.File{}, false
}

// knobs maps each runtime kernel path of the items to the first value
// given for it (what fix --apply sets and the files keep), noting the
// paths given two values.
func (m *model) knobs() map[string]string {
	val, who := map[string]string{}, map[string]string{}
	for _, it := range m.items {
		for _, k := range fix.Knobs(it.Fix) {
			if v, ok := val[k.Path]; ok {
				if v != k.Value {
					m.note("%s: two values, %s (%s) and %s (%s): modelled %s, the first, as fix --out and --apply keep it", k.Path, v, who[k.Path], k.Value, tag(it), v)
				}
				continue
			}
			val[k.Path], who[k.Path] = k.Value, tag(it)
		}
	}
	return val
}

// markRestart takes a server as restarted, for why.
func (m *model) markRestart(in *facts.Instance, why string) {
	m.restart[in] = append(m.restart[in], why)
}

// leftOut names what no file, value or restart of the plan does: manual
// steps, commands the model has no structured form of, TuneD settings.
func (m *model) leftOut() {
	for _, it := range m.items {
		fx := it.Fix
		if fx.Manual != "" {
			m.note("%s: manual step not modelled: %s", tag(it), clip(fx.Manual))
		}
		for _, c := range fx.Runtime {
			if !modelledCommand(c) {
				m.note("%s: command not modelled: %s", tag(it), clip(c))
			}
		}
		for _, kv := range fx.TunedDisk {
			m.note("%s: TuneD [disk] %s=%s not modelled (the child profile takes effect only with tuned-adm)", tag(it), kv.Key, kv.Value)
		}
		if fx.HostOnly && len(fix.Knobs(fx)) > 0 {
			m.note("%s: kernel values modelled as set on the container's host (dbhost runs in a container)", tag(it))
		}
	}
	if m.ctx.TunedProfile != "" && m.anyKernelValue() {
		m.note("TuneD profile %s is active: dbhost's child profile /etc/tuned/dbhost is not modelled as active (it takes effect only with tuned-adm profile dbhost)", m.ctx.TunedProfile)
	}
}

func (m *model) anyKernelValue() bool {
	for _, it := range m.items {
		if len(it.Fix.Sysctl) > 0 || len(it.Fix.Sysfs) > 0 {
			return true
		}
	}
	return false
}

// modelledCommand reports whether a fix's own command does what a
// structured part of the fix says, which the model applies from there.
func modelledCommand(c string) bool {
	for _, p := range []string{"prlimit --pid", "systemctl set-property", "mount -o remount", "sysctl -w", "sysctl --system", "systemctl daemon-reload"} {
		if strings.HasPrefix(c, p) {
			return true
		}
	}
	return strings.Contains(c, " CONFIG SET ")
}

// clip keeps a note's quoted text to one short line.
func clip(s string) string {
	s = strings.Join(strings.Fields(s), " ")
	if len(s) > 160 {
		return s[:157] + "..."
	}
	return s
}
