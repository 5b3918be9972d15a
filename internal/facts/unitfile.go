package facts

import (
	"fmt"
	"math"
	"strconv"
	"strings"

	"github.com/dbhost/dbhost/internal/host"
	"github.com/dbhost/dbhost/internal/unitfile"
)

// This file loads a service's systemd unit as internal/unitfile finds and
// parses it. Only the [Service] and [Manager] settings dbhost judges are
// kept.

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

// applyAssignments folds assignments into settings in order: a later
// assignment overrides an earlier one, and an empty assignment resets the
// setting to its default (removes it).
func applyAssignments(settings map[string]UnitSetting, file, section string, keep map[string]bool, as []unitfile.Assignment) {
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

// loadUnit finds a unit file and its drop-ins on disk and returns the
// effective [Service] settings. ok is false when no unit file exists.
func loadUnit(h *host.Host, name string) (*Unit, bool) {
	u := &Unit{Name: name, Service: map[string]UnitSetting{}}
	file, real := unitfile.Find(h, name)
	if file == "" {
		return nil, false
	}
	if real != name {
		u.Alias = real
	}
	b, err := h.ReadConfig(file)
	if err != nil {
		u.Err = host.Explain(err)
		return u, true
	}
	if len(b) == 0 {
		u.Masked = true // a unit linked to /dev/null is masked
	}
	u.Files = append(u.Files, file)
	as := unitfile.Parse(b)
	applyAssignments(u.Service, file, "Service", serviceKeys, as)
	u.execStart = execStart(as)
	u.text = string(b)
	for _, d := range unitfile.Dropins(h, name, real) {
		b, err := h.ReadConfig(d)
		if err != nil {
			u.Err = host.Explain(err)
			continue
		}
		u.Files = append(u.Files, d)
		applyAssignments(u.Service, d, "Service", serviceKeys, unitfile.Parse(b))
		u.text += "\n" + string(b)
	}
	u.Defaults = managerDefaults(h)
	return u, true
}

// managerDefaults reads the [Manager] Default* settings of system.conf and
// its drop-ins.
func managerDefaults(h *host.Host) map[string]UnitSetting {
	out := map[string]UnitSetting{}
	dropins, _ := unitfile.ConfFiles(h, managerConfDirs, ".conf")
	for _, f := range append([]string{"/etc/systemd/system.conf"}, dropins...) {
		b, err := h.ReadConfig(f)
		if err != nil {
			continue
		}
		applyAssignments(out, f, "Manager", managerKeys, unitfile.Parse(b))
	}
	return out
}

// execStart is the unit's last ExecStart= value.
func execStart(as []unitfile.Assignment) string {
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
