// Package unitfile reads systemd unit files and their drop-ins the way
// systemd itself loads them, without asking systemd (PID 1 may not be
// systemd, and D-Bus may be absent): the ini dialect, the system manager's
// unit search path, aliases, templates and drop-in order. It reads the host
// only through *host.Host, so snapshots replay it. What a caller keeps of the
// settings is its own business (facts: limits; engines: ExecStart).
package unitfile

import (
	"path"
	"sort"
	"strings"

	"github.com/dbhost/dbhost/internal/host"
)

// SearchPath is systemd's unit search path for the system manager, highest
// priority first. A unit file in an earlier directory hides one of the same
// name in a later directory; drop-ins of the same file name likewise.
var SearchPath = []string{
	"/etc/systemd/system.control",
	"/run/systemd/system.control",
	"/run/systemd/transient",
	"/run/systemd/generator.early",
	"/etc/systemd/system",
	"/etc/systemd/system.attached",
	"/run/systemd/system",
	"/run/systemd/system.attached",
	"/run/systemd/generator",
	"/usr/local/lib/systemd/system",
	"/usr/lib/systemd/system",
	"/lib/systemd/system",
	"/run/systemd/generator.late",
}

// Assignment is one Key=Value line of a unit file.
type Assignment struct {
	Section string
	Key     string
	Value   string
	Line    int
}

// Parse parses systemd's ini dialect: [Section] headers, Key=Value
// assignments, comments starting with # or ;, and lines continued with a
// trailing backslash (comment lines inside a continuation are skipped, as
// systemd does). Malformed lines are ignored, as systemd ignores them with a
// warning. An empty value is kept: it resets the setting.
func Parse(b []byte) []Assignment {
	var out []Assignment
	section := ""
	lines := strings.Split(string(b), "\n")
	for i := 0; i < len(lines); i++ {
		start := i + 1
		ln := strings.TrimSpace(strings.TrimSuffix(lines[i], "\r"))
		if ln == "" || ln[0] == '#' || ln[0] == ';' {
			continue
		}
		if ln[0] == '[' {
			if end := strings.IndexByte(ln, ']'); end > 0 {
				section = ln[1:end]
			}
			continue
		}
		// Join continuation lines.
		for strings.HasSuffix(ln, "\\") && i+1 < len(lines) {
			ln = strings.TrimSuffix(ln, "\\") + " "
			i++
			next := strings.TrimSpace(strings.TrimSuffix(lines[i], "\r"))
			for (strings.HasPrefix(next, "#") || strings.HasPrefix(next, ";")) && i+1 < len(lines) {
				i++
				next = strings.TrimSpace(strings.TrimSuffix(lines[i], "\r"))
			}
			if strings.HasPrefix(next, "#") || strings.HasPrefix(next, ";") {
				next = ""
			}
			ln += next
		}
		ln = strings.TrimSuffix(ln, "\\")
		k, v, ok := strings.Cut(ln, "=")
		if !ok || section == "" {
			continue
		}
		k = strings.TrimSpace(k)
		if k == "" {
			continue
		}
		out = append(out, Assignment{Section: section, Key: k, Value: strings.TrimSpace(v), Line: start})
	}
	return out
}

// Names returns the names whose drop-in directories apply to a unit, most
// specific first: the unit itself, its template (postgresql@.service for
// postgresql@15-main.service), and the top-level type drop-in (service.d).
func Names(name string) []string {
	names := []string{name}
	if at := strings.IndexByte(name, '@'); at > 0 {
		if dot := strings.LastIndexByte(name, '.'); dot > at+1 {
			names = append(names, name[:at+1]+name[dot:])
		}
	}
	if dot := strings.LastIndexByte(name, '.'); dot >= 0 {
		names = append(names, name[dot+1:])
	}
	return names
}

// Find returns the highest-priority file for a unit (or, for a template
// instance, for its template), "" when there is none, and the unit's real
// name when the file is an alias symlink (mysql.service → mariadb.service).
// A unit linked to /dev/null (masked) is found: its file reads empty.
func Find(h *host.Host, name string) (file, real string) {
	candidates := []string{name}
	if names := Names(name); len(names) == 3 {
		candidates = append(candidates, names[1]) // the template
	}
	for _, c := range candidates {
		for _, d := range SearchPath {
			p := path.Join(d, c)
			if !h.Exists(p) {
				// A dangling or /dev/null link still masks.
				if t, err := h.Readlink(p); err == nil && t == "/dev/null" {
					return p, name
				}
				continue
			}
			real := name
			if t, err := h.Readlink(p); err == nil && t != "" && t != "/dev/null" {
				if base := path.Base(t); strings.HasSuffix(base, path.Ext(name)) && base != c {
					real = base
				}
			}
			return p, real
		}
	}
	return "", name
}

// Dropins lists the *.conf drop-ins that apply to unit name, whose real
// name (Find) is real, in the order systemd applies them: sorted by file
// name across the search path, a file name in a higher-priority directory
// hiding the same name elsewhere. The real unit's drop-ins apply to its
// aliases.
func Dropins(h *host.Host, name, real string) []string {
	names := Names(name)
	if real != name {
		names = append(Names(real), names...)
	}
	var dirs []string
	for _, d := range SearchPath {
		for _, n := range names {
			dirs = append(dirs, path.Join(d, n+".d"))
		}
	}
	files, _ := ConfFiles(h, dirs, ".conf")
	return files
}

// ConfFiles lists the files with a suffix across directories in the
// systemd way (drop-ins, system.conf.d, sysctl.d, udev rules): sorted by
// file name, a name in an earlier directory hiding the same name in later
// ones. err is the first error other than a missing directory; the
// directories that could be read are listed all the same.
func ConfFiles(h *host.Host, dirs []string, suffix string) (files []string, err error) {
	byBase := map[string]string{}
	for _, d := range dirs {
		ents, rerr := h.ReadDir(d)
		if rerr != nil {
			if !host.IsNotExist(rerr) && err == nil {
				err = rerr
			}
			continue
		}
		for _, e := range ents {
			if !strings.HasSuffix(e, suffix) {
				continue
			}
			if _, seen := byBase[e]; !seen {
				byBase[e] = path.Join(d, e)
			}
		}
	}
	bases := make([]string, 0, len(byBase))
	for b := range byBase {
		bases = append(bases, b)
	}
	sort.Strings(bases)
	files = make([]string, 0, len(bases))
	for _, b := range bases {
		files = append(files, byBase[b])
	}
	return files, err
}
