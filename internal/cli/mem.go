package cli

import (
	"context"
	"fmt"
	"io"
	"strconv"
	"time"

	"github.com/spf13/cobra"

	"github.com/dbhost/dbhost/internal/engine"
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

// memCmd accounts memory: processes, shared regions counted once, database
// instances, the host against /proc/meminfo, NUMA. It only reads.
func (a *app) memCmd() *cobra.Command {
	c := newCmd("mem", "account memory truthfully: processes, shared regions counted once, instances, NUMA")
	fs := c.Flags()
	var src sourceFlags
	src.registerHost(fs, true)
	format := fs.String("format", "text", "output format: text or json")
	sortBy := fs.String("sort", "pss", "sort processes by: rss, pss, uss, swap")
	top := fs.Int("top", 0, "show only the N largest processes (0: all)")
	var pids listFlag
	fs.Var(&pids, "pid", "show only these processes (comma-separated PIDs); regions they map are shown whole")
	eng := fs.String("engine", "", "show only the processes of this engine's instances: postgres, mysql, mongo, redis")
	numa := fs.Bool("numa", false, "read numa_maps of every shown process (slow on large processes; default: instance main processes on multi-node hosts)")
	watch := fs.Float64("watch", 0, "re-scan and redraw every SECONDS until interrupted")
	c.Run = a.do(func(ctx context.Context, _ []string) int {
		env := a.env
		fail := func(err error) int {
			fmt.Fprintln(env.Stderr, "dbhost mem:", err)
			return ExitError
		}
		if err := memFormats.Check(*format); err != nil {
			return fail(err)
		}
		switch *sortBy {
		case "rss", "pss", "uss", "swap":
		default:
			return fail(fmt.Errorf("unknown sort %q (rss, pss, uss, swap)", *sortBy))
		}
		if *top < 0 || *watch < 0 {
			return fail(fmt.Errorf("--top and --watch must not be negative"))
		}
		if *watch > 0 && src.from != "" {
			return fail(fmt.Errorf("--watch re-reads the host; a snapshot holds one moment (use --from without --watch)"))
		}
		opt := mem.Options{NUMA: *numa}
		for _, p := range pids {
			n, err := strconv.Atoi(p)
			if err != nil || n <= 0 {
				return fail(fmt.Errorf("--pid: %q is not a process ID", p))
			}
			opt.PIDs = append(opt.PIDs, n)
		}
		if *eng != "" {
			e, err := engine.Parse(*eng)
			if err != nil {
				return fail(err)
			}
			opt.Engine = e
		}
		h, err := src.open()
		if err != nil {
			return fail(err)
		}
		defer h.Close()
		ro := mem.RenderOptions{Sort: *sortBy, Top: *top}
		render := func(r *mem.Report) error { return memFormats.Render(env.Stdout, *format, memOutput{r, ro}) }
		if *watch == 0 {
			r, err := mem.Scan(ctx, h, opt)
			if err != nil {
				return fail(err)
			}
			if err := render(r); err != nil {
				return fail(err)
			}
			return ExitOK
		}
		interval := time.Duration(*watch * float64(time.Second))
		tick := time.NewTicker(interval)
		defer tick.Stop()
		for {
			r, err := mem.Scan(ctx, h, opt)
			if ctx.Err() != nil {
				return ExitOK // Ctrl-C ends a watch
			}
			if err != nil {
				return fail(err)
			}
			if *format == "text" && isTerminal(env.Stdout) {
				termsafe.Control(env.Stdout, termsafe.ClearScreen) // redraw in place
			}
			if *format == "text" {
				fmt.Fprintf(env.Stdout, "dbhost mem, every %s — %s (Ctrl-C to stop)\n\n", interval, r.Time.Local().Format(time.TimeOnly))
			}
			if err := render(r); err != nil {
				return fail(err)
			}
			select {
			case <-ctx.Done():
				return ExitOK
			case <-tick.C:
			}
		}
	})
	return c
}
