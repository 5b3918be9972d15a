package experiment

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/dbhost/dbhost/internal/change"
	"github.com/dbhost/dbhost/internal/host"
	"github.com/dbhost/dbhost/internal/journal"
	"github.com/dbhost/dbhost/internal/knob"
	"github.com/dbhost/dbhost/internal/pgcluster"
	"github.com/dbhost/dbhost/internal/results"
	"github.com/dbhost/dbhost/internal/stats"
	"github.com/dbhost/dbhost/internal/workload"
)

// DefaultJournal is the one journal every experiment writes its changes
// to; `dbhost experiment recover` restores from it.
const DefaultJournal = "/var/lib/dbhost/experiment.journal"

// Options say where a run stores and reports.
type Options struct {
	Host  *host.Host
	Store *results.Store
	// Journal is the journal file (DefaultJournal when empty).
	Journal string
	// Log receives notes, one line per trial and per look (standard error).
	Log io.Writer
	// Bar draws a progress bar with an ETA on Log (a terminal only).
	Bar bool
}

// ErrInterrupted is returned when a signal stopped the run; the host has
// been restored.
var ErrInterrupted = errors.New("interrupted")

// applier is what the run needs of knob.Applier.
type applier interface {
	Check(ctx context.Context, set []knob.Setting) error
	Current(ctx context.Context, names []string) (map[string]string, error)
	Apply(ctx context.Context, set []knob.Setting, force bool) (knob.Applied, error)
	Fingerprint(ctx context.Context, names []string) (knob.Fingerprint, error)
	CPUTimes() (knob.CPUTimes, error)
	Interval(fp knob.Fingerprint, start knob.CPUTimes) error
}

// run is one experiment in progress. Its state is grouped by concern so
// that each step reads what it needs: the plan and options, the database
// and its knobs, what undoes the changes, the protocol's progress, the
// measurements, and what is printed.
type run struct {
	plan  *Plan
	opts  Options
	facts Facts
	start time.Time

	db    dbTarget
	undo  recovery
	proto protocol
	meas  measurements
	out   output
}

// dbTarget is the database under test and how its knobs are set.
type dbTarget struct {
	srv *server
	ap  applier
	// names are the knobs some arm sets, in the order first named.
	names []string
}

// recovery is what puts the host back: the journal every change goes to
// first, and the journaled scratch directory of the tools.
type recovery struct {
	c    *change.Changer
	j    *journal.Journal // c's
	work string
}

// protocol is the state of the sequential design: the budget, the order
// of trials, the looks and where the blocks have got to.
type protocol struct {
	perArm      int
	jd          *judge
	sched       *Schedule
	block       int
	calibration *stats.Calibration
}

// measurements are the stored experiment and its trials so far.
type measurements struct {
	exp    *results.Experiment
	trials []results.Trial
	seq    int
	// first holds each arm's first complete fingerprint: later trials of
	// the arm that differ from it are excluded as drift.
	first map[int]knob.Fingerprint
	// restartAll: an arm needed a restart, so every trial restarts.
	restartAll bool
	// failures counts failed trials in a row.
	failures int
}

// output is what the run prints: the progress bar and the notes that
// also go into the summary.
type output struct {
	bar     *progress
	notes   []string
	planned int // trials the progress bar aims at
}

// Run carries out the plan and returns its summary. Whatever happens —
// success, an error, a signal, a panic — every change is undone from the
// journal before Run returns (after a second signal or when the orderly
// path hangs, the signal handler restores and exits with status 130).
// The summary is returned also with an error when the experiment was
// created in the store.
func Run(ctx context.Context, p *Plan, o Options) (sum *Summary, err error) {
	if err := p.Validate(); err != nil {
		return nil, err
	}
	if err := o.complete(); err != nil {
		return nil, err
	}
	unlock, err := lockRun(o.Journal)
	if err != nil {
		return nil, err
	}
	defer unlock()
	c, err := openJournal(ctx, o)
	if err != nil {
		return nil, err
	}
	j := c.Journal()
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	r := &run{plan: p, opts: o, start: time.Now(), undo: recovery{c: c, j: j},
		meas: measurements{first: map[int]knob.Fingerprint{}}, out: output{bar: newProgress(o.Log, o.Bar)}}
	restored := make(chan struct{})
	stopSignals := watchSignals(j, cancel, restored, r.out.bar)
	defer func() {
		if v := recover(); v != nil {
			err = fmt.Errorf("panic: %v", v)
			fmt.Fprintf(o.Log, "experiment: panic: %v\n%s\n", v, debug.Stack())
		}
		r.out.bar.clear()
		if ctx.Err() != nil && err != nil {
			err = fmt.Errorf("%w: %v", ErrInterrupted, err)
		}
		rerr := r.restore()
		close(restored)
		stopSignals()
		sum = r.finish(err, rerr)
		if rerr != nil {
			err = errors.Join(err, fmt.Errorf("restore: %w (run 'dbhost experiment recover'; the journal %s keeps what is left)", rerr, o.Journal))
		}
	}()
	return nil, r.execute(ctx)
}

