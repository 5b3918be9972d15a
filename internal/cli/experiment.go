package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/dbhost/dbhost/internal/check"
	"github.com/dbhost/dbhost/internal/engine"
	"github.com/dbhost/dbhost/internal/experiment"
	"github.com/dbhost/dbhost/internal/facts"
	"github.com/dbhost/dbhost/internal/host"
	"github.com/dbhost/dbhost/internal/knob"
	"github.com/dbhost/dbhost/internal/report"
	"github.com/dbhost/dbhost/internal/results"
)

// ExitInterrupted is the status of an experiment stopped by a signal (the
// host was restored).
const ExitInterrupted = 130

// experimentFlags are the flags of 'dbhost experiment'; each overrides the
// plan file's field when given.
type experimentFlags struct {
	file, preset, name        string
	finding                   string
	arms                      []string
	pg, mysql, osUser         string
	allowRestart              bool
	kind, script, benchDB     string
	clients                   experiment.IntList
	jobs, scale               int
	duration, warmup, time    experiment.Duration
	selectOnly, noPrepare     bool
	tables, tableSize         int
	readers, writers          int
	trials, calibrate         int
	restart                   bool
	alpha                     float64
	equivalence               experiment.Fraction
	metric                    string
	seed                      uint64
	sharedBuffers             experiment.Size
	dir                       string
	dataFraction              float64
	db, journal, format, html string
}

type armFlag struct{ list *[]string }

func (a armFlag) String() string     { return "" }
func (a armFlag) Set(v string) error { *a.list = append(*a.list, v); return nil }

func (f *experimentFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&f.file, "f", "", "read the plan from this YAML file (flags given override it)")
	fs.StringVar(&f.preset, "preset", "", "a ready-made experiment: "+strings.Join(experiment.PresetNames(), ", "))
	fs.StringVar(&f.finding, "finding", "", "audit the host and test the runtime fix of these failing findings (check IDs, comma-separated): arms 'now' and 'fixed'")
	fs.StringVar(&f.name, "name", "", "name of the experiment (default: the preset or the arms)")
	fs.Var(armFlag{&f.arms}, "arm", "an arm, 'name: knob=value knob=value' (repeat; the first is the base)")
	fs.StringVar(&f.pg, "pg", "", "PostgreSQL connection string of the server to test (default: a throwaway cluster)")
	fs.StringVar(&f.mysql, "mysql", "", "MySQL/MariaDB DSN of the server to test, user:pass@unix(/run/mysqld/mysqld.sock)/db")
	fs.BoolVar(&f.allowRestart, "allow-restart", false, "let dbhost restart the server (systemd unit) for knobs that need it")
	fs.StringVar(&f.osUser, "os-user", "", "run pgbench/sysbench as this system user (peer authentication)")
	fs.StringVar(&f.kind, "workload", "", "pgbench, sysbench or sql (default: pgbench, sysbench for MySQL)")
	fs.Var(&f.clients, "clients", "client count, or a sweep: 1,2,4,8")
	fs.IntVar(&f.jobs, "jobs", 0, "pgbench threads (default: min(clients, cores))")
	fs.Var(&f.duration, "duration", "measured time of a trial (default 30s; presets 20s)")
	fs.Var(&f.warmup, "warmup", "unmeasured warm-up before each trial (default 10s; presets 5s)")
	fs.IntVar(&f.scale, "scale", 0, "pgbench scale (default 10; throwaway cluster: sized to shared_buffers)")
	fs.BoolVar(&f.selectOnly, "select-only", false, "pgbench -S")
	fs.StringVar(&f.script, "script", "", "pgbench script file, sysbench test (oltp_read_only, ...) or SQL script")
	fs.IntVar(&f.tables, "tables", 0, "sysbench tables")
	fs.IntVar(&f.tableSize, "table-size", 0, "sysbench rows per table")
	fs.IntVar(&f.readers, "readers", 0, "SQL driver reader threads")
	fs.IntVar(&f.writers, "writers", 0, "SQL driver writer threads")
	fs.StringVar(&f.benchDB, "bench-db", "", "database for the benchmark tables (default: the DSN's, else dbhost_bench)")
	fs.BoolVar(&f.noPrepare, "no-prepare", false, "use the benchmark tables already loaded")
	fs.IntVar(&f.trials, "trials", 0, "budget: total trials over all arms (default 8 per arm)")
	fs.Var(&f.time, "time", "budget: wall-clock time, e.g. 2h (presets: 12m)")
	fs.IntVar(&f.calibrate, "calibrate", 0, "run this many A/A trials first and print noise and the smallest detectable change")
	fs.BoolVar(&f.restart, "restart", false, "restart the database before every trial")
	fs.Float64Var(&f.alpha, "alpha", 0, "accepted false 'better'/'worse' rate (default 0.05)")
	fs.Var(&f.equivalence, "equivalence", "change that does not matter, e.g. 2% (default)")
	fs.StringVar(&f.metric, "metric", "", "judge by throughput (default), p50, p95 or p99")
	fs.Uint64Var(&f.seed, "seed", 0, "seed of the trial order (default: random, stored)")
	fs.Var(&f.sharedBuffers, "shared-buffers", "throwaway cluster: shared_buffers (default: sized to the host)")
	fs.StringVar(&f.dir, "dir", "", "throwaway cluster: parent directory (default: the temporary directory)")
	fs.Float64Var(&f.dataFraction, "data-fraction", 0, "throwaway cluster: data set as a fraction of shared_buffers (default 0.5)")
	fs.StringVar(&f.db, "db", results.DefaultPath, "results database")
	fs.StringVar(&f.journal, "journal", experiment.DefaultJournal, "journal of changes to undo")
	fs.StringVar(&f.format, "format", "text", "output: text, json or markdown")
	fs.StringVar(&f.html, "report", "", "also write the HTML report to this file")
}

