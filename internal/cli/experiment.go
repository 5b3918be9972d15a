package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/spf13/cobra"

	"github.com/dbhost/dbhost/internal/apply"
	"github.com/dbhost/dbhost/internal/check"
	"github.com/dbhost/dbhost/internal/engine"
	"github.com/dbhost/dbhost/internal/experiment"
	"github.com/dbhost/dbhost/internal/facts"
	"github.com/dbhost/dbhost/internal/host"
	"github.com/dbhost/dbhost/internal/report"
	"github.com/dbhost/dbhost/internal/results"
)

// ExitInterrupted is the status of an experiment stopped by a signal (the
// host was restored).
const ExitInterrupted = 130

func (a *app) experimentCmd() *cobra.Command {
	var presets strings.Builder
	for _, n := range experiment.PresetNames() {
		fmt.Fprintf(&presets, "\n  %-11s %s", n, experiment.PresetSummary(n))
	}
	c := newCmd("experiment [--preset NAME | --finding ID[,ID] | --arm 'base: knob=value' --arm 'new: knob=value' | -f plan.yaml]",
		"prove a tuning change with a real benchmark; always puts the host back")
	c.Example = `  sudo dbhost experiment --preset hugepages
  sudo dbhost experiment --finding mem.dirty
  sudo dbhost experiment --arm 'base: vm.swappiness=60' --arm 'low: vm.swappiness=1'`
	setExits(c, map[int]string{
		ExitOK:          "The experiment ran to a verdict (better, worse, equivalent or inconclusive) and the host was put back.",
		ExitError:       "It could not run, or failed; what it had changed was put back.",
		ExitInterrupted: "Interrupted by SIGINT or SIGTERM; the host was put back.",
	})
	c.Long = `Prove a tuning change with a real benchmark; always puts the host back.

Presets:` + presets.String() + `

See docs/experiment.md for knobs, plan files and the method.`
	fs := c.Flags()
	f := newExpArgs()
	f.register(fs)
	c.AddCommand(a.experimentRecoverCmd())
	c.Run = a.do(func(ctx context.Context, _ []string) int {
		env := a.env
		if err := summaryFormats.Check(f.format); err != nil {
			fmt.Fprintln(env.Stderr, "dbhost experiment:", err)
			return ExitError
		}
		h, err := host.Open("/")
		if err != nil {
			fmt.Fprintln(env.Stderr, "dbhost experiment:", err)
			return ExitError
		}
		defer h.Close()
		p, err := f.buildPlan(fs, func(ids []string) (*experiment.FindingPlan, error) { return findingPlan(ctx, env, h, f, ids) })
		if err != nil {
			fmt.Fprintln(env.Stderr, "dbhost experiment:", err)
			return ExitError
		}
		st, err := results.Open(f.db)
		if err != nil {
			fmt.Fprintln(env.Stderr, "dbhost experiment:", err)
			return ExitError
		}
		defer st.Close()
		// One change at a time on the host: the run holds the host lock
		// from before it restores an interrupted run's leftovers until it
		// has put the host back, as fix --apply holds it. A plan that
		// cannot run is refused first, without waiting for the lock.
		if err := p.Validate(); err != nil {
			fmt.Fprintln(env.Stderr, "dbhost experiment:", err)
			return ExitError
		}
		release, err := lockHost(ctx, env, "dbhost experiment")
		if err != nil {
			if ctx.Err() != nil {
				fmt.Fprintln(env.Stderr, "dbhost experiment: interrupted while waiting for the host lock; nothing changed")
				return ExitInterrupted
			}
			fmt.Fprintln(env.Stderr, "dbhost experiment: host lock:", err)
			return ExitError
		}
		sum, runErr := experiment.Run(ctx, p, experiment.Options{Host: h, Store: st, Journal: f.journal, Log: env.Stderr, Bar: isTerminal(env.Stderr)})
		release()
		code := ExitOK
		switch {
		case errors.Is(runErr, experiment.ErrInterrupted) || (runErr != nil && ctx.Err() != nil):
			fmt.Fprintln(env.Stderr, "dbhost experiment: interrupted; the host was restored")
			code = ExitInterrupted
		case runErr != nil:
			fmt.Fprintln(env.Stderr, "dbhost experiment:", runErr)
			code = ExitError
		}
		if sum == nil {
			return code
		}
		if err := summaryFormats.Render(env.Stdout, f.format, summaryOutput{ctx, st, sum}); err != nil {
			fmt.Fprintln(env.Stderr, "dbhost experiment:", err)
			return ExitError
		}
		if f.html != "" {
			if err := writeReport(ctx, st, sum.ID, f.html, "html"); err != nil {
				fmt.Fprintln(env.Stderr, "dbhost experiment:", err)
				return ExitError
			}
			fmt.Fprintf(env.Stderr, "report: %s\n", f.html)
		} else if f.format == "text" {
			fmt.Fprintf(env.Stdout, "\nresults: %s in %s; 'dbhost results report %s -o report.html' for the charts\n", sum.ID, f.db, sum.ID)
		}
		return code
	})
	return c
}

