package contention

import (
	"bufio"
	"context"
	"fmt"
	"math"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/dbhost/dbhost/internal/engine"
	"github.com/dbhost/dbhost/internal/engine/mysql"
	"github.com/dbhost/dbhost/internal/engine/postgres"
	"github.com/dbhost/dbhost/internal/engine/redis"
	"github.com/dbhost/dbhost/internal/host"
	"github.com/dbhost/dbhost/internal/testdb"
)

func liveHost(t testing.TB) *host.Host {
	t.Helper()
	h, err := host.Open("/")
	if err != nil {
		t.Fatal(err)
	}
	return h
}

// sampler watches one private server.
func sampler(t testing.TB, pid int) *Sampler {
	t.Helper()
	s, err := NewSampler(context.Background(), liveHost(t), Options{PIDs: []int{pid}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	if len(s.targets) != 1 || s.targets[0].in.PID != pid {
		t.Fatalf("sampler watches %d instances, want the server pid %d (notes %v)", len(s.targets), pid, s.notes)
	}
	return s
}

// asPostgres runs a PostgreSQL client program as the postgres user.
func asPostgres(t testing.TB, dir, name string, args ...string) *exec.Cmd {
	t.Helper()
	u, err := user.Lookup("postgres")
	if err != nil {
		t.Fatal(err)
	}
	uid, _ := strconv.Atoi(u.Uid)
	gid, _ := strconv.Atoi(u.Gid)
	cmd := exec.Command(name, args...)
	cmd.Dir = dir
	cmd.Env = []string{"PATH=/usr/local/bin:/usr/bin:/bin", "LC_ALL=C"}
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}, Setpgid: true}
	return cmd
}

func pgbenchInit(t testing.TB, s *testdb.Server) {
	t.Helper()
	_, err := exec.LookPath("pgbench")
	testdb.Need(t, "pgbench (apt-get install postgresql-contrib)", err == nil)
	out, err := asPostgres(t, s.Dir, "pgbench", "-i", "-q", "-s", "1", "-h", s.Socket, "-p", strconv.Itoa(s.Port), "postgres").CombinedOutput()
	if err != nil {
		t.Fatalf("pgbench -i: %v\n%s", err, out)
	}
}

func psql(t testing.TB, s *testdb.Server, sql string) {
	t.Helper()
	bin, err := testdb.PostgresBin()
	if err != nil {
		t.Fatal(err)
	}
	out, err := asPostgres(t, s.Dir, filepath.Join(bin, "psql"), "-X", "-q", "-h", s.Socket, "-p", strconv.Itoa(s.Port), "-d", "postgres", "-c", sql).CombinedOutput()
	if err != nil {
		t.Fatalf("psql %q: %v\n%s", sql, err, out)
	}
}

// pgbenchRun drives the server with 4 clients for secs seconds, logging
// every transaction under dir; wait returns pgbench's reported tps.
func pgbenchRun(t testing.TB, s *testdb.Server, secs int, logPrefix string) (wait func() float64) {
	t.Helper()
	cmd := asPostgres(t, s.Dir, "pgbench", "-c", "4", "-j", "1", "-T", strconv.Itoa(secs), "-l", "--log-prefix="+logPrefix,
		"-h", s.Socket, "-p", strconv.Itoa(s.Port), "postgres")
	var out strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := false
	t.Cleanup(func() {
		if !done {
			syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
			cmd.Wait()
		}
	})
	return func() float64 {
		err := cmd.Wait()
		done = true
		if err != nil {
			t.Fatalf("pgbench: %v\n%s", err, out.String())
		}
		m := regexp.MustCompile(`tps = ([0-9.]+)`).FindStringSubmatch(out.String())
		if m == nil {
			t.Fatalf("pgbench printed no tps:\n%s", out.String())
		}
		tps, _ := strconv.ParseFloat(m[1], 64)
		return tps
	}
}

// loggedTransactions counts the transactions pgbench logged as ending
// between two times (log lines: client xact latency_us script epoch_s us).
func loggedTransactions(t testing.TB, prefix string, from, to time.Time) int {
	t.Helper()
	files, _ := filepath.Glob(prefix + ".*")
	if len(files) == 0 {
		t.Fatalf("no pgbench log %s.*", prefix)
	}
	n := 0
	for _, f := range files {
		fh, err := os.Open(f)
		if err != nil {
			t.Fatal(err)
		}
		sc := bufio.NewScanner(fh)
		for sc.Scan() {
			fl := strings.Fields(sc.Text())
			if len(fl) < 6 {
				continue
			}
			sec, err1 := strconv.ParseInt(fl[4], 10, 64)
			us, err2 := strconv.ParseInt(fl[5], 10, 64)
			if err1 != nil || err2 != nil {
				continue
			}
			at := time.Unix(sec, us*1000)
			if !at.Before(from) && at.Before(to) {
				n++
			}
		}
		fh.Close()
	}
	return n
}