// override sets *dst to v when the flag name was given, so that a plan
// file's value stands unless the command line names the flag.
func override[T any](set map[string]bool, name string, dst *T, v T) {
	if set[name] {
		*dst = v
	}
}

// plan builds the plan: the file's, with every flag given on top.
// findings, when set, builds the arms of --finding (see findingPlan).
func (f *experimentFlags) plan(fs *flag.FlagSet, findings func(ids []string) (*experiment.FindingPlan, error)) (*experiment.Plan, error) {
	p := &experiment.Plan{}
	if f.file != "" {
		var err error
		if p, err = experiment.LoadPlan(f.file); err != nil {
			return nil, err
		}
	}
	set := map[string]bool{}
	fs.Visit(func(fl *flag.Flag) { set[fl.Name] = true })
	w, pr, t := &p.Workload, &p.Protocol, &p.Target
	override(set, "preset", &p.Preset, f.preset)
	override(set, "name", &p.Name, f.name)
	override(set, "pg", &t.PG, f.pg)
	override(set, "mysql", &t.MySQL, f.mysql)
	override(set, "os-user", &t.OSUser, f.osUser)
	override(set, "dir", &t.Dir, f.dir)
	override(set, "workload", &w.Kind, f.kind)
	override(set, "script", &w.Script, f.script)
	override(set, "bench-db", &w.DB, f.benchDB)
	override(set, "metric", &pr.Metric, f.metric)
	override(set, "jobs", &w.Jobs, f.jobs)
	override(set, "scale", &w.Scale, f.scale)
	override(set, "tables", &w.Tables, f.tables)
	override(set, "table-size", &w.TableSize, f.tableSize)
	override(set, "readers", &w.Readers, f.readers)
	override(set, "writers", &w.Writers, f.writers)
	override(set, "trials", &pr.Trials, f.trials)
	override(set, "calibrate", &pr.Calibrate, f.calibrate)
	override(set, "allow-restart", &t.AllowRestart, f.allowRestart)
	override(set, "clients", &w.Clients, f.clients)
	override(set, "duration", &w.Duration, f.duration)
	override(set, "warmup", &w.Warmup, f.warmup)
	override(set, "select-only", &w.SelectOnly, f.selectOnly)
	override(set, "no-prepare", &w.NoPrepare, f.noPrepare)
	override(set, "restart", &pr.Restart, f.restart)
	override(set, "alpha", &pr.Alpha, f.alpha)
	override(set, "equivalence", &pr.Equivalence, f.equivalence)
	override(set, "seed", &pr.Seed, f.seed)
	override(set, "shared-buffers", &t.SharedBuffers, f.sharedBuffers)
	override(set, "data-fraction", &t.DataFraction, f.dataFraction)
	// --pg and --mysql each name the server: the plan's other one goes.
	if set["pg"] {
		t.MySQL = ""
	}
	if set["mysql"] {
		t.PG = ""
	}
	switch {
	case set["time"] && set["trials"]:
		return nil, errors.New("give a budget of --trials or --time, not both")
	case set["time"]:
		pr.Time, pr.Trials = f.time, 0
	case set["trials"]:
		pr.Time = 0
	}
	if f.finding != "" {
		if len(f.arms) > 0 || p.Preset != "" || len(p.Arms) > 0 {
			return nil, errors.New("--finding builds the arms and chooses the workload: leave out --arm, --preset and a plan's arms")
		}
		fp, err := findings(strings.Split(f.finding, ","))
		if err != nil {
			return nil, err
		}
		p.Arms, p.Findings, p.FindingWorkload = fp.Arms, fp.IDs, fp.Workload
	}
	if len(f.arms) > 0 {
		p.Arms = nil
		for _, s := range f.arms {
			name, settings, err := knob.ParseArm(s)
			if err != nil {
				return nil, fmt.Errorf("--arm: %w", err)
			}
			p.Arms = append(p.Arms, experiment.Arm{Name: name, Set: settings})
		}
	}
	return p, p.Validate()
}

