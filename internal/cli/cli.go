// Package cli wires dbhost's commands. It holds no state between calls: each
// command parses its own flag set, so tests run commands in parallel.
package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"runtime/debug"
	"sort"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/dbhost/dbhost/internal/check"
	"github.com/dbhost/dbhost/internal/contention"
	"github.com/dbhost/dbhost/internal/engine"
	"github.com/dbhost/dbhost/internal/facts"
	"github.com/dbhost/dbhost/internal/fix"
	"github.com/dbhost/dbhost/internal/host"
	"github.com/dbhost/dbhost/internal/mem"
	"github.com/dbhost/dbhost/internal/report"
	"github.com/dbhost/dbhost/internal/results"
	"github.com/dbhost/dbhost/internal/safefile"
	"github.com/dbhost/dbhost/internal/termsafe"
)

// Exit statuses.
const (
	ExitOK       = 0 // nothing at or above --fail-on
	ExitFindings = 1 // findings at or above --fail-on
	ExitError    = 2 // could not run
)

// Env is what a command may touch: its arguments and standard streams.
type Env struct {
	Stdout, Stderr io.Writer
	// Stdin is unused today; kept so tests can drive prompts later.
	Stdin io.Reader
}

type command struct {
	name, summary string
	run           func(ctx context.Context, env Env, args []string) int
}

func commands() []command {
	return []command{
		{"audit", "judge this host (or a snapshot) and every database on it", runAudit},
		{"collect", "write a snapshot of what the checks read, without secrets", runCollect},
		{"checks", "list the check catalog", runChecks},
		{"fix", "render the persistent files that fix the findings", runFix},
		{"mem", "account memory truthfully: processes, shared regions counted once, instances, NUMA", runMem},
		{"contention", "judge context switches per core and per query against this host's capacity", runContention},
		{"experiment", "prove a tuning change with a real benchmark; always puts the host back", runExperiment},
		{"results", "list, show, compare and report stored experiments", runResults},
		{"serve", "Prometheus exporter: audit in the background, serve the last result", runServe},
		{"diff", "what differs between two hosts or two times", runDiff},
		{"fleet", "reports over many snapshots: fleet report", runFleet},
		{"version", "print the version", runVersion},
	}
}

// Main runs dbhost with os.Args-style arguments and returns the exit status.
func Main(args []string, env Env) int {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if len(args) < 2 {
		usage(env.Stderr)
		return ExitError
	}
	// Every command's human-readable output is escaped (termsafe): process
	// arguments, paths and snapshot values are written by other users.
	// Machine formats opt out with termsafe.Raw.
	stdout, stderr := termsafe.New(env.Stdout, false), termsafe.New(env.Stderr, false)
	defer stdout.Flush()
	defer stderr.Flush()
	env.Stdout, env.Stderr = stdout, stderr
	name := args[1]
	if name == "-h" || name == "--help" || name == "help" {
		usage(env.Stdout)
		return ExitOK
	}
	for _, c := range commands() {
		if c.name == name {
			return c.run(ctx, env, args[2:])
		}
	}
	fmt.Fprintf(env.Stderr, "dbhost: unknown command %q\n\n", name)
	usage(env.Stderr)
	return ExitError
}

func usage(w io.Writer) {
	fmt.Fprintln(w, "dbhost makes Linux hosts run databases well.\n\nUsage: dbhost COMMAND [flags]\n\nCommands:")
	for _, c := range commands() {
		fmt.Fprintf(w, "  %-9s %s\n", c.name, c.summary)
	}
	fmt.Fprintln(w, "\nRun 'dbhost COMMAND -h' for a command's flags.")
}

// listFlag collects comma-separated, repeatable values.
type listFlag []string

func (l *listFlag) String() string { return strings.Join(*l, ",") }
func (l *listFlag) Set(v string) error {
	for _, p := range strings.Split(v, ",") {
		if p = strings.TrimSpace(p); p != "" {
			*l = append(*l, p)
		}
	}
	return nil
}

