package facts

import (
	"strings"

	"github.com/dbhost/dbhost/internal/host"
	"github.com/dbhost/dbhost/internal/textio"
)

// Huge page pools a boot unit reserves: enabled services in
// /etc/systemd/system (linked from a .wants directory) and an executable
// rc.local that write nr_hugepages, by sysctl or into /proc or /sys. Key is
// "vm.nr_hugepages" for the default pool or the pool's directory name
// ("hugepages-1048576kB"); Value is the page count, empty when the line
// does not say it literally (a script, a variable).

var (
	hugeSysctlSet = textio.LazyRegexp(`vm[./]nr_hugepages\s*=\s*"?([0-9]*)`)
	hugeEchoSet   = textio.LazyRegexp(`(?:echo|printf)\s+(?:-n\s+)?["']?([^\s"'>|]*)["']?\s*(?:>>?|\|\s*(?:sudo\s+)?tee(?:\s+-a)?)\s*["']?(/proc/sys/vm/nr_hugepages|/sys/kernel/mm/hugepages/(hugepages-[0-9]+kB)/nr_hugepages)`)
)

// parseHugePagesBoot finds the lines of a unit or script that reserve huge
// pages; a line that names nr_hugepages in a form it cannot read is kept
// with an empty value, so the pool's boot size is reported unknown rather
// than zero.
func parseHugePagesBoot(file, data string) []Persisted {
	var out []Persisted
	for i, ln := range strings.Split(data, "\n") {
		t := strings.TrimSpace(ln)
		lt := strings.ToLower(t)
		if strings.HasPrefix(t, "#") || strings.HasPrefix(t, ";") || !(strings.Contains(lt, "hugepages") || strings.Contains(lt, "hugetlb")) {
			continue
		}
		p := Persisted{File: file, Line: i + 1, Key: "vm.nr_hugepages"}
		switch m := hugeEchoSet.FindStringSubmatch(t); {
		case m != nil:
			p.Value = m[1]
			if m[3] != "" {
				p.Key = m[3]
			}
		case hugeSysctlSet.MatchString(t):
			p.Value = hugeSysctlSet.FindStringSubmatch(t)[1]
		case strings.Contains(t, "nr_hugepages") || strings.HasPrefix(t, "ExecStart"):
			// A script or a form dbhost does not read: the count is
			// unknown.
			p.Note = "the count is not written literally on this line"
		default:
			continue
		}
		if strings.Trim(p.Value, "0123456789") != "" {
			p.Value = ""
		}
		out = append(out, p)
	}
	return out
}

// gatherHugePagesBoot scans enabled units in /etc/systemd/system and an
// executable rc.local.
func gatherHugePagesBoot(h *host.Host, p *Persist) {
	names, err := h.ReadDir(unitDir)
	if err == nil {
		enabled := map[string]bool{}
		for _, n := range names {
			if strings.HasSuffix(n, ".wants") {
				ws, _ := h.ReadDir(unitDir + "/" + n)
				for _, w := range ws {
					enabled[w] = true
				}
			}
		}
		for _, n := range names {
			if !strings.HasSuffix(n, ".service") || !enabled[n] {
				continue
			}
			file := unitDir + "/" + n
			if b, err := h.ReadFile(file); err == nil && (strings.Contains(string(b), "hugepages") || strings.Contains(string(b), "hugetlb")) {
				p.HugePagesBoot = append(p.HugePagesBoot, parseHugePagesBoot(file, string(b))...)
			}
		}
	}
	for _, file := range []string{"/etc/rc.local", "/etc/rc.d/rc.local"} {
		st, err := h.Stat(file)
		if err != nil || st.Mode&0o111 == 0 {
			continue
		}
		if b, err := h.ReadFile(file); err == nil {
			p.HugePagesBoot = append(p.HugePagesBoot, parseHugePagesBoot(file, string(b))...)
		}
	}
}

// gatherGrubArgs lists the kernel arguments GRUB gives the next boot.
func gatherGrubArgs(h *host.Host, p *Persist) { p.GrubArgs = grubArgs(h) }

// grubArgs lists the kernel arguments GRUB_CMDLINE_LINUX and
// GRUB_CMDLINE_LINUX_DEFAULT give the next boot (after update-grub), in
// /etc/default/grub and then /etc/default/grub.d/*.cfg. Key is the argument
// ("hugepages=64").
func grubArgs(h *host.Host) []Persisted {
	var out []Persisted
	files := []string{"/etc/default/grub"}
	if names, err := h.ReadDir("/etc/default/grub.d"); err == nil {
		for _, n := range names {
			if strings.HasSuffix(n, ".cfg") {
				files = append(files, "/etc/default/grub.d/"+n)
			}
		}
	}
	for _, file := range files {
		data, err := h.ReadConfig(file)
		if err != nil {
			continue
		}
		for i, ln := range strings.Split(string(data), "\n") {
			m := grubCmdline.FindStringSubmatch(ln)
			if m == nil {
				continue
			}
			for _, w := range strings.Fields(strings.Trim(m[1], `"'`)) {
				out = append(out, Persisted{Key: strings.Trim(w, `"'`), File: file, Line: i + 1})
			}
		}
	}
	return out
}