// findingPlan audits the host as 'dbhost audit' does and builds the arms
// of --finding from the failing findings' runtime fixes.
func findingPlan(ctx context.Context, env Env, h *host.Host, f *expArgs, ids []string) (*experiment.FindingPlan, error) {
	fc := facts.Gather(ctx, h, gatherOptions(engine.Options{PGDSN: f.plan.Target.PG, MySQLDSN: f.plan.Target.MySQL}))
	fds := check.Run(fc, check.Selector{Only: ids})
	fp, err := experiment.PlanFindings(h, fds, ids)
	if err != nil {
		return nil, err
	}
	for _, a := range fp.Arms {
		fmt.Fprintf(env.Stderr, "arm %s\n", a)
	}
	for _, n := range fp.Notes {
		fmt.Fprintf(env.Stderr, "note: %s\n", n)
	}
	return fp, nil
}

// summaryOutput is what 'dbhost experiment' prints at the end: the
// summary, and the store it went to (markdown reads the trials back).
type summaryOutput struct {
	ctx context.Context
	st  *results.Store
	sum *experiment.Summary
}

// summaryFormats are the formats of 'dbhost experiment'.
var summaryFormats = new(report.Formats[summaryOutput]).
	Add("text", func(w io.Writer, o summaryOutput) error { return experiment.WriteText(w, o.sum) }).
	Add("json", func(w io.Writer, o summaryOutput) error { return writeJSON(w, o.sum) }).
	Add("markdown", func(w io.Writer, o summaryOutput) error {
		s, err := experiment.Load(o.ctx, o.st, o.sum.ID)
		if err != nil {
			return err
		}
		return s.WriteMarkdown(w)
	}, "md")

func (a *app) experimentRecoverCmd() *cobra.Command {
	c := newCmd("recover", "undo a run that was killed: restore the host from the journal")
	c.Example = `  sudo dbhost experiment recover`
	fs := c.Flags()
	journalFile := fs.String("journal", experiment.DefaultJournal, "journal of changes to undo")
	db := fs.String("db", results.DefaultPath, "results database (its running experiments are marked interrupted)")
	c.Run = a.do(func(ctx context.Context, _ []string) int {
		env := a.env
		var st *results.Store
		if _, err := os.Stat(*db); err == nil {
			if st, err = results.Open(*db); err != nil {
				fmt.Fprintln(env.Stderr, "dbhost experiment recover:", err)
				return ExitError
			}
			defer st.Close()
		}
		// One recovery for the host: fix's change sets too, under the
		// host lock that applies and experiments take.
		release, err := lockHost(ctx, env, "dbhost experiment recover")
		if err != nil {
			fmt.Fprintln(env.Stderr, "dbhost experiment recover: host lock:", err)
			return ExitError
		}
		defer release()
		opts := apply.Options{StateDir: apply.StateDir("/"), Systemctl: env.Systemctl}
		_, rec, err := recoverHost(ctx, env, opts, *journalFile, st)
		if rec != nil {
			if len(rec.Undone) == 0 {
				fmt.Fprintf(env.Stdout, "nothing to restore (no journal at %s)\n", *journalFile)
			}
			for _, id := range rec.Interrupted {
				fmt.Fprintf(env.Stdout, "experiment %s marked interrupted\n", id)
			}
		}
		if err != nil {
			fmt.Fprintln(env.Stderr, "dbhost experiment recover:", err)
			return ExitError
		}
		return ExitOK
	})
	return c
}
