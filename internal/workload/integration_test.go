package workload

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/dbhost/dbhost/internal/engine"
	"github.com/dbhost/dbhost/internal/host"
	"github.com/dbhost/dbhost/internal/testdb"
)

// Integration tests: every driver against private PostgreSQL and MariaDB
// servers (internal/testdb), a few seconds per run.

func integration(t *testing.T, tools ...string) {
	t.Helper()
	if testing.Short() && !testdb.Required() {
		t.Skip("integration test (-short)")
	}
	testdb.Need(t, "root (private servers run as their service users)", os.Geteuid() == 0)
	for _, name := range tools {
		_, err := findBin("", name)
		testdb.Need(t, fmt.Sprint(err), err == nil)
	}
}

func pgTarget(t *testing.T, srv *testdb.Server) Target {
	return located(t, Target{Engine: engine.Postgres, Host: srv.Socket, Port: srv.Port, User: "postgres"})
}

func myTarget(t *testing.T, srv *testdb.Server) Target {
	return located(t, Target{Engine: engine.MySQL, Host: srv.Socket, Port: srv.Port, User: "root"}) // socket authentication
}

// located resolves a target to the private server discovered behind it,
// as the commands do before they connect.
func located(t *testing.T, tg Target) Target {
	t.Helper()
	h, err := host.Open("/")
	if err != nil {
		t.Fatal(err)
	}
	tg, err = engine.Locate(context.Background(), h, tg)
	if err != nil {
		t.Fatal(err)
	}
	return tg
}

func writeScript(t *testing.T, text string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "script.sql")
	if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// checkResult holds every driver's result to the same standard. clients
// is the number of closed-loop clients, for Little's law.
func checkResult(t *testing.T, what string, r *Result, s Spec, clients int) {
	t.Helper()
	if r == nil {
		t.Fatalf("%s: no result", what)
	}
	l := r.Latency
	t.Logf("MEASURED %-34s %9.1f ops/s  p50 %8s  p95 %8s  p99 %8s  errors %d  warm-up %.1f/s  seconds %s",
		what, r.OpsPerSec, l.P50.Round(time.Microsecond), l.P95.Round(time.Microsecond), l.P99.Round(time.Microsecond), r.Errors, r.WarmupOpsPerSec, series(r.PerSecond))
	// Read-write workloads on two threads deadlock now and then; those
	// are counted as errors (never as successes) and must stay rare.
	if r.Ops <= 0 || !(r.OpsPerSec > 0) || r.Errors*100 > r.Ops {
		t.Errorf("%s: %d ops, %.1f/s, %d errors", what, r.Ops, r.OpsPerSec, r.Errors)
	}
	// The measured window is the spec's duration, not warm-up included.
	if d := r.Duration; d < s.Duration*8/10 || d > s.Duration*12/10 {
		t.Errorf("%s: measured %s for a %s run", what, d, s.Duration)
	}
	if s.Warmup > 0 && !(r.WarmupOpsPerSec > 0) {
		t.Errorf("%s: no warm-up throughput", what)
	}
	// The per-second series adds up to the total rate; a second may hold one
	// of the rare errors (a deadlock sysbench retried) the total allows.
	var ops, span, prev float64
	for _, sec := range r.PerSecond {
		if sec.Warmup || sec.Ops < 0 || sec.Errors < 0 || sec.Errors*100 > sec.Ops {
			t.Errorf("%s: second %+v", what, sec)
		}
		at := sec.At.Seconds()
		ops += sec.Ops * (at - prev)
		span, prev = at, at
	}
	if span < s.Duration.Seconds()/2 {
		t.Errorf("%s: series covers %.1fs of %s", what, span, s.Duration)
	}
	// The bounds below held in 5 runs of each workload with a CPU burner
	// on every core: the series averaged 0.97 to 1.17 of the rate, busy
	// clients were 0.89 to 1.04 of the clients, the slowest transaction
	// took 966 ms.
	rate := ops / span
	busy := r.OpsPerSec * l.Mean.Seconds()
	t.Logf("MEASURED %s: series averages %.2f of the result's rate, %.2f busy clients of %d, max latency %s", what, rate/r.OpsPerSec, busy, clients, l.Max.Round(time.Millisecond))
	if rate < r.OpsPerSec*0.7 || rate > r.OpsPerSec*1.3 {
		t.Errorf("%s: series averages %.1f/s, result says %.1f/s", what, rate, r.OpsPerSec)
	}
	if !(time.Microsecond <= l.Min && l.Min <= l.P50 && l.P50 <= l.P95 && l.P95 <= l.P99 && l.P99 <= l.Max && l.Max < 10*time.Second) {
		t.Errorf("%s: implausible latencies %+v", what, l)
	}
	if l.Count < r.Ops*9/10 || l.Count > r.Ops+int64(clients) {
		t.Errorf("%s: %d latencies for %d ops", what, l.Count, r.Ops)
	}
	// Little's law for closed-loop clients: busy clients = rate x mean
	// latency, at most the number of clients (less the clients' own time
	// between transactions).
	if busy > float64(clients)*1.1 || busy < float64(clients)*0.25 {
		t.Errorf("%s: %.1f/s x %s mean = %.2f busy clients of %d", what, r.OpsPerSec, l.Mean, busy, clients)
	}
	if r.Output == "" || len(r.Command) == 0 {
		t.Errorf("%s: no output or command", what)
	}
}

