package cli

import (
	"errors"
	"flag"
	"fmt"
	"strings"

	"github.com/spf13/pflag"

	"github.com/dbhost/dbhost/internal/experiment"
	"github.com/dbhost/dbhost/internal/knob"
	"github.com/dbhost/dbhost/internal/results"
)

// expArgs is what the flags of 'dbhost experiment' set: a plan, and how
// to run it.
type expArgs struct {
	plan                      experiment.Plan
	file, finding             string
	arms                      []string
	db, journal, format, html string
	flags                     []expFlag
}

// expFlag is one flag of 'dbhost experiment', defined once: its name, its
// heading in the help, its help and the field it sets. A flag of the plan
// also overrides a plan file's field when given (copy).
type expFlag struct {
	name, short, group, usage string
	field                     func(a *expArgs) any // a pointer to the field
	copy                      func(dst *experiment.Plan, a *expArgs)
}

// planFlag is a flag that sets a field of the plan.
func planFlag[T any](name, group, usage string, field func(p *experiment.Plan) *T) expFlag {
	return expFlag{name: name, group: group, usage: usage,
		field: func(a *expArgs) any { return field(&a.plan) },
		copy:  func(dst *experiment.Plan, a *expArgs) { *field(dst) = *field(&a.plan) }}
}

// runFlag is a flag that says how to run the plan, not part of it.
func runFlag[T any](name, short, group, usage string, field func(a *expArgs) *T) expFlag {
	return expFlag{name: name, short: short, group: group, usage: usage, field: func(a *expArgs) any { return field(a) }}
}

// The headings of the help of 'dbhost experiment'.
const (
	groupArms   = "Arms and knobs"
	groupTarget = "Target database"
	groupWork   = "Workload"
	groupTrials = "Trials and statistics"
	groupOutput = "Results and output"
)

