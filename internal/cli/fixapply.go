package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/dbhost/dbhost/internal/apply"
	"github.com/dbhost/dbhost/internal/check"
	"github.com/dbhost/dbhost/internal/experiment"
	"github.com/dbhost/dbhost/internal/fix"
	"github.com/dbhost/dbhost/internal/results"
	"github.com/dbhost/dbhost/internal/safefile"
	"github.com/dbhost/dbhost/internal/termsafe"
)

// geteuid is replaced by tests that play a user who is not root.
var geteuid = os.Geteuid

// applyFlags are the modes of `dbhost fix` that change the host (or show
// what they would change).
type applyFlags struct {
	plan, apply, rollback, history, recover bool
	allowRestart                            bool
	planOut, planFile                       string
	rollbackID                              string
	// format: text, or json for --history and --apply (the change sets as
	// docs/json-schema.md describes them, for tools that drive fix).
	format string
}

// fixFormats are the output formats of --history and --apply.
var fixFormats = []string{"text", "json"}

func (a *applyFlags) register(fs *pflag.FlagSet) {
	fs.BoolVar(&a.plan, "plan", false, "show what --apply would change: a diff per file, old and new value per kernel setting (read-only); exits 0 when nothing would change, 1 when changes are pending, 2 when the plan is refused or on error")
	fs.StringVar(&a.planOut, "plan-out", "", "with --plan: also save the plan as JSON (each file's current hash) for --apply --plan-file")
	fs.BoolVar(&a.apply, "apply", false, "write the safe persistent files and set the kernel values, journaled (root)")
	fs.StringVar(&a.planFile, "plan-file", "", "with --apply: refuse if any file changed since this saved plan, or the changes differ")
	fs.BoolVar(&a.rollback, "rollback", false, "put back a change set exactly: [CHANGE-ID], default the latest applied (root)")
	fs.BoolVar(&a.history, "history", false, "list the change sets: when, by whom, what they fixed")
	fs.BoolVar(&a.recover, "recover", false, "roll back a change set an interrupted apply or rollback left unfinished (root)")
	fs.StringVar(&a.format, "format", "text", "with --history or --apply: output format: text, or json (the change sets, schema dbhost.changes/1)")
	fs.BoolVar(&a.allowRestart, "allow-restart", false, "with --apply: restart, through its systemd unit, a database whose changed settings need a restart")
}

func (a *applyFlags) modes() int {
	n := 0
	for _, b := range []bool{a.plan, a.apply, a.rollback, a.history, a.recover} {
		if b {
			n++
		}
	}
	return n
}

// args checks the operands of `dbhost fix`: the one change set --rollback
// puts back, or none.
func (a *applyFlags) args(_ *cobra.Command, args []string) error {
	if a.rollback && len(args) > 0 {
		a.rollbackID, args = args[0], args[1:]
	}
	return noArgs(nil, args)
}

// runFixApply runs --plan, --apply, --rollback, --history or --recover.
func runFixApply(ctx context.Context, env Env, src *sourceFlags, a *applyFlags, only, skip []string, out string) int {
	if why := a.refused(src, out); why != "" {
		return fixFail(env, "%s", why)
	}
	state := apply.StateDir(src.root)
	switch {
	case a.history:
		return fixHistory(env, state, a.format == "json")
	case a.plan:
		return fixShowPlan(ctx, env, src, a, only, skip)
	case geteuid() != 0:
		return fixFail(env, "--%s changes files under /etc and kernel values: run it as root (sudo dbhost fix --%s)", a.mode(), a.mode())
	}
	// Rollback and recovery log in to servers with the same credentials.
	opts := apply.Options{StateDir: state, Engine: src.options().Engine, Systemctl: env.Systemctl}
	// Two applies (or an apply and an experiment) never interleave.
	release, err := lockHost(ctx, env, "dbhost fix")
	if err != nil {
		return fixFail(env, "host lock: %v", err)
	}
	defer release()
	if a.recover {
		return fixRecover(ctx, env, src.root, opts)
	}
	if code, ok := fixRecoverSets(env, opts); !ok {
		return code
	}
	if a.rollback {
		return fixRollback(env, a.rollbackID, opts)
	}
	return fixApply(ctx, env, src, a, only, skip, opts)
}

func fixFail(env Env, format string, args ...any) int {
	fmt.Fprintf(env.Stderr, "dbhost fix: "+format+"\n", args...)
	return ExitError
}

