package facts

import (
	"context"
	"path"
	"strings"

	"github.com/dbhost/dbhost/internal/host"
)

// Tuned describes an active TuneD profile, which re-applies its values at
// every start of the daemon and so can override sysctl.d, udev rules and the
// THP setting. Whether tuned runs comes from the process table: see
// Facts.TunedRunning.
type Tuned struct {
	// Active is the profile name(s) in /etc/tuned/active_profile; empty
	// when TuneD is not configured. Several names are merged in order.
	Active string `json:"active,omitempty"`
	// Mode is /etc/tuned/profile_mode: "auto" (TuneD may switch profiles
	// itself) or "manual".
	Mode string `json:"mode,omitempty"`
	// Chain lists the profiles in the order they are applied (included
	// profiles first, the active profile last), each with its file.
	Chain []string `json:"chain,omitempty"`
	Files []string `json:"files,omitempty"`
	// Missing lists profiles named (active or included) but not found.
	Missing []string `json:"missing,omitempty"`
	// Sysctl, VM (transparent_hugepages) and Disk (elevator, readahead)
	// are the values the chain applies, with the profile file they come
	// from. Values are kept raw: TuneD expands ${variables} and ${f:...}
	// functions at run time, and readahead may be ">4096" ("at least").
	// VM's key is "transparent_hugepages" whichever spelling the file used.
	Sysctl map[string]Persisted `json:"sysctl,omitempty"`
	VM     map[string]Persisted `json:"vm,omitempty"`
	Disk   map[string]Persisted `json:"disk,omitempty"`
	// ReapplySysctl is reapply_sysctl from /etc/tuned/tuned-main.conf
	// (default true): TuneD re-applies sysctl.d and sysctl.conf after its
	// profile, so for a parameter set in both, sysctl.d wins. THP and disk
	// settings have no such second pass.
	ReapplySysctl bool   `json:"reapply_sysctl"`
	Err           string `json:"error,omitempty"`
}

// TunedRunning reports whether a tuned daemon is in the process table.
func (f *Facts) TunedRunning() bool { return len(processesByComm(f.Processes, "tuned")) > 0 }

// tunedProfileDirs are searched in this order: a profile in /etc overrides a
// shipped one of the same name. Newer TuneD keeps profiles in a profiles/
// subdirectory.
var tunedProfileDirs = []string{"/etc/tuned/profiles", "/etc/tuned", "/usr/lib/tuned/profiles", "/usr/lib/tuned"}

// maxTunedDepth bounds include chains (and include loops).
const maxTunedDepth = 16

func init() { registerHost(DomainTuned, gatherTuned) }

func gatherTuned(_ context.Context, h *host.Host, f *Facts) {
	t := &f.Tuned
	t.ReapplySysctl = true
	if b, err := h.ReadFile("/etc/tuned/tuned-main.conf"); err == nil {
		for _, a := range parseTunedConf(b) {
			if a.Section == "" && a.Key == "reapply_sysctl" {
				t.ReapplySysctl = tunedBool(a.Value)
			}
		}
	}
	active, err := h.ReadString("/etc/tuned/active_profile")
	if err != nil {
		if !host.IsNotExist(err) {
			t.Err = host.Explain(err)
		}
		return
	}
	t.Active = strings.Join(strings.Fields(active), " ")
	if t.Active == "" {
		return
	}
	t.Mode, _ = h.ReadString("/etc/tuned/profile_mode")
	l := &tunedLoader{h: h, t: t, seen: map[string]bool{}}
	for _, p := range strings.Fields(t.Active) {
		l.load(p, 0)
	}
}

type tunedLoader struct {
	h    *host.Host
	t    *Tuned
	seen map[string]bool
}