// complete fills the defaults and refuses options a run cannot start with.
func (o *Options) complete() error {
	if o.Log == nil {
		o.Log = io.Discard
	}
	if o.Journal == "" {
		o.Journal = DefaultJournal
	}
	if o.Host == nil || o.Store == nil {
		return errors.New("experiment: no host or results store")
	}
	if os.Geteuid() != 0 {
		return errors.New("experiment: changes kernel and database settings and starts servers: run as root (sudo)")
	}
	return nil
}

// openJournal opens the run's journal. Changes an interrupted experiment
// left in it are restored first, and the experiments still marked
// running are marked interrupted.
func openJournal(ctx context.Context, o Options) (*change.Changer, error) {
	left, _ := pendingChanges(o.Journal)
	if len(left) > 0 {
		fmt.Fprintf(o.Log, "restoring %d change(s) an interrupted experiment left in %s first\n", len(left), o.Journal)
	}
	c, err := change.Open(o.Journal, changeConfig(o.Host)) // restores leftovers
	if err != nil {
		return nil, err
	}
	if len(left) > 0 {
		if ids, err := o.Store.MarkInterrupted(ctx, "killed; restored by the next experiment"); err == nil && len(ids) > 0 {
			fmt.Fprintf(o.Log, "marked interrupted: %s\n", strings.Join(ids, ", "))
		}
	}
	return c, nil
}

// restore undoes every journaled change, newest first. The throwaway
// cluster is removed first: its parameter changes need no undo then, and
// the huge pages it held are free before their pools shrink back.
func (r *run) restore() error {
	var errs []error
	if srv := r.db.srv; srv != nil && srv.cluster != nil {
		fmt.Fprintf(r.opts.Log, "removing the throwaway cluster %s\n", srv.cluster.Dir)
		errs = append(errs, srv.cluster.Remove(context.Background()))
	}
	if n := len(r.undo.j.Changes()); n > 0 {
		fmt.Fprintf(r.opts.Log, "restoring the host: undoing %d journaled change(s)\n", n)
		errs = append(errs, r.undo.j.Restore())
	}
	return errors.Join(errs...)
}

// note prints a line that the summary keeps too.
func (r *run) note(format string, args ...any) {
	s := fmt.Sprintf(format, args...)
	r.out.notes = append(r.out.notes, s)
	r.out.bar.println(s)
}

func (r *run) execute(ctx context.Context) error {
	if err := r.openTarget(ctx); err != nil {
		return err
	}
	if err := r.planTrials(ctx); err != nil {
		return err
	}
	if err := r.create(ctx); err != nil {
		return err
	}
	r.announce()
	if err := r.prepare(ctx); err != nil {
		return err
	}
	if r.plan.Protocol.Calibrate > 0 {
		if err := r.calibrate(ctx); err != nil {
			return err
		}
	}
	return r.loop(ctx)
}

// openTarget reads the host, makes the scratch directory, starts or
// reaches the database, completes the plan for it (preset, defaults) and
// sets up the knob applier.
func (r *run) openTarget(ctx context.Context) error {
	p := r.plan
	f, err := HostFacts(r.opts.Host)
	if err != nil {
		return err
	}
	if r.undo.work, err = newWorkDir(r.undo.c); err != nil {
		return fmt.Errorf("scratch directory: %w", err)
	}
	r.facts = f
	// Kept with an error too: restore removes a cluster made before it.
	if r.db.srv, err = r.startServer(ctx); err != nil {
		return err
	}
	p.Target.Where = r.db.srv.where
	r.out.bar.println("target: " + r.db.srv.where)
	if p.Preset != "" {
		notes, err := applyPreset(p, r.facts)
		if err != nil {
			return err
		}
		for _, n := range notes {
			r.note("%s", n)
		}
	}
	if w := p.FindingWorkload; w != "" {
		d, dataFraction := presetWorkloads[w](r.facts)
		applyWorkload(p, r.facts, d, dataFraction)
		r.note("finding %s: the %s preset's workload", strings.Join(p.Findings, ","), w)
	}
	p.withDefaults(r.facts)
	if p.Protocol.Restart && r.db.srv.kt.Restart == nil {
		return errors.New("--restart: dbhost may not restart this server (give --allow-restart; it needs a systemd service)")
	}
	r.db.ap = knob.NewApplier(r.opts.Host, r.undo.c, r.db.srv.kt)
	return nil
}

