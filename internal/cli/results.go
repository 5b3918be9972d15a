package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	iofs "io/fs"
	"os"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/dbhost/dbhost/internal/experiment"
	"github.com/dbhost/dbhost/internal/report"
	"github.com/dbhost/dbhost/internal/results"
	"github.com/dbhost/dbhost/internal/termsafe"
)

func (a *app) resultsCmd() *cobra.Command {
	return a.groupCmd("results SUBCOMMAND", "list, show, compare and report stored experiments",
		`List, show, compare and report stored experiments.

ID is an experiment ID, a unique prefix of one, or "last".`,
		a.resultsListCmd(), a.resultsShowCmd(), a.resultsCompareCmd(), a.resultsReportCmd())
}

// storedCmd is a subcommand of 'dbhost results' with its --db flag.
func storedCmd(use, short string, operands int, what string) (*cobra.Command, *string) {
	c := newCmd(use, short)
	c.Args = argCount(operands, operands, what)
	return c, c.Flags().String("db", results.DefaultPath, "results database")
}

// openStore opens the results database read-only: the subcommands of
// `results` only read, so they create no directory and no database.
func openStore(env Env, cmd, path string) (*results.Store, bool) {
	st, err := results.OpenReadOnly(path)
	if err != nil {
		fmt.Fprintf(env.Stderr, "dbhost %s: %v\n", cmd, err)
		return nil, false
	}
	return st, true
}

// loadStored runs check on the parsed flags (--format) and loads the
// experiments refs name from the database at db, opened read-only. When
// ok is false it has said why as "dbhost CMD:"; else the caller closes st.
func loadStored(ctx context.Context, env Env, cmd string, refs []string, check func() error, db string) (st *results.Store, ss []*experiment.Stored, ok bool) {
	if err := check(); err != nil {
		fmt.Fprintf(env.Stderr, "dbhost %s: %v\n", cmd, err)
		return nil, nil, false
	}
	st, ok = openStore(env, cmd, db)
	if !ok {
		return nil, nil, false
	}
	for _, ref := range refs {
		s, err := experiment.Load(ctx, st, ref)
		if err != nil {
			fmt.Fprintf(env.Stderr, "dbhost %s: %v\n", cmd, err)
			st.Close()
			return nil, nil, false
		}
		ss = append(ss, s)
	}
	return st, ss, true
}

// listed is what 'results list' renders: the stored experiments, newest
// first, and the database they are in (noDB: there is none).
type listed struct {
	list []results.Summary
	db   string
	noDB bool
}

// listFormats are the formats of 'results list'.
var listFormats = new(report.Formats[listed]).
	Add("text", listText).
	Add("json", func(w io.Writer, l listed) error {
		if l.list == nil {
			return writeJSON(w, []results.Summary{}) // [], not null
		}
		return writeJSON(w, l.list)
	})

func (a *app) resultsListCmd() *cobra.Command {
	c, db := storedCmd("list", "the stored experiments, newest first", 0, "no arguments")
	c.Example = `  dbhost results list`
	c.Aliases = []string{"ls"}
	format := c.Flags().String("format", "text", "text or json")
	c.Run = a.do(func(ctx context.Context, _ []string) int {
		env := a.env
		if err := listFormats.Check(*format); err != nil {
			fmt.Fprintln(env.Stderr, "dbhost results list:", err)
			return ExitError
		}
		l := listed{db: *db}
		if _, err := os.Lstat(*db); errors.Is(err, iofs.ErrNotExist) {
			l.noDB = true
		} else {
			st, ok := openStore(env, "results list", *db)
			if !ok {
				return ExitError
			}
			defer st.Close()
			if l.list, err = st.List(ctx); err != nil {
				fmt.Fprintln(env.Stderr, "dbhost results list:", err)
				return ExitError
			}
		}
		if err := listFormats.Render(env.Stdout, *format, l); err != nil {
			fmt.Fprintln(env.Stderr, "dbhost results list:", err)
			return ExitError
		}
		return ExitOK
	})
	return c
}