func runExperiment(ctx context.Context, env Env, args []string) int {
	if len(args) > 0 && args[0] == "recover" {
		return runExperimentRecover(ctx, env, args[1:])
	}
	fs := newFlagSet(env, "experiment", "[--preset NAME | --finding ID[,ID] | --arm 'base: knob=value' --arm 'new: knob=value' | -f plan.yaml] [flags]\n       dbhost experiment recover")
	var f experimentFlags
	f.register(fs)
	usage := fs.Usage
	fs.Usage = func() {
		usage()
		fmt.Fprintln(env.Stderr, "\nPresets:")
		for _, n := range experiment.PresetNames() {
			fmt.Fprintf(env.Stderr, "  %-11s %s\n", n, experiment.PresetSummary(n))
		}
		fmt.Fprintln(env.Stderr, "\nSee docs/experiment.md for knobs, plan files and the method.")
	}
	if code, ok := parse(fs, args); !ok {
		return code
	}
	if err := summaryFormats.Check(f.format); err != nil {
		fmt.Fprintln(env.Stderr, "dbhost experiment:", err)
		return ExitError
	}
	h, err := host.Open("/")
	if err != nil {
		fmt.Fprintln(env.Stderr, "dbhost experiment:", err)
		return ExitError
	}
	defer h.Close()
	p, err := f.plan(fs, func(ids []string) (*experiment.FindingPlan, error) { return findingPlan(ctx, env, h, &f, ids) })
	if err != nil {
		fmt.Fprintln(env.Stderr, "dbhost experiment:", err)
		return ExitError
	}
	st, err := results.Open(f.db)
	if err != nil {
		fmt.Fprintln(env.Stderr, "dbhost experiment:", err)
		return ExitError
	}
	defer st.Close()
	sum, runErr := experiment.Run(ctx, p, experiment.Options{Host: h, Store: st, Journal: f.journal, Log: env.Stderr, Bar: isTerminal(env.Stderr)})
	code := ExitOK
	switch {
	case errors.Is(runErr, experiment.ErrInterrupted) || (runErr != nil && ctx.Err() != nil):
		fmt.Fprintln(env.Stderr, "dbhost experiment: interrupted; the host was restored")
		code = ExitInterrupted
	case runErr != nil:
		fmt.Fprintln(env.Stderr, "dbhost experiment:", runErr)
		code = ExitError
	}
	if sum == nil {
		return code
	}
	if err := summaryFormats.Render(env.Stdout, f.format, summaryOutput{ctx, st, sum}); err != nil {
		fmt.Fprintln(env.Stderr, "dbhost experiment:", err)
		return ExitError
	}
	if f.html != "" {
		if err := writeReport(ctx, st, sum.ID, f.html, "html"); err != nil {
			fmt.Fprintln(env.Stderr, "dbhost experiment:", err)
			return ExitError
		}
		fmt.Fprintf(env.Stderr, "report: %s\n", f.html)
	} else if f.format == "text" {
		fmt.Fprintf(env.Stdout, "\nresults: %s in %s; 'dbhost results report %s -o report.html' for the charts\n", sum.ID, f.db, sum.ID)
	}
	return code
}

