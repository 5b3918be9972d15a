package redis

import (
	"strings"

	"github.com/dbhost/dbhost/internal/host"
	"github.com/dbhost/dbhost/internal/unitfile"
)

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
	file, real := unitfile.Find(h, unit)
	if file == "" {
		return nil, ""
	}
	var argv []string
	src := ""
	for _, f := range append([]string{file}, unitfile.Dropins(h, unit, real)...) {
		b, err := h.ReadConfig(f) // redacted in snapshots: ExecStart may carry --requirepass
		if err != nil {
			continue
		}
		for _, a := range unitfile.Parse(b) {
			if a.Section != "Service" || a.Key != "ExecStart" {
				continue
			}
			if a.Value == "" { // an empty assignment resets the list
				argv, src = nil, ""
				continue
			}
			argv, src = unitWords(expandSpecifiers(strings.TrimLeft(a.Value, "-@:+!"), unit)), f
		}
	}
	return argv, src
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