func series(s []Second) string {
	var b strings.Builder
	for i, x := range s {
		if i > 0 {
			b.WriteByte(' ')
		}
		fmt.Fprintf(&b, "%.0f", x.Ops)
	}
	return b.String()
}

// mustFail runs a workload that must not produce a result.
func mustFail(t *testing.T, what string, tg Target, s Spec, want string) {
	t.Helper()
	r, err := Run(context.Background(), tg, s)
	if err == nil || r != nil {
		t.Fatalf("%s: result %+v, error %v", what, r, err)
	}
	if !strings.Contains(err.Error(), want) {
		t.Errorf("%s: error %q does not say %q", what, err, want)
	}
	t.Logf("%s refused: %v", what, err)
}

const kvScriptPG = "testdata/scripts/kv_postgres.sql"
const kvScriptMy = "testdata/scripts/kv_mysql.sql"

func TestIntegrationPostgres(t *testing.T) {
	integration(t, "pgbench", "sysbench")
	t.Parallel()
	srv := testdb.Postgres(t, testdb.Options{})
	tg := pgTarget(t, srv)
	ctx := context.Background()

	t.Run("pgbench", func(t *testing.T) {
		s := Spec{Kind: PGBench, Clients: 4, Jobs: 2, Warmup: time.Second, Duration: 2 * time.Second, Scale: 2}
		if err := Prepare(ctx, tg, s); err != nil {
			t.Fatal(err)
		}
		r, err := Run(ctx, tg, s)
		if err != nil {
			t.Fatal(err)
		}
		checkResult(t, "pgbench TPC-B c4 j2 (PostgreSQL)", r, s, 4)
		if r.Sampling != 1 {
			t.Errorf("sampling %g for a short run", r.Sampling)
		}

		// Select-only, run as the postgres system user.
		s.SelectOnly = true
		asPG := tg
		asPG.OSUser = "postgres"
		r, err = Run(ctx, asPG, s)
		if err != nil {
			t.Fatal(err)
		}
		checkResult(t, "pgbench -S c4 j2 (PostgreSQL)", r, s, 4)

		// Sampled log: the percentiles rest on a part of the transactions.
		s.Warmup, s.LogSampling, s.Duration = 0, 0.25, time.Second
		r, err = Run(ctx, tg, s)
		if err != nil {
			t.Fatal(err)
		}
		if frac := float64(r.Latency.Count) / float64(r.Ops); frac < 0.2 || frac > 0.3 {
			t.Errorf("sampling 0.25 logged %d of %d transactions", r.Latency.Count, r.Ops)
		}

		bad := Spec{Kind: PGBench, Clients: 2, Duration: time.Second, Script: writeScript(t, "SELEC 1;\n")}
		mustFail(t, "pgbench syntax error", tg, bad, `syntax error at or near "SELEC"`)
		bad.Script = writeScript(t, "\\set id random(1, 10)\nSELECT * FROM nosuch WHERE id = :id;\n")
		mustFail(t, "pgbench missing table", tg, bad, `relation "nosuch" does not exist`)
		wrong := tg
		wrong.Port = testdb.FreePort(t)
		mustFail(t, "pgbench wrong port", wrong, Spec{Kind: PGBench, Duration: time.Second}, "No such file or directory")
	})

	t.Run("sysbench", func(t *testing.T) {
		s := Spec{Kind: Sysbench, Script: "oltp_read_only", Clients: 2, Tables: 2, TableSize: 10000, Warmup: time.Second, Duration: 2 * time.Second}
		if err := Prepare(ctx, tg, s); err != nil {
			t.Fatal(err)
		}
		r, err := Run(ctx, tg, s)
		if err != nil {
			t.Fatal(err)
		}
		checkResult(t, "sysbench oltp_read_only t2 (pgsql)", r, s, 2)
		if r.Queries < r.Ops*10 {
			t.Errorf("%d queries for %d transactions", r.Queries, r.Ops)
		}
		s.Tables = 3 // sbtest3 was never prepared
		mustFail(t, "sysbench missing table", tg, s, `relation "sbtest3" does not exist`)
	})

	t.Run("sql", func(t *testing.T) {
		s := Spec{Kind: SQL, Script: kvScriptPG, Readers: 2, Writers: 2, Warmup: time.Second, Duration: 2 * time.Second}
		if err := Prepare(ctx, tg, s); err != nil {
			t.Fatal(err)
		}
		var live []Second
		s.Progress = func(x Second) { live = append(live, x) }
		r, err := Run(ctx, tg, s)
		if err != nil {
			t.Fatal(err)
		}
		checkResult(t, "sql kv readers 2 + writers 2 (pgx)", r, s, 4)
		checkGroups(t, r, 2, 2)
		if len(live) != len(r.PerSecond)+1 || !live[0].Warmup {
			t.Errorf("progress: %d calls for %d measured seconds: %+v", len(live), len(r.PerSecond), live)
		}
		bad := Spec{Kind: SQL, Readers: 1, Duration: time.Second, Script: writeScript(t, "-- reader\nSELEC 1;\n")}
		mustFail(t, "sql syntax error", tg, bad, `syntax error at or near "SELEC"`)
		bad.Script = writeScript(t, "-- param id 1 9\n-- reader\nSELECT * FROM nosuch WHERE id = :id;\n")
		mustFail(t, "sql missing table", tg, bad, `relation "nosuch" does not exist`)
		// A table dropped while the run goes: errors that are not
		// transient stop it.
		drop := writeScript(t, "-- param id 1 9\n-- setup\nDROP TABLE IF EXISTS gone;\nCREATE TABLE gone (id int);\n-- reader\nSELECT * FROM gone WHERE id = :id;\n-- writer\nDROP TABLE gone;\n")
		bad = Spec{Kind: SQL, Readers: 1, Writers: 1, Duration: 2 * time.Second, Script: drop}
		if err := Prepare(ctx, tg, bad); err != nil {
			t.Fatal(err)
		}
		mustFail(t, "sql table dropped mid-run", tg, bad, `"gone" does not exist`)
	})

	t.Run("password", func(t *testing.T) {
		// Make a password necessary over TCP for one role.
		const pw = "Pw-workload-7e1f"
		c, err := connect(ctx, tg, "postgres")
		if err != nil {
			t.Fatal(err)
		}
		defer c.close()
		for _, q := range []string{"CREATE ROLE bench LOGIN SUPERUSER PASSWORD '" + pw + "'"} {
			if _, err := c.query(ctx, q, nil); err != nil {
				t.Fatal(err)
			}
		}
		hba := filepath.Join(srv.DataDir, "pg_hba.conf")
		old, err := os.ReadFile(hba)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(hba, append([]byte("host all bench 127.0.0.1/32 scram-sha-256\n"), old...), 0o600); err != nil {
			t.Fatal(err)
		}
		if _, err := c.query(ctx, "SELECT pg_reload_conf()", nil); err != nil {
			t.Fatal(err)
		}
		time.Sleep(200 * time.Millisecond)
		tcp := located(t, Target{Engine: engine.Postgres, Host: "127.0.0.1", Port: srv.Port, User: "bench", Password: pw, DB: "dbhost_bench"})
		for _, s := range []Spec{
			{Kind: PGBench, SelectOnly: true, Clients: 2, Duration: time.Second},
			{Kind: SQL, Script: kvScriptPG, Readers: 1, Duration: time.Second},
		} {
			r, err := Run(ctx, tcp, s)
			if err != nil {
				t.Fatalf("%s with password: %v", s.Kind, err)
			}
			if strings.Contains(fmt.Sprintf("%+v", r), pw) {
				t.Errorf("%s: password in result", s.Kind)
			}
			wrong := tcp
			wrong.Password = "not-" + pw
			mustFail(t, string(s.Kind)+" wrong password", wrong, s, "password authentication failed")
			_, err = Run(ctx, wrong, s)
			if strings.Contains(err.Error(), pw) {
				t.Errorf("password in error: %v", err)
			}
		}
	})

	t.Run("cancel", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(ctx, 1500*time.Millisecond)
		defer cancel()
		start := time.Now()
		r, err := Run(ctx, tg, Spec{Kind: PGBench, Clients: 2, Duration: 20 * time.Second})
		if err == nil || r != nil || !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("cancelled run: %+v, %v", r, err)
		}
		if d := time.Since(start); d > 5*time.Second {
			t.Errorf("cancel took %s", d)
		}
		if pgbenchRunning(t, tg.Host) {
			t.Error("pgbench left running")
		}
	})
}

