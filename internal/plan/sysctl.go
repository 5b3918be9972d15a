package plan

import (
	"path"
	"strconv"
	"strings"

	"github.com/dbhost/dbhost/internal/facts"
	"github.com/dbhost/dbhost/internal/fix"
	"github.com/dbhost/dbhost/internal/host"
)

// sysctlFile is where fix.Render writes kernel parameters.
const sysctlFile = "/etc/sysctl.d/" + fix.Name + ".conf"

// etcSysctlConf is read after every sysctl.d file (facts.gatherPersist).
const etcSysctlConf = "/etc/sysctl.conf"

// sysctls sets each planned kernel parameter at runtime (sysctl -w) and
// installs dbhost's sysctl.d file in the next boot's order. The huge page
// pool a vm.nr_hugepages value sizes follows.
func (m *model) sysctls() {
	knobs := m.knobs()
	for _, it := range m.items {
		for _, kv := range it.Fix.Sysctl {
			v, ok := knobs[host.SysctlPath(kv.Key)]
			if !ok {
				m.note("%s: sysctl %s = %q not modelled: the files and commands refuse it", tag(it), kv.Key, kv.Value)
				continue
			}
			m.setSysctl(kv.Key, v)
		}
	}
	if f, ok := m.file(sysctlFile); ok {
		installSysctlFile(&m.g.Persist, f)
	}
}

// setSysctl sets a kernel parameter's running value as the kernel prints
// it back (words separated by tabs) and the state it drives.
func (m *model) setSysctl(name, value string) {
	r, ok := m.g.Sysctl[name]
	if !ok {
		r = host.Reading{Source: host.SysctlPath(name)}
	}
	r.Value, r.Err = strings.Join(strings.Fields(value), "\t"), ""
	if m.g.Sysctl == nil {
		m.g.Sysctl = map[string]host.Reading{}
	}
	m.g.Sysctl[name] = r
	if name == "vm.nr_hugepages" {
		if n, err := strconv.ParseInt(strings.TrimSpace(value), 10, 64); err == nil {
			m.resizePool(0, n, "vm.nr_hugepages")
		}
	}
}

// installSysctlFile puts the rendered file's assignments where systemd-sysctl
// reads it: files sorted by name across the sysctl.d directories (the same
// name elsewhere hidden by /etc/sysctl.d's), /etc/sysctl.conf last. A file
// that sorts later and sets the same key still wins, as it will at boot.
func installSysctlFile(p *facts.Persist, f fix.File) {
	entries := facts.ParseSysctlConf(f.Path, []byte(f.Content))
	base := path.Base(f.Path)
	hidden := func(file string) bool { return file != etcSysctlConf && path.Base(file) == base }
	var files []string
	var out []facts.SysctlEntry
	placed := false
	place := func() {
		if !placed {
			files = append(files, f.Path)
			out = append(out, entries...)
			placed = true
		}
	}
	for _, file := range p.SysctlFiles {
		if hidden(file) {
			continue
		}
		if file == etcSysctlConf || path.Base(file) > base {
			place()
		}
		files = append(files, file)
		out = append(out, entriesOf(p.Sysctl, file)...)
	}
	place()
	p.SysctlFiles, p.Sysctl = files, out
}

// entriesOf are the assignments of one file, in order.
func entriesOf(all []facts.SysctlEntry, file string) []facts.SysctlEntry {
	var out []facts.SysctlEntry
	for _, e := range all {
		if e.File == file {
			out = append(out, e)
		}
	}
	return out
}