// load applies a profile after the profiles it includes, so that its own
// values override theirs.
func (l *tunedLoader) load(name string, depth int) {
	if depth > maxTunedDepth || l.seen[name] {
		return // an include loop or a profile already merged
	}
	l.seen[name] = true
	file, b := l.find(name)
	if file == "" {
		l.t.Missing = append(l.t.Missing, name)
		return
	}
	as := parseTunedConf(b)
	for _, a := range as {
		if a.Section == "main" && a.Key == "include" {
			for _, inc := range strings.FieldsFunc(a.Value, func(r rune) bool { return r == ',' || r == ' ' || r == ';' }) {
				if strings.Contains(inc, "${") {
					l.t.Missing = append(l.t.Missing, inc+" (include with a variable, not followed)")
					continue
				}
				l.load(inc, depth+1)
			}
		}
	}
	l.t.Chain = append(l.t.Chain, name)
	l.t.Files = append(l.t.Files, file)
	l.apply(file, as)
}

// find returns the profile's tuned.conf and its content.
func (l *tunedLoader) find(name string) (string, []byte) {
	for _, d := range tunedProfileDirs {
		p := path.Join(d, name, "tuned.conf")
		if b, err := l.h.ReadFile(p); err == nil {
			return p, b
		}
	}
	return "", nil
}

// apply merges one profile's plugin sections. A section's plugin is its
// type= or its name; replace=1 drops what included profiles set for that
// plugin; enabled=false disables it.
func (l *tunedLoader) apply(file string, as []tunedAssignment) {
	plugin := map[string]string{}
	for _, a := range as {
		if a.Key == "type" {
			plugin[a.Section] = a.Value
		}
	}
	typeOf := func(sec string) string {
		if p, ok := plugin[sec]; ok {
			return p
		}
		return sec
	}
	target := func(sec string) *map[string]Persisted {
		switch typeOf(sec) {
		case "sysctl":
			return &l.t.Sysctl
		case "vm":
			return &l.t.VM
		case "disk":
			return &l.t.Disk
		}
		return nil
	}
	for _, a := range as {
		m := target(a.Section)
		if m == nil {
			continue
		}
		if *m == nil {
			*m = map[string]Persisted{}
		}
		switch {
		case a.Key == "type" || a.Key == "devices" || a.Key == "devices_udev_regex":
			continue
		case a.Key == "replace" && tunedBool(a.Value):
			*m = map[string]Persisted{}
			continue
		case a.Key == "enabled" && !tunedBool(a.Value):
			*m = map[string]Persisted{}
			continue
		}
		key := a.Key
		switch typeOf(a.Section) {
		case "sysctl":
			key = NormalizeSysctlKey(key)
		case "vm":
			if key == "transparent_hugepage" {
				key = "transparent_hugepages"
			}
		}
		(*m)[key] = Persisted{Key: a.Key, Value: a.Value, File: file, Line: a.Line}
	}
}

// tunedAssignment is one key = value line of a TuneD file; Section is empty
// before the first header (tuned-main.conf has none).
type tunedAssignment struct {
	Section, Key, Value string
	Line                int
}

// parseTunedConf parses TuneD's ini files (configobj syntax: [section],
// key = value, # comments).
func parseTunedConf(b []byte) []tunedAssignment {
	var out []tunedAssignment
	section := ""
	for i, ln := range strings.Split(string(b), "\n") {
		ln = strings.TrimSpace(ln)
		if ln == "" || ln[0] == '#' {
			continue
		}
		if ln[0] == '[' {
			if end := strings.IndexByte(ln, ']'); end > 0 {
				section = strings.TrimSpace(ln[1:end])
			}
			continue
		}
		k, v, ok := strings.Cut(ln, "=")
		if !ok {
			continue
		}
		v = strings.TrimSpace(v)
		if len(v) >= 2 && (v[0] == '"' && v[len(v)-1] == '"' || v[0] == '\'' && v[len(v)-1] == '\'') {
			v = v[1 : len(v)-1]
		}
		out = append(out, tunedAssignment{Section: section, Key: strings.TrimSpace(k), Value: v, Line: i + 1})
	}
	return out
}

func tunedBool(v string) bool {
	switch strings.ToLower(strings.TrimSpace(v)) {
	case "0", "false", "no", "off", "n":
		return false
	}
	return true
}