func checkGroups(t *testing.T, r *Result, readers, writers int) {
	t.Helper()
	if len(r.Groups) != 2 || r.Groups[0].Name != "reader" || r.Groups[1].Name != "writer" ||
		r.Groups[0].Workers != readers || r.Groups[1].Workers != writers {
		t.Fatalf("groups %+v", r.Groups)
	}
	var ops int64
	for _, g := range r.Groups {
		ops += g.Ops
		l := g.Latency
		t.Logf("MEASURED   %-32s %9.1f ops/s  p50 %8s  p95 %8s  p99 %8s  errors %d", g.Name+"s", g.OpsPerSec, l.P50.Round(time.Microsecond), l.P95.Round(time.Microsecond), l.P99.Round(time.Microsecond), g.Errors)
		if g.Ops <= 0 || !(l.P50 > 0 && l.P50 <= l.P95 && l.P95 <= l.P99) {
			t.Errorf("group %+v", g)
		}
	}
	if ops != r.Ops {
		t.Errorf("groups add up to %d ops, result %d", ops, r.Ops)
	}
	// A reader pass is 2 statements, a writer pass 4.
	if want := 2*r.Groups[0].Ops + 4*r.Groups[1].Ops; r.Queries != want {
		t.Errorf("%d queries, want %d", r.Queries, want)
	}
}