// startServer creates the throwaway cluster, or reaches the user's server.
func (r *run) startServer(ctx context.Context) (*server, error) {
	p := r.plan
	if !p.Target.Embedded() {
		return userServer(ctx, r.opts.Host, p, &r.facts)
	}
	r.out.bar.println("creating a throwaway PostgreSQL cluster ...")
	// Presets choose their client counts later; none goes beyond four
	// per core (at most 64).
	maxClients := max(min(64, max(4, 4*r.facts.CPUs)), defaultClients(r.facts.CPUs))
	if len(p.Workload.Clients) > 0 {
		maxClients = slices.Max(p.Workload.Clients)
	}
	return embeddedServer(ctx, r.undo.j, p, &r.facts, maxClients)
}

// planTrials gives every arm every knob, checks the arms before any
// trial, and sets the budget, the order of trials and the looks.
func (r *run) planTrials(ctx context.Context) error {
	p := r.plan
	if err := r.fillArms(ctx); err != nil {
		return err
	}
	for _, a := range p.Arms {
		if err := r.db.ap.Check(ctx, a.Set); err != nil {
			return fmt.Errorf("arm %s: %w", a.Name, err)
		}
	}
	if err := r.probeHugePages(ctx); err != nil {
		return err
	}
	perArm, err := p.budget(p.Protocol.Restart || r.needsRestart())
	if err != nil {
		return err
	}
	r.proto.perArm = perArm
	p.Protocol.MaxPerArm = perArm
	p.Protocol.MaxReplace = p.Protocol.replaceBudget(perArm)
	if need := firstDecisive(p, len(p.Arms)-1, len(p.Workload.Clients)); need > perArm {
		r.note("%d treatment arm(s) x %d client count(s) share alpha: no verdict is possible before %d trials per arm, and this budget gives %d",
			len(p.Arms)-1, len(p.Workload.Clients), need, perArm)
	} else if perArm < stats.WarnPerArm {
		r.note("budget of %d trials per arm: a verdict needs at least %d and carries a warning under %d", perArm, stats.MinPerArm, stats.WarnPerArm)
	}
	if p.Protocol.Seed == 0 {
		p.Protocol.Seed = newSeed()
	}
	r.proto.sched = NewSchedule(p.Protocol.Seed)
	if r.proto.jd, err = newJudge(p, perArm); err != nil {
		return err
	}
	r.out.planned = perArm*len(p.Arms)*len(p.Workload.Clients) + p.Protocol.Calibrate
	return nil
}

// announce prints the arms and the plan of the stored experiment.
func (r *run) announce() {
	p := r.plan
	for _, a := range p.Arms {
		r.out.bar.println(fmt.Sprintf("arm %-12s %s", a.Name, strings.Join(a.Knobs(), " ")))
	}
	replace := ""
	if n := p.Protocol.MaxReplace; n > 0 {
		replace = fmt.Sprintf(" (and up to %d more in place of excluded ones)", n)
	}
	r.out.bar.println(fmt.Sprintf("experiment %s: up to %d trials per arm%s%s, %s each (+%s warm-up), seed %d",
		r.meas.exp.ID, r.proto.perArm, sweepNote(p), replace, time.Duration(p.Workload.Duration), time.Duration(p.Workload.Warmup), p.Protocol.Seed))
}

func sweepNote(p *Plan) string {
	if len(p.Workload.Clients) > 1 {
		return " and client count (" + p.Workload.Clients.String() + ")"
	}
	return fmt.Sprintf(" at %d clients", p.Workload.Clients[0])
}