// refused says why the flags do not go together, or "".
func (a *applyFlags) refused(src *sourceFlags, out string) string {
	switch {
	case a.modes() > 1:
		return "--plan, --apply, --rollback, --history and --recover are separate modes: give one"
	case a.format != "text" && a.format != "json":
		return fmt.Sprintf("unknown --format %q (want text or json)", a.format)
	case a.format == "json" && !a.history && !a.apply:
		return "--format json goes with --history or --apply"
	case out != "":
		return fmt.Sprintf("--out renders files only; it does not combine with --%s", a.mode())
	case a.planOut != "" && !a.plan:
		return "--plan-out goes with --plan"
	case a.planFile != "" && !a.apply:
		return "--plan-file goes with --apply"
	case a.allowRestart && !a.apply:
		return "--allow-restart goes with --apply"
	case src.from != "" && (src.root == "/" || src.root == ""):
		return fmt.Sprintf("--from reads a snapshot, not this host: --%s needs --root DIR, a copy tree to change instead of /", a.mode())
	}
	return ""
}

// fixShowPlan runs --plan: exit 0 when nothing would change, 1 when
// changes are pending.
func fixShowPlan(ctx context.Context, env Env, src *sourceFlags, a *applyFlags, only, skip []string) int {
	p, code := fixPlan(ctx, env, src, only, skip)
	if p == nil {
		return code
	}
	printPlan(env.Stdout, p)
	code = ExitOK
	if p.Changes() {
		code = ExitFindings // changes are pending
	}
	if a.planOut != "" {
		b, _ := json.MarshalIndent(p, "", "  ")
		if err := safefile.WriteBytes(a.planOut, 0o600, append(b, '\n')); err != nil {
			return fixFail(env, "%v", err)
		}
		fmt.Fprintf(env.Stderr, "dbhost fix: plan saved to %s\n", a.planOut)
	}
	return code
}

// fixRecoverSets rolls back the change sets an interrupted run left
// unfinished, as every changing mode does first; ok false: it failed.
func fixRecoverSets(env Env, opts apply.Options) (code int, ok bool) {
	_, err := recoverSets(env, opts)
	if err != nil {
		return fixFail(env, "recover: %v", err), false
	}
	return ExitOK, true
}

func recoverSets(env Env, opts apply.Options) ([]string, error) {
	recovered, err := apply.Recover(opts.StateDir, opts)
	for _, id := range recovered {
		fmt.Fprintf(env.Stderr, "dbhost fix: change set %s was left unfinished by an interrupted run: rolled back\n", id)
	}
	return recovered, err
}

// fixRecover runs --recover: every unfinished change on this host.
func fixRecover(ctx context.Context, env Env, root string, opts apply.Options) int {
	exp := filepath.Join(root, experiment.DefaultJournal)
	if _, err := os.Lstat(exp); err != nil {
		exp = "" // no experiment left anything
	}
	sets, rec, err := recoverHost(ctx, env, opts, exp, nil)
	if err != nil {
		return fixFail(env, "recover: %v", err)
	}
	if len(sets) == 0 && (rec == nil || len(rec.Undone) == 0) {
		fmt.Fprintln(env.Stdout, "nothing to recover")
	}
	return ExitOK
}

// recoverHost puts back every change an interrupted run left on this
// host, for `fix --recover` and `experiment recover` alike: the change
// sets of fix --apply and --rollback, then the experiment's journal (its
// running experiments marked interrupted in store, which may be nil). rec
// is nil when expJournal is "". The caller holds the host lock.
func recoverHost(ctx context.Context, env Env, opts apply.Options, expJournal string, store *results.Store) (sets []string, rec *experiment.Recovered, err error) {
	sets, err = recoverSets(env, opts)
	if err != nil {
		return sets, nil, err
	}
	if expJournal == "" {
		return sets, nil, nil
	}
	rec, err = experiment.Recover(ctx, expJournal, store, env.Stderr)
	if rec != nil && len(rec.Undone) > 0 && err == nil {
		fmt.Fprintf(env.Stdout, "restored %d change(s) from %s\n", len(rec.Undone), expJournal)
	}
	return sets, rec, err
}

// fixRollback runs --rollback [ID].
func fixRollback(env Env, id string, opts apply.Options) int {
	cs, err := apply.Rollback(opts.StateDir, id, opts)
	if err != nil {
		return fixFail(env, "rollback: %v", err)
	}
	fmt.Fprintf(env.Stdout, "rolled back %s: %d files, %d kernel values and %d database settings as they were before\n", cs.ID, len(cs.Files), len(cs.Values), len(cs.Settings))
	for _, s := range cs.Settings {
		if s.Restart {
			fmt.Fprintf(env.Stdout, "  %s: %s takes its old value back only when the server restarts\n", s.Server.Name, s.Key)
		}
	}
	return ExitOK
}