func TestIntegrationMariaDB(t *testing.T) {
	integration(t, "sysbench")
	t.Parallel()
	srv := testdb.MariaDB(t, testdb.Options{})
	tg := myTarget(t, srv)
	ctx := context.Background()

	t.Run("sysbench", func(t *testing.T) {
		s := Spec{Kind: Sysbench, Script: "oltp_read_write", Clients: 2, Tables: 2, TableSize: 10000, Warmup: time.Second, Duration: 2 * time.Second}
		if err := Prepare(ctx, tg, s); err != nil {
			t.Fatal(err)
		}
		r, err := Run(ctx, tg, s)
		if err != nil {
			t.Fatal(err)
		}
		checkResult(t, "sysbench oltp_read_write t2 (MariaDB)", r, s, 2)
		s.Tables = 3
		mustFail(t, "sysbench missing table", tg, s, "Table 'dbhost_bench.sbtest3' doesn't exist")
	})

	t.Run("sql", func(t *testing.T) {
		s := Spec{Kind: SQL, Script: kvScriptMy, Readers: 2, Writers: 2, Warmup: time.Second, Duration: 2 * time.Second}
		if err := Prepare(ctx, tg, s); err != nil {
			t.Fatal(err)
		}
		r, err := Run(ctx, tg, s)
		if err != nil {
			t.Fatal(err)
		}
		checkResult(t, "sql kv readers 2 + writers 2 (MariaDB)", r, s, 4)
		checkGroups(t, r, 2, 2)
		bad := Spec{Kind: SQL, Readers: 1, Duration: time.Second, Script: writeScript(t, "-- param id 1 9\n-- reader\nSELECT * FROM nosuch WHERE id = :id;\n")}
		mustFail(t, "sql missing table", tg, bad, "Table 'dbhost_bench.nosuch' doesn't exist")
	})

	t.Run("password", func(t *testing.T) {
		const pw = "Pw-workload-9c2d"
		c, err := connect(ctx, tg, "")
		if err != nil {
			t.Fatal(err)
		}
		defer c.close()
		for _, q := range []string{"CREATE USER 'bench'@'127.0.0.1' IDENTIFIED BY '" + pw + "'", "GRANT ALL ON dbhost_bench.* TO 'bench'@'127.0.0.1'"} {
			if _, err := c.query(ctx, q, nil); err != nil {
				t.Fatal(err)
			}
		}
		tcp := located(t, Target{Engine: engine.MySQL, Host: "127.0.0.1", Port: srv.Port, User: "bench", Password: pw})
		s := Spec{Kind: Sysbench, Script: "oltp_read_only", Clients: 2, Tables: 2, TableSize: 10000, Duration: time.Second}
		r, err := Run(ctx, tcp, s)
		if err != nil {
			t.Fatal(err)
		}
		if strings.Contains(fmt.Sprintf("%+v", r), pw) {
			t.Error("password in result")
		}
		wrong := tcp
		wrong.Password = "not-" + pw
		mustFail(t, "sysbench wrong password", wrong, s, "Access denied for user 'bench'")
	})
}