// needsRestart guesses, for the time budget only, whether trials will
// restart the server: huge pages and PostgreSQL page settings do.
func (r *run) needsRestart() bool {
	for _, n := range r.db.names {
		if strings.HasPrefix(n, "hugepages") || n == "pg.huge_pages" || n == "pg.shared_buffers" || n == "pg.huge_page_size" {
			return true
		}
	}
	return false
}

// fillArms gives every arm every knob: those it does not name keep their
// original value, so that the state of a trial never depends on the arm
// before it.
func (r *run) fillArms(ctx context.Context) error {
	seen := map[string]bool{}
	r.db.names = nil
	for _, a := range r.plan.Arms {
		for _, s := range a.Set {
			if !seen[s.Name] {
				seen[s.Name] = true
				r.db.names = append(r.db.names, s.Name)
			}
		}
	}
	cur, err := r.db.ap.Current(ctx, r.db.names)
	if err != nil {
		return fmt.Errorf("reading the knobs' current values: %w", err)
	}
	if err := r.checkDirtyPairs(ctx); err != nil {
		return err
	}
	for i := range r.plan.Arms {
		a := &r.plan.Arms[i]
		has := map[string]bool{}
		for _, s := range a.Set {
			has[s.Name] = true
		}
		for _, n := range r.db.names {
			if has[n] {
				continue
			}
			v, ok := cur[n]
			if !ok {
				return fmt.Errorf("arm %s: the current value of %s is unknown, so the arm cannot keep it: name it in every arm", a.Name, n)
			}
			a.Set = append(a.Set, knob.Setting{Name: n, Value: v})
			a.Filled = append(a.Filled, n)
		}
	}
	return nil
}

// create stores the experiment.
func (r *run) create(ctx context.Context) error {
	planJSON, err := json.Marshal(r.plan)
	if err != nil {
		return err
	}
	hostJSON, err := json.Marshal(r.facts)
	if err != nil {
		return err
	}
	r.meas.exp = &results.Experiment{Name: r.plan.Name, Created: r.start, Plan: planJSON, Host: hostJSON}
	for i, a := range r.plan.Arms {
		r.meas.exp.Arms = append(r.meas.exp.Arms, results.Arm{Index: i, Name: a.Name, Knobs: a.Knobs()})
	}
	return r.opts.Store.Create(ctx, r.meas.exp)
}

// prepare loads the benchmark data: on the throwaway cluster a data set of
// Target.DataFraction of shared_buffers.
func (r *run) prepare(ctx context.Context) error {
	p := r.plan
	if p.Workload.NoPrepare {
		return nil
	}
	c := r.db.srv.cluster
	if c != nil && p.Workload.Kind == string(workload.PGBench) && p.Workload.Scale == 0 {
		p.Workload.Scale = c.ScaleFor(p.Target.DataFraction)
		r.out.bar.println(fmt.Sprintf("loading the data set: pgbench scale %d (about %s, %.0f%% of shared_buffers) ...",
			p.Workload.Scale, Size(uint64(p.Workload.Scale)*pgcluster.BytesPerScale), 100*p.Target.DataFraction))
		t0 := time.Now()
		c.WorkDir = r.undo.work
		if err := c.Load(ctx, p.Workload.Scale); err != nil {
			return err
		}
		r.out.bar.println(fmt.Sprintf("loaded in %s", time.Since(t0).Round(time.Second)))
		return c.Prewarm(ctx)
	}
	spec := p.Workload.Spec(slices.Max(p.Workload.Clients))
	spec.WorkDir = r.undo.work
	what := string(spec.Kind)
	if spec.Kind == workload.PGBench {
		what = fmt.Sprintf("pgbench scale %d (about %s)", max(spec.Scale, 1), Size(uint64(max(spec.Scale, 1))*16<<20))
	}
	r.out.bar.println("loading the data set: " + what + " ...")
	t0 := time.Now()
	if err := workload.Prepare(ctx, r.db.srv.wt, spec); err != nil {
		return fmt.Errorf("loading the data set: %w", err)
	}
	r.out.bar.println(fmt.Sprintf("loaded in %s", time.Since(t0).Round(time.Second)))
	return nil
}

