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
	"github.com/dbhost/dbhost/internal/host"
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

// contentionFlags are the flags of 'dbhost contention'.
type contentionFlags struct {
	src           sourceFlags
	interval      time.Duration
	format        string
	watch, probe  bool
	probeTime     time.Duration
	state         string
	pids, engines listFlag
}

func (cf *contentionFlags) register(fs *pflag.FlagSet) {
	cf.src.register(fs, true)
	fs.DurationVar(&cf.interval, "interval", contention.DefaultInterval, "how long to measure")
	fs.StringVar(&cf.format, "format", "text", "output format: text or json (with --watch: one JSON object per line)")
	fs.BoolVar(&cf.watch, "watch", false, "measure again and again, redrawing, until interrupted")
	fs.BoolVar(&cf.probe, "probe", false, "measure this host's context-switch capacity and store it in --state")
	fs.DurationVar(&cf.probeTime, "probe-time", contention.DefaultProbeTime, "how long --probe runs (it keeps every CPU busy)")
	fs.StringVar(&cf.state, "state", contention.DefaultStateFile, "file holding the probe result")
	fs.Var(&cf.pids, "pid", "only the instances holding these PIDs (comma-separated, repeatable)")
	fs.Var(&cf.engines, "engine", "only these engines: postgres, mysql (also mariadb), redis, mongodb")
}

// check refuses flags that cannot work together: an unknown format, too
// short an interval, live-only flags with --from.
func (cf *contentionFlags) check(fs *pflag.FlagSet) error {
	if err := contentionFormats.Check(cf.format); err != nil {
		return err
	}
	if cf.interval < 100*time.Millisecond {
		return fmt.Errorf("--interval %s is too short (at least 100ms)", cf.interval)
	}
	if cf.src.from == "" {
		return nil
	}
	// A snapshot holds one sample taken at collection: nothing to wait
	// for, watch or probe.
	var live []string
	fs.Visit(func(f *pflag.Flag) {
		if f.Name == "interval" || f.Name == "watch" || f.Name == "probe" || f.Name == "probe-time" {
			live = append(live, "--"+f.Name)
		}
	})
	if len(live) > 0 {
		return fmt.Errorf("%s measures the live host; --from reads one sample recorded by 'dbhost collect'", strings.Join(live, ", "))
	}
	return nil
}

// options are the sampler's options: the connection and which instances.
func (cf *contentionFlags) options() (contention.Options, error) {
	src := &cf.src
	opts := contention.Options{Engine: src.options().Engine}
	for _, p := range cf.pids {
		n, err := strconv.Atoi(p)
		if err != nil || n <= 0 {
			return opts, fmt.Errorf("--pid %q is not a process ID", p)
		}
		opts.PIDs = append(opts.PIDs, n)
	}
	for _, e := range cf.engines {
		en, err := engine.Parse(e)
		if err != nil {
			return opts, err
		}
		opts.Engines = append(opts.Engines, en)
	}
	return opts, nil
}

func (a *app) contentionCmd() *cobra.Command {
	c := newCmd("contention", "judge context switches per core and per query against this host's capacity")
	c.Example = `  sudo dbhost contention --probe
  sudo dbhost contention
  sudo dbhost contention --watch`
	setExits(c, map[int]string{
		ExitOK:       "No verdict warns.",
		ExitFindings: "A verdict warns: switching takes too much of a core, or too many switches per query.",
		ExitError:    "It could not run, or could judge nothing.",
	})
	fs := c.Flags()
	var cf contentionFlags
	cf.register(fs)
	c.Run = a.do(func(ctx context.Context, _ []string) int {
		fail := func(err error) int {
			fmt.Fprintln(a.env.Stderr, "dbhost contention:", err)
			return ExitError
		}
		if err := cf.check(fs); err != nil {
			return fail(err)
		}
		opts, err := cf.options()
		if err != nil {
			return fail(err)
		}
		h, err := cf.src.open()
		if err != nil {
			return fail(err)
		}
		defer h.Close()
		if cf.probe {
			if err := cf.runProbe(ctx, a.env, h); err != nil {
				return fail(err)
			}
			return ExitOK
		}
		capacity := contention.LoadCapacity(h, cf.state)
		s, err := contention.NewSampler(ctx, h, opts)
		if err != nil {
			return fail(err)
		}
		defer s.Close()
		if cf.watch {
			return cf.runWatch(ctx, a.env, s, capacity, fail)
		}
		r, err := contention.Measure(ctx, s, cf.interval, capacity)
		if err != nil {
			return fail(err)
		}
		if err := cf.render(a.env.Stdout, r); err != nil {
			return fail(err)
		}
		return reportStatus(r)
	})
	return c
}

func (cf *contentionFlags) render(w io.Writer, r *contention.Report) error {
	return contentionFormats.Render(w, cf.format, contentionOutput{r, cf.watch})
}

// runProbe measures the host's capacity, prints it and stores it in --state.
func (cf *contentionFlags) runProbe(ctx context.Context, env Env, h *host.Host) error {
	r, err := contention.Probe(ctx, h, cf.probeTime)
	if err != nil {
		return err
	}
	if err := probeFormats.Render(env.Stdout, cf.format, r); err != nil {
		return err
	}
	if err := contention.SaveProbe(cf.state, r); err != nil {
		return fmt.Errorf("the probe ran but could not be stored (use --state FILE): %w", err)
	}
	if cf.format == "text" {
		fmt.Fprintf(env.Stdout, "  stored in %s\n", cf.state)
	}
	return nil
}

// runWatch renders consecutive intervals, each sample ending one and
// starting the next, until interrupted (a normal end of watching).
func (cf *contentionFlags) runWatch(ctx context.Context, env Env, s *contention.Sampler, capacity contention.Capacity, fail func(error) int) int {
	redraw := cf.format == "text" && isTerminal(env.Stdout)
	a := s.Sample(ctx)
	if redraw {
		termsafe.Control(env.Stdout, termsafe.ClearScreen)
		fmt.Fprintf(env.Stdout, "dbhost contention: measuring %s ...\n", cf.interval)
	}
	for {
		if err := waitInterval(ctx, cf.interval); err != nil {
			return ExitOK
		}
		b := s.Sample(ctx)
		r := contention.Compare(a, b, capacity)
		if redraw {
			termsafe.Control(env.Stdout, termsafe.ClearScreen)
		}
		if err := cf.render(env.Stdout, r); err != nil {
			return fail(err)
		}
		if !redraw && cf.format == "text" {
			fmt.Fprintln(env.Stdout)
		}
		a = b
	}
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