func instance(t testing.TB, r *Report) InstanceFigures {
	t.Helper()
	if len(r.Instances) != 1 {
		t.Fatalf("%d instances in the report, want 1", len(r.Instances))
	}
	return r.Instances[0]
}

func verdict(r *Report, id, subject string) (Verdict, bool) {
	for _, v := range r.Verdicts {
		if v.ID == id && v.Subject == subject {
			return v, true
		}
	}
	return Verdict{}, false
}

func within(got, want, tol float64) bool { return math.Abs(got-want) <= tol*want }

// TestPgbenchLive drives a private PostgreSQL with pgbench and checks the
// figures against pgbench's own log and /proc/stat: the transaction rate
// (pg_stat_database), then the statement rate (pg_stat_statements), the
// per-CPU split and the switches per query.
func TestPgbenchLive(t *testing.T) {
	if testing.Short() {
		t.Skip("integration: starts PostgreSQL and pgbench")
	}
	s := testdb.Postgres(t, testdb.Options{Settings: map[string]string{"shared_preload_libraries": "pg_stat_statements"}})
	pgbenchInit(t, s)
	c := Assumed("test")
	prefix := filepath.Join(s.Dir, "pgbench")
	// pgbench must outlast both intervals and what comes between them:
	// nominally 8 s, but under a CPU burner on every core pgbench ended
	// inside the second interval of a 9 s run (4 of its processes went,
	// 0.00 switches per query).
	wait := pgbenchRun(t, s, 16, prefix)
	time.Sleep(1500 * time.Millisecond) // clients connected and running

	// Transactions from pg_stat_database.
	sp := sampler(t, s.PID)
	if src := sp.targets[0].q.source; src != postgres.XactSource {
		t.Fatalf("query source %q (err %v), want pg_stat_database", src, sp.targets[0].q.err)
	}
	r1, err := Measure(context.Background(), sp, 3*time.Second, c)
	if err != nil {
		t.Fatal(err)
	}
	from1, to1 := r1.Time.Add(-time.Duration(r1.Seconds*float64(time.Second))), r1.Time

	// Statements from pg_stat_statements, once the extension exists.
	psql(t, s, "CREATE EXTENSION pg_stat_statements")
	sp2 := sampler(t, s.PID)
	if src := sp2.targets[0].q.source; src != postgres.StatementsSource {
		t.Fatalf("query source %q (err %v note %q), want pg_stat_statements", src, sp2.targets[0].q.err, sp2.targets[0].q.note)
	}
	r2, err := Measure(context.Background(), sp2, 2*time.Second, c)
	if err != nil {
		t.Fatal(err)
	}
	from2, to2 := r2.Time.Add(-time.Duration(r2.Seconds*float64(time.Second))), r2.Time
	tps := wait()

	in1, in2 := instance(t, r1), instance(t, r2)
	for _, in := range []InstanceFigures{in1, in2} {
		t.Logf("%s: %d processes %d threads, %.0f switches/s, %.0f queries/s (%s), per query %v, came %d went %d",
			in.Name, in.Processes, in.Threads, in.Switches, in.Queries.PerSecond, in.Queries.Source, deref(in.PerQuery), in.ThreadsCame, in.ThreadsWent)
		if in.Err != "" || in.Queries.Err != "" {
			t.Fatalf("instance error %q, queries error %q", in.Err, in.Queries.Err)
		}
		// postmaster, checkpointer, background writer, walwriter,
		// autovacuum launcher, logical replication launcher, 4 clients.
		if in.Processes < 9 || in.Excluded != 1 {
			t.Errorf("%d processes counted (want the server's and pgbench's at least 9), %d of dbhost's own left out (want 1)", in.Processes, in.Excluded)
		}
		// The server's processes alone are counted: a backend sleeps at
		// least once per statement, waiting for the next (the verdict's
		// floor of 2 counts the client's switch too). Measured with a CPU
		// burner on every core: 2.22 to 2.64 per statement, 13.7 to 21.2
		// per transaction (10 runs); a counter that counted far more queries than
		// ran (statements taken for transactions gives 0.3) fails.
		if in.PerQuery == nil || *in.PerQuery < 1 {
			t.Errorf("switches per query %v, want at least 1", deref(in.PerQuery))
		}
	}

	// Transactions: what pgbench logged as done inside the same interval.
	// pg_stat_database hears of them when each session flushes its
	// counts, at most once a second while busy, so either end of the
	// interval may lag by up to a second of transactions, and pgbench's
	// one thread logs late when it waits for a CPU. Hence a tolerance of
	// 1.5 s worth of transactions (48 % of a 3.1 s interval): with a CPU
	// burner on every core the two parted by -23 % to +37 % (650 counted,
	// 473 logged) in 10 runs; a count off by a factor of 2 (or 7,
	// statements) fails.
	logged1 := loggedTransactions(t, prefix, from1, to1)
	t.Logf("pgbench: %.0f tps overall; %d transactions logged in the first interval, %d counted", tps, logged1, in1.Queries.Count)
	if !within(float64(in1.Queries.Count), float64(logged1), 1.5/r1.Seconds) {
		t.Errorf("pg_stat_database counted %d transactions, pgbench logged %d in the same %.1f s", in1.Queries.Count, logged1, r1.Seconds)
	}
	// pgbench's tps averages its whole run, while the rate above is one
	// interval's: on a host where other work comes and goes the two part
	// by more than a third (2305/s against 1667 once; 208/s against 399
	// with a CPU burner on every core). The exact check is the one above,
	// against what pgbench logged in the same interval; this one only
	// catches a rate off by a unit or a large factor (7: statements).
	if in1.Queries.PerSecond < tps/3 || in1.Queries.PerSecond > 3*tps {
		t.Errorf("%.0f transactions/s measured, pgbench reports %.0f tps", in1.Queries.PerSecond, tps)
	}
	// Statements: a pgbench transaction is 7 (BEGIN, 3 UPDATEs, SELECT,
	// INSERT, END), counted by pg_stat_statements as each ends.
	logged2 := loggedTransactions(t, prefix, from2, to2)
	t.Logf("second interval: %d transactions logged, %d statements counted", logged2, in2.Queries.Count)
	// pg_stat_statements counts each statement as it ends, in shared
	// memory: with a CPU burner on every core the count was within 0.6 %
	// of 7 x the logged transactions.
	if !within(float64(in2.Queries.Count), 7*float64(logged2), 0.10) {
		t.Errorf("pg_stat_statements counted %d statements, pgbench logged %d transactions (x7 = %d)", in2.Queries.Count, logged2, 7*logged2)
	}

	for _, r := range []*Report{r1, r2} {
		checkPerCPU(t, r)
		if v, ok := verdict(r, IDPerQuery, in1.Name); !ok || v.Status == Unknown {
			t.Errorf("per-query verdict %+v", v)
		}
	}
}