// sourceFlags are shared by commands that observe a host.
type sourceFlags struct {
	from      string
	root      string
	pgDSN     string
	mysqlDSN  string
	noConnect bool
}

func (s *sourceFlags) register(fs *flag.FlagSet, withFrom bool) {
	s.registerHost(fs, withFrom)
	fs.StringVar(&s.pgDSN, "pg", "", "PostgreSQL connection string (default: local socket with the usual credentials)")
	fs.StringVar(&s.mysqlDSN, "mysql", "", "MySQL DSN (default: local socket with ~/.my.cnf or socket auth)")
	fs.BoolVar(&s.noConnect, "no-connect", false, "do not connect to databases; read settings from files")
}

// registerHost registers where to read (--from, --root) without the
// connection flags, for commands that never connect to a database.
func (s *sourceFlags) registerHost(fs *flag.FlagSet, withFrom bool) {
	if withFrom {
		fs.StringVar(&s.from, "from", "", "read a snapshot written by 'dbhost collect' instead of this host")
	}
	fs.StringVar(&s.root, "root", "/", "root of the live filesystem to read (for chroots and tests)")
}

func (s *sourceFlags) open() (*host.Host, error) {
	if s.from != "" {
		// A snapshot may come from anywhere. Its size is capped (see
		// host.OpenSnapshot); a soft memory limit makes the collector work
		// harder rather than let parsers of large files grow the heap.
		debug.SetMemoryLimit(snapshotMemoryLimit)
		return host.OpenSnapshot(s.from)
	}
	return host.Open(s.root)
}

// gather opens the source and gathers its facts; the caller closes the
// host after judging them. When it fails, it has said why as "dbhost CMD:".
func (s *sourceFlags) gather(ctx context.Context, env Env, cmd string) (*facts.Facts, func() error, bool) {
	h, err := s.open()
	if err != nil {
		fmt.Fprintf(env.Stderr, "dbhost %s: %v\n", cmd, err)
		return nil, nil, false
	}
	return facts.Gather(ctx, h, s.options()), h.Close, true
}

// snapshotMemoryLimit is the soft heap limit while judging a snapshot: an
// archive at the size limits is judged in well under 200 MB of RSS.
const snapshotMemoryLimit = 128 << 20

func (s *sourceFlags) options() facts.Options {
	return facts.Options{Engine: engine.Options{PGDSN: s.pgDSN, MySQLDSN: s.mysqlDSN, NoConnect: s.noConnect}}
}

func newFlagSet(env Env, name, args string) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(env.Stderr)
	fs.Usage = func() {
		fmt.Fprintf(env.Stderr, "Usage: dbhost %s %s\n\nFlags:\n", name, args)
		fs.PrintDefaults()
	}
	return fs
}

// parse handles -h (exit 0) and flag errors (exit 2).
func parse(fs *flag.FlagSet, args []string) (int, bool) {
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return ExitOK, false
		}
		return ExitError, false
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(fs.Output(), "dbhost %s: unexpected argument %q\n", fs.Name(), fs.Arg(0))
		return ExitError, false
	}
	return 0, true
}

