// Package apply changes the host the way `dbhost fix --out` only describes:
// it writes the rendered persistent files that are safe to write into their
// real places and sets the runtime kernel values, every change journaled
// before it happens so that a change set can be rolled back byte for byte
// (files) and value for value (kernel knobs), also after a crash.
//
// The same function (Build) computes what `fix --plan` shows and what
// `fix --apply` does. Everything is relative to a root directory standing
// in for /, so tests run on a temporary tree; kernel values are only
// touched when the root is "/".
package apply

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"

	"github.com/dbhost/dbhost/internal/change"
	"github.com/dbhost/dbhost/internal/check"
	"github.com/dbhost/dbhost/internal/fix"
	"github.com/dbhost/dbhost/internal/host"
	"github.com/dbhost/dbhost/internal/journal"
	"github.com/dbhost/dbhost/internal/safefile"
)

// maxFile bounds a destination file read back (dbhost's are a few KB).
const maxFile = change.MaxFile

// Plan is what an apply changes: the files, the runtime values, and what it
// leaves to a person.
type Plan struct {
	Root     string      `json:"root"`
	Findings []Target    `json:"findings"`
	Files    []FilePlan  `json:"files"`
	Values   []ValuePlan `json:"values"`
	// Settings are database settings changed on running servers.
	Settings []SettingPlan `json:"settings"`
	// IncludeDirs are directories of option files that running MySQL
	// servers include, checked when planned: apply writes there too.
	IncludeDirs []string `json:"include_dirs,omitempty"`
	// NotApplied lists, per finding, what apply never does (restarts, the
	// kernel command line, fstab, settings of servers it cannot reach,
	// check commands).
	NotApplied []string `json:"not_applied,omitempty"`
}

// Target is a finding an apply fixes.
type Target struct {
	ID      string `json:"id"`
	Subject string `json:"subject"`
}

func (t Target) String() string {
	if t.Subject == "" || t.Subject == "host" {
		return t.ID
	}
	return t.ID + " (" + t.Subject + ")"
}

// FilePlan is one persistent file and the state it replaces.
type FilePlan struct {
	Path string `json:"path"` // on the host, absolute
	// Exists, Sum, OldMode, UID, GID: the destination as read by the plan
	// (Sum is the SHA-256 of its content, "" when absent).
	Exists  bool   `json:"exists"`
	Sum     string `json:"sum"`
	OldMode uint32 `json:"old_mode,omitempty"`
	UID     int    `json:"uid,omitempty"`
	GID     int    `json:"gid,omitempty"`
	// NewSum and Mode: the content and permission written.
	NewSum  string `json:"new_sum"`
	Mode    uint32 `json:"mode"`
	Content string `json:"content"`
	Diff    string `json:"diff,omitempty"`
	// Unchanged: the file already has this content and mode.
	Unchanged bool `json:"unchanged,omitempty"`
	// Refused says why the file cannot be written (a link there).
	Refused  string   `json:"refused,omitempty"`
	Findings []string `json:"findings"`
}

// ValuePlan is one runtime kernel value.
type ValuePlan struct {
	Path      string   `json:"path"`
	Old       string   `json:"old"`
	New       string   `json:"new"`
	Unchanged bool     `json:"unchanged,omitempty"`
	Findings  []string `json:"findings"`
}

// Allowed says why apply must not write the file at p (absolute, on the
// host), or nil: see change.Allowed.
func Allowed(p string) error { return change.Allowed(p) }

func sortedSet(m map[string]bool) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// Select returns the failing findings with a fix, in check order; those
// about untrusted instances have advice only and are left out.
func Select(findings []check.Finding) []check.Finding {
	var out []check.Finding
	for _, f := range findings {
		if f.Status == check.Fail && f.Fix != nil && !f.Fix.Empty() && !f.Untrusted {
			out = append(out, f)
		}
	}
	return out
}

// Build computes the plan for the selected findings (see Select) against
// the files under root, reading only. Kernel values are read from the live
// host only when root is "/"; elsewhere they are listed as not applied.
// Database settings are listed as not applied; see BuildWith.
func Build(root string, fc fix.Context, selected []check.Finding) (*Plan, error) {
	return BuildWith(root, fc, selected, nil)
}

