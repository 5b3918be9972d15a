package workload

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/dbhost/dbhost/internal/textio"
)

// pgbench: progress lines (--progress=1) give the per-second series, the
// per-transaction log (-l into a private directory) gives the latencies the
// percentiles come from, and the summary on stdout gives the totals the log
// is checked against.

// maxLogged is how many transactions pgbench logs at most when the
// sampling rate is automatic (about 35 MB of log).
const maxLogged = 1_000_000

func pgbenchConn(t Target) []string {
	var a []string
	if t.Host != "" {
		a = append(a, "-h", t.Host)
	}
	return append(a, "-p", strconv.Itoa(t.PortOrDefault()), "-U", t.User)
}

func pgbenchEnv(t Target, home string) []string {
	if t.Password != "" {
		return toolEnv(home, "PGPASSWORD="+t.Password)
	}
	return toolEnv(home)
}

func pgbenchPrepare(ctx context.Context, t Target, s Spec) error {
	bin, err := findBin(s.Bin, "pgbench")
	if err != nil {
		return err
	}
	dir, cred, home, err := workDir(t, s.WorkDir, "pgbench")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	args := append([]string{"-i", "-q", "-s", strconv.Itoa(s.Scale)}, pgbenchConn(t)...)
	args = append(args, t.Database())
	var errs []string
	tl := &tool{bin: bin, args: args, env: pgbenchEnv(t, home), dir: dir, cred: cred,
		line: func(_ int, l string) {
			if m, ok := strings.CutPrefix(l, "pgbench: error: "); ok {
				errs = append(errs, m)
			}
		}}
	tail, err := tl.run(ctx)
	if err != nil {
		return scrubErr(exitError("pgbench -i", err, errs, tail), t.Password)
	}
	return nil
}

func pgbenchRun(ctx context.Context, t Target, s Spec) (*Result, error) {
	bin, err := findBin(s.Bin, "pgbench")
	if err != nil {
		return nil, err
	}
	dir, cred, home, err := workDir(t, s.WorkDir, "pgbench")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	var script []string
	switch {
	case s.Script != "":
		p, err := copyInto(dir, cred, s.Script)
		if err != nil {
			return nil, fmt.Errorf("pgbench script: %w", err)
		}
		// Custom scripts usually do not use pgbench's tables: no vacuum
		// of them; :scale comes from the spec.
		script = []string{"-n", "-f", p, "-s", strconv.Itoa(s.Scale)}
	case s.SelectOnly:
		script = []string{"-S"}
	}
	base := append(append([]string{}, s.Args...), pgbenchConn(t)...)
	base = append(base, "-c", strconv.Itoa(s.Clients), "-j", strconv.Itoa(s.Jobs), "--progress=1")
	env := pgbenchEnv(t, home)

	r := &Result{}
	vacuumed := false
	if s.Warmup > 0 {
		args := append(append([]string{}, base...), "-T", strconv.Itoa(wholeSeconds(s.Warmup)))
		args = append(append(args, script...), t.Database())
		w, _, err := pgbenchOnce(ctx, bin, args, env, dir, cred, wholeSeconds(s.Warmup), s.Progress, true)
		if err != nil {
			return nil, fmt.Errorf("warm-up: %w", err)
		}
		r.WarmupOpsPerSec = w.tps
		vacuumed = true
	}

	r.Sampling = 1
	switch {
	case s.LogSampling > 0:
		r.Sampling = s.LogSampling
	case r.WarmupOpsPerSec*s.Duration.Seconds() > maxLogged:
		r.Sampling = maxLogged / (r.WarmupOpsPerSec * s.Duration.Seconds())
	}
	logPrefix := filepath.Join(dir, "tx")
	args := append(append([]string{}, base...), "-T", strconv.Itoa(wholeSeconds(s.Duration)), "-l", "--log-prefix="+logPrefix)
	if r.Sampling < 1 {
		args = append(args, "--sampling-rate="+strconv.FormatFloat(r.Sampling, 'g', 6, 64))
	}
	if vacuumed && s.Script == "" {
		args = append(args, "-n") // the warm-up vacuumed
	}
	args = append(append(args, script...), t.Database())
	out, tail, err := pgbenchOnce(ctx, bin, args, env, dir, cred, wholeSeconds(s.Duration), s.Progress, false)
	if err != nil {
		return nil, err
	}
	r.Command = append([]string{bin}, args...)
	r.Output = tail
	r.PerSecond = out.seconds
	r.Ops = out.processed
	r.Errors = out.failed + out.skipped
	r.OpsPerSec = out.tps
	r.Duration = time.Duration(float64(out.processed) / out.tps * float64(time.Second))

	var h Histogram
	ok, failed, err := readPGBenchLogs(logPrefix, &h)
	if err != nil {
		return nil, err
	}
	if r.Sampling == 1 && (ok != out.processed || failed != out.failed+out.skipped) {
		return nil, fmt.Errorf("pgbench log has %d transactions and %d failures, its summary %d and %d", ok, failed, out.processed, out.failed+out.skipped)
	}
	r.Latency = h.Latency()
	return r, nil
}