// calibrate runs A/A trials of the base arm and prints what this host's
// noise allows.
func (r *run) calibrate(ctx context.Context) error {
	p := r.plan
	c := slices.Max(p.Workload.Clients)
	var xs []float64
	t0 := time.Now()
	// A trial excluded for its own reasons (steal time) is replaced, up
	// to as many again: a busy hypervisor otherwise leaves too few to
	// estimate the noise.
	runs := 0
	var excluded []results.Trial
	for len(xs) < p.Protocol.Calibrate && runs < 2*p.Protocol.Calibrate {
		t, err := r.trial(ctx, 0, c, -1, true)
		if err != nil {
			return err
		}
		runs++
		if v := sample(p.Protocol.Metric, *t); t.Excluded == calibrationNote && v > 0 {
			xs = append(xs, v)
		} else {
			excluded = append(excluded, *t)
		}
	}
	if len(excluded) > 0 {
		r.note("A/A calibration: %s; %d run in their place, of up to %d", excludedCauses(excluded), runs-p.Protocol.Calibrate, p.Protocol.Calibrate)
	}
	wall := time.Since(t0) / time.Duration(runs)
	cal, err := stats.Calibrate(xs, wall, p.statsPlan(r.proto.perArm, len(p.Workload.Clients)))
	if err != nil {
		r.note("A/A calibration: %v", err)
		return nil
	}
	r.proto.calibration = &cal
	cells := float64(len(p.Arms)*len(p.Workload.Clients)) / 2
	r.note("A/A calibration (%d trials of %s at %d clients): noise ±%.1f%%; within %d trials per arm the smallest change found 8 times in 10 is %.1f%%",
		cal.Samples, p.Arms[0].Name, c, 100*cal.NoiseCV, cal.MaxPerArm, 100*cal.MDE)
	r.note("expected time: %s if the change is that size, %s if there is none, at most %s",
		scaleDur(cal.Expected, cells), scaleDur(cal.ExpectedNoChange, cells), scaleDur(cal.Max, cells))
	for _, w := range cal.Warnings {
		r.note("calibration: %s", w)
	}
	return nil
}

func scaleDur(d time.Duration, f float64) time.Duration {
	return time.Duration(float64(d) * f).Round(time.Second)
}

// calibrationNote marks A/A trials: stored, but not part of the comparison.
const calibrationNote = "A/A calibration: not part of the comparison"

// loop runs blocks until every comparison has a verdict or the budget is
// spent.
func (r *run) loop(ctx context.Context) error {
	return runBlocks(r.proto.jd, r.proto.sched, &r.proto.block, func(arm, clients, block int) error {
		_, err := r.trial(ctx, arm, clients, block, false)
		return err
	}, func() []results.Trial { return r.meas.trials }, r.noteJudgeError, r.printLook)
}

// noteJudgeError notes, once, why a client count's look could not judge.
func (r *run) noteJudgeError(c int) {
	if msg := r.proto.jd.errs[c]; msg != "" {
		r.note("%d clients: %s", c, msg)
		delete(r.proto.jd.errs, c)
	}
}

// printLook prints the decisions of a look at client count c.
func (r *run) printLook(c int) {
	p := r.plan
	for i, d := range r.proto.jd.decisions[c] {
		prefix := p.Arms[i+1].Name + " vs " + p.Arms[0].Name
		if len(p.Workload.Clients) > 1 {
			prefix += fmt.Sprintf(" at %d clients", c)
		}
		r.out.bar.println(fmt.Sprintf("look %d: %s: %s", d.Look, prefix, d.Reason))
	}
	r.updatePlanned()
}

// runBlocks is the protocol: rounds over the client counts still running
// (in a random order), one block of the active arms per client count, a
// look after each block. trial runs and stores one trial; trials returns
// all stored so far; after is called after every block, looked after
// every look.
func runBlocks(jd *judge, sched *Schedule, block *int, trial func(arm, clients, block int) error,
	trials func() []results.Trial, after, looked func(clients int)) error {
	for !jd.done() {
		for _, c := range sched.Round(jd.running()) {
			order := sched.Block(jd.activeArms(c))
			b := *block
			*block++
			for _, arm := range order {
				if err := trial(arm, c, b); err != nil {
					return err
				}
			}
			ok, err := jd.endBlock(c, trials())
			if err != nil {
				return err
			}
			after(c)
			if ok {
				looked(c)
			}
		}
	}
	return nil
}

// updatePlanned lowers the trial count the progress bar aims at when arms
// or client counts have stopped early.
func (r *run) updatePlanned() {
	left := 0
	for _, c := range r.proto.jd.running() {
		blocks := r.proto.perArm/2 - r.proto.jd.blocks[c]
		left += 2 * blocks * len(r.proto.jd.activeArms(c))
	}
	r.out.planned = r.meas.seq + left
}