// A server that stops mid-run yields an error, never a result, whatever
// was measured before.
func TestIntegrationServerStopped(t *testing.T) {
	integration(t, "pgbench", "sysbench")
	t.Parallel()
	for _, tc := range []struct {
		name string
		spec Spec
		mk   func(*testing.T, *testdb.Server) Target
		pg   bool
		want []string // what the error may say, depending on the moment
	}{
		{"pgbench", Spec{Kind: PGBench, Clients: 2}, pgTarget, true, []string{"aborted"}},
		{"sysbench", Spec{Kind: Sysbench, Script: "oltp_read_write", Clients: 2}, myTarget, false, []string{"Lost connection", "gone away", "connect"}},
		{"sql", Spec{Kind: SQL, Script: kvScriptPG, Readers: 1, Writers: 1}, pgTarget, true, []string{"terminating connection", "conn closed", "EOF", "broken pipe", "connect"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var srv *testdb.Server
			if tc.pg {
				srv = testdb.Postgres(t, testdb.Options{})
			} else {
				srv = testdb.MariaDB(t, testdb.Options{})
			}
			tg := tc.mk(t, srv)
			s := tc.spec
			s.Duration = 8 * time.Second
			if err := Prepare(context.Background(), tg, s); err != nil {
				t.Fatal(err)
			}
			started := make(chan struct{}, 1)
			s.Progress = func(Second) {
				select {
				case started <- struct{}{}:
				default:
				}
			}
			stopped := make(chan struct{})
			go func() {
				defer close(stopped)
				select {
				case <-started:
				case <-time.After(5 * time.Second):
				}
				srv.Stop(t)
			}()
			r, err := Run(context.Background(), tg, s)
			<-stopped // before the cleanup's Stop
			if err == nil || r != nil {
				t.Fatalf("run on a stopped server: %+v, %v", r, err)
			}
			if !slices.ContainsFunc(tc.want, func(w string) bool { return strings.Contains(err.Error(), w) }) {
				t.Errorf("error %q says none of %q", err, tc.want)
			}
			t.Logf("%s refused: %v", tc.name, err)
		})
	}
}

// pgbenchRunning looks through /proc for a pgbench against host: no pgrep
// needed, and nothing to miss when a tool is absent.
func pgbenchRunning(t *testing.T, host string) bool {
	t.Helper()
	dirs, err := os.ReadDir("/proc")
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range dirs {
		cmd, err := os.ReadFile("/proc/" + d.Name() + "/cmdline")
		if err != nil {
			continue
		}
		args := strings.Split(string(cmd), "\x00")
		if filepath.Base(args[0]) == "pgbench" && strings.Contains(string(cmd), host) {
			return true
		}
	}
	return false
}
