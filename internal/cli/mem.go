package cli

import (
	"context"
	"fmt"
	"io"
	"strconv"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/dbhost/dbhost/internal/engine"
	"github.com/dbhost/dbhost/internal/host"
	"github.com/dbhost/dbhost/internal/mem"
	"github.com/dbhost/dbhost/internal/report"
	"github.com/dbhost/dbhost/internal/termsafe"

	_ "github.com/dbhost/dbhost/internal/engine/all" // detectors for instance grouping
)

// memOutput is what 'dbhost mem' renders: one scan and how to show it.
type memOutput struct {
	r  *mem.Report
	ro mem.RenderOptions
}

var memFormats = new(report.Formats[memOutput]).
	Add("text", func(w io.Writer, o memOutput) error { return mem.Text(w, o.r, o.ro) }).
	Add("json", func(w io.Writer, o memOutput) error { return mem.JSON(termsafe.Raw(w), o.r, o.ro) })

// memFlags are the flags of 'dbhost mem'.
type memFlags struct {
	src          sourceFlags
	format, sort string
	top          int
	pids         listFlag
	engine       string
	numa         bool
	watch        float64
}

func (mf *memFlags) register(fs *pflag.FlagSet) {
	mf.src.registerHost(fs, true)
	fs.StringVar(&mf.format, "format", "text", "output format: text or json")
	fs.StringVar(&mf.sort, "sort", "pss", "sort processes by: rss, pss, uss, swap")
	fs.IntVar(&mf.top, "top", 0, "show only the N largest processes (0: all)")
	fs.Var(&mf.pids, "pid", "show only these processes (comma-separated PIDs); regions they map are shown whole")
	fs.StringVar(&mf.engine, "engine", "", "show only the processes of this engine's instances: postgres, mysql, mongo, redis")
	fs.BoolVar(&mf.numa, "numa", false, "read numa_maps of every shown process (slow on large processes; default: instance main processes on multi-node hosts)")
	fs.Float64Var(&mf.watch, "watch", 0, "re-scan and redraw every SECONDS until interrupted")
}

// options checks the flags and makes the scan's options of them.
func (mf *memFlags) options() (mem.Options, error) {
	opt := mem.Options{NUMA: mf.numa}
	if err := memFormats.Check(mf.format); err != nil {
		return opt, err
	}
	switch mf.sort {
	case "rss", "pss", "uss", "swap":
	default:
		return opt, fmt.Errorf("unknown sort %q (rss, pss, uss, swap)", mf.sort)
	}
	if mf.top < 0 || mf.watch < 0 {
		return opt, fmt.Errorf("--top and --watch must not be negative")
	}
	if mf.watch > 0 && mf.src.from != "" {
		return opt, fmt.Errorf("--watch re-reads the host; a snapshot holds one moment (use --from without --watch)")
	}
	for _, p := range mf.pids {
		n, err := strconv.Atoi(p)
		if err != nil || n <= 0 {
			return opt, fmt.Errorf("--pid: %q is not a process ID", p)
		}
		opt.PIDs = append(opt.PIDs, n)
	}
	if mf.engine != "" {
		e, err := engine.Parse(mf.engine)
		if err != nil {
			return opt, err
		}
		opt.Engine = e
	}
	return opt, nil
}

// memCmd accounts memory: processes, shared regions counted once, database
// instances, the host against /proc/meminfo, NUMA. It only reads.
func (a *app) memCmd() *cobra.Command {
	c := newCmd("mem", "account memory truthfully: processes, shared regions counted once, instances, NUMA")
	c.Example = `  sudo dbhost mem
  dbhost mem --from db1.tar.gz --format json`
	var mf memFlags
	mf.register(c.Flags())
	c.Run = a.do(func(ctx context.Context, _ []string) int {
		env := a.env
		fail := func(err error) int {
			fmt.Fprintln(env.Stderr, "dbhost mem:", err)
			return ExitError
		}
		opt, err := mf.options()
		if err != nil {
			return fail(err)
		}
		h, err := mf.src.open()
		if err != nil {
			return fail(err)
		}
		defer h.Close()
		if mf.watch > 0 {
			return mf.runWatch(ctx, env, h, opt, fail)
		}
		r, err := mem.Scan(ctx, h, opt)
		if err != nil {
			return fail(err)
		}
		if err := mf.render(env.Stdout, r); err != nil {
			return fail(err)
		}
		return ExitOK
	})
	return c
}

func (mf *memFlags) render(w io.Writer, r *mem.Report) error {
	return memFormats.Render(w, mf.format, memOutput{r, mem.RenderOptions{Sort: mf.sort, Top: mf.top}})
}

// runWatch re-scans and redraws every --watch seconds until interrupted
// (Ctrl-C ends a watch: not an error).
func (mf *memFlags) runWatch(ctx context.Context, env Env, h *host.Host, opt mem.Options, fail func(error) int) int {
	interval := time.Duration(mf.watch * float64(time.Second))
	tick := time.NewTicker(interval)
	defer tick.Stop()
	for {
		r, err := mem.Scan(ctx, h, opt)
		if ctx.Err() != nil {
			return ExitOK
		}
		if err != nil {
			return fail(err)
		}
		if mf.format == "text" && isTerminal(env.Stdout) {
			termsafe.Control(env.Stdout, termsafe.ClearScreen) // redraw in place
		}
		if mf.format == "text" {
			fmt.Fprintf(env.Stdout, "dbhost mem, every %s — %s (Ctrl-C to stop)\n\n", interval, r.Time.Local().Format(time.TimeOnly))
		}
		if err := mf.render(env.Stdout, r); err != nil {
			return fail(err)
		}
		select {
		case <-ctx.Done():
			return ExitOK
		case <-tick.C:
		}
	}
}