// finish stores the end state and builds the summary.
func (r *run) finish(runErr, restoreErr error) *Summary {
	if r.meas.exp == nil {
		return nil
	}
	status := results.Done
	note := ""
	switch {
	case errors.Is(runErr, ErrInterrupted) || errors.Is(runErr, context.Canceled):
		status, note = results.Interrupted, "stopped by a signal; host restored"
	case runErr != nil:
		status, note = results.Failed, runErr.Error()
	}
	if restoreErr != nil {
		note = strings.TrimPrefix(note+"; restore failed: "+restoreErr.Error(), "; ")
	}
	sum := buildSummary(r.plan, r.meas.exp, r.meas.trials, r.proto.jd, r.proto.calibration)
	sum.Status = status
	sum.Notes = append(sum.Notes, r.out.notes...)
	sum.Wall = Duration(time.Since(r.start).Round(time.Second))
	sum.Restored = restoreErr == nil
	if runErr != nil {
		sum.Error = runErr.Error()
	}
	b, _ := json.Marshal(sum)
	if err := r.opts.Store.Finish(context.Background(), r.meas.exp.ID, status, b, note); err != nil {
		fmt.Fprintf(r.opts.Log, "experiment: storing the result: %v\n", err)
	}
	return sum
}

// watchSignals turns the first SIGINT, SIGTERM or SIGHUP into a
// cancellation: the trial stops, the deferred restore runs and the run
// returns. A second signal, or an orderly path that has not restored
// within two minutes, restores from here and exits with status 130.
func watchSignals(j *journal.Journal, cancel context.CancelFunc, restored <-chan struct{}, bar *progress) (stop func()) {
	ch := make(chan os.Signal, 2)
	signal.Notify(ch, os.Interrupt, syscall.SIGTERM, syscall.SIGHUP)
	quit := make(chan struct{})
	go func() {
		select {
		case s := <-ch:
			bar.println(fmt.Sprintf("%v: stopping and restoring the host (signal again to restore at once)", s))
			cancel()
			select {
			case <-restored:
				return
			case <-quit:
				return
			case <-ch:
			case <-time.After(2 * time.Minute):
			}
			bar.println("restoring the host now")
			if err := j.Restore(); err != nil {
				bar.println("restore failed: " + err.Error() + " (run 'dbhost experiment recover')")
			}
			os.Exit(130)
		case <-quit:
		}
	}()
	return func() {
		signal.Stop(ch)
		close(quit)
	}
}

// lockRun makes sure one experiment at a time uses the journal: a second
// one would restore the first one's changes as leftovers.
func lockRun(journalFile string) (func(), error) {
	if err := os.MkdirAll(filepath.Dir(journalFile), 0o700); err != nil {
		return nil, err
	}
	f, err := os.OpenFile(journalFile+".lock", os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return nil, err
	}
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
		f.Close()
		if errors.Is(err, unix.EWOULDBLOCK) {
			return nil, fmt.Errorf("another experiment is running (it holds %s.lock); wait for it or stop it with Ctrl-C", journalFile)
		}
		return nil, err
	}
	return func() { unix.Flock(int(f.Fd()), unix.LOCK_UN); f.Close() }, nil
}

// pendingChanges reads what a journal file still holds.
func pendingChanges(file string) ([]journal.Change, error) {
	cs, err := journal.Pending(file)
	if err != nil {
		return nil, fmt.Errorf("journal %s: %w", file, err)
	}
	return cs, nil
}

// firstDecisive is the fewest trials per arm at which the most stringent
// test of the experiment (alpha shared by Holm over the treatments and
// over the client counts) can reject at all: an exact rank test with n
// trials per arm cannot reach p-values below 2/C(2n, n).
func firstDecisive(p *Plan, treatments, clients int) int {
	alpha := p.Protocol.Alpha / float64(treatments*clients)
	for n := stats.MinPerArm; n <= stats.MaxExactPerArm; n += 2 {
		sp := stats.Plan{Alpha: alpha, MaxPerArm: n, FirstLook: n}
		looks, err := sp.Schedule()
		if err == nil && len(looks) > 0 && looks[len(looks)-1].Alpha > 0 {
			return n
		}
	}
	return stats.MaxExactPerArm
}

