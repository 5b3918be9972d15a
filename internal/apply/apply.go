package apply

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/dbhost/dbhost/internal/change"
	"github.com/dbhost/dbhost/internal/check"
	"github.com/dbhost/dbhost/internal/engine"
	"github.com/dbhost/dbhost/internal/host"
	"github.com/dbhost/dbhost/internal/safefile"
)

// Options say where an apply writes and what it does after.
type Options struct {
	// StateDir holds the change sets (default ROOT/var/lib/dbhost/changes).
	StateDir string
	// Reaudit, if set, judges the host again after the changes; the
	// selected findings' new statuses are stored with the change set.
	Reaudit func() []check.Finding
	// AllowRestart lets apply restart, through its systemd unit, a server
	// whose changed settings take effect only at a restart.
	AllowRestart bool
	// Engine says how to log in to the servers whose settings an apply,
	// a rollback or a recovery (maybe in a later process) changes.
	Engine engine.Options
	// Host is the rooted host reads go through (nil: the live system).
	Host *host.Host
	// Systemctl lists where the restart's systemctl is looked for, first
	// trusted one wins (empty: /usr/bin/systemctl, /bin/systemctl). Code
	// sets it (a test's stand-in), never a flag or the environment: root
	// must not run a binary others chose. The binary must still be one only
	// root can change.
	Systemctl []string
	// hook runs after each step ("recorded PATH": the journal holds a
	// file's undo, "wrote PATH", "set PATH": a kernel value written); tests
	// kill the process there.
	hook func(step string)
	now  func() time.Time
}

// StateDir is where change sets of root are kept by default.
func StateDir(root string) string { return filepath.Join(root, "var/lib/dbhost/changes") }

func (o *Options) step(s string) {
	if o.hook != nil {
		o.hook(s)
	}
}

func (o *Options) stateDir(root string) string {
	if o.StateDir != "" {
		return o.StateDir
	}
	return StateDir(root)
}

// Status of a change set.
const (
	StatusApplying    = "applying"     // unfinished: recovered (rolled back) by the next run
	StatusApplied     = "applied"      // done; --rollback puts it back
	StatusRollingBack = "rolling-back" // unfinished rollback: finished by the next run
	StatusRolledBack  = "rolled-back"
	StatusFailed      = "failed" // an apply that failed and was rolled back at once
)

// ChangeSet is the metadata of one apply, kept as meta.json next to its
// journal.
type ChangeSet struct {
	ID       string        `json:"id"`
	Status   string        `json:"status"`
	Root     string        `json:"root"`
	Created  time.Time     `json:"created"`
	Finished time.Time     `json:"finished,omitzero"`
	UID      int           `json:"uid"`
	User     string        `json:"user"`
	SudoUser string        `json:"sudo_user,omitempty"`
	Findings []Target      `json:"findings"`
	Files    []FilePlan    `json:"files"`
	Values   []ValuePlan   `json:"values"`
	Settings []SettingPlan `json:"settings,omitempty"`
	// Restarts say, per server, whether it was restarted for its settings.
	Restarts []string `json:"restarts,omitempty"`
	// After: the selected findings' statuses when audited again.
	After      []Outcome `json:"after,omitempty"`
	Errors     []string  `json:"errors,omitempty"`
	RolledBack time.Time `json:"rolled_back,omitzero"`
	// RolledBackBy: the user who rolled it back, or "recover" for an
	// interrupted apply put back by the next run.
	RolledBackBy string `json:"rolled_back_by,omitempty"`
	// Notes: what the apply did besides (udev) or left out at run time
	// (a server's limit that could not be set).
	Notes []string `json:"notes,omitempty"`
}

// Outcome is a selected finding's status after the apply.
type Outcome struct {
	Target
	Status string `json:"status"`
	Reason string `json:"reason,omitempty"`
}

// Apply performs the plan as one change set: it first puts back what an
// interrupted earlier run left (Recover), checks that every destination is
// still what the plan read (a file edited since is refused, by name),
// journals each change before making it, writes the files atomically and
// sets the values, and reads every one back. On any error the change set
// is rolled back at once. The caller holds the host lock.
func Apply(p *Plan, opts Options) (*ChangeSet, error) {
	if opts.now == nil {
		opts.now = time.Now
	}
	cfg := opts.config()
	if err := validate(p, cfg); err != nil {
		return nil, err
	}
	state := opts.stateDir(p.Root)
	if _, err := Recover(state, opts); err != nil {
		return nil, fmt.Errorf("an earlier change set could not be recovered: %w", err)
	}
	if err := p.Verify(); err != nil {
		return nil, err
	}
	live := newLiveServers(cfg)
	defer live.close()
	settings := changedSettings(p)
	if err := live.verify(settings); err != nil {
		return nil, err
	}
	if !p.Changes() {
		return nil, errors.New("nothing to change: every file and value is already as the fixes want")
	}
	a, err := openSet(p, settings, state, opts)
	if err != nil {
		return nil, err
	}
	if err := a.files(); err != nil {
		return a.fail(err)
	}
	if err := a.values(); err != nil {
		return a.fail(err)
	}
	if err := live.apply(a.c, a.cs.Settings); err != nil {
		return a.fail(err)
	}
	return a.finish(p.Settings)
}