// findingPlan audits the host as 'dbhost audit' does and builds the arms
// of --finding from the failing findings' runtime fixes.
func findingPlan(ctx context.Context, env Env, h *host.Host, f *experimentFlags, ids []string) (*experiment.FindingPlan, error) {
	fc := facts.Gather(ctx, h, facts.Options{Engine: engine.Options{PGDSN: f.pg, MySQLDSN: f.mysql}})
	fds := check.Run(fc, check.Selector{Only: ids})
	fp, err := experiment.PlanFindings(h, fds, ids)
	if err != nil {
		return nil, err
	}
	for _, a := range fp.Arms {
		fmt.Fprintf(env.Stderr, "arm %s\n", a)
	}
	for _, n := range fp.Notes {
		fmt.Fprintf(env.Stderr, "note: %s\n", n)
	}
	return fp, nil
}

// summaryOutput is what 'dbhost experiment' prints at the end: the
// summary, and the store it went to (markdown reads the trials back).
type summaryOutput struct {
	ctx context.Context
	st  *results.Store
	sum *experiment.Summary
}

// summaryFormats are the formats of 'dbhost experiment'.
var summaryFormats = new(report.Formats[summaryOutput]).
	Add("text", func(w io.Writer, o summaryOutput) error { return experiment.WriteText(w, o.sum) }).
	Add("json", func(w io.Writer, o summaryOutput) error { return writeJSON(w, o.sum) }).
	Add("markdown", func(w io.Writer, o summaryOutput) error {
		s, err := experiment.Load(o.ctx, o.st, o.sum.ID)
		if err != nil {
			return err
		}
		return s.WriteMarkdown(w)
	}, "md")

func runExperimentRecover(ctx context.Context, env Env, args []string) int {
	fs := newFlagSet(env, "experiment recover", "[flags]")
	journalFile := fs.String("journal", experiment.DefaultJournal, "journal of changes to undo")
	db := fs.String("db", results.DefaultPath, "results database (its running experiments are marked interrupted)")
	if code, ok := parse(fs, args); !ok {
		return code
	}
	var st *results.Store
	if _, err := os.Stat(*db); err == nil {
		if st, err = results.Open(*db); err != nil {
			fmt.Fprintln(env.Stderr, "dbhost experiment recover:", err)
			return ExitError
		}
		defer st.Close()
	}
	rec, err := experiment.Recover(ctx, *journalFile, st, env.Stderr)
	if rec != nil {
		if len(rec.Undone) == 0 {
			fmt.Fprintf(env.Stdout, "nothing to restore (no journal at %s)\n", *journalFile)
		} else if err == nil {
			fmt.Fprintf(env.Stdout, "restored %d change(s) from %s\n", len(rec.Undone), *journalFile)
		}
		for _, id := range rec.Interrupted {
			fmt.Fprintf(env.Stdout, "experiment %s marked interrupted\n", id)
		}
	}
	if err != nil {
		fmt.Fprintln(env.Stderr, "dbhost experiment recover:", err)
		return ExitError
	}
	return ExitOK
}
