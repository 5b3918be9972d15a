package cli

import (
	"context"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/dbhost/dbhost/internal/contention"
	"github.com/dbhost/dbhost/internal/engine"
	"github.com/dbhost/dbhost/internal/report"
	"github.com/dbhost/dbhost/internal/termsafe"
)

// contentionOutput is what 'dbhost contention' renders: one measured
// interval, and whether more follow (--watch).
type contentionOutput struct {
	r     *contention.Report
	watch bool
}

// contentionFormats are the formats of 'dbhost contention'.
var contentionFormats = new(report.Formats[contentionOutput]).
	Add("text", func(w io.Writer, o contentionOutput) error { return contention.WriteText(w, o.r) }).
	Add("json", func(w io.Writer, o contentionOutput) error { return contention.WriteJSON(w, o.r, !o.watch) }) // --watch: one object per line

// probeFormats are how --probe prints its result: the same names as
// contentionFormats, which the flag is checked against.
var probeFormats = new(report.Formats[*contention.ProbeResult]).
	Add("text", contention.WriteProbeText).
	Add("json", func(w io.Writer, r *contention.ProbeResult) error {
		return contention.WriteJSON(termsafe.Raw(w), r, true)
	})

func (a *app) contentionCmd() *cobra.Command {
	c := newCmd("contention", "judge context switches per core and per query against this host's capacity")
	fs := c.Flags()
	var src sourceFlags
	src.register(fs, true)
	interval := fs.Duration("interval", contention.DefaultInterval, "how long to measure")
	format := fs.String("format", "text", "output format: text or json (with --watch: one JSON object per line)")
	watch := fs.Bool("watch", false, "measure again and again, redrawing, until interrupted")
	probe := fs.Bool("probe", false, "measure this host's context-switch capacity and store it in --state")
	probeTime := fs.Duration("probe-time", contention.DefaultProbeTime, "how long --probe runs (it keeps every CPU busy)")
	state := fs.String("state", contention.DefaultStateFile, "file holding the probe result")
	var pids, engines listFlag
	fs.Var(&pids, "pid", "only the instances holding these PIDs (comma-separated, repeatable)")
	fs.Var(&engines, "engine", "only these engines: postgres, mysql (also mariadb), redis, mongodb")
	c.Run = a.do(func(ctx context.Context, _ []string) int {
		env := a.env
		fail := func(err error) int {
			fmt.Fprintln(env.Stderr, "dbhost contention:", err)
			return ExitError
		}
		if err := contentionFormats.Check(*format); err != nil {
			return fail(err)
		}
		if *interval < 100*time.Millisecond {
			return fail(fmt.Errorf("--interval %s is too short (at least 100ms)", *interval))
		}
		if src.from != "" {
			// A snapshot holds one sample taken at collection: nothing to
			// wait for, watch or probe.
			var live []string
			fs.Visit(func(f *pflag.Flag) {
				if f.Name == "interval" || f.Name == "watch" || f.Name == "probe" || f.Name == "probe-time" {
					live = append(live, "--"+f.Name)
				}
			})
			if len(live) > 0 {
				return fail(fmt.Errorf("%s measures the live host; --from reads one sample recorded by 'dbhost collect'", strings.Join(live, ", ")))
			}
		}
		opts := contention.Options{Engine: src.options().Engine}
		for _, p := range pids {
			n, err := strconv.Atoi(p)
			if err != nil || n <= 0 {
				return fail(fmt.Errorf("--pid %q is not a process ID", p))
			}
			opts.PIDs = append(opts.PIDs, n)
		}
		for _, e := range engines {
			en, err := engine.Parse(e)
			if err != nil {
				return fail(err)
			}
			opts.Engines = append(opts.Engines, en)
		}
		h, err := src.open()
		if err != nil {
			return fail(err)
		}
		defer h.Close()

		if *probe {
			r, err := contention.Probe(ctx, h, *probeTime)
			if err != nil {
				return fail(err)
			}
			if err := probeFormats.Render(env.Stdout, *format, r); err != nil {
				return fail(err)
			}
			if err := contention.SaveProbe(*state, r); err != nil {
				return fail(fmt.Errorf("the probe ran but could not be stored (use --state FILE): %w", err))
			}
			if *format == "text" {
				fmt.Fprintf(env.Stdout, "  stored in %s\n", *state)
			}
			return ExitOK
		}

		capacity := contention.LoadCapacity(h, *state)
		s, err := contention.NewSampler(ctx, h, opts)
		if err != nil {
			return fail(err)
		}
		defer s.Close()
		render := func(w io.Writer, r *contention.Report) error {
			return contentionFormats.Render(w, *format, contentionOutput{r, *watch})
		}
		if !*watch {
			r, err := contention.Measure(ctx, s, *interval, capacity)
			if err != nil {
				return fail(err)
			}
			if err := render(env.Stdout, r); err != nil {
				return fail(err)
			}
			return reportStatus(r)
		}

		// --watch: consecutive intervals, each sample ending one and starting
		// the next, until interrupted.
		redraw := *format == "text" && isTerminal(env.Stdout)
		a := s.Sample(ctx)
		if redraw {
			termsafe.Control(env.Stdout, termsafe.ClearScreen)
			fmt.Fprintf(env.Stdout, "dbhost contention: measuring %s ...\n", *interval)
		}
		for {
			if err := waitInterval(ctx, *interval); err != nil {
				return ExitOK // interrupted: a normal end of watching
			}
			b := s.Sample(ctx)
			r := contention.Compare(a, b, capacity)
			if redraw {
				termsafe.Control(env.Stdout, termsafe.ClearScreen)
			}
			if err := render(env.Stdout, r); err != nil {
				return fail(err)
			}
			if !redraw && *format == "text" {
				fmt.Fprintln(env.Stdout)
			}
			a = b
		}
	})
	return c
}

// waitInterval sleeps unless ctx ends first.
func waitInterval(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// reportStatus is 1 when a verdict warns, 2 when nothing could be judged.
func reportStatus(r *contention.Report) int {
	judged, warned := 0, false
	for _, v := range r.Verdicts {
		if v.Status != contention.Unknown {
			judged++
		}
		if v.Status == contention.Warning {
			warned = true
		}
	}
	switch {
	case warned:
		return ExitFindings
	case judged == 0:
		return ExitError
	}
	return ExitOK
}
