package facts

import (
	"fmt"
	"math"
	"path"
	"sort"
	"strconv"
	"strings"

	"github.com/dbhost/dbhost/internal/host"
)

// This file reads systemd unit files and their drop-ins from disk, the way
// systemd itself would load them, without asking systemd (PID 1 may not be
// systemd, and D-Bus may be absent). Only the [Service] and [Manager]
// settings dbhost judges are kept.

// unitDirs is systemd's unit search path for the system manager, highest
// priority first. A unit file in an earlier directory hides one of the same
// name in a later directory; drop-ins of the same file name likewise.
var unitDirs = []string{
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

// managerConfDirs hold drop-ins for /etc/systemd/system.conf.
var managerConfDirs = []string{
	"/etc/systemd/system.conf.d",
	"/run/systemd/system.conf.d",
	"/usr/local/lib/systemd/system.conf.d",
	"/usr/lib/systemd/system.conf.d",
}

// serviceKeys are the [Service] settings gathered.
var serviceKeys = map[string]bool{
	"LimitNOFILE": true, "LimitNPROC": true, "LimitMEMLOCK": true, "LimitCORE": true,
	"TasksMax": true, "OOMScoreAdjust": true, "MemoryMax": true, "MemoryLimit": true,
	"MemoryHigh": true, "CPUQuota": true, "User": true, "Group": true,
}

// managerKeys are the [Manager] defaults of system.conf that apply to every
// service that does not set its own value.
var managerKeys = map[string]bool{
	"DefaultLimitNOFILE": true, "DefaultLimitNPROC": true, "DefaultLimitMEMLOCK": true,
	"DefaultLimitCORE": true, "DefaultTasksMax": true, "DefaultMemoryAccounting": true,
}

// unitAssignment is one Key=Value line of a unit file.
type unitAssignment struct {
	Section string
	Key     string
	Value   string
	Line    int
}

// parseUnitFile parses systemd's ini dialect: [Section] headers, Key=Value
// assignments, comments starting with # or ;, and lines continued with a
// trailing backslash (comment lines inside a continuation are skipped, as
// systemd does). Malformed lines are ignored, as systemd ignores them with a
// warning.
func parseUnitFile(b []byte) []unitAssignment {
	var out []unitAssignment
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
		out = append(out, unitAssignment{Section: section, Key: k, Value: strings.TrimSpace(v), Line: start})
	}
	return out
}

// applyAssignments folds assignments into settings in order: a later
// assignment overrides an earlier one, and an empty assignment resets the
// setting to its default (removes it).
func applyAssignments(settings map[string]UnitSetting, file, section string, keep map[string]bool, as []unitAssignment) {
	for _, a := range as {
		if a.Section != section || !keep[a.Key] {
			continue
		}
		if a.Value == "" {
			delete(settings, a.Key)
			continue
		}
		settings[a.Key] = UnitSetting{Value: a.Value, Source: fmt.Sprintf("%s:%d", file, a.Line)}
	}
}

