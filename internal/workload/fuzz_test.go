package workload

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/dbhost/dbhost/internal/engine"
)

// seedLines adds every recorded output line of a tool as a seed.
func seedLines(f *testing.F, tool string) {
	files, _ := filepath.Glob(filepath.Join("testdata", tool, "*"))
	for _, name := range files {
		if strings.HasSuffix(name, ".rc") || strings.HasSuffix(name, ".log") {
			continue
		}
		b, err := os.ReadFile(name)
		if err != nil {
			f.Fatal(err)
		}
		for _, l := range strings.Split(string(b), "\n") {
			if strings.HasPrefix(l, "progress: ") || strings.HasPrefix(l, "[ ") {
				f.Add(l)
			}
		}
	}
}

func FuzzPGBenchProgress(f *testing.F) {
	seedLines(f, "pgbench")
	f.Add("progress: 3.0 s, 99.0 tps, lat 9.9 ms stddev 1.0, lag 0.1 ms, 4 skipped")
	f.Add("progress: 1e309 s, 1e309 tps, lat x ms stddev y, 99999999999999999999 failed")
	f.Fuzz(func(t *testing.T, line string) {
		at, tps, failed, skipped, ok := pgbenchProgress(line)
		if !ok {
			if at != 0 || tps != 0 || failed != 0 || skipped != 0 {
				t.Fatalf("rejected line returned values")
			}
			return
		}
		if !finite(at) || !finite(tps) || at < 0 || tps < 0 || failed < 0 || skipped < 0 {
			t.Fatalf("%q: at %v tps %v failed %d skipped %d", line, at, tps, failed, skipped)
		}
		// Fed to the output parser, the line becomes exactly one second.
		p := &pgbenchOut{}
		p.line(stderr, line)
		if len(p.seconds) != 1 || p.seconds[0].Ops != tps || p.seconds[0].Errors < 0 {
			t.Fatalf("%q: seconds %+v", line, p.seconds)
		}
	})
}

func FuzzSysbenchInterval(f *testing.F) {
	seedLines(f, "sysbench")
	f.Add("[ 1s ] thds: 99999999999 tps: 1 qps: 1 (r/w/o: 1/1/1) lat (ms,95%): 1 err/s: 1 reconn/s: 1")
	f.Fuzz(func(t *testing.T, line string) {
		at, threads, tps, errs, ok := sysbenchInterval(line)
		if !ok {
			return
		}
		if !finite(at) || !finite(tps) || !finite(errs) || at < 0 || tps < 0 || errs < 0 || threads < 0 {
			t.Fatalf("%q: %v %v %v %v", line, at, threads, tps, errs)
		}
		p := &sysbenchOut{}
		p.line(stdout, line)
		if len(p.seconds) != 1 || p.seconds[0].Ops != tps {
			t.Fatalf("%q: seconds %+v", line, p.seconds)
		}
	})
}

// Whole outputs, mangled: the parsers never panic, and whatever they
// accept did real work.
func FuzzToolOutputs(f *testing.F) {
	for _, name := range []string{"pgbench/tpcb.out", "pgbench/failed.err", "sysbench/pg_ro.out", "sysbench/my_deadlock.out"} {
		b, err := os.ReadFile(filepath.Join("testdata", name))
		if err != nil {
			f.Fatal(err)
		}
		f.Add(string(b))
	}
	f.Fuzz(func(t *testing.T, text string) {
		pg := &pgbenchOut{}
		sb := &sysbenchOut{}
		for _, l := range strings.Split(text, "\n") {
			pg.line(stdout, l)
			pg.line(stderr, l)
			sb.line(stdout, l)
		}
		if pg.check(nil, "") == nil && (pg.processed <= 0 || !(pg.tps > 0) || len(pg.seconds) == 0) {
			t.Fatalf("pgbench output accepted without work: %+v", pg)
		}
		if sb.check(nil, "") == nil {
			l := sb.latency()
			if sb.transactions <= 0 || !(sb.tps > 0) || sb.hist.Count() == 0 || l.P50 > l.P95 || l.P95 > l.P99 {
				t.Fatalf("sysbench output accepted without work: %+v", sb)
			}
		}
	})
}

func FuzzParseScript(f *testing.F) {
	for _, name := range []string{"kv_postgres.sql", "kv_mysql.sql"} {
		b, err := os.ReadFile(filepath.Join("testdata", "scripts", name))
		if err != nil {
			f.Fatal(err)
		}
		f.Add(string(b))
	}
	f.Add("-- param a 1 2\n-- reader\nSELECT $q$;$q$, ':a', :a::int, `x`, \"y\" /* ; */;")
	f.Fuzz(func(t *testing.T, src string) {
		for _, e := range []engine.Engine{engine.Postgres, engine.MySQL} {
			s, err := ParseScript(src, e)
			if err != nil {
				continue
			}
			declared := map[string]bool{}
			for _, p := range s.Params {
				if p.Low > p.High {
					t.Fatalf("param %+v", p)
				}
				declared[p.Name] = true
			}
			for _, st := range append(append([]Statement{}, s.Reader...), s.Writer...) {
				if strings.TrimSpace(st.SQL) == "" {
					t.Fatalf("empty statement from %q", src)
				}
				for _, a := range st.Args {
					if !declared[a] {
						t.Fatalf("undeclared %q bound", a)
					}
				}
			}
		}
	})
}
