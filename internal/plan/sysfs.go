package plan

import (
	"path"
	"strconv"
	"strings"

	"github.com/dbhost/dbhost/internal/facts"
	"github.com/dbhost/dbhost/internal/fix"
	"github.com/dbhost/dbhost/internal/host"
)

// tmpfilesFile is where fix.Render persists /sys knobs.
const tmpfilesFile = "/etc/tmpfiles.d/" + fix.Name + ".conf"

// sysfs sets the planned /sys knobs now (transparent huge pages, huge page
// pools of a size other than the default) and installs dbhost's
// tmpfiles.d lines among the THP boot settings.
func (m *model) sysfs() {
	knobs := m.knobs()
	for _, it := range m.items {
		for _, kv := range it.Fix.Sysfs {
			v, ok := knobs[kv.Key]
			if !ok {
				m.note("%s: %s = %q not modelled: the files and commands refuse it", tag(it), kv.Key, kv.Value)
				continue
			}
			if !m.setSysfs(kv.Key, v) {
				m.note("%s: %s not modelled: no fact holds it", tag(it), kv.Key)
			}
		}
	}
	if f, ok := m.file(tmpfilesFile); ok {
		installTmpfiles(&m.g.Memory.THP, f)
	}
}

// setSysfs writes one /sys knob in the model; false when no fact holds it.
func (m *model) setSysfs(p, v string) bool {
	if key, ok := strings.CutPrefix(path.Clean(p), facts.THPDir+"/"); ok {
		return m.setTHP(key, v)
	}
	dir, file := path.Split(path.Clean(p))
	if kb, ok := host.HugePageSizeKB(path.Base(dir)); ok && file == "nr_hugepages" && path.Dir(path.Clean(dir)) == host.HugePagesRoot {
		n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
		if err != nil {
			return false
		}
		m.resizePool(int(kb), n, p)
		return true
	}
	return false
}

// setTHP sets a transparent huge page file: a selector line keeps the
// kernel's choices with the new one bracketed, a number is written as is.
func (m *model) setTHP(key, v string) bool {
	t := &m.g.Memory.THP
	var r *host.Reading
	switch key {
	case "enabled":
		r = &t.Enabled
	case "defrag":
		r = &t.Defrag
	case "khugepaged/defrag":
		r = &t.KhugepagedDefrag
	case "khugepaged/max_ptes_none":
		r = &t.MaxPtesNone
	case "shmem_enabled":
		r = &t.ShmemEnabled
	default:
		return false
	}
	r.Value, r.Err = selectChoice(r.Value, v), ""
	return true
}

// selectChoice brackets choice in a selector line ("always [madvise]
// never"); a line without brackets (a plain value) becomes choice.
func selectChoice(line, choice string) string {
	words := strings.Fields(strings.NewReplacer("[", "", "]", "").Replace(line))
	if !strings.Contains(line, "[") || len(words) < 2 {
		return choice
	}
	found := false
	for i, w := range words {
		if w == choice {
			words[i], found = "["+w+"]", true
		}
	}
	if !found {
		words = append(words, "["+choice+"]")
	}
	return strings.Join(words, " ")
}

// installTmpfiles adds dbhost's tmpfiles.d THP lines to the boot settings
// in boot order: after the kernel command line (running, then GRUB's),
// among the tmpfiles.d files by name, where the first line for a file wins
// (a later one is ignored), and before units and rc.local, which run after
// tmpfiles.d and so win.
func installTmpfiles(t *facts.THP, f fix.File) {
	ours := tmpfilesTHP(f)
	var before, tmp, after []facts.Persisted
	for _, p := range t.Boot {
		switch {
		case p.File == "/proc/cmdline" || strings.HasPrefix(p.File, "/etc/default/grub"):
			before = append(before, p)
		case isTmpfiles(p.File):
			if path.Base(p.File) != path.Base(f.Path) {
				tmp = append(tmp, p)
			}
		default:
			after = append(after, p)
		}
	}
	seen := map[string]bool{}
	var kept []facts.Persisted
	for _, p := range sortTmpfiles(append(tmp, ours...)) {
		if seen[p.Key] {
			p.Note = "an earlier tmpfiles.d line sets the same file"
			t.BootIgnored = append(t.BootIgnored, p)
			continue
		}
		seen[p.Key] = true
		kept = append(kept, p)
	}
	t.Boot = append(append(before, kept...), after...)
}

func isTmpfiles(file string) bool { return strings.Contains(file, "/tmpfiles.d/") }

// sortTmpfiles orders lines by file name (systemd-tmpfiles' order), keeping
// the order within a file.
func sortTmpfiles(ps []facts.Persisted) []facts.Persisted {
	out := make([]facts.Persisted, 0, len(ps))
	for len(ps) > 0 {
		first := 0
		for i, p := range ps {
			if path.Base(p.File) < path.Base(ps[first].File) {
				first = i
			}
		}
		name := path.Base(ps[first].File)
		var rest []facts.Persisted
		for _, p := range ps {
			if path.Base(p.File) == name {
				out = append(out, p)
			} else {
				rest = append(rest, p)
			}
		}
		ps = rest
	}
	return out
}

// tmpfilesTHP reads the "w /sys/kernel/mm/transparent_hugepage/KEY - - - - V"
// lines of a rendered tmpfiles.d file.
func tmpfilesTHP(f fix.File) []facts.Persisted {
	var out []facts.Persisted
	for i, ln := range strings.Split(f.Content, "\n") {
		w := strings.Fields(ln)
		if len(w) < 7 || !strings.HasPrefix(w[0], "w") {
			continue
		}
		key, ok := strings.CutPrefix(path.Clean(strings.Trim(w[1], `"'`)), facts.THPDir+"/")
		if !ok {
			continue
		}
		out = append(out, facts.Persisted{Key: key, Value: strings.Join(w[6:], " "), File: f.Path, Line: i + 1})
	}
	return out
}
