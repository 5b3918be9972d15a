package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"runtime/debug"
	"strings"

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

func runDiff(ctx context.Context, env Env, args []string) int {
	fs := newFlagSet(env, "diff", "A [B] [flags]\n\nA and B are snapshot files ('dbhost collect'), or 'live' (also '-') for this host.\nWith one operand, A is compared with this host. Exit status: 0 same, 1 differences, 2 error")
	var src sourceFlags
	src.register(fs, false) // for the live side
	format := fs.String("format", "text", "output format: "+strings.Join(diffFormats.Names(), ", "))
	verbose := fs.Bool("v", false, "also list the settings observed on one side only (text)")
	pos, code, ok := parseOperands(fs, args)
	if !ok {
		return code
	}
	if len(pos) < 1 || len(pos) > 2 {
		fmt.Fprintln(env.Stderr, "dbhost diff: want one or two operands: A [B] (see dbhost diff -h)")
		return ExitError
	}
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

// parseOperands parses flags that may come before, between or after the
// operands, and returns the operands. "--" ends the flags: what follows
// is operands only.
func parseOperands(fs *flag.FlagSet, args []string) ([]string, int, bool) {
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				return nil, ExitOK, false
			}
			return nil, ExitError, false
		}
		rest := fs.Args()
		if len(rest) == 0 {
			return pos, 0, true
		}
		if len(args) > len(rest) && args[len(args)-len(rest)-1] == "--" {
			return append(pos, rest...), 0, true
		}
		pos = append(pos, rest[0])
		args = rest[1:]
	}
}
