package cli

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/spf13/cobra"

	"github.com/dbhost/dbhost/internal/fleet"
	"github.com/dbhost/dbhost/internal/report"
	"github.com/dbhost/dbhost/internal/termsafe"
)

func (a *app) fleetCmd() *cobra.Command {
	return a.groupCmd("fleet SUBCOMMAND", "reports over many snapshots: fleet report",
		`Reports over many snapshots. A SNAPSHOT is a file written by 'dbhost collect', or a
directory: its *.tar.gz files.`, a.fleetReportCmd())
}

// fleetFormats are the formats of 'fleet report'; both escape what they
// write, so they go past the terminal filter.
var fleetFormats = new(report.Formats[*fleet.Report]).
	Add("html", func(w io.Writer, r *fleet.Report) error { return fleet.WriteHTML(termsafe.Raw(w), r) }).
	Add("json", func(w io.Writer, r *fleet.Report) error { return writeJSON(w, r) })

func (a *app) fleetReportCmd() *cobra.Command {
	c := newCmd("report SNAPSHOT... -o FILE", "one page over many snapshots: the odd hosts, rare settings, checks by host")
	c.Example = `  dbhost fleet report snaps/ -o fleet.html
  dbhost fleet report snaps/*.tar.gz --format json -o -`
	setExits(c, map[int]string{
		ExitOK:       "The report covers every snapshot.",
		ExitFindings: "The report lists snapshots that could not be read.",
		ExitError:    "No report: bad arguments, nothing readable, or the file could not be written.",
	})
	c.Long = `One page over many snapshots: the hosts farthest from the fleet's majority first (the
rare setting values they hold, the checks they fail where most hosts pass), the settings
whose value only a few hosts hold, the checks failing fleet-wide on one line, and a matrix
of hosts by the checks that tell them apart. The page filters and sorts in itself (one
inline script, nothing fetched). --format json carries the same ranking.

Exit status: 0 every snapshot read, 1 the report lists snapshots that could not be read,
2 no report (bad arguments, nothing readable, or the file could not be written).`
	c.Args = cobra.ArbitraryArgs
	fs := c.Flags()
	out := fs.StringP("output", "o", "", "write the report to this file ('-' for standard output)")
	format := fs.String("format", "html", "output format: "+strings.Join(fleetFormats.Names(), ", "))
	workers := fs.IntP("jobs", "j", 0, "snapshots judged at once (default: the CPUs Go uses, GOMAXPROCS)")
	c.Run = a.do(func(ctx context.Context, pos []string) int {
		env := a.env
		if err := fleetFormats.Check(*format); err != nil {
			fmt.Fprintln(env.Stderr, "dbhost fleet report:", err)
			return ExitError
		}
		if *out == "" {
			fmt.Fprintln(env.Stderr, "dbhost fleet report: -o FILE is required ('-' for standard output)")
			return ExitError
		}
		if *workers < 0 {
			fmt.Fprintln(env.Stderr, "dbhost fleet report: -j must be 0 (one per CPU) or more")
			return ExitError
		}
		files, err := snapshotFiles(pos)
		if err != nil {
			fmt.Fprintln(env.Stderr, "dbhost fleet report:", err)
			return ExitError
		}
		if len(files) == 0 {
			fmt.Fprintln(env.Stderr, "dbhost fleet report: no snapshot given")
			return ExitError
		}
		var progress func(done, total int)
		if isTerminal(env.Stderr) {
			progress = func(done, total int) {
				termsafe.Control(env.Stderr, termsafe.EraseLine)
				fmt.Fprintf(env.Stderr, "dbhost fleet report: %d/%d snapshots judged", done, total)
			}
		}
		snaps, errs := fleet.LoadAll(ctx, files, *workers, progress)
		if progress != nil {
			termsafe.Control(env.Stderr, termsafe.EraseLine)
		}
		if ctx.Err() != nil {
			fmt.Fprintln(env.Stderr, "dbhost fleet report: interrupted; no report written")
			return ExitError
		}
		r := fleet.Build(snaps, errs)
		snaps = nil // the report keeps what it shows
		for _, e := range errs {
			fmt.Fprintf(env.Stderr, "dbhost fleet report: %s: %s\n", e.File, e.Error)
		}
		if *out == "-" {
			err = fleetFormats.Render(env.Stdout, *format, r)
		} else {
			err = writeFileAtomic(*out, 0o644, func(w io.Writer) error { return fleetFormats.Render(w, *format, r) })
		}
		if err != nil {
			fmt.Fprintln(env.Stderr, "dbhost fleet report:", err)
			return ExitError
		}
		if *out != "-" {
			fmt.Fprintf(env.Stderr, "dbhost fleet report: wrote %s (%d hosts, %d failing findings, %d could not be read)\n",
				*out, r.Summary.Hosts, r.Summary.FailingFindings, r.Summary.Unreadable)
		}
		switch {
		case r.Summary.Hosts == 0:
			return ExitError
		case len(errs) > 0:
			return ExitFindings
		}
		return ExitOK
	})
	return c
}

// snapshotFiles expands the operands of 'fleet report': a directory stands
// for its *.tar.gz files (not its subdirectories'). A file named twice is
// judged once.
func snapshotFiles(operands []string) ([]string, error) {
	var out []string
	seen := map[string]bool{}
	add := func(f string) {
		if c := filepath.Clean(f); !seen[c] {
			seen[c] = true
			out = append(out, f)
		}
	}
	for _, op := range operands {
		st, err := os.Stat(op)
		if err != nil || !st.IsDir() {
			add(op) // a file that cannot be read is reported with the others
			continue
		}
		ents, err := os.ReadDir(op)
		if err != nil {
			return nil, err
		}
		var names []string
		for _, e := range ents {
			if !e.IsDir() && strings.HasSuffix(e.Name(), ".tar.gz") {
				names = append(names, filepath.Join(op, e.Name()))
			}
		}
		sort.Strings(names)
		for _, n := range names {
			add(n)
		}
	}
	return out, nil
}
