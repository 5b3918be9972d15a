package workload

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/dbhost/dbhost/internal/engine"

	"github.com/dbhost/dbhost/internal/textio"
)

// sysbench: --report-interval=1 lines give the per-second series,
// --histogram=on the latency distribution printed at the end (the
// percentiles), and the summary the totals. sysbench 1.0 has no
// --warmup-time; its --report-checkpoints would reset the counters in-run,
// but a separate warm-up process keeps pgbench and sysbench alike.

func sysbenchConn(t Target) []string {
	if t.Engine == engine.MySQL {
		a := []string{"--db-driver=mysql"}
		switch {
		case t.Socket():
			a = append(a, "--mysql-socket="+t.Host)
		case t.Host != "":
			a = append(a, "--mysql-host="+t.Host, "--mysql-port="+strconv.Itoa(t.PortOrDefault()))
		default:
			a = append(a, "--mysql-port="+strconv.Itoa(t.PortOrDefault()))
		}
		return append(a, "--mysql-user="+t.User, "--mysql-db="+t.Database())
	}
	a := []string{"--db-driver=pgsql"}
	if t.Host != "" {
		a = append(a, "--pgsql-host="+t.Host) // libpq takes a directory as a socket
	}
	return append(a, "--pgsql-port="+strconv.Itoa(t.PortOrDefault()), "--pgsql-user="+t.User, "--pgsql-db="+t.Database())
}

func sysbenchEnv(t Target, home string) []string {
	switch {
	case t.Password == "":
		return toolEnv(home)
	case t.Engine == engine.MySQL:
		return toolEnv(home, "MYSQL_PWD="+t.Password)
	default:
		return toolEnv(home, "PGPASSWORD="+t.Password)
	}
}

// sysbenchBase is the test (a path is used as is, a name is sysbench's own
// script) and the arguments every command of a test shares.
func sysbenchBase(t Target, s Spec, dir string, cred *syscall.Credential) ([]string, error) {
	test := s.Script
	if strings.HasPrefix(test, "/") {
		p, err := copyInto(dir, cred, test)
		if err != nil {
			return nil, fmt.Errorf("sysbench script: %w", err)
		}
		test = p
	}
	a := append([]string{test}, s.Args...)
	a = append(a, sysbenchConn(t)...)
	return append(a, "--tables="+strconv.Itoa(s.Tables), "--table-size="+strconv.Itoa(s.TableSize)), nil
}

func sysbenchPrepare(ctx context.Context, t Target, s Spec) error {
	bin, err := findBin(s.Bin, "sysbench")
	if err != nil {
		return err
	}
	dir, cred, home, err := workDir(t, s.WorkDir, "sysbench")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	base, err := sysbenchBase(t, s, dir, cred)
	if err != nil {
		return err
	}
	// Tables are created in parallel, one thread per table at most.
	threads := "--threads=" + strconv.Itoa(min(s.Tables, s.Clients))
	for _, cmd := range []string{"cleanup", "prepare"} {
		var fatal []string
		args := append(append([]string{}, base...), threads, cmd)
		tl := &tool{bin: bin, args: args, env: sysbenchEnv(t, home), dir: dir, cred: cred,
			line: func(_ int, l string) {
				if m, ok := strings.CutPrefix(l, "FATAL: "); ok {
					fatal = append(fatal, m)
				}
			}}
		tail, err := tl.run(ctx)
		if err == nil && len(fatal) > 0 {
			err = errors.New("FATAL")
		}
		if err != nil {
			return scrubErr(exitError("sysbench "+cmd, err, fatal, tail), t.Password)
		}
	}
	return nil
}

