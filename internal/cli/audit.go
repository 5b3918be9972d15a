package cli

import (
	"context"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/dbhost/dbhost/internal/check"
	"github.com/dbhost/dbhost/internal/fix"
	"github.com/dbhost/dbhost/internal/report"
	"github.com/dbhost/dbhost/internal/results"
	"github.com/dbhost/dbhost/internal/safefile"
	"github.com/dbhost/dbhost/internal/termsafe"
)

func (a *app) auditCmd() *cobra.Command {
	c := newCmd("audit", "judge this host (or a snapshot) and every database on it")
	c.Example = `  sudo dbhost audit
  dbhost audit --from db1.tar.gz -v
  dbhost audit --format json | jq '.findings[] | select(.status=="fail")'
  dbhost audit --format prom --fail-on none -o /var/lib/node_exporter/textfile/dbhost.prom`
	setExits(c, map[int]string{
		ExitOK:       "No check failed at or above --fail-on (default warning).",
		ExitFindings: "A check failed at or above --fail-on.",
		ExitError:    "It could not run, or could judge nothing (every check unknown).",
	})
	fs := c.Flags()
	var src sourceFlags
	src.register(fs, true)
	src.keep.register(fs)
	src.budget.register(fs)
	src.waivers.register(fs)
	format := fs.String("format", "text", "output format: "+strings.Join(report.AuditFormats.Names(), ", "))
	verbose := fs.BoolP("verbose", "v", false, "show evidence and passed checks")
	failOn := fs.String("fail-on", "warning", "exit 1 when a check fails at or above this severity: info, warning, critical, none")
	color := fs.String("color", "auto", "colour: auto (only on a terminal), always, never")
	output := fs.StringP("output", "o", "", "write the report to this file atomically (mode 0644), e.g. for node_exporter's textfile collector")
	resultsDB := fs.String("results-db", results.DefaultPath, "experiment results to link findings to (read only; \"\" for none; with --from only when given)")
	var only, skip listFlag
	fs.Var(&only, "only", "run only these checks (IDs or domain prefixes, comma-separated)")
	fs.Var(&skip, "skip", "skip these checks (IDs or domain prefixes)")
	c.Run = a.do(func(ctx context.Context, _ []string) int {
		env := a.env
		if err := report.AuditFormats.Check(*format); err != nil {
			fmt.Fprintln(env.Stderr, "dbhost audit:", err) // before gathering, which takes seconds
			return ExitError
		}
		threshold, err := check.ParseSeverity(*failOn)
		if err != nil {
			fmt.Fprintln(env.Stderr, "dbhost audit:", err)
			return ExitError
		}
		if err := validSelection(only, skip); err != nil {
			fmt.Fprintln(env.Stderr, "dbhost audit:", err)
			return ExitError
		}
		start := time.Now()
		f, closeHost, ok := src.gather(ctx, env, "audit")
		if !ok {
			return ExitError
		}
		defer closeHost()
		sel := check.Selector{Only: only, Skip: skip}
		findings := check.Run(f, sel)
		waived := src.waivers.apply(findings, sel, f)
		check.RenderFixes(findings, fix.ContextFrom(f))
		rep := &report.Audit{Facts: f, Findings: findings, Checks: countSelected(sel), Duration: time.Since(start), Waivers: waived}
		rep.Experiments = findingExperiments(ctx, linkedStore(fs, src.from, *resultsDB), f)
		if *output != "" {
			// Never a half-written file where a collector reads it: a
			// temporary file beside it (not matching *.prom), synced, renamed.
			err := safefile.Write(*output, 0o644, func(w io.Writer) error {
				return report.Render(w, *format, rep, report.Options{Verbose: *verbose, Version: a.env.Version})
			})
			if err != nil {
				fmt.Fprintln(env.Stderr, "dbhost audit:", err)
				return ExitError
			}
			return exitStatus(findings, threshold)
		}
		useColor := *color == "always" || (*color == "auto" && isTerminal(env.Stdout) && os.Getenv("NO_COLOR") == "")
		out := termsafe.Raw(env.Stdout) // json and prom escape themselves
		if *format == "text" {
			w := termsafe.New(out, useColor)
			defer w.Flush()
			out = w
		}
		if err := report.Render(out, *format, rep, report.Options{Verbose: *verbose, Color: useColor, Version: a.env.Version}); err != nil {
			fmt.Fprintln(env.Stderr, "dbhost audit:", err)
			return ExitError
		}
		return exitStatus(findings, threshold)
	})
	return c
}

// linkedStore is the results database an audit links its findings to:
// the local store speaks of this machine, so a snapshot (perhaps of
// another host with the same name) is linked only to a store named on
// the command line.
func linkedStore(fs *pflag.FlagSet, from, path string) string {
	if from != "" && !fs.Changed("results-db") {
		return ""
	}
	return path
}

// exitStatus is 2 when nothing could be judged, 1 when a check failed at or
// above the threshold (a waived finding does not count), else 0.
func exitStatus(findings []check.Finding, threshold check.Severity) int {
	judged, failed := 0, false
	for _, fd := range findings {
		if fd.Status != check.Unknown {
			judged++
		}
		if fd.Status == check.Fail && fd.Waiver == nil && fd.Severity >= threshold {
			failed = true
		}
	}
	switch {
	case len(findings) > 0 && judged == 0:
		return ExitError
	case failed:
		return ExitFindings
	}
	return ExitOK
}

func countSelected(sel check.Selector) int {
	n := 0
	for _, c := range check.All() {
		if sel.Match(c.ID) {
			n++
		}
	}
	return n
}

// validSelection rejects --only/--skip patterns that match no check, so a
// typo does not silently run nothing.
func validSelection(lists ...[]string) error {
	for _, l := range lists {
		for _, p := range l {
			sel := check.Selector{Only: []string{p}}
			if countSelected(sel) == 0 {
				return fmt.Errorf("no check matches %q (see 'dbhost checks')", p)
			}
		}
	}
	return nil
}
