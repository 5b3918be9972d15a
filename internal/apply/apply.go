package apply

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/user"
	"path"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/dbhost/dbhost/internal/check"
	"github.com/dbhost/dbhost/internal/journal"
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
	if why := p.Refusals(); len(why) > 0 {
		return nil, fmt.Errorf("refusing to apply: %s", strings.Join(why, "; "))
	}
	for _, d := range p.IncludeDirs {
		if err := trustedDir(d); err != nil {
			return nil, err
		}
	}
	for _, f := range p.Files {
		if err := allowedIn(f.Path, p.IncludeDirs); err != nil {
			return nil, err
		}
		if safefile.Sum([]byte(f.Content)) != f.NewSum {
			return nil, fmt.Errorf("refusing %s: plan content does not match its hash", f.Path)
		}
	}
	for _, v := range p.Values {
		if err := knobAllowed(v.Path, v.New); err != nil {
			return nil, err
		}
		if p.Root != "/" {
			return nil, fmt.Errorf("refusing %s: kernel values are set only when the root is /", v.Path)
		}
	}
	state := opts.stateDir(p.Root)
	if _, err := Recover(state); err != nil {
		return nil, fmt.Errorf("an earlier change set could not be recovered: %w", err)
	}
	if err := p.Verify(); err != nil {
		return nil, err
	}
	var settings []SettingPlan
	for _, s := range p.Settings {
		if !s.Unchanged {
			settings = append(settings, s)
		}
	}
	live := newLiveServers()
	defer live.close()
	if err := live.verify(settings); err != nil {
		return nil, err
	}
	if !p.Changes() {
		return nil, errors.New("nothing to change: every file and value is already as the fixes want")
	}
	cs := &ChangeSet{ID: newID(opts.now()), Status: StatusApplying, Root: p.Root, Created: opts.now().UTC(),
		Findings: p.Findings, Values: []ValuePlan{}, Files: []FilePlan{}, Settings: settings}
	cs.UID, cs.User, cs.SudoUser = who()
	dir, err := makeSetDir(state, cs.ID)
	if err != nil {
		return nil, err
	}
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
	if err := saveMeta(dir, cs); err != nil {
		return nil, err
	}
	j, err := journal.Open(filepath.Join(dir, "journal.json"))
	if err != nil {
		return nil, err
	}
	fail := func(err error) (*ChangeSet, error) {
		cs.Errors = append(cs.Errors, err.Error())
		if rerr := j.Restore(); rerr != nil {
			cs.Errors = append(cs.Errors, "rollback: "+rerr.Error())
			saveMeta(dir, cs) // still "applying": the next run recovers it
			return cs, fmt.Errorf("%w; rolling back failed too: %v (change set %s is recovered by the next run)", err, rerr, cs.ID)
		}
		cs.Status, cs.Finished, cs.RolledBack, cs.RolledBackBy = StatusFailed, opts.now().UTC(), opts.now().UTC(), "apply"
		saveMeta(dir, cs)
		return cs, fmt.Errorf("%w (everything changed so far was put back)", err)
	}
	d, err := safefile.OpenDir(p.Root)
	if err != nil {
		return fail(err)
	}
	defer d.Close()
	for _, f := range cs.Files {
		if err := writeFile(j, d, dir, p.Root, f, opts); err != nil {
			return fail(err)
		}
	}
	for _, v := range cs.Values {
		if note, ok, err := applyRlimit(j, v); ok {
			if err != nil {
				return fail(fmt.Errorf("%s: %w", v.Path, err))
			}
			if note != "" {
				cs.Notes = append(cs.Notes, note)
			}
			opts.step("set " + v.Path)
			continue
		}
		if err := j.Set(v.Path, v.New); err != nil {
			return fail(fmt.Errorf("%s: %w", v.Path, err))
		}
		b, err := os.ReadFile(v.Path)
		if err != nil {
			return fail(err)
		}
		if got := journal.Current(string(b)); got != v.New {
			return fail(fmt.Errorf("%s reads back %q after writing %q", v.Path, got, v.New))
		}
		opts.step("set " + v.Path)
	}
	if err := live.apply(j, cs.Settings, opts); err != nil {
		return fail(err)
	}
	cs.Notes = append(cs.Notes, udevTrigger(cs)...)
	cs.Status, cs.Finished = StatusApplied, opts.now().UTC()
	if err := saveMeta(dir, cs); err != nil {
		return cs, err
	}
	// A restart is not undone by a rollback: it comes after the change
	// set is complete, and its failure is reported, not rolled back.
	cs.Restarts = restarts(p.Settings, opts.AllowRestart, opts.Systemctl)
	if err := saveMeta(dir, cs); err != nil {
		return cs, err
	}
	if opts.Reaudit != nil {
		cs.After = outcomes(cs.Findings, opts.Reaudit())
		saveMeta(dir, cs)
	}
	return cs, nil
}