// fixApply runs --apply: the plan made now (checked against --plan-file),
// applied as one change set, and the selected findings audited again.
func fixApply(ctx context.Context, env Env, src *sourceFlags, a *applyFlags, only, skip []string, opts apply.Options) int {
	// With --format json, stdout holds only the JSON; the plan's text goes
	// to stderr, where a tool's log keeps it.
	penv := env
	if a.format == "json" {
		penv.Stdout = env.Stderr
	}
	p, code := fixPlan(ctx, penv, src, only, skip)
	if p == nil {
		return code
	}
	if a.planFile != "" {
		if err := checkPlanFile(a.planFile, p); err != nil {
			return fixFail(env, "%v", err)
		}
	}
	printPlan(penv.Stdout, p)
	opts.AllowRestart = a.allowRestart
	opts.Reaudit = func() []check.Finding {
		f, closeHost, ok := src.gather(ctx, env, "fix")
		if !ok {
			return nil
		}
		defer closeHost()
		return check.Run(f, check.Selector{Only: only, Skip: skip})
	}
	cs, err := apply.Apply(p, opts)
	if a.format == "json" {
		// The set is written whatever happened (a failed apply's set says
		// what was put back), so a tool learns its ID without parsing text.
		if cs != nil {
			writeChangeSets(env, []*apply.ChangeSet{cs})
		}
		if err != nil {
			return fixFail(env, "apply: %v", err)
		}
		return afterCode(cs)
	}
	if err != nil {
		return fixFail(env, "apply: %v", err)
	}
	fmt.Fprintf(env.Stdout, "\napplied change set %s (undo with: dbhost fix --rollback %s)\n", cs.ID, cs.ID)
	for _, r := range cs.Restarts {
		fmt.Fprintf(env.Stdout, "  %s\n", r)
	}
	for _, n := range cs.Notes {
		fmt.Fprintf(env.Stdout, "  note: %s\n", n)
	}
	for _, o := range cs.After {
		fmt.Fprintf(env.Stdout, "  %-5s %s\n", o.Status, o.Target)
	}
	return afterCode(cs)
}

// afterCode is --apply's exit status: findings when a fixed check still
// fails after the apply.
func afterCode(cs *apply.ChangeSet) int {
	for _, o := range cs.After {
		if o.Status != string(check.Pass) {
			return ExitFindings
		}
	}
	return ExitOK
}

// changeSetsJSON is the JSON form of change sets (schema dbhost.changes/1).
type changeSetsJSON struct {
	Schema     string             `json:"schema"`
	ChangeSets []*apply.ChangeSet `json:"change_sets"`
}

func writeChangeSets(env Env, sets []*apply.ChangeSet) int {
	if sets == nil {
		sets = []*apply.ChangeSet{}
	}
	enc := json.NewEncoder(termsafe.Raw(env.Stdout))
	enc.SetIndent("", "  ")
	if err := enc.Encode(changeSetsJSON{Schema: "dbhost.changes/1", ChangeSets: sets}); err != nil {
		fmt.Fprintln(env.Stderr, "dbhost fix:", err)
		return ExitError
	}
	return ExitOK
}

func (a *applyFlags) mode() string {
	switch {
	case a.plan:
		return "plan"
	case a.apply:
		return "apply"
	case a.rollback:
		return "rollback"
	case a.recover:
		return "recover"
	}
	return "history"
}

// fixPlan gathers the facts and builds the plan: --plan and --apply call
// this same function, so they show the same changes.
func fixPlan(ctx context.Context, env Env, src *sourceFlags, only, skip []string) (*apply.Plan, int) {
	if err := validSelection(only, skip); err != nil {
		fmt.Fprintln(env.Stderr, "dbhost fix:", err)
		return nil, ExitError
	}
	f, closeHost, ok := src.gather(ctx, env, "fix")
	if !ok {
		return nil, ExitError
	}
	defer closeHost()
	hp, waived := makePlan(src, f, check.Selector{Only: only, Skip: skip})
	printHostPlan(env.Stdout, hp)
	if len(waived) > 0 {
		fmt.Fprintln(env.Stdout, "Waivers (waived findings are left alone):")
		printWaiverNotes(env.Stdout, "  - ", waived)
	}
	if hp.Refused() {
		return nil, ExitError
	}
	sel := apply.Select(hp.Findings)
	var srv *apply.Servers
	if src.from == "" && !src.noConnect {
		srv = &apply.Servers{Instances: f.Instances, Conn: src.options().Engine}
	}
	p, err := apply.BuildWith(src.root, fix.ContextFrom(f), sel, srv)
	if err != nil {
		fmt.Fprintln(env.Stderr, "dbhost fix:", err)
		return nil, ExitError
	}
	if n := check.UntrustedNote(hp.Observed); n != "" {
		p.NotApplied = append(p.NotApplied, n)
	}
	for _, c := range hp.Conflicts {
		if c.Kept == "" {
			p.NotApplied = append(p.NotApplied, "conflict: "+c.String())
		}
	}
	return p, ExitOK
}

