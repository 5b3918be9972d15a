package workload

import (
	"bufio"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// The fixtures under testdata/ are real outputs of this host's pgbench 15
// and sysbench 1.0.20 (testdata/record.sh): NAME.out, NAME.err, NAME.rc
// (exit status) and, for pgbench, NAME.log (per-transaction log).

type recorded struct {
	out, err string
	rc       int
	log      string
}

func load(t testing.TB, tool, name string) recorded {
	t.Helper()
	read := func(ext string) string {
		b, err := os.ReadFile(filepath.Join("testdata", tool, name+ext))
		if err != nil && !os.IsNotExist(err) {
			t.Fatal(err)
		}
		return string(b)
	}
	rc, err := strconv.Atoi(strings.TrimSpace(read(".rc")))
	if err != nil {
		t.Fatalf("%s/%s.rc: %v", tool, name, err)
	}
	return recorded{out: read(".out"), err: read(".err"), rc: rc, log: read(".log")}
}

// exitOf stands for the exit status a run would have returned.
func exitOf(rc int) error {
	if rc == 0 {
		return nil
	}
	return fmt.Errorf("exit status %d", rc)
}

func feed(line func(int, string), stream int, text string) {
	sc := bufio.NewScanner(strings.NewReader(text))
	for sc.Scan() {
		line(stream, sc.Text())
	}
}

func parsePGBench(r recorded, rc int) (*pgbenchOut, error) {
	p := &pgbenchOut{}
	feed(p.line, stderr, r.err)
	feed(p.line, stdout, r.out)
	return p, p.check(exitOf(rc), r.err+r.out)
}

// summaryValue reads "key: value" or "key = value" from a tool's summary
// independently of the parser under test.
func summaryValue(t *testing.T, text, key string) float64 {
	t.Helper()
	for _, l := range strings.Split(text, "\n") {
		l = strings.TrimSpace(l)
		for _, sep := range []string{": ", " = "} {
			if rest, ok := strings.CutPrefix(l, key+sep); ok {
				v, err := strconv.ParseFloat(strings.Fields(rest)[0], 64)
				if err != nil {
					t.Fatalf("%q: %v", l, err)
				}
				return v
			}
		}
	}
	t.Fatalf("no %q in summary", key)
	return 0
}

func TestPGBenchRecordedRuns(t *testing.T) {
	for _, name := range []string{"tpcb", "select", "failed"} {
		t.Run(name, func(t *testing.T) {
			r := load(t, "pgbench", name)
			p, err := parsePGBench(r, r.rc)
			if err != nil {
				t.Fatalf("good run refused: %v", err)
			}
			if want := int64(summaryValue(t, r.out, "number of transactions actually processed")); p.processed != want {
				t.Errorf("processed %d, summary says %d", p.processed, want)
			}
			if want := summaryValue(t, r.out, "tps"); p.tps != want {
				t.Errorf("tps %g, summary says %g", p.tps, want)
			}
			if want := int64(summaryValue(t, r.out, "number of failed transactions")); p.failed != want {
				t.Errorf("failed %d, summary says %d", p.failed, want)
			}
			if n := strings.Count(r.err, "progress: "); len(p.seconds) != n || n == 0 {
				t.Errorf("%d seconds parsed from %d progress lines", len(p.seconds), n)
			}
			// Given the run's duration, the seconds pgbench did not report
			// are derived from the summary, and the series adds up to it.
			d := summaryValue(t, r.out, "duration")
			pd := &pgbenchOut{duration: d}
			feed(pd.line, stderr, r.err)
			feed(pd.line, stdout, r.out)
			if err := pd.check(nil, ""); err != nil {
				t.Fatal(err)
			}
			var ops, errs, prev float64
			for _, s := range pd.seconds {
				ops += s.Ops * (s.At.Seconds() - prev)
				errs += s.Errors * (s.At.Seconds() - prev)
				prev = s.At.Seconds()
			}
			// (Reported rates are rounded to 0.1/s.)
			if prev != d || math.Abs(ops-float64(p.processed)) > float64(p.processed)/100+1 || math.Abs(errs-float64(p.failed)) > float64(p.failed)/100+1 {
				t.Errorf("series %+v covers %gs of %gs, %g of %d transactions, %g of %d failures", pd.seconds, prev, d, ops, p.processed, errs, p.failed)
			}
			for _, s := range p.seconds {
				if s.Ops <= 0 || s.At <= 0 || s.Errors < 0 {
					t.Errorf("implausible second %+v", s)
				}
			}
			if r.log == "" {
				return
			}
			var h Histogram
			ok, failed, err := parsePGBenchLog(bufio.NewReader(strings.NewReader(r.log)), &h)
			if err != nil {
				t.Fatal(err)
			}
			if ok != p.processed || failed != p.failed {
				t.Errorf("log: %d ok %d failed; summary %d, %d", ok, failed, p.processed, p.failed)
			}
			// The log's mean must match pgbench's own "latency average"
			// (printed to the microsecond).
			l := h.Latency()
			avg := summaryValue(t, r.out, "latency average")
			if got := float64(l.Mean) / 1e6; math.Abs(got-avg) > 0.0015 {
				t.Errorf("log mean %.4f ms, pgbench says %.3f ms", got, avg)
			}
			if !(l.Min <= l.P50 && l.P50 <= l.P95 && l.P95 <= l.P99 && l.P99 <= l.Max) {
				t.Errorf("percentiles out of order: %+v", l)
			}
		})
	}
}

func TestPGBenchFailedRunsRefused(t *testing.T) {
	for name, want := range map[string]string{
		"syntax":  `syntax error at or near "SELEC"`,
		"missing": `relation "nosuch_table" does not exist`,
		"parse":   `syntax error in command "set"`,
		"port":    "Connection refused",
		"partial": "division by zero",
		"stopped": "terminating connection due to administrator command",
	} {
		t.Run(name, func(t *testing.T) {
			r := load(t, "pgbench", name)
			if r.rc == 0 {
				t.Fatalf("fixture exited 0")
			}
			_, err := parsePGBench(r, r.rc)
			if err == nil || !strings.Contains(err.Error(), want) {
				t.Fatalf("error %v, want one saying %q", err, want)
			}
			// An aborted client is refused even if the exit status were 0.
			if strings.Contains(r.err, "aborted") {
				if _, err := parsePGBench(r, 0); err == nil {
					t.Error("aborted run accepted with exit status 0")
				}
			}
		})
	}
}

// TestPGBenchInterleavedError: with -j 2, a client's error written while
// thread 0 prints a progress report lands inside the report's line. The
// error is still found and the run refused; the report still counts.
func TestPGBenchInterleavedError(t *testing.T) {
	p := &pgbenchOut{}
	feed(p.line, stderr, "progress: 1.0 s, 0.0 tps, lat 0.000 ms stddev 0.000pgbench: error: client 1 script 0 aborted in command 0 query 0: ERROR:  relation \"nosuch\" does not exist\n"+
		", 0 failed\n"+
		"pgbench: error: clipgbench: error: client 0 script 0 aborted in command 0 query 0: ERROR:  relation \"nosuch\" does not exist\n"+
		"pgbench: error: Run was aborted; the above results are incomplete.\n")
	err := p.check(exitOf(2), "")
	if err == nil || !strings.Contains(err.Error(), `relation "nosuch" does not exist`) || !strings.Contains(err.Error(), "1 more alike") {
		t.Errorf("error %v, want both clients' errors", err)
	}
	if len(p.seconds) != 1 || p.unparsedProgresses != 0 {
		t.Errorf("progress: %d seconds, %d unparsed", len(p.seconds), p.unparsedProgresses)
	}
}

// The prefix and the level are writes of their own: another thread's
// output can take both, leaving the message on a line that starts with
// neither (seen once in a fresh root: only "Run was aborted" was kept).
func TestPGBenchErrorWithoutPrefix(t *testing.T) {
	p := &pgbenchOut{}
	feed(p.line, stderr, "progress: 1.0 s, 0.0 tps, lat 0.000 ms stddev 0.000pgbench: pgbench: , 0 failed\n"+
		"error: error: client 0 script 0 aborted in command 1 query 0: ERROR:  relation \"nosuch\" does not exist\n"+
		"LINE 1: SELECT * FROM nosuch WHERE id = 3;\n"+
		"pgbench: error: Run was aborted; the above results are incomplete.\n")
	err := p.check(exitOf(2), "")
	if err == nil || !strings.Contains(err.Error(), `relation "nosuch" does not exist`) {
		t.Errorf("error %v, want the clients' errors", err)
	}
	for _, m := range p.errors {
		if strings.TrimSpace(m) == "" {
			t.Errorf("an empty error message kept: %q", p.errors)
		}
	}
}

// Output cut anywhere must never yield a result that differs from the
// whole output's.
func TestPGBenchTruncatedOutput(t *testing.T) {
	r := load(t, "pgbench", "tpcb")
	full, err := parsePGBench(r, 0)
	if err != nil {
		t.Fatal(err)
	}
	for n := 0; n < len(r.out); n++ {
		cut := r
		cut.out = r.out[:n]
		p, err := parsePGBench(cut, 0)
		if err == nil && (p.processed != full.processed || p.tps != full.tps || p.failed != full.failed) {
			t.Fatalf("cut at %d accepted with processed %d tps %g", n, p.processed, p.tps)
		}
	}
	if _, err := parsePGBench(recorded{err: r.err}, 0); err == nil || !strings.Contains(err.Error(), "no summary") {
		t.Errorf("missing summary: %v", err)
	}
	if _, err := parsePGBench(recorded{out: r.out}, 0); err == nil || !strings.Contains(err.Error(), "no progress") {
		t.Errorf("missing progress: %v", err)
	}
	// A truncated log is caught: its lines no longer parse or no longer add
	// up to the summary.
	var h Histogram
	lines := strings.SplitAfter(r.log, "\n")
	cut := strings.Join(lines[:len(lines)/2], "") + lines[len(lines)/2][:5]
	ok, failed, err := parsePGBenchLog(bufio.NewReader(strings.NewReader(cut)), &h)
	if err == nil && ok+failed == full.processed {
		t.Errorf("truncated log accepted: %d transactions", ok)
	}
}

func TestPGBenchProgressLine(t *testing.T) {
	for _, tc := range []struct {
		line            string
		at, tps         float64
		failed, skipped int64
		ok              bool
	}{
		{"progress: 1.0 s, 6222.2 tps, lat 0.623 ms stddev 0.239, 0 failed", 1, 6222.2, 0, 0, true},
		{"progress: 1.2 s, 3450.6 tps, lat 0.841 ms stddev 15.658, 0 failed", 1.2, 3450.6, 0, 0, true},
		{"progress: 2.0 s, 6843.3 tps, lat 0.193 ms stddev 0.378, 6777 failed", 2, 6843.3, 6777, 0, true},
		{"progress: 2.0 s, 290.0 tps, lat 0.566 ms stddev 0.138, 0 failed, lag 0.096 ms", 2, 290, 0, 0, true},
		// PostgreSQL 13 and 14 print neither failures nor, without a rate
		// limit, lag; with --latency-limit they print skipped ones.
		{"progress: 5.0 s, 1500.3 tps, lat 1.200 ms stddev 0.500", 5, 1500.3, 0, 0, true},
		{"progress: 3.0 s, 99.0 tps, lat 9.9 ms stddev 1.0, lag 0.1 ms, 4 skipped", 3, 99, 0, 4, true},
		{"progress: 3.0 s, 0.0 tps, lat 0.000 ms stddev 0.000, 0 failed", 3, 0, 0, 0, true},
		{"progress: 3.0 s, nan tps, lat nan ms stddev nan", 0, 0, 0, 0, false},
		{"progress: 1.0 s, 6222.2 tps", 0, 0, 0, 0, false},
		{"starting vacuum...end.", 0, 0, 0, 0, false},
	} {
		at, tps, failed, skipped, ok := pgbenchProgress(tc.line)
		if ok != tc.ok || at != tc.at || tps != tc.tps || failed != tc.failed || skipped != tc.skipped {
			t.Errorf("%q: got %v %v %v %v %v", tc.line, at, tps, failed, skipped, ok)
		}
	}
}

func parseSysbench(r recorded, rc int) (*sysbenchOut, error) {
	p := &sysbenchOut{}
	feed(p.line, stdout, r.out)
	feed(p.line, stderr, r.err)
	return p, p.check(exitOf(rc), r.out+r.err)
}

// histogramTotal sums the histogram rows independently of the parser.
func histogramTotal(out string) (n int64) {
	for _, l := range strings.Split(out, "\n") {
		if i := strings.Index(l, " |"); i > 0 {
			if _, err := strconv.ParseFloat(strings.TrimSpace(l[:i]), 64); err == nil {
				f := strings.Fields(l[i+2:])
				v, _ := strconv.ParseInt(f[len(f)-1], 10, 64)
				n += v
			}
		}
	}
	return n
}

func TestSysbenchRecordedRuns(t *testing.T) {
	for _, name := range []string{"pg_ro", "pg_rw", "my_rw", "my_deadlock", "pg_checkpoint"} {
		t.Run(name, func(t *testing.T) {
			r := load(t, "sysbench", name)
			p, err := parseSysbench(r, r.rc)
			if err != nil {
				t.Fatalf("good run refused: %v", err)
			}
			// The final summary is the one that counts (a checkpoint
			// prints one before it).
			final := r.out[strings.LastIndex(r.out, "SQL statistics:"):]
			if want := int64(summaryValue(t, final, "total number of events")); p.transactions != want || p.events != want {
				t.Errorf("transactions %d events %d, summary says %d", p.transactions, p.events, want)
			}
			if want := int64(summaryValue(t, final, "ignored errors")); p.ignored != want {
				t.Errorf("ignored errors %d, summary says %d", p.ignored, want)
			}
			if want := histogramTotal(r.out); p.hist.Count() != want || want == 0 {
				t.Errorf("histogram holds %d, its rows add up to %d", p.hist.Count(), want)
			}
			if n := strings.Count(r.out, "] thds: "); len(p.seconds) != n || n == 0 {
				t.Errorf("%d seconds parsed from %d interval lines", len(p.seconds), n)
			}
			// Percentiles from the histogram agree with sysbench's own 95th
			// (same buckets; ours is the bucket's middle, its the bucket's
			// value, printed to 0.01 ms).
			l := p.hist.Latency()
			own := summaryValue(t, final, "95th percentile")
			if got := float64(l.P95) / 1e6; math.Abs(got-own) > own*0.01+0.006 {
				t.Errorf("p95 %.3f ms from the histogram, sysbench says %.2f ms", got, own)
			}
			if !(l.P50 > 0 && l.P50 <= l.P95 && l.P95 <= l.P99) {
				t.Errorf("percentiles out of order: %+v", l)
			}
			if name == "my_deadlock" && p.ignored == 0 {
				t.Error("deadlocks not counted")
			}
		})
	}
}

func TestSysbenchFailedRunsRefused(t *testing.T) {
	for name, want := range map[string]string{
		"my_missing": "Table 'sbtest.sbtest2' doesn't exist",
		"my_port":    "Can't connect to server",
		"my_stopped": "Lost connection to server during query",
		"pg_port":    "Connection refused",
		"pg_missing": `relation "sbtest2" does not exist`,
		"pg_stopped": "exit status 139",
	} {
		t.Run(name, func(t *testing.T) {
			r := load(t, "sysbench", name)
			_, err := parseSysbench(r, r.rc)
			if err == nil || !strings.Contains(err.Error(), want) {
				t.Fatalf("error %v, want one saying %q", err, want)
			}
			if strings.Contains(r.out, "FATAL") {
				if _, err := parseSysbench(r, 0); err == nil {
					t.Error("FATAL accepted with exit status 0")
				}
			}
		})
	}
}

func TestSysbenchTruncatedOutput(t *testing.T) {
	r := load(t, "sysbench", "pg_ro")
	full, err := parseSysbench(r, 0)
	if err != nil {
		t.Fatal(err)
	}
	for n := 0; n < len(r.out); n += 7 {
		p, err := parseSysbench(recorded{out: r.out[:n]}, 0)
		if err == nil && (p.transactions != full.transactions || p.tps != full.tps || p.hist.Count() != full.hist.Count() || p.avg != full.avg) {
			t.Fatalf("cut at %d accepted: %d transactions, %g tps", n, p.transactions, p.tps)
		}
	}
	// Without its histogram a run has no percentiles.
	i := strings.Index(r.out, "Latency histogram")
	j := strings.Index(r.out, "SQL statistics:")
	if _, err := parseSysbench(recorded{out: r.out[:i] + r.out[j:]}, 0); err == nil || !strings.Contains(err.Error(), "histogram") {
		t.Errorf("run without histogram: %v", err)
	}
}

func TestSysbenchIntervalLine(t *testing.T) {
	for _, tc := range []struct {
		line      string
		at        float64
		threads   int
		tps, errs float64
		ok        bool
	}{
		{"[ 1s ] thds: 2 tps: 3341.18 qps: 53475.88 (r/w/o: 46791.52/0.00/6684.36) lat (ms,95%): 1.12 err/s: 0.00 reconn/s: 0.00", 1, 2, 3341.18, 0, true},
		{"[ 2s ] thds: 8 tps: 1525.06 qps: 11223.47 (r/w/o: 0.00/7244.31/3979.17) lat (ms,95%): 11.87 err/s: 926.04 reconn/s: 0.00", 2, 8, 1525.06, 926.04, true},
		{"[ 12s ] thds: 4 tps: 10.00 qps: 200.00 (r/w/o: 140.00/40.00/20.00) lat (ms,99%): 50.11 err/s: 1.00 reconn/s: 2.00", 12, 4, 10, 3, true},
		{"[ 1s ] Checkpoint report:", 0, 0, 0, 0, false},
		{"[ 1s ] thds: 2 tps: 3341.18 qps: 53475.88 (r/w/o: 46791.52/0.00/6684.36) lat (ms,95%): 1.12", 0, 0, 0, 0, false},
	} {
		at, threads, tps, errs, ok := sysbenchInterval(tc.line)
		if ok != tc.ok || at != tc.at || threads != tc.threads || tps != tc.tps || math.Abs(errs-tc.errs) > 1e-9 {
			t.Errorf("%q: got %v %v %v %v %v", tc.line, at, threads, tps, errs, ok)
		}
	}
}

func TestExitErrorNamesCause(t *testing.T) {
	err := exitError("pgbench", fmt.Errorf("exit status 2"), []string{"a", "b", "c", "d", "e", "f"}, "")
	if !strings.Contains(err.Error(), "a; b; c; d; (2 more)") {
		t.Errorf("%v", err)
	}
	err = exitError("sysbench", nil, nil, "x\ny\nlast words")
	if !strings.Contains(err.Error(), "last words") {
		t.Errorf("%v", err)
	}
}

func TestTailBufferKeepsEnd(t *testing.T) {
	var b tailBuffer
	for i := range 5000 {
		b.add(fmt.Sprintf("line %d", i))
	}
	s := b.String()
	if len(s) > outputTail+16 || !strings.HasPrefix(s, "[...]\n") || !strings.HasSuffix(s, "line 4999") {
		t.Errorf("tail of %d bytes: %q...%q", len(s), s[:20], s[len(s)-20:])
	}
}

func TestScrub(t *testing.T) {
	if got := scrub("password=s3cr3t!x and s3cr3t!x", "s3cr3t!x"); strings.Contains(got, "s3cr3t") {
		t.Errorf("%q", got)
	}
	if got := scrubErr(fmt.Errorf("login s3cr3t!x failed"), "s3cr3t!x"); strings.Contains(got.Error(), "s3cr3t") {
		t.Errorf("%v", got)
	}
	tg := Target{Engine: "postgres", Host: "/run/pg", User: "u", Password: "s3cr3t!x"}
	for _, s := range []string{tg.String(), fmt.Sprintf("%v %+v %#v %s", tg, tg, tg, tg)} {
		if strings.Contains(s, "s3cr3t") {
			t.Errorf("password shown: %s", s)
		}
	}
}