func deref(p *float64) any {
	if p == nil {
		return nil
	}
	return fmt.Sprintf("%.2f", *p)
}

// checkPerCPU: per-CPU counters on the live system as root, summing to
// the /proc/stat total of the same interval.
func checkPerCPU(t *testing.T, r *Report) {
	t.Helper()
	hf := r.Host
	if hf.Averaged || hf.PerCPUSource != perfSource {
		t.Fatalf("per-CPU source %q, want perf counters (root on the live system)", hf.PerCPUSource)
	}
	if len(hf.PerCPU) != hf.CPUs || hf.CPUs == 0 {
		t.Fatalf("%d per-CPU figures for %d CPUs", len(hf.PerCPU), hf.CPUs)
	}
	sum := 0.0
	for _, c := range hf.PerCPU {
		// Every CPU switches under pgbench, none more than the host.
		if c.Switches <= 0 || c.Switches > hf.Switches.Value || c.Busy <= 0 || c.Busy > 100 {
			t.Errorf("cpu%d: %.0f switches/s (host %.0f), %.1f %% busy", c.CPU, c.Switches, hf.Switches.Value, c.Busy)
		}
		if want := c.Switches / r.Capacity.PerCore; math.Abs(c.Share-want) > 1e-9 {
			t.Errorf("cpu%d share %v, want %v", c.CPU, c.Share, want)
		}
		sum += c.Switches
	}
	t.Logf("per-CPU sum %.0f/s, /proc/stat ctxt %.0f/s", sum, hf.Switches.Value)
	// Two counts of the same switches over the same interval: with a CPU
	// burner on every core they differed by at most 1 in 20,000.
	if !within(sum, hf.Switches.Value, 0.10) {
		t.Errorf("per-CPU switches sum to %.0f/s, /proc/stat ctxt says %.0f/s", sum, hf.Switches.Value)
	}
}

