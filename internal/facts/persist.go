package facts

import (
	"context"
	"fmt"
	"path"
	"strings"

	"github.com/dbhost/dbhost/internal/host"
	"github.com/dbhost/dbhost/internal/textio"
	"github.com/dbhost/dbhost/internal/unitfile"
)

// Persist is what the host will apply at the next boot: sysctl.d files,
// limits.d entries and udev rules that set queue attributes.
type Persist struct {
	// Sysctl lists kernel parameter assignments in the order systemd-sysctl
	// and `sysctl --system` apply them. Use PersistedSysctl for the value
	// the next boot ends with.
	Sysctl []SysctlEntry `json:"sysctl,omitempty"`
	// SysctlFiles are the files read, in order.
	SysctlFiles []string `json:"sysctl_files,omitempty"`
	SysctlErr   string   `json:"sysctl_error,omitempty"`
	// SysctlSkipped names the lines that are neither comments nor
	// assignments (FILE:LINE): systemd-sysctl skips them with a warning.
	SysctlSkipped []string `json:"sysctl_skipped,omitempty"`
	// Limits lists pam_limits entries from limits.conf and limits.d, in the
	// order pam_limits reads them.
	Limits    []LimitEntry `json:"limits,omitempty"`
	LimitsErr string       `json:"limits_error,omitempty"`
	// Udev lists rules that set block queue attributes (scheduler,
	// read_ahead_kb), in the order udev reads them.
	Udev    []UdevRule `json:"udev,omitempty"`
	UdevErr string     `json:"udev_error,omitempty"`
	// KernelConfig is the running kernel's build configuration, for the
	// defaults a boot gives where no file sets a value (THP).
	KernelConfig KernelConfig `json:"kernel_config"`
	// HugePagesBoot lists boot units and rc.local lines that reserve huge
	// pages (see parseHugePagesBoot), in the order found.
	HugePagesBoot []Persisted `json:"hugepages_boot,omitempty"`
	// GrubArgs are the kernel arguments the GRUB configuration gives the
	// next boot (see gatherGrubArgs).
	GrubArgs []Persisted `json:"grub_args,omitempty"`
}

// SysctlEntry is one assignment of a sysctl.d file. Key is in dotted form
// ("net.core.somaxconn") whatever separator the file used.
type SysctlEntry struct {
	Persisted
	// IgnoreErrors: the line starts with "-", a failure to write it is not
	// an error (systemd-sysctl).
	IgnoreErrors bool `json:"ignore_errors,omitempty"`
	// Glob: the key is a glob pattern (net.ipv4.conf.*.rp_filter) written to
	// every matching parameter that is not assigned explicitly.
	Glob bool `json:"glob,omitempty"`
	// Exclude: a "-key" line without a value, which keeps the key out of
	// glob assignments.
	Exclude bool `json:"exclude,omitempty"`
}

// LimitEntry is one line of limits.conf: domain type item value.
type LimitEntry struct {
	File   string `json:"file"`
	Line   int    `json:"line"`
	Domain string `json:"domain"`
	Type   string `json:"type"` // soft, hard, -
	Item   string `json:"item"` // nofile, nproc, memlock
	Value  string `json:"value"`
}

// UdevRule is a rule line that assigns a queue attribute.
type UdevRule struct {
	File string `json:"file"`
	Line int    `json:"line"`
	Text string `json:"text"`
	// Attr ("queue/scheduler", "queue/read_ahead_kb", "bdi/read_ahead_kb")
	// and Value assigned; Match is the KERNEL== pattern, if any.
	Attr  string `json:"attr"`
	Value string `json:"value"`
	Match string `json:"match,omitempty"`
	// Conditions are the rule's other match keys besides ACTION, SUBSYSTEM
	// and KERNEL (ATTR{queue/zoned}=="host-managed", ENV{ID_SERIAL}=="..."):
	// the assignment only applies to devices that meet them.
	Conditions []string `json:"conditions,omitempty"`
}

// PersistedSysctl returns the value the next boot will set for a kernel
// parameter, and whether any file sets it. An explicit assignment beats a
// glob whatever their order (systemd-sysctl's rule); among equals the last
// one wins.
func (p Persist) PersistedSysctl(name string) (Persisted, bool) {
	var explicit, glob Persisted
	var hasExplicit, hasGlob, excluded bool
	for _, s := range p.Sysctl {
		switch {
		case s.Exclude:
			if s.Key == name {
				excluded = true
			}
		case s.Glob:
			if ok, _ := path.Match(s.Key, name); ok {
				glob, hasGlob = s.Persisted, true
			}
		case s.Key == name:
			explicit, hasExplicit = s.Persisted, true
		}
	}
	if hasExplicit {
		return explicit, true
	}
	if hasGlob && !excluded {
		return glob, true
	}
	return Persisted{}, false
}