// writeFile journals and writes one file, then reads it back.
func writeFile(j *journal.Journal, d *safefile.Dir, setDir, root string, f FilePlan, opts Options) error {
	rel := strings.TrimPrefix(f.Path, "/")
	// The destination must still be what the plan read, just before the
	// journal records it as the content to put back.
	b, info, err := d.ReadFileInfo(rel, maxFile)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		if f.Exists {
			return fmt.Errorf("refusing %s: it was removed since the plan", f.Path)
		}
	case err != nil:
		return fmt.Errorf("refusing %s: %w", f.Path, err)
	case !f.Exists || safefile.Sum(b) != f.Sum:
		return fmt.Errorf("refusing %s: it changed since the plan (sha256 %s, the plan read %s)", f.Path, safefile.Sum(b), orAbsent(f.Sum))
	}
	u := fileUndo{Root: root, Path: f.Path, Existed: f.Exists, NewSum: f.NewSum, MadeDirs: missingDirs(root, f.Path)}
	if Allowed(f.Path) != nil {
		u.IncludeDir = path.Dir(f.Path) // allowed as a server's included directory
	}
	if f.Exists {
		u.Content, u.Mode, u.UID, u.GID = b, info.Mode, info.UID, info.GID
		// A copy for people; the journal holds the same bytes.
		backup := filepath.Join(setDir, "backup", rel)
		if err := os.MkdirAll(filepath.Dir(backup), 0o700); err != nil {
			return err
		}
		if err := safefile.WriteBytes(backup, 0o600, b); err != nil {
			return err
		}
	}
	if err := j.Record(KindFile, "file "+f.Path, u); err != nil {
		return err
	}
	opts.step("recorded " + f.Path)
	if err := d.WriteFile(rel, os.FileMode(f.Mode), []byte(f.Content)); err != nil {
		return err
	}
	got, info, err := d.ReadFileInfo(rel, maxFile)
	if err != nil {
		return err
	}
	if safefile.Sum(got) != f.NewSum || uint32(info.Mode) != f.Mode {
		return fmt.Errorf("%s reads back different content or mode %04o", f.Path, info.Mode)
	}
	opts.step("wrote " + f.Path)
	return nil
}

func orAbsent(sum string) string {
	if sum == "" {
		return "no file"
	}
	return sum
}

// missingDirs lists the directories (relative to root) that writing p
// creates, outermost first.
func missingDirs(root, p string) []string {
	var out []string
	for dir := path.Dir(p); dir != "/"; dir = path.Dir(dir) {
		if _, err := os.Lstat(filepath.Join(root, dir)); errors.Is(err, fs.ErrNotExist) {
			out = append([]string{strings.TrimPrefix(dir, "/")}, out...)
		}
	}
	return out
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
			return fmt.Errorf("refusing to apply: %s changed since the plan (sha256 %s, the plan read %s)", f.Path, orAbsent(now), orAbsent(f.Sum))
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
			out = append(out, fmt.Sprintf("file %s %s -> %s %04o", f.Path, orAbsent(f.Sum), f.NewSum, f.Mode))
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
