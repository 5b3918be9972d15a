package facts

import (
	"fmt"
	"path"
	"sort"
	"strings"

	"github.com/dbhost/dbhost/internal/host"
	"github.com/dbhost/dbhost/internal/textio"
)

// THPDir is where the kernel exposes transparent huge page settings.
const THPDir = "/sys/kernel/mm/transparent_hugepage"

// Active returns the bracketed choice of a selector file
// ("always [madvise] never" → "madvise"), or the trimmed value of a plain
// one ("511").
func Active(r host.Reading) string {
	v := strings.TrimSpace(r.Value)
	if i := strings.IndexByte(v, '['); i >= 0 {
		if k := strings.IndexByte(v[i:], ']'); k > 0 {
			return v[i+1 : i+k]
		}
	}
	return v
}

// thpModes are the choices the kernel offers in each THP selector file.
var thpModes = map[string][]string{
	"enabled":              {"always", "madvise", "never"},
	"defrag":               {"always", "defer", "defer+madvise", "madvise", "never"},
	"shmem_enabled":        {"always", "within_size", "advise", "never", "deny", "force"},
	"khugepaged/defrag":    {"0", "1"},
	"transparent_hugepage": {"always", "madvise", "never"}, // the boot parameter
}

// THPMode returns the active choice of the THP selector file key
// ("enabled", "defrag", "shmem_enabled"), or why there is none: the file
// could not be read, or it does not hold one of the kernel's choices.
func THPMode(r host.Reading, key string) (string, string) {
	if !r.OK() {
		return "", r.Err
	}
	v := Active(r)
	modes, known := thpModes[key]
	for _, m := range modes {
		if v == m {
			return v, ""
		}
	}
	if key == "khugepaged/max_ptes_none" {
		if _, why := r.IntIn(0, 511); why != "" {
			return "", why
		}
		return v, ""
	}
	if !known {
		return v, ""
	}
	return "", fmt.Sprintf("%s holds %q, none of the kernel's choices (%s)", r.Source, clipValue(r.Value), strings.Join(modes, ", "))
}

// clipValue keeps a quoted bad value short.
func clipValue(s string) string {
	s = strings.TrimSpace(s)
	if len(s) > 40 {
		return s[:40] + "..."
	}
	return s
}

func gatherTHP(h *host.Host) THP {
	t := THP{
		Enabled:          h.Read(THPDir + "/enabled"),
		Defrag:           h.Read(THPDir + "/defrag"),
		KhugepagedDefrag: h.Read(THPDir + "/khugepaged/defrag"),
		MaxPtesNone:      h.Read(THPDir + "/khugepaged/max_ptes_none"),
		ShmemEnabled:     h.Read(THPDir + "/shmem_enabled"),
	}
	b := &bootScan{}
	b.cmdline(h)
	b.grub(h)
	b.tmpfiles(h)
	b.units(h)
	b.rcLocal(h)
	t.Boot, t.BootIgnored = b.boot, b.ignored
	return t
}

// bootScan collects the places that set THP at boot, in boot order.
type bootScan struct {
	boot, ignored []Persisted
}

func (b *bootScan) add(p Persisted) { b.boot = append(b.boot, p) }
func (b *bootScan) ignore(p Persisted, why string) {
	p.Note = why
	b.ignored = append(b.ignored, p)
}

// cmdline: transparent_hugepage= on the running kernel's command line sets
// "enabled" from the first instant (it has no defrag counterpart).
func (b *bootScan) cmdline(h *host.Host) {
	args, err := h.CmdLine()
	if err != nil {
		return
	}
	for _, a := range args {
		if a == "--" {
			break
		}
		if v, ok := strings.CutPrefix(a, "transparent_hugepage="); ok {
			b.add(Persisted{Key: "enabled", Value: v, File: "/proc/cmdline"})
		}
	}
}

var grubCmdline = textio.LazyRegexp(`^\s*GRUB_CMDLINE_LINUX(?:_DEFAULT)?\s*=\s*(.*)$`)

// grub: the boot loader configuration is what the next boot's command line
// will be (after update-grub), so it comes after the running one.
func (b *bootScan) grub(h *host.Host) {
	for _, a := range grubArgs(h) {
		if v, ok := strings.CutPrefix(a.Key, "transparent_hugepage="); ok {
			b.add(Persisted{Key: "enabled", Value: v, File: a.File, Line: a.Line})
		}
	}
}

// tmpfilesDirs in priority order: a file name in an earlier directory
// shadows the same name in a later one.
var tmpfilesDirs = []string{"/etc/tmpfiles.d", "/run/tmpfiles.d", "/usr/local/lib/tmpfiles.d", "/usr/lib/tmpfiles.d"}