// sysctlDirs are read in this order; a file name in an earlier directory
// hides the same name in a later one. /etc/sysctl.conf comes last.
var sysctlDirs = []string{"/etc/sysctl.d", "/run/sysctl.d", "/usr/local/lib/sysctl.d", "/usr/lib/sysctl.d", "/lib/sysctl.d"}

// udevDirs likewise, for *.rules.
var udevDirs = []string{"/etc/udev/rules.d", "/run/udev/rules.d", "/usr/local/lib/udev/rules.d", "/usr/lib/udev/rules.d", "/lib/udev/rules.d"}

func init() { registerHost(DomainPersist, gatherPersist) }

func gatherPersist(ctx context.Context, h *host.Host, f *Facts) {
	p := &f.Persist
	gatherKernelConfigFor(ctx, h, p)
	gatherHugePagesBoot(h, p)
	gatherGrubArgs(h, p)
	files, err := confFiles(h, sysctlDirs, ".conf")
	if err != "" {
		p.SysctlErr = err
	}
	files = append(files, "/etc/sysctl.conf")
	for _, file := range files {
		b, ok := readConf(h, file, &p.SysctlErr)
		if !ok {
			continue
		}
		p.SysctlFiles = append(p.SysctlFiles, file)
		entries, skipped := parseSysctlConf(file, b)
		p.Sysctl = append(p.Sysctl, entries...)
		p.SysctlSkipped = append(p.SysctlSkipped, skipped...)
	}

	for _, file := range limitsFiles(h, p) {
		b, ok := readConf(h, file, &p.LimitsErr)
		if !ok {
			continue
		}
		p.Limits = append(p.Limits, ParseLimitsConf(file, b)...)
	}

	rules, uerr := confFiles(h, udevDirs, ".rules")
	p.UdevErr = uerr
	for _, file := range rules {
		b, ok := readConf(h, file, &p.UdevErr)
		if !ok {
			continue
		}
		p.Udev = append(p.Udev, ParseUdevRules(file, b)...)
	}
}

// readConf reads a configuration file. A missing one is no error (the
// fixed names, /etc/sysctl.conf for one, need not exist); any other failure
// is explained in *why.
func readConf(h *host.Host, file string, why *string) ([]byte, bool) {
	b, err := h.ReadFile(file)
	if err != nil {
		if !host.IsNotExist(err) {
			*why = host.Explain(err)
		}
		return nil, false
	}
	return b, true
}

// confFiles lists files with a suffix across directories in the
// systemd/udev way (unitfile.ConfFiles) and explains the first error other
// than a missing directory.
func confFiles(h *host.Host, dirs []string, suffix string) ([]string, string) {
	files, err := unitfile.ConfFiles(h, dirs, suffix)
	if err != nil {
		return files, host.Explain(err)
	}
	return files, ""
}

// limitsFiles is pam_limits' order: limits.conf, then limits.d/*.conf in
// C-locale order.
func limitsFiles(h *host.Host, p *Persist) []string {
	files := []string{"/etc/security/limits.conf"}
	ents, err := h.ReadDir("/etc/security/limits.d")
	if err != nil && !host.IsNotExist(err) {
		p.LimitsErr = host.Explain(err)
	}
	for _, e := range ents {
		if strings.HasSuffix(e, ".conf") && !strings.HasPrefix(e, ".") {
			files = append(files, path.Join("/etc/security/limits.d", e))
		}
	}
	return files
}

// NormalizeSysctlKey turns a sysctl.d key into dotted form. If its first
// separator is a slash, slashes separate and dots are literal
// ("net/ipv4/conf/eth0.1/rp_filter"), so the two are swapped; otherwise the
// key is already dotted.
func NormalizeSysctlKey(k string) string {
	i := strings.IndexAny(k, "./")
	if i < 0 || k[i] == '.' {
		return k
	}
	return strings.Map(func(r rune) rune {
		switch r {
		case '/':
			return '.'
		case '.':
			return '/'
		}
		return r
	}, k)
}

// ParseSysctlConf parses one sysctl.d file: "key = value" lines, comments
// starting with # or ;, a leading "-" to ignore write failures, glob keys.
// Values keep their words, joined by single spaces (as the kernel prints
// them back).
func ParseSysctlConf(file string, b []byte) []SysctlEntry {
	out, _ := parseSysctlConf(file, b)
	return out
}

