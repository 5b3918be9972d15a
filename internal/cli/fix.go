package cli

import (
	"context"
	"fmt"
	"sort"

	"github.com/spf13/cobra"

	"github.com/dbhost/dbhost/internal/check"
	"github.com/dbhost/dbhost/internal/fix"
)

func (a *app) fixCmd() *cobra.Command {
	c := newCmd("fix --out DIR | --plan | --apply | --rollback [CHANGE-ID] | --history | --recover", "render the fixes of the findings, or plan, apply and roll them back on this host")
	fs := c.Flags()
	var src sourceFlags
	src.register(fs, true)
	src.budget.register(fs)
	out := fs.String("out", "", "directory to render the fix files into (render only; nothing on the host changes)")
	var only, skip listFlag
	fs.Var(&only, "only", "fix only these checks (IDs or domain prefixes)")
	fs.Var(&skip, "skip", "leave these checks out")
	var af applyFlags
	af.register(fs)
	c.Args = af.args
	c.Run = a.do(func(ctx context.Context, _ []string) int {
		env := a.env
		if af.modes() > 0 || af.planOut != "" || af.planFile != "" {
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
		// Each finding's own files are not needed: all fixes render together.
		findings := check.Run(f, check.Selector{Only: only, Skip: skip})
		var items []fix.Item
		for _, fd := range findings {
			if fd.Status == check.Fail && fd.Fix != nil && !fd.Untrusted {
				items = append(items, fix.Item{ID: fd.ID, Subject: fd.Subject, Fix: fd.Fix})
			}
		}
		fc := fix.ContextFrom(f)
		files := fix.Render(fc, items)
		notes := fix.Notes(items)
		if n := check.UntrustedNote(findings); n != "" {
			notes = append(notes, n)
		}
		written, kept, err := fix.WriteTree(*out, files, notes, fix.Sequence(fc, items))
		for _, k := range kept {
			fmt.Fprintln(env.Stderr, "dbhost fix:", k)
		}
		if err != nil {
			fmt.Fprintln(env.Stderr, "dbhost fix:", err)
			return ExitError
		}
		sort.Strings(written)
		for _, p := range written {
			fmt.Fprintln(env.Stdout, p)
		}
		fmt.Fprintf(env.Stderr, "dbhost fix: %d findings with fixes, %d files in %s\n", len(items), len(written), *out)
		return ExitOK
	})
	return c
}