// probeHugePages reserves, before the first trial, the largest explicit
// huge page pool each size is asked for, and gives it back. The kernel
// reserves huge pages at run time only as far as it finds physically
// contiguous memory: 1 GB pages in particular often fall short on a host
// that has been up for a while. An arm that cannot have its pages would
// stop the experiment in the middle; a preset's arm is left out instead,
// with a note, and a user's arm is refused now, before any trial.
func (r *run) probeHugePages(ctx context.Context) error {
	want := wantedHugePages(r.plan.Arms)
	if len(want) == 0 {
		return nil
	}
	names := make([]string, 0, len(want))
	for n := range want {
		names = append(names, n)
	}
	slices.Sort(names)
	cur, err := r.db.ap.Current(ctx, names)
	if err != nil {
		return err
	}
	for _, name := range names {
		if v, err := strconv.Atoi(cur[name]); err == nil && v >= want[name] {
			continue
		}
		_, err := r.db.ap.Apply(ctx, []knob.Setting{{Name: name, Value: strconv.Itoa(want[name])}}, false)
		if _, berr := r.db.ap.Apply(ctx, []knob.Setting{{Name: name, Value: cur[name]}}, false); berr != nil {
			return fmt.Errorf("giving back the %s pages reserved to try: %w", name, berr)
		}
		if err == nil {
			continue
		}
		if r.plan.Preset == "" {
			return fmt.Errorf("%s=%d cannot be reserved on this host now (%v); reserve them at boot (kernel command line) or ask for fewer", name, want[name], err)
		}
		if err := r.leaveOutHugePageArms(name, want[name], err); err != nil {
			return err
		}
	}
	return nil
}

// wantedHugePages is the largest pool of each huge page size an arm asks
// for.
func wantedHugePages(arms []Arm) map[string]int {
	want := map[string]int{}
	for _, a := range arms {
		for _, s := range a.Set {
			if n, err := strconv.Atoi(s.Value); err == nil && strings.HasPrefix(s.Name, "hugepages.") && n > want[s.Name] {
				want[s.Name] = n
			}
		}
	}
	return want
}

// leaveOutHugePageArms drops, with a note, the preset's arms that ask for
// pages of the pool name that could not be reserved (why); an experiment
// needs two arms left.
func (r *run) leaveOutHugePageArms(name string, n int, why error) error {
	var kept []Arm
	for _, a := range r.plan.Arms {
		if slices.ContainsFunc(a.Set, func(s knob.Setting) bool {
			n, _ := strconv.Atoi(s.Value)
			return s.Name == name && n > 0 && !slices.Contains(a.Filled, name)
		}) {
			r.note("arm %s left out: its huge pages cannot be reserved at run time on this host now: %v", a.Name, why)
			continue
		}
		kept = append(kept, a)
	}
	if len(kept) < 2 {
		return fmt.Errorf("%s=%d cannot be reserved on this host now: %w", name, n, why)
	}
	r.plan.Arms = kept
	return nil
}

// dirtyPairs are the kernel's dirty page thresholds: each is kept either
// as a ratio or in bytes, and writing one form clears the other.
var dirtyPairs = [][2]string{{"vm.dirty_ratio", "vm.dirty_bytes"}, {"vm.dirty_background_ratio", "vm.dirty_background_bytes"}}

// checkDirtyPairs refuses arms whose dirty thresholds could not be put
// back: writing a ratio on a host that limits in bytes loses its byte
// limit (the journal holds the ratio's old value, 0), and a byte limit of
// 0 cannot be written back at all (the kernel refuses it).
func (r *run) checkDirtyPairs(ctx context.Context) error {
	for _, pair := range dirtyPairs {
		if !slices.Contains(r.db.names, pair[0]) && !slices.Contains(r.db.names, pair[1]) {
			continue
		}
		cur, err := r.db.ap.Current(ctx, pair[:])
		if err != nil {
			return err
		}
		usesBytes := cur[pair[1]] != "" && cur[pair[1]] != "0"
		switch {
		case slices.Contains(r.db.names, pair[1]) && !usesBytes:
			return fmt.Errorf("%s: this host sets %s instead (%s is 0, and the kernel refuses to write 0 back), so the change could not be undone: compare %s values", pair[1], pair[0], pair[1], pair[0])
		case slices.Contains(r.db.names, pair[0]) && usesBytes:
			return fmt.Errorf("%s: this host sets %s=%s; writing the ratio would clear it for good: compare %s values", pair[0], pair[1], cur[pair[1]], pair[1])
		}
	}
	return nil
}