// config is the change layer's configuration of an apply, a rollback and
// a recovery alike.
func (o *Options) config() change.Config {
	return change.Config{Host: o.Host, Engine: o.Engine, Systemctl: o.Systemctl, Step: o.hook}
}

// validate refuses a plan with a destination apply must not write, a file
// whose content is not what it says, or a value it must not set.
func validate(p *Plan, cfg change.Config) error {
	if why := p.Refusals(); len(why) > 0 {
		return fmt.Errorf("refusing to apply: %s", strings.Join(why, "; "))
	}
	for _, d := range p.IncludeDirs {
		if err := cfg.TrustedDir(d); err != nil {
			return err
		}
	}
	for _, f := range p.Files {
		if err := change.AllowedIn(f.Path, p.IncludeDirs); err != nil {
			return err
		}
		if safefile.Sum([]byte(f.Content)) != f.NewSum {
			return fmt.Errorf("refusing %s: plan content does not match its hash", f.Path)
		}
	}
	for _, v := range p.Values {
		if err := knobAllowed(v.Path, v.New); err != nil {
			return err
		}
		if p.Root != "/" {
			return fmt.Errorf("refusing %s: kernel values are set only when the root is /", v.Path)
		}
	}
	return nil
}

func changedSettings(p *Plan) []SettingPlan {
	var out []SettingPlan
	for _, s := range p.Settings {
		if !s.Unchanged {
			out = append(out, s)
		}
	}
	return out
}

// applying is one change set being applied.
type applying struct {
	p    *Plan
	cs   *ChangeSet
	dir  string
	c    *change.Changer
	opts Options
}

// openSet makes the change set's directory, its metadata (still
// "applying": the next run recovers it) and its journal.
func openSet(p *Plan, settings []SettingPlan, state string, opts Options) (*applying, error) {
	cs := &ChangeSet{ID: newID(opts.now()), Status: StatusApplying, Root: p.Root, Created: opts.now().UTC(),
		Findings: p.Findings, Values: []ValuePlan{}, Files: []FilePlan{}, Settings: settings}
	cs.UID, cs.User, cs.SudoUser = who()
	for _, f := range p.Files {
		if !f.Unchanged {
			cs.Files = append(cs.Files, f)
		}
	}
	for _, v := range p.Values {
		if !v.Unchanged {
			cs.Values = append(cs.Values, v)
		}
	}
	dir, err := makeSetDir(state, cs.ID)
	if err != nil {
		return nil, err
	}
	if err := saveMeta(dir, cs); err != nil {
		return nil, err
	}
	c, err := change.Open(filepath.Join(dir, "journal.json"), opts.config())
	if err != nil {
		return nil, err
	}
	return &applying{p: p, cs: cs, dir: dir, c: c, opts: opts}, nil
}

// fail rolls the change set back at once and says so.
func (a *applying) fail(err error) (*ChangeSet, error) {
	cs := a.cs
	cs.Errors = append(cs.Errors, err.Error())
	if rerr := a.c.Restore(); rerr != nil {
		cs.Errors = append(cs.Errors, "rollback: "+rerr.Error())
		saveMeta(a.dir, cs) // still "applying": the next run recovers it
		return cs, fmt.Errorf("%w; rolling back failed too: %v (change set %s is recovered by the next run)", err, rerr, cs.ID)
	}
	now := a.opts.now().UTC()
	cs.Status, cs.Finished, cs.RolledBack, cs.RolledBackBy = StatusFailed, now, now, "apply"
	saveMeta(a.dir, cs)
	return cs, fmt.Errorf("%w (everything changed so far was put back)", err)
}