func experimentFlags() []expFlag {
	type (
		P = experiment.Plan
		A = expArgs
	)
	return []expFlag{
		runFlag("file", "f", groupArms, "read the plan from this YAML file (flags given override it)", func(a *A) *string { return &a.file }),
		planFlag("preset", groupArms, "a ready-made experiment: "+strings.Join(experiment.PresetNames(), ", "), func(p *P) *string { return &p.Preset }),
		runFlag("finding", "", groupArms, "audit the host and test the runtime fix of these failing findings (check IDs, comma-separated): arms 'now' and 'fixed'", func(a *A) *string { return &a.finding }),
		runFlag("arm", "", groupArms, "an arm, 'name: knob=value knob=value' (repeat; the first is the base)", func(a *A) *[]string { return &a.arms }),
		planFlag("name", groupArms, "name of the experiment (default: the preset or the arms)", func(p *P) *string { return &p.Name }),

		planFlag("pg", groupTarget, "PostgreSQL connection string of the server to test (default: a throwaway cluster)", func(p *P) *string { return &p.Target.PG }),
		planFlag("mysql", groupTarget, "MySQL/MariaDB DSN of the server to test, user:pass@unix(/run/mysqld/mysqld.sock)/db", func(p *P) *string { return &p.Target.MySQL }),
		planFlag("allow-restart", groupTarget, "let dbhost restart the server (systemd unit) for knobs that need it", func(p *P) *bool { return &p.Target.AllowRestart }),
		planFlag("os-user", groupTarget, "run pgbench/sysbench as this system user (peer authentication)", func(p *P) *string { return &p.Target.OSUser }),
		planFlag("shared-buffers", groupTarget, "throwaway cluster: shared_buffers (default: sized to the host)", func(p *P) *experiment.Size { return &p.Target.SharedBuffers }),
		planFlag("dir", groupTarget, "throwaway cluster: parent directory (default: the temporary directory)", func(p *P) *string { return &p.Target.Dir }),
		planFlag("data-fraction", groupTarget, "throwaway cluster: data set as a fraction of shared_buffers (default 0.5)", func(p *P) *float64 { return &p.Target.DataFraction }),

		planFlag("workload", groupWork, "pgbench, sysbench or sql (default: pgbench, sysbench for MySQL)", func(p *P) *string { return &p.Workload.Kind }),
		planFlag("clients", groupWork, "client count, or a sweep: 1,2,4,8", func(p *P) *experiment.IntList { return &p.Workload.Clients }),
		planFlag("jobs", groupWork, "pgbench threads (default: min(clients, cores))", func(p *P) *int { return &p.Workload.Jobs }),
		planFlag("duration", groupWork, "measured time of a trial (default 30s; presets 20s)", func(p *P) *experiment.Duration { return &p.Workload.Duration }),
		planFlag("warmup", groupWork, "unmeasured warm-up before each trial (default 10s; presets 5s)", func(p *P) *experiment.Duration { return &p.Workload.Warmup }),
		planFlag("scale", groupWork, "pgbench scale (default 10; throwaway cluster: sized to shared_buffers)", func(p *P) *int { return &p.Workload.Scale }),
		planFlag("select-only", groupWork, "pgbench -S", func(p *P) *bool { return &p.Workload.SelectOnly }),
		planFlag("script", groupWork, "pgbench script file, sysbench test (oltp_read_only, ...) or SQL script", func(p *P) *string { return &p.Workload.Script }),
		planFlag("tables", groupWork, "sysbench tables", func(p *P) *int { return &p.Workload.Tables }),
		planFlag("table-size", groupWork, "sysbench rows per table", func(p *P) *int { return &p.Workload.TableSize }),
		planFlag("readers", groupWork, "SQL driver reader threads", func(p *P) *int { return &p.Workload.Readers }),
		planFlag("writers", groupWork, "SQL driver writer threads", func(p *P) *int { return &p.Workload.Writers }),
		planFlag("bench-db", groupWork, "database for the benchmark tables (default: the DSN's, else dbhost_bench)", func(p *P) *string { return &p.Workload.DB }),
		planFlag("no-prepare", groupWork, "use the benchmark tables already loaded", func(p *P) *bool { return &p.Workload.NoPrepare }),

		planFlag("trials", groupTrials, "budget: total trials over all arms (default 8 per arm)", func(p *P) *int { return &p.Protocol.Trials }),
		planFlag("time", groupTrials, "budget: wall-clock time, e.g. 2h (presets: 12m)", func(p *P) *experiment.Duration { return &p.Protocol.Time }),
		planFlag("calibrate", groupTrials, "run this many A/A trials first and print noise and the smallest detectable change", func(p *P) *int { return &p.Protocol.Calibrate }),
		planFlag("replace", groupTrials, "at most this many more trials per arm in place of excluded ones (steal time, drift, failures; default: as many as the budget, -1: none)", func(p *P) *int { return &p.Protocol.Replace }),
		planFlag("restart", groupTrials, "restart the database before every trial", func(p *P) *bool { return &p.Protocol.Restart }),
		planFlag("alpha", groupTrials, "accepted false 'better'/'worse' rate (default 0.05)", func(p *P) *float64 { return &p.Protocol.Alpha }),
		planFlag("equivalence", groupTrials, "change that does not matter, e.g. 2% (default)", func(p *P) *experiment.Fraction { return &p.Protocol.Equivalence }),
		planFlag("metric", groupTrials, "judge by throughput (default), p50, p95 or p99", func(p *P) *string { return &p.Protocol.Metric }),
		planFlag("seed", groupTrials, "seed of the trial order (default: random, stored)", func(p *P) *uint64 { return &p.Protocol.Seed }),

		runFlag("db", "", groupOutput, "results database", func(a *A) *string { return &a.db }),
		runFlag("journal", "", groupOutput, "journal of changes to undo", func(a *A) *string { return &a.journal }),
		runFlag("format", "", groupOutput, "output: text, json or markdown", func(a *A) *string { return &a.format }),
		runFlag("report", "", groupOutput, "also write the HTML report to this file", func(a *A) *string { return &a.html }),
	}
}

// newExpArgs holds the defaults of the flags that have one.
func newExpArgs() *expArgs {
	return &expArgs{db: results.DefaultPath, journal: experiment.DefaultJournal, format: "text"}
}

