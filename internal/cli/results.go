package cli

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	iofs "io/fs"
	"os"
	"text/tabwriter"
	"time"

	"github.com/dbhost/dbhost/internal/experiment"
	"github.com/dbhost/dbhost/internal/report"
	"github.com/dbhost/dbhost/internal/results"
	"github.com/dbhost/dbhost/internal/termsafe"
)

func runResults(ctx context.Context, env Env, args []string) int {
	return dispatch(ctx, env, "results", args, resultsUsage, map[string]func(context.Context, Env, []string) int{
		"list": resultsList, "ls": resultsList, "show": resultsShow, "compare": resultsCompare, "report": resultsReport,
	})
}

// dispatch runs a command's subcommand; help goes to standard output, an
// unknown or missing subcommand is an error with the usage.
func dispatch(ctx context.Context, env Env, cmd string, args []string, usage func(io.Writer), subs map[string]func(context.Context, Env, []string) int) int {
	sub := ""
	if len(args) > 0 {
		sub, args = args[0], args[1:]
	}
	if run, ok := subs[sub]; ok {
		return run(ctx, env, args)
	}
	switch sub {
	case "-h", "--help", "help":
		usage(env.Stdout)
		return ExitOK
	case "":
	default:
		fmt.Fprintf(env.Stderr, "dbhost %s: unknown subcommand %q\n\n", cmd, sub)
	}
	usage(env.Stderr)
	return ExitError
}

func resultsUsage(w io.Writer) {
	fmt.Fprintln(w, `Usage: dbhost results SUBCOMMAND [flags]

  list                      the stored experiments, newest first
  show ID                   one experiment: verdicts, arms, trials
  compare ID ID             the same arms in two experiments (did the host change?)
  report ID -o report.html  the report: --format html (default), markdown or json

ID is an experiment ID, a unique prefix of one, or "last".
Flags: --db PATH (default `+results.DefaultPath+`), --format.`)
}

// parseWithArgs parses flags that may come before or after the positional
// arguments and checks their count.
func parseWithArgs(fs *flag.FlagSet, args []string, want int, what string) ([]string, int, bool) {
	pos, code, ok := parseOperands(fs, args)
	if !ok {
		return nil, code, false
	}
	if len(pos) != want {
		fmt.Fprintf(fs.Output(), "dbhost %s: want %s\n", fs.Name(), what)
		return nil, ExitError, false
	}
	return pos, 0, true
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

// loadStored parses a results subcommand that takes n experiment IDs
// (described by what), runs check on the parsed flags (--format), and
// loads the experiments from the database at *db (a flag, so read after
// parsing), opened read-only. When ok is false it has said why and the
// command ends with code; else the caller closes st.
func loadStored(ctx context.Context, env Env, fs *flag.FlagSet, args []string, check func() error, db *string, n int, what string) (st *results.Store, ss []*experiment.Stored, code int, ok bool) {
	pos, code, ok := parseWithArgs(fs, args, n, what)
	if !ok {
		return nil, nil, code, false
	}
	if err := check(); err != nil {
		fmt.Fprintf(env.Stderr, "dbhost %s: %v\n", fs.Name(), err)
		return nil, nil, ExitError, false
	}
	st, ok = openStore(env, fs.Name(), *db)
	if !ok {
		return nil, nil, ExitError, false
	}
	for _, ref := range pos {
		s, err := experiment.Load(ctx, st, ref)
		if err != nil {
			fmt.Fprintf(env.Stderr, "dbhost %s: %v\n", fs.Name(), err)
			st.Close()
			return nil, nil, ExitError, false
		}
		ss = append(ss, s)
	}
	return st, ss, 0, true
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

func resultsList(ctx context.Context, env Env, args []string) int {
	fs := newFlagSet(env, "results list", "[flags]")
	db := fs.String("db", results.DefaultPath, "results database")
	format := fs.String("format", "text", "text or json")
	if _, code, ok := parseWithArgs(fs, args, 0, "no arguments"); !ok {
		return code
	}
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

func resultsShow(ctx context.Context, env Env, args []string) int {
	fs := newFlagSet(env, "results show", "ID [flags]")
	db := fs.String("db", results.DefaultPath, "results database")
	format := fs.String("format", "text", "text, json or markdown")
	check := func() error { return showFormats.Check(*format) }
	st, ss, code, ok := loadStored(ctx, env, fs, args, check, db, 1, "one experiment ID")
	if !ok {
		return code
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

func resultsCompare(ctx context.Context, env Env, args []string) int {
	fs := newFlagSet(env, "results compare", "ID ID [flags]")
	db := fs.String("db", results.DefaultPath, "results database")
	format := fs.String("format", "text", "text or json")
	check := func() error { return compareFormats.Check(*format) }
	st, ss, code, ok := loadStored(ctx, env, fs, args, check, db, 2, "two experiment IDs")
	if !ok {
		return code
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
}

// compareFormats are the formats of 'results compare'.
var compareFormats = new(report.Formats[*experiment.Compared]).
	Add("text", func(w io.Writer, c *experiment.Compared) error { experiment.WriteComparison(w, c); return nil }).
	Add("json", func(w io.Writer, c *experiment.Compared) error { return writeJSON(w, c) })

func resultsReport(ctx context.Context, env Env, args []string) int {
	fs := newFlagSet(env, "results report", "ID -o FILE [flags]")
	db := fs.String("db", results.DefaultPath, "results database")
	out := fs.String("o", "", "write the report to this file ('-' for standard output)")
	format := fs.String("format", "html", "html, markdown or json")
	pos, code, ok := parseWithArgs(fs, args, 1, "one experiment ID")
	if !ok {
		return code
	}
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