// BuildWith is Build that also plans the database settings of the servers
// it can log in to (root "/" only): PostgreSQL through ALTER SYSTEM, which
// replaces the snippet fix --out renders for that server.
func BuildWith(root string, fc fix.Context, selected []check.Finding, srv *Servers) (*Plan, error) {
	root = filepath.Clean(root)
	p := &Plan{Root: root, Findings: []Target{}, Files: []FilePlan{}, Values: []ValuePlan{}, Settings: []SettingPlan{}}
	var items []fix.Item
	for _, f := range selected {
		items = append(items, fix.Item{ID: f.ID, Subject: f.Subject, Fix: f.Fix})
	}
	skipped := map[string]string{}
	if srv != nil && root == "/" {
		p.Settings, skipped = planSettings(srv, fc, items)
	}
	// Settings a server keeps itself leave the findings' fixes (ALTER
	// SYSTEM replaces the conf.d snippet); the others stay, as the option
	// file written into the server's included directory keeps them. The
	// rest, and why, stay with the lines fix --out renders.
	planned, includeDirs, keepConfig := map[string]bool{}, map[string]bool{}, map[string]bool{}
	for _, sp := range p.Settings {
		planned[sp.Server.Name+" "+sp.Key] = true
		if !sp.SavedByServer {
			if !sp.RuntimeOnly {
				includeDirs[fc.Instances[sp.Server.Name].ConfDir] = true
			}
			keepConfig[sp.Server.Name+" "+sp.Key] = true
		}
	}
	p.IncludeDirs = sortedSet(includeDirs)
	fileOwners := map[string][]string{}
	for i, it := range items {
		t := Target{ID: it.ID, Subject: it.Subject}
		p.Findings = append(p.Findings, t)
		fx := *it.Fix
		fx.Config = nil
		for _, c := range it.Fix.Config {
			if !planned[c.Instance+" "+c.Key] || keepConfig[c.Instance+" "+c.Key] {
				fx.Config = append(fx.Config, c)
			}
		}
		items[i].Fix = &fx
		for _, file := range fix.Render(fc, []fix.Item{items[i]}) {
			fileOwners[file.Path] = append(fileOwners[file.Path], t.String())
		}
		p.NotApplied = append(p.NotApplied, notApplied(t, items[i].Fix, fc, root, skipped, planned)...)
	}
	for _, file := range fix.Render(fc, items) {
		if err := change.AllowedIn(file.Path, p.IncludeDirs); err != nil {
			p.NotApplied = append(p.NotApplied, fmt.Sprintf("%s: %s is not written (only rendered by `dbhost fix --out`): %s",
				strings.Join(fileOwners[file.Path], ", "), file.Path, reasonNotWritten(file.Path)))
			continue
		}
		if includeDirs[path.Dir(file.Path)] {
			// The server's account reads it; it holds no secret.
			file.Mode = 0o644
		}
		fp, err := planFile(root, file)
		if err != nil {
			return nil, err
		}
		fp.Findings = fileOwners[file.Path]
		p.Files = append(p.Files, fp)
	}
	if root == "/" {
		h, err := host.Open("/")
		if err != nil {
			return nil, err
		}
		defer h.Close()
		seen := map[string]int{}
		for _, f := range selected {
			if f.Fix.HostOnly {
				continue
			}
			t := Target{ID: f.ID, Subject: f.Subject}.String()
			for _, k := range fix.Knobs(f.Fix) {
				clean := path.Clean(k.Path)
				if i, ok := seen[clean]; ok {
					p.Values[i].Findings = append(p.Values[i].Findings, t)
					continue
				}
				if err := knobAllowed(clean, k.Value); err != nil {
					return nil, err
				}
				b, err := h.ReadFile(clean)
				if err != nil {
					return nil, fmt.Errorf("%s: %w", t, err)
				}
				old := journal.Current(string(b))
				seen[clean] = len(p.Values)
				p.Values = append(p.Values, ValuePlan{Path: clean, Old: old, New: k.Value, Unchanged: old == k.Value, Findings: []string{t}})
			}
		}
		vals, notes := planRlimits(change.Config{Host: h}, selected)
		p.Values, p.NotApplied = append(p.Values, vals...), append(append(p.NotApplied, notes...), udevPlanNotes(p)...)
	}
	sort.Strings(p.NotApplied)
	return p, nil
}

func reasonNotWritten(p string) string {
	switch {
	case strings.HasPrefix(p, "/etc/default/grub"):
		return "the kernel command line changes only with update-grub and a reboot"
	case strings.Contains(p, "fstab"):
		return "fstab is never edited by dbhost"
	case strings.HasPrefix(p, "/etc/tuned/"):
		return "a TuneD profile takes effect only with tuned-adm"
	}
	return "database configuration and other files are left to a person"
}

// knobAllowed keeps a runtime value under /proc/sys and /sys, or a
// process's limit.
func knobAllowed(p, v string) error {
	if isRlimitPath(p) {
		return rlimitAllowed(p, v)
	}
	return change.KernelAllowed(p, v)
}