// pgbenchOnce runs pgbench and validates its output.
func pgbenchOnce(ctx context.Context, bin string, args, env []string, dir string, cred *syscall.Credential, secs int, progress func(Second), warmup bool) (*pgbenchOut, string, error) {
	p := &pgbenchOut{progress: progress, warmup: warmup, duration: float64(secs)}
	tl := &tool{bin: bin, args: args, env: env, dir: dir, cred: cred, line: p.line}
	tail, err := runChecked(ctx, tl, p)
	if err != nil {
		return nil, tail, err
	}
	return p, tail, nil
}

// pgbenchOut accumulates what pgbench prints.
type pgbenchOut struct {
	seconds []Second
	lastAt  float64

	summary            bool // saw "number of transactions actually processed"
	processed          int64
	failed, skipped    int64
	tps                float64
	aborted            bool
	errors             []string
	progress           func(Second)
	warmup             bool
	unparsedProgresses int
	duration           float64 // -T, seconds (0: unknown)
}

var (
	progressRE = textio.LazyRegexp(`^progress: ([0-9.]+) s, ([0-9.]+|-?nan|-?inf) tps, lat ([^ ]+) ms stddev ([^ ,]+)(.*)$`)
	failedRE   = textio.LazyRegexp(`, ([0-9]+) failed`)
	skippedRE  = textio.LazyRegexp(`, ([0-9]+) skipped`)
)

// pgbenchProgress parses a --progress line: the interval's end (seconds
// from the start), the successful transactions per second, and the failed
// and skipped transactions counted in the interval.
func pgbenchProgress(s string) (at, tps float64, failed, skipped int64, ok bool) {
	m := progressRE.FindStringSubmatch(s)
	if m == nil {
		return 0, 0, 0, 0, false
	}
	at, err1 := strconv.ParseFloat(m[1], 64)
	tps, err2 := strconv.ParseFloat(m[2], 64)
	if err1 != nil || err2 != nil || !finite(at) || !finite(tps) || at < 0 || tps < 0 {
		return 0, 0, 0, 0, false
	}
	if f := failedRE.FindStringSubmatch(m[5]); f != nil {
		if failed, err1 = strconv.ParseInt(f[1], 10, 64); err1 != nil {
			return 0, 0, 0, 0, false
		}
	}
	if k := skippedRE.FindStringSubmatch(m[5]); k != nil {
		if skipped, err1 = strconv.ParseInt(k[1], 10, 64); err1 != nil {
			return 0, 0, 0, 0, false
		}
	}
	return at, tps, failed, skipped, true
}

func finite(f float64) bool { return !math.IsNaN(f) && !math.IsInf(f, 0) }

func (p *pgbenchOut) line(stream int, s string) {
	if stream == stderr {
		// pgbench's threads write to an unbuffered stderr in pieces (a
		// progress report is several writes, and so is a logged error):
		// with -j above 1 a client's error can land inside a progress
		// line. Each part is read as a line of its own.
		if len(s) > 1 {
			if i := strings.Index(s[1:], "pgbench: "); i >= 0 {
				p.line(stream, s[:i+1])
				p.line(stream, s[i+1:])
				return
			}
		}
		if strings.HasPrefix(s, "progress: ") {
			at, tps, failed, skipped, ok := pgbenchProgress(s)
			if !ok {
				p.unparsedProgresses++
				return
			}
			span := at - p.lastAt
			if span <= 0 {
				span = 1
			}
			p.lastAt = at
			sec := Second{At: time.Duration(at * float64(time.Second)), Ops: tps,
				Errors: float64(failed+skipped) / span, Warmup: p.warmup}
			p.seconds = append(p.seconds, sec)
			if p.progress != nil {
				p.progress(sec)
			}
			return
		}
		msg, isErr := strings.CutPrefix(s, "pgbench: error: ")
		if !isErr {
			msg, isErr = strings.CutPrefix(s, "pgbench: fatal: ") // PostgreSQL < 15
		}
		if !isErr && strings.HasPrefix(s, "client ") && strings.Contains(s, " aborted") {
			msg, isErr = s, true // PostgreSQL < 13 printed aborts without a prefix
		}
		if !isErr && (strings.Contains(s, "ERROR:  ") || strings.Contains(s, "FATAL:  ")) {
			// A server's message whose "pgbench: error: " prefix another
			// thread's write took (the prefix, the level and the message
			// are separate writes): still the reason, whatever precedes it.
			msg, isErr = s, true
		}
		if isErr && strings.TrimSpace(msg) == "" {
			return // a prefix whose message went to the next line
		}
		if isErr {
			if strings.Contains(msg, "aborted") {
				p.aborted = true
			}
			p.errors = append(p.errors, msg)
		}
		return
	}
	key, val, ok := strings.Cut(s, ": ")
	if !ok {
		// "tps = N (without initial connection time)" (PostgreSQL 14+),
		// else the "excluding connections establishing" figure. The closing
		// parenthesis proves the number was not cut short.
		if k, v, ok := strings.Cut(s, " = "); ok && k == "tps" && strings.HasSuffix(v, ")") {
			if strings.Contains(v, "without initial") || strings.Contains(v, "excluding") || p.tps == 0 {
				p.tps = leadingFloat(v)
			}
		}
		return
	}
	switch key {
	case "number of transactions actually processed":
		// "N" or "N/M" when a transaction count was asked for.
		n, _, _ := strings.Cut(val, "/")
		if v, err := strconv.ParseInt(strings.TrimSpace(n), 10, 64); err == nil {
			p.processed, p.summary = v, true
		}
	case "number of failed transactions":
		p.failed = leadingInt(val)
	case "number of transactions skipped":
		p.skipped = leadingInt(val)
	}
}

