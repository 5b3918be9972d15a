package cli

import (
	"context"
	"fmt"
	"io"
	"runtime/debug"
	"strings"

	"github.com/spf13/cobra"

	"github.com/dbhost/dbhost/internal/fleet"
	"github.com/dbhost/dbhost/internal/host"
	"github.com/dbhost/dbhost/internal/report"
)

// liveOperand reports an operand of 'dbhost diff' that names this host.
func liveOperand(s string) bool { return s == "live" || s == "-" }

// diffOutput is what 'dbhost diff' renders.
type diffOutput struct {
	result  *fleet.Result
	verbose bool
}

// diffFormats are the formats of 'dbhost diff'.
var diffFormats = new(report.Formats[diffOutput]).
	Add("text", func(w io.Writer, d diffOutput) error { return fleet.WriteDiffText(w, d.result, d.verbose) }).
	Add("json", func(w io.Writer, d diffOutput) error { return writeJSON(w, d.result) })

func (a *app) diffCmd() *cobra.Command {
	c := newCmd("diff A [B]", "what differs between two hosts or two times")
	c.Example = `  dbhost diff db1.tar.gz db2.tar.gz
  sudo dbhost diff db1.tar.gz          # the snapshot against this host
  dbhost diff --format json before.tar.gz after.tar.gz`
	setExits(c, map[int]string{
		ExitOK:       "No difference.",
		ExitFindings: "Differences.",
		ExitError:    "Trouble: a bad argument, or a side that could not be read.",
	})
	c.Long = `What differs between two hosts or two times.

A and B are snapshot files ('dbhost collect'), or 'live' (also '-') for this host.
With one operand, A is compared with this host. Databases are paired by engine and data
directory, then port, then engine (the only one of it on each side); devices by the database
paths they hold, then by name. Exit status: 0 same, 1 differences, 2 error.`
	c.Args = argCount(1, 2, "one or two operands: A [B]")
	fs := c.Flags()
	var src sourceFlags
	src.register(fs, false) // for the live side
	format := fs.String("format", "text", "output format: "+strings.Join(diffFormats.Names(), ", "))
	verbose := fs.BoolP("verbose", "v", false, "also list the settings observed on one side only (text)")
	c.Run = a.do(func(ctx context.Context, pos []string) int {
		env := a.env
		if err := diffFormats.Check(*format); err != nil {
			fmt.Fprintln(env.Stderr, "dbhost diff:", err) // before gathering, which takes seconds
			return ExitError
		}
		if len(pos) == 1 {
			pos = append(pos, "live")
		}
		if liveOperand(pos[0]) && liveOperand(pos[1]) {
			fmt.Fprintln(env.Stderr, "dbhost diff: both operands are this host; give a snapshot file for at least one")
			return ExitError
		}
		var sides [2]fleet.Snapshot
		for i, p := range pos {
			s, err := loadSide(ctx, p, &src)
			if err != nil {
				fmt.Fprintln(env.Stderr, "dbhost diff:", err)
				return ExitError
			}
			sides[i] = s
		}
		r := fleet.Diff(sides[0], sides[1])
		if err := diffFormats.Render(env.Stdout, *format, diffOutput{&r, *verbose}); err != nil {
			fmt.Fprintln(env.Stderr, "dbhost diff:", err)
			return ExitError
		}
		if r.Empty() {
			return ExitOK
		}
		return ExitFindings
	})
	return c
}

// loadSide judges one operand of 'dbhost diff': a snapshot file, or this
// host read through src (--root, --pg, --mysql, --no-connect).
func loadSide(ctx context.Context, operand string, src *sourceFlags) (fleet.Snapshot, error) {
	if !liveOperand(operand) {
		// A snapshot may come from anywhere: see sourceFlags.open.
		debug.SetMemoryLimit(snapshotMemoryLimit)
		return fleet.Load(ctx, operand)
	}
	h, err := host.Open(src.root)
	if err != nil {
		return fleet.Snapshot{}, err
	}
	defer h.Close()
	return fleet.LoadHost(ctx, "live", h, src.options()), nil
}