// notApplied lists what apply leaves to a person for one finding.
func notApplied(t Target, f *fix.Fix, fc fix.Context, root string, skipped map[string]string, planned map[string]bool) []string {
	var out []string
	add := func(format string, a ...any) { out = append(out, t.String()+": "+fmt.Sprintf(format, a...)) }
	if f.HostOnly && len(fix.Knobs(f)) > 0 {
		add("kernel values not set: dbhost runs in a container; apply them on the container's host")
	} else if root != "/" && len(fix.Knobs(f)) > 0 {
		add("kernel values not set: the root is %s, not the live host", root)
	}
	for _, c := range f.Config {
		if planned[c.Instance+" "+c.Key] {
			continue
		}
		why := skipped[c.Instance+" "+c.Key]
		if why == "" {
			why = "settings are changed only on the live host's running servers"
		}
		add("database setting %s = %s on %s not applied: %s", c.Key, c.Value, c.Instance, why)
	}
	for _, c := range f.Cmdline {
		add("kernel command line %s not changed (needs update-grub and a reboot)", c)
	}
	for _, m := range f.Mount {
		add("mount options of %s not changed (fstab and remounts are left to a person)", m.MountPoint)
	}
	for _, kv := range f.TunedDisk {
		add("TuneD [disk] %s=%s not applied", kv.Key, kv.Value)
	}
	if len(f.Dropins) > 0 || len(f.Limits) > 0 {
		add("limits and unit drop-ins take effect when the service restarts or at the next login; nothing is restarted")
	}
	for _, r := range f.Runtime {
		if root == "/" && rlimitCommand(f, r) {
			continue // planned as a value, or said why not
		}
		add("command not run: %s", r)
	}
	if s := fix.Steps(f, fc); s != "" {
		add("%s", s)
	}
	if f.Manual != "" {
		add("%s", f.Manual)
	}
	return out
}

// planFile reads the destination of one rendered file.
func planFile(root string, file fix.File) (FilePlan, error) {
	mode := file.Mode
	if mode == 0 {
		mode = 0o644
	}
	fp := FilePlan{Path: file.Path, Mode: mode, Content: file.Content, NewSum: safefile.Sum([]byte(file.Content))}
	full := filepath.Join(root, file.Path)
	if why := linkOnTheWay(root, file.Path); why != "" {
		fp.Refused = why
		return fp, nil
	}
	st, err := os.Lstat(full)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		fp.Diff = diff(file.Path, "", file.Content)
		return fp, nil
	case err != nil:
		return fp, err
	case !st.Mode().IsRegular():
		fp.Refused = fmt.Sprintf("%s is not a regular file (%s): dbhost does not write through it", file.Path, st.Mode().Type())
		return fp, nil
	}
	b, info, err := readNoFollow(full)
	if err != nil {
		return fp, err
	}
	fp.Exists, fp.Sum, fp.OldMode, fp.UID, fp.GID = true, safefile.Sum(b), uint32(info.Mode), info.UID, info.GID
	fp.Content = keep(file.Path, string(b), file.Content)
	fp.NewSum = safefile.Sum([]byte(fp.Content))
	fp.Unchanged = fp.Sum == fp.NewSum && fp.OldMode == mode
	fp.Diff = diff(file.Path, string(b), fp.Content)
	return fp, nil
}

// linkOnTheWay says which directory between root and p is a symbolic link
// or not a directory, or "".
func linkOnTheWay(root, p string) string {
	dir := root
	parts := strings.Split(strings.Trim(path.Dir(p), "/"), "/")
	for _, c := range parts {
		dir = filepath.Join(dir, c)
		st, err := os.Lstat(dir)
		if errors.Is(err, fs.ErrNotExist) {
			return ""
		}
		if err != nil {
			return err.Error()
		}
		if st.Mode()&fs.ModeSymlink != 0 {
			return fmt.Sprintf("%s is a symbolic link: dbhost does not write through links", dir)
		}
		if !st.IsDir() {
			return fmt.Sprintf("%s is not a directory", dir)
		}
	}
	return ""
}

// Sum returns the SHA-256 of the file at p under root, "" when it does not
// exist; a link or anything but a regular file is an error.
func Sum(root, p string) (string, error) {
	full := filepath.Join(root, p)
	if why := linkOnTheWay(root, p); why != "" {
		return "", errors.New(why)
	}
	st, err := os.Lstat(full)
	if errors.Is(err, fs.ErrNotExist) {
		return "", nil
	}
	if err != nil {
		return "", err
	}
	if !st.Mode().IsRegular() {
		return "", fmt.Errorf("%s is not a regular file", full)
	}
	b, _, err := readNoFollow(full)
	if err != nil {
		return "", err
	}
	return safefile.Sum(b), nil
}

// Changes reports whether the plan changes anything.
func (p *Plan) Changes() bool {
	for _, f := range p.Files {
		if !f.Unchanged {
			return true
		}
	}
	for _, v := range p.Values {
		if !v.Unchanged {
			return true
		}
	}
	for _, s := range p.Settings {
		if !s.Unchanged {
			return true
		}
	}
	return false
}

// Refusals lists why the plan cannot be applied (links at destinations).
func (p *Plan) Refusals() []string {
	var out []string
	for _, f := range p.Files {
		if f.Refused != "" {
			out = append(out, f.Refused)
		}
	}
	return out
}