func leadingInt(s string) int64 {
	f := strings.Fields(s)
	if len(f) == 0 {
		return 0
	}
	v, _ := strconv.ParseInt(f[0], 10, 64)
	return v
}

func leadingFloat(s string) float64 {
	f := strings.Fields(s)
	if len(f) == 0 {
		return 0
	}
	v, err := strconv.ParseFloat(f[0], 64)
	if err != nil || !finite(v) {
		return 0
	}
	return v
}

// check refuses a run that did not demonstrably work.
func (p *pgbenchOut) check(exit error, tail string) error {
	switch {
	case exit != nil:
		return exitError("pgbench", exit, p.errors, tail)
	case p.aborted:
		return exitError("pgbench", nil, p.errors, tail)
	case !p.summary:
		return fmt.Errorf("pgbench printed no summary (output cut short?): %s", textio.LastLines(tail, 3))
	case p.processed == 0:
		return errors.New("pgbench processed no transaction")
	case !(p.tps > 0):
		return errors.New("pgbench reported no tps")
	case p.unparsedProgresses > 0:
		return fmt.Errorf("pgbench progress lines did not parse (%d)", p.unparsedProgresses)
	case len(p.seconds) == 0 && (p.duration == 0 || p.duration >= 3):
		return errors.New("pgbench printed no progress")
	}
	p.lastInterval()
	return nil
}

// lastInterval adds the end of the run pgbench does not report progress
// for (its timer often misses the last second), from the summary: the
// transactions the progress lines do not account for.
func (p *pgbenchOut) lastInterval() {
	span := p.duration - p.lastAt
	if span < 0.5 {
		return
	}
	var done, failed, prev float64
	for _, s := range p.seconds {
		at := s.At.Seconds()
		done += s.Ops * (at - prev)
		failed += s.Errors * (at - prev)
		prev = at
	}
	sec := Second{At: time.Duration(p.duration * float64(time.Second)), Warmup: p.warmup,
		Ops:    max(float64(p.processed)-done, 0) / span,
		Errors: max(float64(p.failed+p.skipped)-failed, 0) / span}
	p.seconds = append(p.seconds, sec)
	p.lastAt = p.duration
	if p.progress != nil {
		p.progress(sec)
	}
}

// readPGBenchLogs reads the per-transaction logs pgbench wrote with
// --log-prefix=prefix (one file per thread: prefix.PID, prefix.PID.N)
// into h and counts the successful and the failed or skipped transactions.
func readPGBenchLogs(prefix string, h *Histogram) (ok, failed int64, err error) {
	files, _ := filepath.Glob(prefix + ".*")
	if len(files) == 0 {
		return 0, 0, errors.New("pgbench wrote no transaction log")
	}
	for _, name := range files {
		f, err := os.Open(name)
		if err != nil {
			return 0, 0, err
		}
		o, fl, err := parsePGBenchLog(bufio.NewReader(f), h)
		f.Close()
		if err != nil {
			return 0, 0, fmt.Errorf("pgbench log %s: %w", filepath.Base(name), err)
		}
		ok += o
		failed += fl
	}
	return ok, failed, nil
}

// parsePGBenchLog reads one per-transaction log: lines of
// "client_id transaction_no time script_no time_epoch time_us [lag] [retries]"
// where time is the latency in microseconds, or "failed", "serialization",
// "deadlock", "other" (PostgreSQL 15+) or "skipped" for a transaction that
// did not succeed.
func parsePGBenchLog(r *bufio.Reader, h *Histogram) (ok, failed int64, err error) {
	sc := bufio.NewScanner(r)
	n := 0
	for sc.Scan() {
		n++
		f := strings.Fields(sc.Text())
		if len(f) == 0 {
			continue
		}
		if len(f) < 6 {
			return 0, 0, fmt.Errorf("line %d: %d fields, want at least 6", n, len(f))
		}
		switch f[2] {
		case "failed", "serialization", "deadlock", "other", "skipped":
			failed++
			continue
		}
		us, perr := strconv.ParseInt(f[2], 10, 64)
		if perr != nil || us < 0 {
			return 0, 0, fmt.Errorf("line %d: latency %q", n, f[2])
		}
		h.Record(time.Duration(us) * time.Microsecond)
		ok++
	}
	return ok, failed, sc.Err()
}