func runAudit(ctx context.Context, env Env, args []string) int {
	fs := newFlagSet(env, "audit", "[flags]")
	var src sourceFlags
	src.register(fs, true)
	format := fs.String("format", "text", "output format: "+strings.Join(report.AuditFormats.Names(), ", "))
	verbose := fs.Bool("v", false, "show evidence and passed checks")
	failOn := fs.String("fail-on", "warning", "exit 1 when a check fails at or above this severity: info, warning, critical, none")
	color := fs.String("color", "auto", "colour: auto (only on a terminal), always, never")
	output := fs.String("o", "", "write the report to this file atomically (mode 0644), e.g. for node_exporter's textfile collector")
	resultsDB := fs.String("results-db", results.DefaultPath, "experiment results to link findings to (read only; \"\" for none; with --from only when given)")
	var only, skip listFlag
	fs.Var(&only, "only", "run only these checks (IDs or domain prefixes, comma-separated)")
	fs.Var(&skip, "skip", "skip these checks (IDs or domain prefixes)")
	if code, ok := parse(fs, args); !ok {
		return code
	}
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
	check.RenderFixes(findings, fix.ContextFrom(f))
	a := &report.Audit{Facts: f, Findings: findings, Checks: countSelected(sel), Duration: time.Since(start)}
	a.Experiments = findingExperiments(ctx, linkedStore(fs, src.from, *resultsDB), f)
	if *output != "" {
		// Never a half-written file where a collector reads it: a
		// temporary file beside it (not matching *.prom), synced, renamed.
		err := safefile.Write(*output, 0o644, func(w io.Writer) error {
			return report.Render(w, *format, a, report.Options{Verbose: *verbose})
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
	if err := report.Render(out, *format, a, report.Options{Verbose: *verbose, Color: useColor}); err != nil {
		fmt.Fprintln(env.Stderr, "dbhost audit:", err)
		return ExitError
	}
	return exitStatus(findings, threshold)
}

// linkedStore is the results database an audit links its findings to:
// the local store speaks of this machine, so a snapshot (perhaps of
// another host with the same name) is linked only to a store named on
// the command line.
func linkedStore(fs *flag.FlagSet, from, path string) string {
	if from != "" && !flagSet(fs, "results-db") {
		return ""
	}
	return path
}

// flagSet reports whether the command line set the flag.
func flagSet(fs *flag.FlagSet, name string) bool {
	set := false
	fs.Visit(func(f *flag.Flag) { set = set || f.Name == name })
	return set
}

// exitStatus is 2 when nothing could be judged, 1 when a check failed at or
// above the threshold, else 0.
func exitStatus(findings []check.Finding, threshold check.Severity) int {
	judged, failed := 0, false
	for _, fd := range findings {
		if fd.Status != check.Unknown {
			judged++
		}
		if fd.Status == check.Fail && fd.Severity >= threshold {
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

func isTerminal(w io.Writer) bool {
	f, ok := termsafe.Raw(w).(*os.File)
	if !ok {
		return false
	}
	_, err := unix.IoctlGetTermios(int(f.Fd()), unix.TCGETS)
	return err == nil
}

func runCollect(ctx context.Context, env Env, args []string) int {
	fs := newFlagSet(env, "collect", "-o FILE.tar.gz [flags]")
	var src sourceFlags
	src.register(fs, false)
	out := fs.String("o", "", "write the snapshot to this file ('-' for standard output)")
	note := fs.String("note", "", "free text stored in the manifest (what this snapshot shows)")
	if code, ok := parse(fs, args); !ok {
		return code
	}
	if *out == "" {
		fmt.Fprintln(env.Stderr, "dbhost collect: -o FILE is required")
		return ExitError
	}
	h, err := host.Open(src.root)
	if err != nil {
		fmt.Fprintln(env.Stderr, "dbhost collect:", err)
		return ExitError
	}
	defer h.Close()
	if err := h.StartRecording(); err != nil {
		fmt.Fprintln(env.Stderr, "dbhost collect:", err)
		return ExitError
	}
	f := facts.Gather(ctx, h, src.options())
	for _, why := range recordObservers(ctx, h) {
		fmt.Fprintln(env.Stderr, "dbhost collect:", why)
	}
	write := func(w io.Writer) error { return h.WriteSnapshot(w, *note) }
	if *out == "-" {
		err = write(termsafe.Raw(env.Stdout))
	} else {
		err = writeFileAtomic(*out, 0o600, write)
	}
	if err != nil {
		fmt.Fprintln(env.Stderr, "dbhost collect:", err)
		return ExitError
	}
	if *out != "-" {
		fmt.Fprintf(env.Stderr, "dbhost collect: wrote %s (%d instances, %d notes)\n", *out, len(f.Instances), len(f.Notes))
	}
	return ExitOK
}

// recordObservers reads the host once the way 'dbhost mem' and 'dbhost
// contention' do, so that the snapshot holds what they read with --from
// (smaps_rollup or smaps of every process, System V and /dev/shm segments,
// NUMA nodes, /proc/stat, the instances' threads). Nothing is connected to:
// query counts need the live host. The instances are found without a
// second inspection: the gather before this one already read their
// configuration. It returns what could not be read.
func recordObservers(ctx context.Context, h *host.Host) []string {
	var notes []string
	if _, err := mem.Scan(ctx, h, mem.Options{}); err != nil {
		notes = append(notes, "memory accounting not recorded: "+err.Error())
	}
	s, err := contention.NewSampler(ctx, h, contention.Options{Engine: engine.Options{NoConnect: true, NoInspect: true}})
	if err != nil {
		return append(notes, "contention sample not recorded: "+err.Error())
	}
	s.Sample(ctx)
	s.Close()
	return notes
}

func runChecks(_ context.Context, env Env, args []string) int {
	fs := newFlagSet(env, "checks", "[flags]")
	format := fs.String("format", "text", "output format: text, json, markdown")
	if code, ok := parse(fs, args); !ok {
		return code
	}
	if err := renderCatalog(env.Stdout, *format); err != nil {
		fmt.Fprintln(env.Stderr, "dbhost checks:", err)
		return ExitError
	}
	return ExitOK
}

func runFix(ctx context.Context, env Env, args []string) int {
	fs := newFlagSet(env, "fix", "--out DIR | --plan | --apply | --rollback [CHANGE-ID] | --history | --recover [flags]")
	var src sourceFlags
	src.register(fs, true)
	out := fs.String("out", "", "directory to render the fix files into (render only; nothing on the host changes)")
	var only, skip listFlag
	fs.Var(&only, "only", "fix only these checks (IDs or domain prefixes)")
	fs.Var(&skip, "skip", "leave these checks out")
	var af applyFlags
	af.register(fs)
	if code, ok := parseFix(fs, args, &af); !ok {
		return code
	}
	if af.modes() > 0 || af.planOut != "" || af.planFile != "" {
		return runFixApply(ctx, env, &src, &af, only, skip, *out)
	}
	if *out == "" {
		fmt.Fprintln(env.Stderr, "dbhost fix: --out DIR is required (or --plan, --apply, --rollback, --history, --recover)")
		return ExitError
	}
	if err := validSelection(only, skip); err != nil {
		fmt.Fprintln(env.Stderr, "dbhost fix:", err)
		return ExitError
	}
	f, closeHost, ok := src.gather(ctx, env, "fix")
	if !ok {
		return ExitError
	}
	defer closeHost()
	// Each finding's own files are not needed: all fixes render together.
	findings := check.Run(f, check.Selector{Only: only, Skip: skip})
	var items []fix.Item
	for _, fd := range findings {
		if fd.Status == check.Fail && fd.Fix != nil {
			items = append(items, fix.Item{ID: fd.ID, Subject: fd.Subject, Fix: fd.Fix})
		}
	}
	fc := fix.ContextFrom(f)
	files := fix.Render(fc, items)
	written, kept, err := fix.WriteTree(*out, files, fix.Notes(items), fix.Sequence(fc, items))
	for _, k := range kept {
		fmt.Fprintln(env.Stderr, "dbhost fix:", k)
	}
	if err != nil {
		fmt.Fprintln(env.Stderr, "dbhost fix:", err)
		return ExitError
	}
	sort.Strings(written)
	for _, p := range written {
		fmt.Fprintln(env.Stdout, p)
	}
	fmt.Fprintf(env.Stderr, "dbhost fix: %d findings with fixes, %d files in %s\n", len(items), len(written), *out)
	return ExitOK
}

func runVersion(_ context.Context, env Env, _ []string) int {
	fmt.Fprintln(env.Stdout, "dbhost", host.Version)
	return ExitOK
}