// unitNames returns the names whose drop-in directories apply to a unit, most
// specific first: the unit itself, its template (postgresql@.service for
// postgresql@15-main.service), and the top-level type drop-in (service.d).
func unitNames(name string) []string {
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

// loadUnit finds a unit file and its drop-ins on disk and returns the
// effective [Service] settings. ok is false when no unit file exists.
func loadUnit(h *host.Host, name string) (*Unit, bool) {
	u := &Unit{Name: name, Service: map[string]UnitSetting{}}
	file, real := findUnitFile(h, name)
	if file == "" {
		return nil, false
	}
	if real != name {
		u.Alias = real
	}
	b, err := h.ReadFile(file)
	if err != nil {
		u.Err = host.Explain(err)
		return u, true
	}
	if len(b) == 0 {
		u.Masked = true // a unit linked to /dev/null is masked
	}
	u.Files = append(u.Files, file)
	applyAssignments(u.Service, file, "Service", serviceKeys, parseUnitFile(b))
	u.execStart = execStart(parseUnitFile(b))
	u.text = string(b)
	names := unitNames(name)
	if real != name {
		names = append(unitNames(real), names...)
	}
	for _, d := range dropins(h, unitDirs, names) {
		b, err := h.ReadFile(d)
		if err != nil {
			u.Err = host.Explain(err)
			continue
		}
		u.Files = append(u.Files, d)
		applyAssignments(u.Service, d, "Service", serviceKeys, parseUnitFile(b))
		u.text += "\n" + string(b)
	}
	u.Defaults = managerDefaults(h)
	return u, true
}

// findUnitFile returns the highest-priority file for a unit (or, for a
// template instance, for its template) and the unit's real name when the
// file is an alias symlink (mysql.service → mariadb.service).
func findUnitFile(h *host.Host, name string) (string, string) {
	candidates := []string{name}
	if names := unitNames(name); len(names) == 3 {
		candidates = append(candidates, names[1]) // the template
	}
	for _, c := range candidates {
		for _, d := range unitDirs {
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

// dropins lists the *.conf drop-ins of the named units across dirs, sorted
// by file name; a file name in a higher-priority directory hides the same
// name elsewhere.
func dropins(h *host.Host, dirs, names []string) []string {
	byBase := map[string]string{}
	for _, d := range dirs {
		for _, n := range names {
			dir := path.Join(d, n+".d")
			ents, err := h.ReadDir(dir)
			if err != nil {
				continue
			}
			for _, e := range ents {
				if !strings.HasSuffix(e, ".conf") {
					continue
				}
				if _, seen := byBase[e]; !seen {
					byBase[e] = path.Join(dir, e)
				}
			}
		}
	}
	bases := make([]string, 0, len(byBase))
	for b := range byBase {
		bases = append(bases, b)
	}
	sort.Strings(bases)
	out := make([]string, 0, len(bases))
	for _, b := range bases {
		out = append(out, byBase[b])
	}
	return out
}

// managerDefaults reads the [Manager] Default* settings of system.conf and
// its drop-ins.
func managerDefaults(h *host.Host) map[string]UnitSetting {
	out := map[string]UnitSetting{}
	files := []string{"/etc/systemd/system.conf"}
	byBase := map[string]string{}
	for _, d := range managerConfDirs {
		ents, err := h.ReadDir(d)
		if err != nil {
			continue
		}
		for _, e := range ents {
			if _, seen := byBase[e]; !seen && strings.HasSuffix(e, ".conf") {
				byBase[e] = path.Join(d, e)
			}
		}
	}
	bases := make([]string, 0, len(byBase))
	for b := range byBase {
		bases = append(bases, b)
	}
	sort.Strings(bases)
	for _, b := range bases {
		files = append(files, byBase[b])
	}
	for _, f := range files {
		b, err := h.ReadFile(f)
		if err != nil {
			continue
		}
		applyAssignments(out, f, "Manager", managerKeys, parseUnitFile(b))
	}
	return out
}

func execStart(as []unitAssignment) string {
	v := ""
	for _, a := range as {
		if a.Section == "Service" && a.Key == "ExecStart" {
			v = a.Value
		}
	}
	return v
}

// ParseUnitLimit parses a systemd LimitXXX= value: "N", "soft:hard",
// "infinity", with optional K, M, G, T, P, E (1024-based) suffixes for byte
// limits. A single value sets both soft and hard.
func ParseUnitLimit(v string) (soft, hard uint64, ok bool) {
	v = strings.TrimSpace(v)
	if v == "" {
		return 0, 0, false
	}
	s, h, two := strings.Cut(v, ":")
	soft, ok = parseUnitNumber(s)
	if !ok {
		return 0, 0, false
	}
	if !two {
		return soft, soft, true
	}
	hard, ok = parseUnitNumber(h)
	if !ok {
		return 0, 0, false
	}
	return soft, hard, true
}

// parseUnitNumber reads "infinity", "65536" or "64K".
func parseUnitNumber(s string) (uint64, bool) {
	s = strings.TrimSpace(s)
	if s == "infinity" {
		return host.Unlimited, true
	}
	mult := uint64(1)
	if n := len(s); n > 0 {
		if i := strings.IndexByte("KMGTPE", s[n-1]); i >= 0 {
			mult = 1 << (10 * (i + 1))
			s = s[:n-1]
		}
	}
	n, err := strconv.ParseUint(s, 10, 64)
	if err != nil {
		return 0, false
	}
	if mult > 1 && n > math.MaxUint64/mult {
		return host.Unlimited, true
	}
	return n * mult, true
}

// ParseTasksMax resolves TasksMax= ("N", "N%" of the kernel's task limit,
// "infinity") against the host's maximum number of tasks.
func ParseTasksMax(v string, kernelMax uint64) (uint64, bool) {
	v = strings.TrimSpace(v)
	if v == "infinity" {
		return host.Unlimited, true
	}
	if p, ok := strings.CutSuffix(v, "%"); ok {
		f, err := strconv.ParseFloat(p, 64)
		if err != nil || kernelMax == 0 {
			return 0, false
		}
		return uint64(f / 100 * float64(kernelMax)), true
	}
	n, err := strconv.ParseUint(v, 10, 64)
	return n, err == nil
}

// Effective returns a [Service] setting of the unit, or, when the unit does
// not set it, the manager default (DefaultLimitNOFILE= in system.conf), or
// systemd's built-in default. Source says which.
func (u *Unit) Effective(key string) (UnitSetting, bool) {
	if u == nil {
		return UnitSetting{}, false
	}
	if s, ok := u.Service[key]; ok {
		return s, true
	}
	if key == "MemoryMax" {
		if s, ok := u.Service["MemoryLimit"]; ok {
			return s, true // the cgroup v1 name of the same limit
		}
	}
	if s, ok := u.Defaults["Default"+key]; ok {
		return s, true
	}
	if v, ok := builtinDefaults[key]; ok {
		return UnitSetting{Value: v, Source: "systemd built-in default"}, true
	}
	return UnitSetting{}, false
}

// builtinDefaults are systemd's compiled-in defaults (systemd 240 and later
// for LimitNOFILE, 243 and later for TasksMax).
var builtinDefaults = map[string]string{
	"LimitNOFILE":    "1024:524288",
	"TasksMax":       "15%",
	"OOMScoreAdjust": "0",
}

// Mentions reports whether the unit's files contain s (a config file or data
// directory path): how an installed, not running, unit is matched to an
// instance.
func (u *Unit) Mentions(s string) bool {
	return u != nil && s != "" && strings.Contains(u.text, s)
}