// checkPlanFile refuses an apply when a file changed since the saved plan
// (named), or when the changes computed now differ from the saved ones.
func checkPlanFile(name string, now *apply.Plan) error {
	b, err := os.ReadFile(name)
	if err != nil {
		return err
	}
	var saved apply.Plan
	if err := json.Unmarshal(b, &saved); err != nil {
		return fmt.Errorf("%s: %w", name, err)
	}
	saved.Root = now.Root
	if err := saved.Verify(); err != nil {
		return err
	}
	if d := apply.Same(&saved, now); d != "" {
		return fmt.Errorf("refusing to apply: the changes differ from the plan in %s (%s): make a new plan", name, d)
	}
	return nil
}

// printPlan shows each file's diff and each value's change.
func printPlan(w io.Writer, p *apply.Plan) {
	if len(p.Findings) == 0 {
		fmt.Fprintln(w, "No failing finding has a fix: nothing to change.")
		return
	}
	fmt.Fprintf(w, "Fixes for %d findings.\n", len(p.Findings))
	for _, f := range p.Files {
		state := "new file"
		if f.Exists {
			state = fmt.Sprintf("replaces sha256 %s", f.Sum)
		}
		switch {
		case f.Refused != "":
			fmt.Fprintf(w, "\nfile %s: REFUSED: %s\n", f.Path, f.Refused)
			continue
		case f.Unchanged:
			fmt.Fprintf(w, "\nfile %s: already as wanted\n", f.Path)
			continue
		}
		fmt.Fprintf(w, "\nfile %s (mode %04o, %s; for %s)\n%s", f.Path, f.Mode, state, strings.Join(f.Findings, ", "), f.Diff)
	}
	for _, v := range p.Values {
		if v.Unchanged {
			fmt.Fprintf(w, "\nvalue %s: already %s\n", v.Path, v.New)
			continue
		}
		fmt.Fprintf(w, "\nvalue %s: %s -> %s (for %s)\n", v.Path, v.Old, v.New, strings.Join(v.Findings, ", "))
	}
	for _, s := range p.Settings {
		if s.Unchanged && s.SavedByServer {
			fmt.Fprintf(w, "\nsetting %s %s: already saved as %s\n", s.Server.Name, s.Key, s.New)
			continue
		}
		fmt.Fprintf(w, "\nsetting %s %s: %s -> %s by %s (for %s)\n", s.Server.Name, s.Key, s.Old, s.New, s.Method, strings.Join(s.Findings, ", "))
	}
	if len(p.NotApplied) > 0 {
		fmt.Fprintln(w, "\nNot applied (left to a person):")
		for _, n := range p.NotApplied {
			fmt.Fprintf(w, "  - %s\n", n)
		}
	}
}

func fixHistory(env Env, state string, asJSON bool) int {
	sets, err := apply.History(state)
	if err != nil {
		fmt.Fprintln(env.Stderr, "dbhost fix --history:", err)
		return ExitError
	}
	if asJSON {
		return writeChangeSets(env, sets)
	}
	if len(sets) == 0 {
		fmt.Fprintln(env.Stdout, "no change sets in", state)
	}
	for _, cs := range sets {
		by := cs.User
		if cs.SudoUser != "" {
			by += " (sudo by " + cs.SudoUser + ")"
		}
		var fixed []string
		for _, t := range cs.Findings {
			fixed = append(fixed, t.String())
		}
		fmt.Fprintf(env.Stdout, "%s  %-12s %s  by %s: %d files, %d values, %d settings; fixed %s\n", cs.ID, cs.Status,
			cs.Created.Format("2006-01-02 15:04:05Z"), by, len(cs.Files), len(cs.Values), len(cs.Settings), strings.Join(fixed, ", "))
		if !cs.RolledBack.IsZero() {
			fmt.Fprintf(env.Stdout, "    rolled back %s by %s\n", cs.RolledBack.Format("2006-01-02 15:04:05Z"), cs.RolledBackBy)
		}
		for _, e := range cs.Errors {
			fmt.Fprintf(env.Stdout, "    error: %s\n", e)
		}
	}
	return ExitOK
}
