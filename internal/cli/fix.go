package cli

import (
	"context"
	"fmt"
	"sort"

	"github.com/spf13/cobra"

	"github.com/dbhost/dbhost/internal/check"
	"github.com/dbhost/dbhost/internal/facts"
	"github.com/dbhost/dbhost/internal/fix"
	"github.com/dbhost/dbhost/internal/plan"
)

func (a *app) fixCmd() *cobra.Command {
	c := newCmd("fix --out DIR | --plan | --apply | --rollback [CHANGE-ID] | --history | --recover", "render the fixes of the findings, or plan, apply and roll them back on this host")
	c.Example = `  dbhost fix --out ./fixes
  sudo dbhost fix --plan
  sudo dbhost fix --apply --only mem
  sudo dbhost fix --rollback`
	setExits(c, map[int]string{
		ExitOK:       "Done: the files rendered (--out), nothing to change (--plan), every selected finding passes after --apply; --rollback, --history, --recover done.",
		ExitFindings: "--plan: changes are pending. --apply: applied, but a selected finding does not pass after it.",
		ExitError:    "It could not run, the plan was refused, or the apply failed and was rolled back.",
	})
	fs := c.Flags()
	var src sourceFlags
	src.register(fs, true)
	src.keep.register(fs)
	src.budget.register(fs)
	src.waivers.register(fs)
	out := fs.String("out", "", "directory to render the fix files into (render only; nothing on the host changes)")
	var only, skip listFlag
	fs.Var(&only, "only", "fix only these checks (IDs or domain prefixes)")
	fs.Var(&skip, "skip", "leave these checks out")
	var af applyFlags
	af.register(fs)
	c.Args = af.args
	c.Run = a.do(func(ctx context.Context, _ []string) int {
		env := a.env
		if af.modes() > 0 || af.planOut != "" || af.planFile != "" || af.format != "text" {
			return runFixApply(ctx, env, &src, &af, only, skip, *out)
		}
		if *out == "" {
			fmt.Fprintln(env.Stderr, "dbhost fix: --out DIR is required (or --plan, --apply, --rollback, --history, --recover)")
			return ExitError
		}
		if err := validSelection(only, skip); err != nil {
			fmt.Fprintln(env.Stderr, "dbhost fix:", err)
			return ExitError
		}
		f, closeHost, ok := src.gather(ctx, env, "fix")
		if !ok {
			return ExitError
		}
		defer closeHost()
		// All fixes are decided together, on the host as it would be after
		// them; each finding's own files are not needed.
		hp, waived := makePlan(&src, f, check.Selector{Only: only, Skip: skip})
		fc := fix.ContextFrom(f)
		items := hp.Items
		notes := hostPlanNotes(hp)
		notes = append(notes, waived...)
		if hp.Refused() {
			// A refused plan writes no file a person could install.
			items = nil
			notes = append([]string{"dbhost wrote no fix: the planned host fails the checks listed below. Fix those by hand, or narrow the plan with --only/--skip, then run dbhost fix again."}, notes...)
		}
		files := fix.Render(fc, items)
		notes = append(notes, fix.Notes(items)...)
		notes = append(notes, fix.StepNotes(fc, items)...)
		if n := check.UntrustedNote(hp.Observed); n != "" {
			notes = append(notes, n)
		}
		written, kept, err := fix.WriteTree(*out, files, notes, fix.Lines(fix.Runbook(fc, items)))
		if hp.Refused() {
			printHostPlan(env.Stderr, hp)
		}
		for _, k := range kept {
			fmt.Fprintln(env.Stderr, "dbhost fix:", k)
		}
		printWaiverNotes(env.Stderr, "dbhost fix: ", waived)
		if err != nil {
			fmt.Fprintln(env.Stderr, "dbhost fix:", namingPath(*out, err))
			return ExitError
		}
		sort.Strings(written)
		for _, p := range written {
			fmt.Fprintln(env.Stdout, p)
		}
		if hp.Refused() {
			fmt.Fprintf(env.Stderr, "dbhost fix: plan refused: only %s/README.txt written, with the reasons\n", *out)
			return ExitError
		}
		fmt.Fprintf(env.Stderr, "dbhost fix: %d findings with fixes, %d files in %s\n", len(items), len(written), *out)
		return ExitOK
	})
	return c
}

// makePlan makes the host plan leaving the waived findings alone, and says
// which ones were left alone and what the waiver file's outcome was.
func makePlan(src *sourceFlags, f *facts.Facts, sel check.Selector) (*plan.HostPlan, []string) {
	hp := plan.MakeWaived(f, sel, func(fds []check.Finding) { src.waivers.apply(fds, sel, f) })
	return hp, waivedNotes(hp.Observed, src.waivers.apply(hp.Observed, sel, f))
}