func listText(w io.Writer, l listed) error {
	switch {
	case l.noDB:
		fmt.Fprintf(w, "no experiments stored (no database at %s)\n", l.db)
		return nil
	case len(l.list) == 0:
		fmt.Fprintf(w, "no experiments in %s\n", l.db)
		return nil
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tCREATED\tSTATUS\tVERDICT\tARMS\tTRIALS\tNAME")
	for _, s := range l.list {
		v := s.Verdict
		if v == "" {
			v = "-"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%d\t%d\t%s\n", s.ID, s.Created.Local().Format(time.DateTime), s.Status, v, s.Arms, s.Trials, s.Name)
	}
	tw.Flush()
	return nil
}

// showJSON is 'results show --format json': the summary, the plan and the
// trials (with their per-second samples).
type showJSON struct {
	*experiment.Summary
	Plan     *experiment.Plan `json:"plan"`
	Recheck  string           `json:"recheck"`
	Created  time.Time        `json:"created"`
	Finished time.Time        `json:"finished,omitzero"`
	Host     json.RawMessage  `json:"host,omitempty"`
	TrialLog []results.Trial  `json:"trial_log"`
}

// shown is what 'results show' renders: a stored experiment, its summary
// and what recomputing that summary from the trials gave.
type shown struct {
	s       *experiment.Stored
	sum     *experiment.Summary
	recheck string
}

func (o shown) json() showJSON {
	return showJSON{Summary: o.sum, Plan: o.s.Plan, Recheck: o.recheck, Created: o.s.Experiment.Created,
		Finished: o.s.Experiment.Finished, Host: o.s.Experiment.Host, TrialLog: o.s.Trials}
}

// showFormats are the formats of 'results show'.
var showFormats = new(report.Formats[shown]).
	Add("text", showText).
	Add("json", func(w io.Writer, o shown) error { return writeJSON(w, o.json()) }).
	Add("markdown", func(w io.Writer, o shown) error { return o.s.WriteMarkdown(w) }, "md")

func (a *app) resultsShowCmd() *cobra.Command {
	c, db := storedCmd("show ID", "one experiment: verdicts, arms, trials", 1, "one experiment ID")
	c.Example = `  dbhost results show last`
	format := c.Flags().String("format", "text", "text, json or markdown")
	c.Run = a.do(func(ctx context.Context, args []string) int {
		env := a.env
		check := func() error { return showFormats.Check(*format) }
		st, ss, ok := loadStored(ctx, env, "results show", args, check, *db)
		if !ok {
			return ExitError
		}
		defer st.Close()
		s := ss[0]
		sum, recheck := summaryChecked(s)
		if sum == nil {
			fmt.Fprintf(env.Stderr, "dbhost results show: %s\n", recheck)
			return ExitError
		}
		if err := showFormats.Render(env.Stdout, *format, shown{s, sum, recheck}); err != nil {
			fmt.Fprintln(env.Stderr, "dbhost results show:", err)
			return ExitError
		}
		return ExitOK
	})
	return c
}

// showText is 'results show': the summary, whether it recomputes, and
// the trials.
func showText(w io.Writer, o shown) error {
	s := o.s
	experiment.WriteText(w, o.sum)
	fmt.Fprintf(w, "  recomputed from the stored trials: %s\n", o.recheck)
	if s.Experiment.Note != "" {
		fmt.Fprintf(w, "  stored note: %s\n", s.Experiment.Note)
	}
	fmt.Fprintln(w, "\n  trials:")
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "  SEQ\tBLOCK\tARM\tCLIENTS\tOPS/S\tP99\tSECONDS\tEXCLUDED")
	for _, t := range s.Trials {
		arm := fmt.Sprint(t.Arm)
		if t.Arm >= 0 && t.Arm < len(s.Experiment.Arms) {
			arm = s.Experiment.Arms[t.Arm].Name
		}
		block := fmt.Sprint(t.Block)
		if t.Block < 0 {
			block = "A/A"
		}
		fmt.Fprintf(tw, "  %d\t%s\t%s\t%d\t%.1f\t%s\t%d\t%s\n", t.Seq, block, arm, t.Clients, t.OpsPerSec, t.P99.Round(time.Microsecond), len(t.Seconds), t.Excluded)
	}
	tw.Flush()
	return nil // text to standard output is not checked for write errors, as elsewhere
}

// summaryChecked returns the stored summary and whether recomputing it
// from the stored trials gives the same verdicts; for a run killed before
// it stored a summary, the recomputed one.
func summaryChecked(s *experiment.Stored) (*experiment.Summary, string) {
	re, err := s.Recompute()
	if s.Summary == nil {
		if err != nil {
			return nil, err.Error()
		}
		return re, "no stored decision (the run was killed); this summary is recomputed from its trials"
	}
	if err != nil {
		return s.Summary, "not possible: " + err.Error()
	}
	if len(re.Comparisons) != len(s.Summary.Comparisons) {
		return s.Summary, fmt.Sprintf("DIFFERS: %d comparisons recomputed, %d stored", len(re.Comparisons), len(s.Summary.Comparisons))
	}
	for i, c := range re.Comparisons {
		o := s.Summary.Comparisons[i]
		if c.Decision.Verdict != o.Decision.Verdict || c.Decision.P != o.Decision.P || c.Decision.Ratio != o.Decision.Ratio {
			return s.Summary, fmt.Sprintf("DIFFERS for %s at %d clients: recomputed %s (p=%g), stored %s (p=%g)",
				c.Name, c.Clients, c.Decision.Verdict, c.Decision.P, o.Decision.Verdict, o.Decision.P)
		}
	}
	return s.Summary, "same verdicts, ratios and p-values"
}

func (a *app) resultsCompareCmd() *cobra.Command {
	c, db := storedCmd("compare ID ID", "the same arms in two experiments (did the host change?)", 2, "two experiment IDs")
	c.Example = `  dbhost results compare 20260101 last`
	format := c.Flags().String("format", "text", "text or json")
	c.Run = a.do(func(ctx context.Context, args []string) int {
		env := a.env
		check := func() error { return compareFormats.Check(*format) }
		st, ss, ok := loadStored(ctx, env, "results compare", args, check, *db)
		if !ok {
			return ExitError
		}
		defer st.Close()
		cmp, err := experiment.Compare(ss[0], ss[1])
		if err == nil {
			err = compareFormats.Render(env.Stdout, *format, cmp)
		}
		if err != nil {
			fmt.Fprintln(env.Stderr, "dbhost results compare:", err)
			return ExitError
		}
		return ExitOK
	})
	return c
}

// compareFormats are the formats of 'results compare'.
var compareFormats = new(report.Formats[*experiment.Compared]).
	Add("text", func(w io.Writer, c *experiment.Compared) error { experiment.WriteComparison(w, c); return nil }).
	Add("json", func(w io.Writer, c *experiment.Compared) error { return writeJSON(w, c) })

func (a *app) resultsReportCmd() *cobra.Command {
	c, db := storedCmd("report ID -o FILE", "the report: --format html (default), markdown or json", 1, "one experiment ID")
	c.Example = `  dbhost results report last -o report.html`
	out := c.Flags().StringP("output", "o", "", "write the report to this file ('-' for standard output)")
	format := c.Flags().String("format", "html", "html, markdown or json")
	c.Run = a.do(func(ctx context.Context, pos []string) int {
		env := a.env
		if err := reportFormats.Check(*format); err != nil {
			fmt.Fprintln(env.Stderr, "dbhost results report:", err)
			return ExitError
		}
		if *out == "" {
			fmt.Fprintln(env.Stderr, "dbhost results report: -o FILE is required")
			return ExitError
		}
		st, ok := openStore(env, "results report", *db)
		if !ok {
			return ExitError
		}
		defer st.Close()
		if *out == "-" {
			s, err := experiment.Load(ctx, st, pos[0])
			if err == nil {
				err = reportFormats.Render(env.Stdout, *format, s)
			}
			if err != nil {
				fmt.Fprintln(env.Stderr, "dbhost results report:", err)
				return ExitError
			}
			return ExitOK
		}
		if err := writeReport(ctx, st, pos[0], *out, *format); err != nil {
			fmt.Fprintln(env.Stderr, "dbhost results report:", err)
			return ExitError
		}
		fmt.Fprintf(env.Stderr, "dbhost results report: wrote %s\n", *out)
		return ExitOK
	})
	return c
}

// writeReport writes an experiment's report to a file atomically.
func writeReport(ctx context.Context, st *results.Store, ref, path, format string) error {
	s, err := experiment.Load(ctx, st, ref)
	if err != nil {
		return err
	}
	if err := reportFormats.Check(format); err != nil {
		return err
	}
	return writeFileAtomic(path, 0o644, func(w io.Writer) error { return reportFormats.Render(w, format, s) })
}

// reportFormats are the formats of 'results report'. HTML and JSON escape
// themselves, so they are written past the terminal filter.
var reportFormats = new(report.Formats[*experiment.Stored]).
	Add("html", func(w io.Writer, s *experiment.Stored) error { return s.WriteHTML(termsafe.Raw(w)) }).
	Add("markdown", func(w io.Writer, s *experiment.Stored) error { return s.WriteMarkdown(w) }, "md").
	Add("json", func(w io.Writer, s *experiment.Stored) error {
		sum, recheck := summaryChecked(s)
		if sum == nil {
			return errors.New(recheck)
		}
		return writeJSON(w, shown{s, sum, recheck}.json())
	})