// tmpfiles: systemd-tmpfiles reads the files sorted by name; for a path
// listed twice the line from the file that sorts first wins.
func (b *bootScan) tmpfiles(h *host.Host) {
	byName := map[string]string{}
	for _, dir := range tmpfilesDirs {
		names, err := h.ReadDir(dir)
		if err != nil {
			continue
		}
		for _, n := range names {
			if _, seen := byName[n]; !seen && strings.HasSuffix(n, ".conf") {
				byName[n] = dir + "/" + n
			}
		}
	}
	names := make([]string, 0, len(byName))
	for n := range byName {
		names = append(names, n)
	}
	sort.Strings(names)
	seen := map[string]bool{}
	for _, n := range names {
		data, err := h.ReadFile(byName[n])
		if err != nil {
			continue
		}
		for _, p := range parseTmpfilesTHP(byName[n], string(data)) {
			if seen[p.Key] {
				b.ignore(p, "an earlier tmpfiles.d line sets the same file")
				continue
			}
			seen[p.Key] = true
			b.add(p)
		}
	}
}

// parseTmpfilesTHP finds "w /sys/kernel/mm/transparent_hugepage/X - - - - V"
// lines.
func parseTmpfilesTHP(file, data string) []Persisted {
	var out []Persisted
	for i, ln := range strings.Split(data, "\n") {
		f := strings.Fields(ln)
		if len(f) < 7 || !strings.HasPrefix(f[0], "w") {
			continue
		}
		key, ok := thpKey(f[1])
		if !ok {
			continue
		}
		out = append(out, Persisted{Key: key, Value: strings.Join(f[6:], " "), File: file, Line: i + 1})
	}
	return out
}

// thpKey turns /sys/kernel/mm/transparent_hugepage/khugepaged/defrag into
// "khugepaged/defrag".
func thpKey(p string) (string, bool) {
	p = path.Clean(strings.Trim(p, `"'`))
	k, ok := strings.CutPrefix(p, THPDir+"/")
	return k, ok && k != ""
}

// thpWrite matches shell writes of a THP file: "echo never > FILE",
// "echo never | tee FILE", "printf never > FILE", with optional quotes.
var thpWrite = textio.LazyRegexp(`(?:echo|printf)\s+(?:-n\s+)?["']?([A-Za-z0-9+_]+)["']?\s*(?:>>?|\|\s*(?:sudo\s+)?tee(?:\s+-a)?)\s*["']?(/sys/kernel/mm/transparent_hugepage/[A-Za-z0-9_/]+)`)

// parseShellTHP finds THP writes in shell lines (rc.local, ExecStart=).
func parseShellTHP(file, data string) []Persisted {
	var out []Persisted
	for i, ln := range strings.Split(data, "\n") {
		t := strings.TrimSpace(ln)
		if strings.HasPrefix(t, "#") || !strings.Contains(t, "transparent_hugepage") {
			continue
		}
		for _, m := range thpWrite.FindAllStringSubmatch(t, -1) {
			if key, ok := thpKey(m[2]); ok {
				out = append(out, Persisted{Key: key, Value: m[1], File: file, Line: i + 1})
			}
		}
	}
	return out
}

const unitDir = "/etc/systemd/system"

// units: services in /etc/systemd/system that write THP files (the
// "disable-thp.service" recipes); they apply at boot only when enabled, i.e.
// linked from a *.wants directory.
func (b *bootScan) units(h *host.Host) {
	names, err := h.ReadDir(unitDir)
	if err != nil {
		return
	}
	enabled := map[string]bool{}
	var services []string
	for _, n := range names {
		switch {
		case strings.HasSuffix(n, ".wants"):
			if ws, err := h.ReadDir(unitDir + "/" + n); err == nil {
				for _, w := range ws {
					enabled[w] = true
				}
			}
		case strings.HasSuffix(n, ".service"):
			services = append(services, n)
		}
	}
	for _, n := range services {
		file := unitDir + "/" + n
		data, err := h.ReadFile(file)
		if err != nil || !strings.Contains(string(data), "transparent_hugepage") {
			continue
		}
		for _, p := range parseShellTHP(file, string(data)) {
			if enabled[n] {
				b.add(p)
			} else {
				b.ignore(p, "unit "+n+" is not enabled (no link in a .wants directory)")
			}
		}
	}
}

// rcLocal: systemd's rc-local generator runs /etc/rc.local only when it is
// executable; RHEL keeps it at /etc/rc.d/rc.local.
func (b *bootScan) rcLocal(h *host.Host) {
	for _, file := range []string{"/etc/rc.local", "/etc/rc.d/rc.local"} {
		data, err := h.ReadFile(file)
		if err != nil {
			continue
		}
		ps := parseShellTHP(file, string(data))
		if len(ps) == 0 {
			continue
		}
		st, err := h.Stat(file)
		exec := err == nil && st.Mode&0o111 != 0
		for _, p := range ps {
			if exec {
				b.add(p)
			} else {
				b.ignore(p, file+" is not executable, so it does not run at boot")
			}
		}
	}
}

// BootValue returns the value the next boot leaves for a THP key (the last
// setter wins) and every setter found, in boot order. TuneD is not included:
// the checks read it from Tuned.VM.
func (t THP) BootValue(key string) (Persisted, []Persisted, bool) {
	var all []Persisted
	for _, p := range t.Boot {
		if p.Key == key {
			all = append(all, p)
		}
	}
	if len(all) == 0 {
		return Persisted{}, nil, false
	}
	return all[len(all)-1], all, true
}
