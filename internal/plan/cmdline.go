package plan

import (
	"path"
	"strings"

	"github.com/dbhost/dbhost/internal/facts"
	"github.com/dbhost/dbhost/internal/fix"
)

// grubFile is where fix.Render writes kernel command line arguments.
const grubFile = "/etc/default/grub.d/" + fix.Name + ".cfg"

// cmdline adds the planned kernel arguments to the next boot's command line
// (GRUB's configuration), and a transparent_hugepage= among the THP boot
// settings. The running command line does not change: only a reboot (after
// update-grub) brings them, so the notes say so.
func (m *model) cmdline() {
	f, ok := m.file(grubFile)
	if !ok {
		return
	}
	args, line := grubFileArgs(f)
	installGrubArgs(&m.g.Persist, f.Path, args, line)
	installGrubTHP(&m.g.Memory.THP, f.Path, args, line)
	if len(args) > 0 {
		m.note("kernel command line %s: modelled in the next boot's GRUB configuration only; the running kernel keeps its command line until update-grub and a reboot", strings.Join(args, " "))
	}
}

// grubFileArgs reads the arguments of the rendered GRUB drop-in and the line
// that sets them.
func grubFileArgs(f fix.File) ([]string, int) {
	for i, ln := range strings.Split(f.Content, "\n") {
		v, ok := strings.CutPrefix(ln, "GRUB_CMDLINE_LINUX=")
		if !ok {
			continue
		}
		var args []string
		for _, w := range strings.Fields(strings.Trim(v, `"'`)) {
			if !strings.HasPrefix(w, "$") {
				args = append(args, w)
			}
		}
		return args, i + 1
	}
	return nil, 0
}

// installGrubArgs puts the arguments after /etc/default/grub and the
// grub.d files that sort before dbhost's, as update-grub reads them.
func installGrubArgs(p *facts.Persist, file string, args []string, line int) {
	var out []facts.Persisted
	placed := false
	place := func() {
		if !placed {
			for _, a := range args {
				out = append(out, facts.Persisted{Key: a, File: file, Line: line})
			}
			placed = true
		}
	}
	for _, a := range p.GrubArgs {
		if a.File == file {
			continue
		}
		if strings.HasPrefix(a.File, "/etc/default/grub.d/") && path.Base(a.File) > path.Base(file) {
			place()
		}
		out = append(out, a)
	}
	place()
	p.GrubArgs = out
}

// installGrubTHP adds a transparent_hugepage= argument to the THP boot
// settings after the running command line and the GRUB files before
// dbhost's (the next boot's command line sets "enabled" from the start).
func installGrubTHP(t *facts.THP, file string, args []string, line int) {
	var ours []facts.Persisted
	for _, a := range args {
		if v, ok := strings.CutPrefix(a, "transparent_hugepage="); ok {
			ours = append(ours, facts.Persisted{Key: "enabled", Value: v, File: file, Line: line})
		}
	}
	if len(ours) == 0 {
		return
	}
	var out []facts.Persisted
	placed := false
	for _, p := range t.Boot {
		if p.File == file {
			continue
		}
		later := strings.HasPrefix(p.File, "/etc/default/grub.d/") && path.Base(p.File) > path.Base(file)
		if !placed && (later || (p.File != "/proc/cmdline" && !strings.HasPrefix(p.File, "/etc/default/grub"))) {
			out, placed = append(out, ours...), true
		}
		out = append(out, p)
	}
	if !placed {
		out = append(out, ours...)
	}
	t.Boot = out
}