func sysbenchRun(ctx context.Context, t Target, s Spec) (*Result, error) {
	bin, err := findBin(s.Bin, "sysbench")
	if err != nil {
		return nil, err
	}
	dir, cred, home, err := workDir(t, s.WorkDir, "sysbench")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	base, err := sysbenchBase(t, s, dir, cred)
	if err != nil {
		return nil, err
	}
	base = append(base, "--threads="+strconv.Itoa(s.Clients), "--report-interval=1", "--histogram=on")
	env := sysbenchEnv(t, home)
	r := &Result{Sampling: 1}
	if s.Warmup > 0 {
		args := append(append([]string{}, base...), "--time="+strconv.Itoa(wholeSeconds(s.Warmup)), "run")
		w, _, err := sysbenchOnce(ctx, bin, args, env, dir, cred, s.Progress, true)
		if err != nil {
			return nil, fmt.Errorf("warm-up: %w", err)
		}
		r.WarmupOpsPerSec = w.tps
	}
	args := append(append([]string{}, base...), "--time="+strconv.Itoa(wholeSeconds(s.Duration)), "run")
	out, tail, err := sysbenchOnce(ctx, bin, args, env, dir, cred, s.Progress, false)
	if err != nil {
		return nil, err
	}
	r.Command = append([]string{bin}, args...)
	r.Output = tail
	r.PerSecond = out.seconds
	r.Ops = out.transactions
	r.Queries = out.queries
	r.Errors = out.ignored + out.reconnects
	r.OpsPerSec = out.tps
	r.Duration = time.Duration(out.totalTime * float64(time.Second))
	r.Latency = out.latency()
	return r, nil
}

func sysbenchOnce(ctx context.Context, bin string, args, env []string, dir string, cred *syscall.Credential, progress func(Second), warmup bool) (*sysbenchOut, string, error) {
	p := &sysbenchOut{progress: progress, warmup: warmup}
	tl := &tool{bin: bin, args: args, env: env, dir: dir, cred: cred, line: p.line,
		keep: func(l string) bool { return !histRowRE.MatchString(l) }}
	tail, err := runChecked(ctx, tl, p)
	if err != nil {
		return nil, tail, err
	}
	return p, tail, nil
}

// sysbenchOut accumulates what sysbench prints.
type sysbenchOut struct {
	seconds  []Second
	inHist   bool
	hist     Histogram
	histRows int

	summary                 bool // saw "transactions:"
	complete                bool // saw the summary's last line
	transactions, queries   int64
	ignored, reconnects     int64
	events                  int64
	tps                     float64
	totalTime               float64 // seconds
	avg, p95                float64 // ms
	fatal                   []string
	threads                 int
	progress                func(Second)
	warmup                  bool
	unparsedIntervals       int
	sawPercentile, sawHisto bool
}

var (
	intervalRE = textio.LazyRegexp(`^\[ *([0-9]+(?:\.[0-9]+)?)s \] thds: ([0-9]+) tps: ([0-9.]+) qps: ([0-9.]+) .*err/s: ([0-9.]+) reconn/s: ([0-9.]+)\s*$`)
	histRowRE  = textio.LazyRegexp(`^\s*([0-9]+\.[0-9]+) \|\**\s+([0-9]+)$`)
	perSecRE   = textio.LazyRegexp(`^([0-9]+)\s+\(([0-9.]+) per sec\.\)$`)
)

// sysbenchInterval parses a --report-interval line: the interval's end
// (seconds from the start), threads, transactions and errors per second
// (reconnects count as errors).
func sysbenchInterval(s string) (at float64, threads int, tps, errs float64, ok bool) {
	m := intervalRE.FindStringSubmatch(s)
	if m == nil {
		return 0, 0, 0, 0, false
	}
	var f [6]float64
	for i := range f {
		v, err := strconv.ParseFloat(m[i+1], 64)
		if err != nil || !finite(v) || v < 0 {
			return 0, 0, 0, 0, false
		}
		f[i] = v
	}
	if f[1] > 1e9 {
		return 0, 0, 0, 0, false
	}
	return f[0], int(f[1]), f[2], f[4] + f[5], true
}