// files writes the persistent files, each journaled first and read back.
func (a *applying) files() error {
	for _, f := range a.cs.Files {
		err := a.c.File(change.FileWrite{Root: a.p.Root, Path: f.Path, Exists: f.Exists, Sum: f.Sum, Content: f.Content,
			Mode: f.Mode, NewSum: f.NewSum, IncludeDirs: a.p.IncludeDirs, Backup: filepath.Join(a.dir, "backup")})
		if err != nil {
			return err
		}
	}
	return nil
}

// values sets the kernel values and the running processes' limits.
func (a *applying) values() error {
	for _, v := range a.cs.Values {
		if pid, item, ok := change.ParseRlimitPath(v.Path); ok {
			note, err := a.c.Rlimit(pid, item, v.Old, v.New)
			if err != nil {
				return fmt.Errorf("%s: %w", v.Path, err)
			}
			if note != "" {
				a.cs.Notes = append(a.cs.Notes, note)
			}
			a.opts.step("set " + v.Path)
			continue
		}
		got, err := a.c.Kernel(v.Path, v.New)
		if err != nil {
			return fmt.Errorf("%s: %w", v.Path, err)
		}
		if got != v.New {
			return fmt.Errorf("%s reads back %q after writing %q", v.Path, got, v.New)
		}
	}
	return nil
}

// finish marks the change set applied, then restarts what waits for a
// restart (allowed) and audits again. A restart is not undone by a
// rollback: it comes after the change set is complete, and its failure is
// reported, not rolled back.
func (a *applying) finish(planned []SettingPlan) (*ChangeSet, error) {
	cs := a.cs
	cs.Notes = append(cs.Notes, udevTrigger(cs)...)
	cs.Status, cs.Finished = StatusApplied, a.opts.now().UTC()
	if err := saveMeta(a.dir, cs); err != nil {
		return cs, err
	}
	cs.Restarts = restarts(planned, a.opts.AllowRestart, a.c)
	if err := saveMeta(a.dir, cs); err != nil {
		return cs, err
	}
	if a.opts.Reaudit != nil {
		cs.After = outcomes(cs.Findings, a.opts.Reaudit())
		saveMeta(a.dir, cs)
	}
	return cs, nil
}

// Verify checks that every destination still has the content the plan
// read, and names the first that does not.
func (p *Plan) Verify() error {
	for _, f := range p.Files {
		now, err := Sum(p.Root, f.Path)
		if err != nil {
			return fmt.Errorf("refusing %s: %w", f.Path, err)
		}
		if now != f.Sum {
			return fmt.Errorf("refusing to apply: %s changed since the plan (sha256 %s, the plan read %s)", f.Path, change.OrAbsent(now), change.OrAbsent(f.Sum))
		}
	}
	return nil
}

// Same reports how two plans differ in what they change, or "".
func Same(a, b *Plan) string {
	if a.Root != b.Root {
		return fmt.Sprintf("root %s, now %s", a.Root, b.Root)
	}
	key := func(p *Plan) []string {
		var out []string
		for _, f := range p.Files {
			out = append(out, fmt.Sprintf("file %s %s -> %s %04o", f.Path, change.OrAbsent(f.Sum), f.NewSum, f.Mode))
		}
		for _, v := range p.Values {
			out = append(out, fmt.Sprintf("value %s -> %s", v.Path, v.New))
		}
		for _, s := range p.Settings {
			out = append(out, fmt.Sprintf("setting %s %s %s -> %s", s.Server.Name, s.Key, showSaved(s.Saved), s.New))
		}
		return out
	}
	x, y := key(a), key(b)
	for i := 0; i < max(len(x), len(y)); i++ {
		switch {
		case i >= len(x):
			return "not in the plan: " + y[i]
		case i >= len(y):
			return "no longer needed: " + x[i]
		case x[i] != y[i]:
			return fmt.Sprintf("planned %s, now %s", x[i], y[i])
		}
	}
	return ""
}

func outcomes(targets []Target, findings []check.Finding) []Outcome {
	var out []Outcome
	for _, t := range targets {
		o := Outcome{Target: t, Status: "gone"}
		for _, f := range findings {
			if f.ID == t.ID && f.Subject == t.Subject {
				o.Status, o.Reason = string(f.Status), f.Reason
			}
		}
		out = append(out, o)
	}
	return out
}

func newID(t time.Time) string {
	var b [2]byte
	rand.Read(b[:])
	return t.UTC().Format("20060102T150405Z") + "-" + hex.EncodeToString(b[:])
}

func who() (uid int, name, sudo string) {
	uid = os.Getuid()
	name = strconv.Itoa(uid)
	if u, err := user.LookupId(name); err == nil {
		name = u.Username
	}
	return uid, name, os.Getenv("SUDO_USER")
}