// register defines the flags on fs, in the order of the table (the help
// lists them so, under their headings).
func (a *expArgs) register(fs *pflag.FlagSet) {
	fs.SortFlags = false
	a.flags = experimentFlags()
	for _, f := range a.flags {
		defineFlag(fs, f.name, f.short, f.usage, f.field(a))
		setGroup(fs, f.group, f.name)
	}
}

// defineFlag defines a flag of the type ptr points to, its default what
// ptr holds.
func defineFlag(fs *pflag.FlagSet, name, short, usage string, ptr any) {
	var v pflag.Value
	switch p := ptr.(type) {
	case *string:
		fs.StringVarP(p, name, short, *p, usage)
		return
	case *bool:
		fs.BoolVarP(p, name, short, *p, usage)
		return
	case *int:
		fs.IntVarP(p, name, short, *p, usage)
		return
	case *uint64:
		fs.Uint64VarP(p, name, short, *p, usage)
		return
	case *float64:
		fs.Float64VarP(p, name, short, *p, usage)
		return
	case *[]string:
		v = repeated{p}
	case *experiment.IntList:
		v = typed{p, "ints"}
	case *experiment.Duration:
		v = typed{p, "duration"}
	case *experiment.Fraction:
		v = typed{p, "percent"}
	case *experiment.Size:
		v = typed{p, "size"}
	default:
		panic(fmt.Sprintf("experiment flag --%s: no flag for %T", name, ptr))
	}
	fs.VarP(v, name, short, usage)
	fs.Lookup(name).DefValue = "" // the plan's zero value: the usage says the default
}

// typed gives a flag.Value of the experiment package the type name pflag
// shows.
type typed struct {
	flag.Value
	name string
}

func (t typed) Type() string { return t.name }

// repeated is a flag given once per value (--arm), not split at commas.
type repeated struct{ list *[]string }

func (r repeated) String() string     { return "" }
func (r repeated) Set(v string) error { *r.list = append(*r.list, v); return nil }
func (r repeated) Type() string       { return "string" }

// buildPlan builds the plan: the file's, with every flag given on top.
// findings, when set, builds the arms of --finding (see findingPlan).
func (a *expArgs) buildPlan(fs *pflag.FlagSet, findings func(ids []string) (*experiment.FindingPlan, error)) (*experiment.Plan, error) {
	p := &a.plan // without a file, the flags are the plan
	if a.file != "" {
		var err error
		if p, err = experiment.LoadPlan(a.file); err != nil {
			return nil, err
		}
		for _, f := range a.flags {
			if f.copy != nil && fs.Changed(f.name) {
				f.copy(p, a)
			}
		}
	}
	t, pr := &p.Target, &p.Protocol
	// --pg and --mysql each name the server: the plan's other one goes.
	if fs.Changed("pg") {
		t.MySQL = ""
	}
	if fs.Changed("mysql") {
		t.PG = ""
	}
	switch {
	case fs.Changed("time") && fs.Changed("trials"):
		return nil, errors.New("give a budget of --trials or --time, not both")
	case fs.Changed("time"):
		pr.Trials = 0
	case fs.Changed("trials"):
		pr.Time = 0
	}
	if a.finding != "" {
		if len(a.arms) > 0 || p.Preset != "" || len(p.Arms) > 0 {
			return nil, errors.New("--finding builds the arms and chooses the workload: leave out --arm, --preset and a plan's arms")
		}
		fp, err := findings(strings.Split(a.finding, ","))
		if err != nil {
			return nil, err
		}
		p.Arms, p.Findings, p.FindingWorkload = fp.Arms, fp.IDs, fp.Workload
	}
	if len(a.arms) > 0 {
		p.Arms = nil
		for _, s := range a.arms {
			name, settings, err := knob.ParseArm(s)
			if err != nil {
				return nil, fmt.Errorf("--arm: %w", err)
			}
			p.Arms = append(p.Arms, experiment.Arm{Name: name, Set: settings})
		}
	}
	return p, p.Validate()
}