func (p *sysbenchOut) line(_ int, s string) {
	if m, ok := strings.CutPrefix(s, "FATAL: "); ok {
		p.fatal = append(p.fatal, m)
		return
	}
	if strings.HasPrefix(s, "[") {
		at, threads, tps, errs, ok := sysbenchInterval(s)
		if !ok {
			if !strings.Contains(s, "Checkpoint report") {
				p.unparsedIntervals++
			}
			return
		}
		p.threads = max(p.threads, threads)
		sec := Second{At: time.Duration(at * float64(time.Second)), Ops: tps, Errors: errs, Warmup: p.warmup}
		p.seconds = append(p.seconds, sec)
		if p.progress != nil {
			p.progress(sec)
		}
		return
	}
	if strings.HasPrefix(s, "Latency histogram") {
		p.inHist, p.sawHisto = true, true
		return
	}
	if p.inHist {
		if m := histRowRE.FindStringSubmatch(s); m != nil {
			ms, err1 := strconv.ParseFloat(m[1], 64)
			n, err2 := strconv.ParseInt(m[2], 10, 64)
			if err1 == nil && err2 == nil && finite(ms) {
				p.hist.RecordN(msDuration(ms), n)
				p.histRows++
			}
			return
		}
		if strings.Contains(s, "distribution") {
			return // the header
		}
		p.inHist = false
	}
	key, val, ok := strings.Cut(strings.TrimSpace(s), ":")
	if !ok {
		return
	}
	val = strings.TrimSpace(val)
	switch key {
	case "SQL statistics":
		// A summary begins (a checkpoint's, or the final one).
		p.summary, p.complete = false, false
	case "execution time (avg/stddev)":
		p.complete = true
	case "transactions":
		if m := perSecRE.FindStringSubmatch(val); m != nil {
			p.transactions, _ = strconv.ParseInt(m[1], 10, 64)
			p.tps, _ = strconv.ParseFloat(m[2], 64)
			p.summary = true
		}
	case "queries":
		if m := perSecRE.FindStringSubmatch(val); m != nil {
			p.queries, _ = strconv.ParseInt(m[1], 10, 64)
		}
	case "ignored errors":
		p.ignored = leadingInt(val)
	case "reconnects":
		p.reconnects = leadingInt(val)
	case "total time":
		p.totalTime = leadingFloat(strings.TrimSuffix(val, "s"))
	case "total number of events":
		p.events = leadingInt(val)
	case "avg":
		p.avg = leadingFloat(val)
	default:
		if strings.HasSuffix(key, " percentile") {
			p.p95, p.sawPercentile = leadingFloat(val), true
		}
	}
}

func msDuration(ms float64) time.Duration { return time.Duration(ms * float64(time.Millisecond)) }

// check refuses a run that did not demonstrably work.
func (p *sysbenchOut) check(exit error, tail string) error {
	switch {
	case exit != nil:
		return exitError("sysbench", exit, p.fatal, tail)
	case len(p.fatal) > 0:
		return exitError("sysbench", nil, p.fatal, tail)
	case !p.summary || !p.complete || p.totalTime <= 0:
		return fmt.Errorf("sysbench printed no summary (output cut short?): %s", textio.LastLines(tail, 3))
	case p.transactions == 0:
		return errors.New("sysbench completed no transaction")
	case !(p.tps > 0):
		return errors.New("sysbench reported no transaction rate")
	case !p.sawHisto || p.histRows == 0:
		return errors.New("sysbench printed no latency histogram")
	case p.unparsedIntervals > 0:
		return fmt.Errorf("sysbench interval reports did not parse (%d)", p.unparsedIntervals)
	case len(p.seconds) == 0 && p.totalTime >= 3:
		return errors.New("sysbench printed no interval report")
	}
	// The histogram counts every event; events still running when time is
	// up may be missing from it.
	if d := p.hist.Count() - p.events; d > 0 || -d > int64(max(p.threads, 1)) {
		return fmt.Errorf("sysbench histogram holds %d events, its summary %d", p.hist.Count(), p.events)
	}
	p.lastInterval()
	return nil
}

// lastInterval adds the end of the run no interval report covers (a run of
// a second or two may end before its first report), from the summary.
func (p *sysbenchOut) lastInterval() {
	var done, errs, prev float64
	for _, s := range p.seconds {
		at := s.At.Seconds()
		done += s.Ops * (at - prev)
		errs += s.Errors * (at - prev)
		prev = at
	}
	span := p.totalTime - prev
	if span < 0.5 {
		return
	}
	sec := Second{At: time.Duration(p.totalTime * float64(time.Second)), Warmup: p.warmup,
		Ops:    max(float64(p.transactions)-done, 0) / span,
		Errors: max(float64(p.ignored+p.reconnects)-errs, 0) / span}
	p.seconds = append(p.seconds, sec)
	if p.progress != nil {
		p.progress(sec)
	}
}

// latency takes the distribution from the histogram (sysbench's buckets,
// within 2 %) and the exact mean from the summary.
func (p *sysbenchOut) latency() Latency {
	l := p.hist.Latency()
	if p.avg > 0 {
		l.Mean = msDuration(p.avg)
	}
	return l
}