// parseSysctlConf also returns the lines it skipped (FILE:LINE).
func parseSysctlConf(file string, b []byte) (out []SysctlEntry, skipped []string) {
	for i, ln := range strings.Split(string(b), "\n") {
		ln = strings.TrimSpace(ln)
		if ln == "" || ln[0] == '#' || ln[0] == ';' {
			continue
		}
		k, v, hasValue := strings.Cut(ln, "=")
		k = strings.TrimSpace(k)
		e := SysctlEntry{}
		if strings.HasPrefix(k, "-") {
			e.IgnoreErrors = true
			k = strings.TrimSpace(k[1:])
		}
		if k == "" || strings.ContainsAny(k, " \t") {
			skipped = append(skipped, fmt.Sprintf("%s:%d", file, i+1))
			continue
		}
		if !hasValue {
			if !e.IgnoreErrors {
				skipped = append(skipped, fmt.Sprintf("%s:%d", file, i+1))
				continue // not an assignment: systemd-sysctl warns and skips it
			}
			e.Exclude = true
		}
		e.Key = NormalizeSysctlKey(k)
		e.Value = strings.Join(strings.Fields(v), " ")
		e.File, e.Line = file, i+1
		e.Glob = strings.ContainsAny(e.Key, "*?[")
		out = append(out, e)
	}
	return out, skipped
}

// ParseLimitsConf parses a pam_limits file: "domain type item value" lines.
func ParseLimitsConf(file string, b []byte) []LimitEntry {
	var out []LimitEntry
	for i, ln := range strings.Split(string(b), "\n") {
		if j := strings.IndexByte(ln, '#'); j >= 0 {
			ln = ln[:j]
		}
		f := strings.Fields(ln)
		if len(f) != 4 {
			continue
		}
		out = append(out, LimitEntry{File: file, Line: i + 1, Domain: f[0], Type: strings.ToLower(f[1]), Item: strings.ToLower(f[2]), Value: strings.ToLower(f[3])})
	}
	return out
}

// LimitFor returns the soft and hard values limits.conf/limits.d give a user
// for an item, following pam_limits' precedence: an entry for the user
// beats one for one of its groups (@group), which beats the wildcard (*);
// among entries of the same kind, the later one wins. Each result is the
// entry that set it, nil when none does.
func (p Persist) LimitFor(user string, groups []string, item string) (soft, hard *LimitEntry) {
	rank := func(d string) int {
		switch {
		case d == user:
			return 3
		case strings.HasPrefix(d, "@") || strings.HasPrefix(d, "%"):
			for _, g := range groups {
				if d[1:] == g {
					return 2
				}
			}
		case d == "*":
			return 1
		}
		return 0
	}
	softRank, hardRank := 0, 0
	for i := range p.Limits {
		e := &p.Limits[i]
		if e.Item != item {
			continue
		}
		r := rank(e.Domain)
		if r == 0 {
			continue
		}
		if (e.Type == "soft" || e.Type == "-") && r >= softRank {
			soft, softRank = e, r
		}
		if (e.Type == "hard" || e.Type == "-") && r >= hardRank {
			hard, hardRank = e, r
		}
	}
	return soft, hard
}

var (
	udevAttr   = textio.LazyRegexp(`ATTRS?\{([^}]+)\}\s*(==|!=|:=|\+=|-=|=)\s*"([^"]*)"`)
	udevKernel = textio.LazyRegexp(`KERNEL\s*==\s*"([^"]*)"`)
	udevMatch  = textio.LazyRegexp(`([A-Z_]+(?:\{[^}]*\})?)\s*(==|!=)\s*"([^"]*)"`)
)

// udevQueueAttrs are the block queue attributes dbhost follows.
var udevQueueAttrs = map[string]bool{"queue/scheduler": true, "queue/read_ahead_kb": true, "bdi/read_ahead_kb": true}

// ParseUdevRules extracts the rules of a udev rules file that assign a queue
// attribute (ATTR{queue/scheduler}="none"), with their KERNEL== match.
// Lines continued with a backslash are joined first.
func ParseUdevRules(file string, b []byte) []UdevRule {
	var out []UdevRule
	lines := strings.Split(string(b), "\n")
	for i := 0; i < len(lines); i++ {
		start := i + 1
		ln := strings.TrimSpace(lines[i])
		for strings.HasSuffix(ln, "\\") && i+1 < len(lines) {
			i++
			ln = strings.TrimSuffix(ln, "\\") + " " + strings.TrimSpace(lines[i])
		}
		if ln == "" || ln[0] == '#' {
			continue
		}
		match := ""
		if m := udevKernel.FindStringSubmatch(ln); m != nil {
			match = m[1]
		}
		var conds []string
		for _, m := range udevMatch.FindAllStringSubmatch(ln, -1) {
			switch m[1] {
			case "ACTION", "SUBSYSTEM", "KERNEL":
				continue
			}
			conds = append(conds, m[0])
		}
		for _, m := range udevAttr.FindAllStringSubmatch(ln, -1) {
			if (m[2] != "=" && m[2] != ":=") || !udevQueueAttrs[m[1]] || strings.HasPrefix(m[0], "ATTRS") {
				continue
			}
			out = append(out, UdevRule{File: file, Line: start, Text: ln, Attr: m[1], Value: m[3], Match: match, Conditions: conds})
		}
	}
	return out
}