// TestMariaDBQuestions counts a known number of statements through
// Questions, with dbhost's own reading subtracted.
func TestMariaDBQuestions(t *testing.T) {
	if testing.Short() {
		t.Skip("integration: starts MariaDB")
	}
	s := testdb.MariaDB(t, testdb.Options{})
	sp := sampler(t, s.PID)
	if q := sp.targets[0].q; q.err != nil || q.source != mysql.QuestionsSource {
		t.Fatalf("query counter: source %q, error %v", q.source, q.err)
	}
	db := mariaDB(t, s)
	const n = 300
	a := sp.Sample(context.Background())
	for i := 0; i < n; i++ {
		if _, err := db.Exec("SELECT 1"); err != nil {
			t.Fatal(err)
		}
	}
	r := Compare(a, sp.Sample(context.Background()), Assumed("test"))
	in := instance(t, r)
	t.Logf("%s: %d threads, %.0f switches (%.0f/s), %d queries, per query %v", in.Name, in.Threads, float64(in.SwitchCount), in.Switches, in.Queries.Count, deref(in.PerQuery))
	if in.Queries.Err != "" || in.Queries.Count != n || in.Queries.Own != 1 {
		t.Fatalf("queries %+v, want %d with dbhost's own 1 subtracted", in.Queries, n)
	}
	if in.Threads < 5 || in.Processes != 1 {
		t.Errorf("%d processes, %d threads counted", in.Processes, in.Threads)
	}
	// Only the server's switches are counted (the client is this test):
	// its connection thread sleeps once per query, waiting for the next.
	// The verdict's floor of 2 counts the client's too; a busy VM
	// measured 1.99 here, and 2.02 to 3.08 with a CPU burner on every
	// core (5 runs). Queries counted twice, or a server that answered
	// without sleeping between them, would give under 1.
	if in.PerQuery == nil || *in.PerQuery < 1 {
		t.Errorf("switches per query %v, want at least 1", deref(in.PerQuery))
	}
}

// TestRedisCommands counts a known number of commands through INFO stats.
func TestRedisCommands(t *testing.T) {
	if testing.Short() {
		t.Skip("integration: starts Redis")
	}
	s := testdb.Redis(t, testdb.Options{})
	sp := sampler(t, s.PID)
	if q := sp.targets[0].q; q.err != nil || q.source != redis.CommandsSource {
		t.Fatalf("query counter: source %q, error %v", q.source, q.err)
	}
	conn, err := net.Dial("unix", s.Socket)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	rd := bufio.NewReader(conn)
	const n = 200
	a := sp.Sample(context.Background())
	for i := 0; i < n; i++ {
		if _, err := conn.Write([]byte("PING\r\n")); err != nil {
			t.Fatal(err)
		}
		if ln, err := rd.ReadString('\n'); err != nil || ln != "+PONG\r\n" {
			t.Fatalf("PING: %q %v", ln, err)
		}
	}
	r := Compare(a, sp.Sample(context.Background()), Assumed("test"))
	in := instance(t, r)
	t.Logf("%s: %d threads, %d switches, %d commands, per command %v", in.Name, in.Threads, in.SwitchCount, in.Queries.Count, deref(in.PerQuery))
	if in.Queries.Err != "" || in.Queries.Count != n || in.Queries.Own != 1 {
		t.Fatalf("queries %+v, want %d with dbhost's own 1 subtracted", in.Queries, n)
	}
	// One command at a time: Redis answers, then sleeps in epoll_wait
	// until the next arrives, so at least one switch per command on its
	// side (the verdict's floor of 2 counts the client's too; on a busy
	// VM the server was seen at 1.8; with a CPU burner on every core
	// 2.01 to 3.65 in 5 runs). Pipelined commands would give far less
	// than one: 200 PINGs in one write wake the server once or twice.
	if in.PerQuery == nil || *in.PerQuery < 1 {
		t.Errorf("switches per command %v, want at least 1 (one at a time, not pipelined)", deref(in.PerQuery))
	}
}

// TestNoConnection: without a connection the per-query verdict is unknown
// with the reason, and the switches are still measured.
func TestNoConnection(t *testing.T) {
	if testing.Short() {
		t.Skip("integration: starts Redis")
	}
	s := testdb.Redis(t, testdb.Options{})
	sp, err := NewSampler(context.Background(), liveHost(t), Options{PIDs: []int{s.PID}, Engine: engine.Options{NoConnect: true}})
	if err != nil {
		t.Fatal(err)
	}
	defer sp.Close()
	r, err := Measure(context.Background(), sp, 300*time.Millisecond, Assumed("test"))
	if err != nil {
		t.Fatal(err)
	}
	in := instance(t, r)
	v, _ := verdict(r, IDPerQuery, in.Name)
	if v.Status != Unknown || !strings.Contains(v.Summary, "--no-connect") || in.Threads < 1 || in.Err != "" {
		t.Errorf("threads %d, err %q, verdict %+v", in.Threads, in.Err, v)
	}
	if pc, _ := verdict(r, IDPerCore, "host"); pc.Status == Unknown {
		t.Errorf("per-core verdict %+v", pc)
	}
}
