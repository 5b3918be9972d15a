package redis

import (
	"path"
	"sort"
	"strings"

	"github.com/dbhost/dbhost/internal/host"
)

// unitDirs are where systemd looks for unit files, highest priority first.
var unitDirs = []string{"/etc/systemd/system", "/run/systemd/system", "/usr/local/lib/systemd/system", "/lib/systemd/system", "/usr/lib/systemd/system"}

// unitExecStart recovers the command line a systemd service started the
// server with, for servers whose /proc/PID/cmdline was overwritten by
// set-proc-title. The unit is the one whose cgroup the process runs in, so
// the command line is really this process's. It returns the arguments and
// the file that set them, or nil.
func unitExecStart(h *host.Host, pid int) ([]string, string) {
	cgs, err := h.Cgroups(pid)
	if err != nil {
		return nil, ""
	}
	unit := ""
	for _, cg := range cgs {
		for _, part := range strings.Split(cg.Path, "/") {
			if strings.HasSuffix(part, ".service") {
				unit = part // the innermost service wins
			}
		}
	}
	if unit == "" {
		return nil, ""
	}
	files := unitFiles(h, unit)
	var argv []string
	src := ""
	for _, f := range files {
		b, err := h.ReadConfig(f)
		if err != nil {
			continue
		}
		inService := false
		for _, ln := range joinContinuations(string(b)) {
			ln = strings.TrimSpace(ln)
			if strings.HasPrefix(ln, "[") {
				inService = ln == "[Service]"
				continue
			}
			k, v, ok := strings.Cut(ln, "=")
			if !inService || !ok || strings.TrimSpace(k) != "ExecStart" {
				continue
			}
			v = strings.TrimSpace(v)
			if v == "" { // an empty assignment resets the list
				argv, src = nil, ""
				continue
			}
			argv, src = unitWords(expandSpecifiers(strings.TrimLeft(v, "-@:+!"), unit)), f
		}
	}
	return argv, src
}

// unitFiles lists a unit's file and its drop-ins in the order systemd
// applies them (template units fall back to name@.service).
func unitFiles(h *host.Host, unit string) []string {
	var out []string
	names := []string{unit}
	if at := strings.Index(unit, "@"); at > 0 {
		names = append(names, unit[:at+1]+".service")
	}
	for _, n := range names {
		found := false
		for _, d := range unitDirs {
			if h.Exists(path.Join(d, n)) {
				out = append(out, path.Join(d, n))
				found = true
				break
			}
		}
		if found {
			break
		}
	}
	dropins := map[string]string{} // file name → path; earlier dirs win
	for _, n := range names {
		for _, d := range unitDirs {
			dir := path.Join(d, n+".d")
			ents, err := h.ReadDir(dir)
			if err != nil {
				continue
			}
			for _, e := range ents {
				if strings.HasSuffix(e, ".conf") {
					if _, dup := dropins[e]; !dup {
						dropins[e] = path.Join(dir, e)
					}
				}
			}
		}
	}
	keys := make([]string, 0, len(dropins))
	for k := range dropins {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		out = append(out, dropins[k])
	}
	return out
}

func joinContinuations(s string) []string {
	var out []string
	cur := ""
	for _, ln := range strings.Split(s, "\n") {
		if strings.HasSuffix(ln, "\\") {
			cur += strings.TrimSuffix(ln, "\\") + " "
			continue
		}
		out = append(out, cur+ln)
		cur = ""
	}
	if cur != "" {
		out = append(out, cur)
	}
	return out
}

// expandSpecifiers replaces the unit specifiers a server command line uses
// (%i, %I: the instance name; %n, %N, %p, %%).
func expandSpecifiers(s, unit string) string {
	name := strings.TrimSuffix(unit, ".service")
	prefix, inst, _ := strings.Cut(name, "@")
	r := strings.NewReplacer("%%", "%", "%i", inst, "%I", inst, "%n", unit, "%N", name, "%p", prefix, "%P", prefix)
	return r.Replace(s)
}

// unitWords splits an ExecStart value into words: white space separates,
// "double" and 'single' quotes group, a backslash escapes the next byte.
func unitWords(s string) []string {
	var out []string
	var cur strings.Builder
	in := false
	var quote byte
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case quote != 0 && c == quote:
			quote = 0
		case quote == 0 && (c == '"' || c == '\''):
			quote, in = c, true
		case c == '\\' && i+1 < len(s):
			i++
			cur.WriteByte(s[i])
			in = true
		case quote == 0 && (c == ' ' || c == '\t'):
			if in {
				out = append(out, cur.String())
				cur.Reset()
				in = false
			}
		default:
			cur.WriteByte(c)
			in = true
		}
	}
	if in {
		out = append(out, cur.String())
	}
	return out
}
