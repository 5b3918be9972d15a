package pgcluster

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/dbhost/dbhost/internal/host"
	"github.com/dbhost/dbhost/internal/journal"
	"github.com/dbhost/dbhost/internal/testdb"
)

// childEnv, when set, makes the test binary a crash victim: it creates a
// cluster journaled in the named file, reports it, and waits to be killed.
const childEnv = "DBHOST_PGCLUSTER_CRASH_CHILD"

func TestMain(m *testing.M) {
	if file := os.Getenv(childEnv); file != "" {
		os.Exit(crashChild(file))
	}
	os.Exit(m.Run())
}

func crashChild(file string) int {
	ctx := context.Background()
	j, err := journal.Open(file, Kinds())
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	c, err := Create(ctx, j, Options{SharedBuffers: 128 * miB, MaxClients: 4})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	fmt.Printf("CLUSTER %d %s\n", c.PID, c.Dir)
	// Killed long before this; should the parent die, clean up anyway.
	time.Sleep(2 * time.Minute)
	j.Restore()
	return 3
}

// integration skips under -short, needs root (fails without it under
// DBHOST_INTEGRATION=require) and takes the host lock shared, as every
// test that starts private servers does.
func integration(t testing.TB) {
	t.Helper()
	if testing.Short() {
		t.Skip("integration test: starts PostgreSQL")
	}
	testdb.Need(t, "root (the cluster runs as the postgres user)", os.Geteuid() == 0)
	_, err := testdb.PostgresBin()
	testdb.Need(t, fmt.Sprint(err), err == nil)
	unlock, err := journal.LockShared(journal.HostLock)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(unlock)
}

// testJournal is a journal restored when the test ends, whatever happened.
func testJournal(t testing.TB) (*journal.Journal, string) {
	t.Helper()
	file := filepath.Join(t.TempDir(), "experiment.journal")
	j, err := journal.Open(file, Kinds())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := j.Restore(); err != nil {
			t.Errorf("journal restore: %v", err)
		}
	})
	return j, file
}

func pidAlive(t *testing.T, pid int) (proc, bool) {
	t.Helper()
	h, err := host.Open("/")
	if err != nil {
		t.Fatal(err)
	}
	st, err := h.ProcStat(pid)
	if err != nil || st.State == "Z" {
		return proc{}, false
	}
	return proc{pid: pid, ppid: st.PPID, start: st.Starttime}, true
}

func query[T any](t testing.TB, c *Cluster, db, sql string) T {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, err := c.connect(ctx, db)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	var v T
	if err := conn.QueryRow(ctx, sql).Scan(&v); err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
	return v
}

func exec1(t testing.TB, c *Cluster, sql string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, err := c.connect(ctx, BenchDB)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, sql); err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
}

func TestClusterLifecycle(t *testing.T) {
	integration(t)
	ctx := context.Background()
	j, _ := testJournal(t)
	c, err := Create(ctx, j, Options{MaxClients: 8})
	if err != nil {
		t.Fatal(err)
	}
	// Journaled before anything else, with what the undo needs.
	ch := j.Changes()
	if len(ch) != 1 || ch[0].Kind != Kind || !strings.Contains(string(ch[0].Data), c.Dir) {
		t.Fatalf("journal after Create: %+v", ch)
	}

	// Sized to the host, and the server took the sizing.
	if c.Sizing.SharedBuffers < minSharedBuffers || c.Sizing.SharedBuffers > maxSharedBuffers ||
		c.Sizing.SharedBuffers > max(c.Sizing.MemTotal/4, minSharedBuffers) {
		t.Errorf("host sizing gave shared_buffers %d MiB for MemTotal %d MiB", c.Sizing.SharedBuffers/miB, c.Sizing.MemTotal/miB)
	}
	if c.SharedBuffers != c.Sizing.SharedBuffers {
		t.Errorf("server reports shared_buffers %d, sized %d", c.SharedBuffers, c.Sizing.SharedBuffers)
	}
	if got := query[int64](t, c, "postgres", "SELECT pg_size_bytes(current_setting('shared_buffers'))"); uint64(got) != c.Sizing.SharedBuffers {
		t.Errorf("SHOW shared_buffers = %d bytes, sized %d", got, c.Sizing.SharedBuffers)
	}
	if got := query[string](t, c, "postgres", "SHOW max_connections"); got != "18" {
		t.Errorf("max_connections %s for 8 clients, want 18", got)
	}
	if got := query[string](t, c, "postgres", "SHOW fsync"); got != "on" {
		t.Errorf("fsync = %s, want on by default", got)
	}
	if got := query[string](t, c, "postgres", "SHOW listen_addresses"); got != "" {
		t.Errorf("listen_addresses = %q, want only the socket", got)
	}
	if c.Version == "" || !strings.HasPrefix(c.Bin, "/") {
		t.Errorf("version %q, bin %q", c.Version, c.Bin)
	}

	// Private directory of the postgres user; server running as postgres.
	st, err := os.Stat(c.Dir)
	if err != nil {
		t.Fatal(err)
	}
	if st.Mode().Perm() != 0o700 {
		t.Errorf("%s mode %s, want 0700", c.Dir, st.Mode().Perm())
	}
	if uid := st.Sys().(*syscall.Stat_t).Uid; int(uid) != c.uid {
		t.Errorf("%s owned by uid %d, want postgres (%d)", c.Dir, uid, c.uid)
	}
	h, _ := host.Open("/")
	ps, err := h.Status(c.PID)
	if err != nil {
		t.Fatal(err)
	}
	if int(ps.UIDs[1]) != c.uid {
		t.Errorf("postmaster runs as uid %d, want postgres (%d)", ps.UIDs[1], c.uid)
	}
	if b, err := os.ReadFile(c.LogFile); err != nil || !strings.Contains(string(b), "ready to accept connections") {
		t.Errorf("server log %s: %v\n%s", c.LogFile, err, b)
	}

	// A small data set, about the measured size per scale unit.
	const scale = 2
	if err := c.Load(ctx, scale); err != nil {
		t.Fatal(err)
	}
	size := query[int64](t, c, BenchDB, `SELECT sum(pg_total_relation_size(oid))::bigint FROM pg_class WHERE relname LIKE 'pgbench\_%' AND relkind = 'r'`)
	if want := float64(scale * BytesPerScale); float64(size) < 0.95*want || float64(size) > 1.05*want {
		t.Errorf("scale %d loaded %d bytes, BytesPerScale predicts %.0f", scale, size, want)
	}
	if got := c.ScaleFor(float64(scale*BytesPerScale) / float64(c.SharedBuffers)); got != scale {
		t.Errorf("ScaleFor of %d units' share = %d", scale, got)
	}

	// Restart: new postmaster, ALTER SYSTEM applied over dbhost.conf, data
	// kept, buffers cold until Prewarm.
	altered := c.Sizing.SharedBuffers - 128*miB
	exec1(t, c, fmt.Sprintf("ALTER SYSTEM SET shared_buffers = '%dkB'", altered/kiB))
	old := c.PID
	if err := c.Restart(ctx); err != nil {
		t.Fatal(err)
	}
	if c.SharedBuffers != altered {
		t.Errorf("shared_buffers %d after ALTER SYSTEM and Restart, want %d", c.SharedBuffers, altered)
	}
	exec1(t, c, "ALTER SYSTEM RESET shared_buffers")
	if c.PID == old || c.PID == 0 {
		t.Errorf("PID %d after restart (was %d)", c.PID, old)
	}
	if _, ok := pidAlive(t, old); ok {
		t.Errorf("old postmaster %d still runs", old)
	}
	const cached = `SELECT count(*) FROM pg_buffercache b JOIN pg_class c ON b.relfilenode = pg_relation_filenode(c.oid)
		AND b.reldatabase = (SELECT oid FROM pg_database WHERE datname = current_database()) WHERE c.relname = 'pgbench_accounts'`
	exec1(t, c, "CREATE EXTENSION IF NOT EXISTS pg_buffercache")
	pages := query[int64](t, c, BenchDB, "SELECT relpages::bigint FROM pg_class WHERE relname = 'pgbench_accounts'")
	before := query[int64](t, c, BenchDB, cached)
	if err := c.Prewarm(ctx); err != nil {
		t.Fatal(err)
	}
	after := query[int64](t, c, BenchDB, cached)
	if pages < 100 || after < pages*95/100 || before > pages/2 {
		t.Errorf("pgbench_accounts: %d pages, %d cached before Prewarm, %d after", pages, before, after)
	}
	if n := query[int64](t, c, BenchDB, "SELECT count(*) FROM pgbench_accounts"); n != scale*100000 {
		t.Errorf("%d accounts after restart, want %d", n, scale*100000)
	}

	// RestartArgv works from another process as the postgres user.
	argv, osUser := c.RestartArgv()
	if osUser != OSUser {
		t.Errorf("RestartArgv user %q", osUser)
	}
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: c.cred, Setpgid: true}
	cmd.Dir = "/"
	cmd.Env = env()
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("%s: %v\n%s", strings.Join(argv, " "), err, out)
	}
	pf, err := readPIDFile(c.DataDir)
	if err != nil || pf.PID == c.PID || pf.Status != "ready" {
		t.Errorf("after pg_ctl restart: %+v, %v (previous PID %d)", pf, err, c.PID)
	}
	if got := query[int64](t, c, "postgres", "SELECT pg_size_bytes(current_setting('shared_buffers'))"); uint64(got) != c.Sizing.SharedBuffers {
		t.Errorf("after ALTER SYSTEM RESET and pg_ctl restart: shared_buffers %d, want the sized %d", got, c.Sizing.SharedBuffers)
	}
	if n := query[int64](t, c, BenchDB, "SELECT count(*) FROM pgbench_accounts"); n != scale*100000 {
		t.Errorf("%d accounts after pg_ctl restart", n)
	}

	// Remove stops the postmaster pg_ctl started (not our child) and the directory goes.
	p, ok := pidAlive(t, pf.PID)
	if !ok {
		t.Fatalf("postmaster %d not running", pf.PID)
	}
	if err := c.Remove(ctx); err != nil {
		t.Fatal(err)
	}
	if alive(h, p) {
		t.Errorf("postmaster %d still runs after Remove", p.pid)
	}
	if _, err := os.Stat(c.Dir); !os.IsNotExist(err) {
		t.Errorf("%s still exists after Remove: %v", c.Dir, err)
	}
	if left := scan(h, realDir(c.DataDir)); len(left) > 0 {
		t.Errorf("processes of the cluster left: %+v", left)
	}
	// The journal entry's undo finds nothing to do.
	if err := j.Restore(); err != nil {
		t.Errorf("restore after Remove: %v", err)
	}
}

// kill -9 of the process that made a cluster leaves a running postmaster
// and its directory; recovering the journal removes both.
func TestCrashRecovery(t *testing.T) {
	integration(t)
	file := filepath.Join(t.TempDir(), "experiment.journal")
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), childEnv+"="+file)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	// Whatever happens below, nothing is left behind.
	t.Cleanup(func() {
		cmd.Process.Kill()
		cmd.Wait()
		if err := journal.Recover(file, Kinds()); err != nil {
			t.Errorf("cleanup recover: %v", err)
		}
	})
	line := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			if s, ok := strings.CutPrefix(sc.Text(), "CLUSTER "); ok {
				line <- s
				return
			}
		}
		close(line)
	}()
	var s string
	select {
	case s = <-line:
	case <-time.After(60 * time.Second):
	}
	pidS, dir, _ := strings.Cut(s, " ")
	pid, err := strconv.Atoi(pidS)
	if err != nil || dir == "" {
		t.Fatalf("child did not report a cluster (%q): %s", s, stderr.String())
	}
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	cmd.Wait()

	pm, ok := pidAlive(t, pid)
	if !ok {
		t.Fatalf("postmaster %d did not outlive its killed parent", pid)
	}
	mustExist(t, filepath.Join(dir, MarkerName))
	mustExist(t, file)

	if err := journal.Recover(file, Kinds()); err != nil {
		t.Fatalf("recover: %v", err)
	}
	h, _ := host.Open("/")
	if alive(h, pm) {
		t.Errorf("postmaster %d still runs after recover", pid)
	}
	if left := scan(h, realDir(filepath.Join(dir, "data"))); len(left) > 0 {
		t.Errorf("processes of the cluster left: %+v", left)
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Errorf("%s still exists after recover: %v", dir, err)
	}
	if _, err := os.Stat(file); !os.IsNotExist(err) {
		t.Errorf("journal still exists after recover: %v", err)
	}
	// Recovering again is a no-op.
	if err := journal.Recover(file, Kinds()); err != nil {
		t.Errorf("second recover: %v", err)
	}
}

// A cluster that cannot start is removed again, with the server's reason.
func TestCreateFailureCleansUp(t *testing.T) {
	integration(t)
	ctx := context.Background()
	j, _ := testJournal(t)
	// Under /tmp: t.TempDir's parents are closed to the postgres user.
	parent, err := os.MkdirTemp("", "pgcluster-test-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(parent) })
	if err := os.Chmod(parent, 0o755); err != nil {
		t.Fatal(err)
	}
	_, err = Create(ctx, j, Options{Dir: parent, SharedBuffers: 128 * miB, Settings: map[string]string{"max_connections": "not-a-number"}})
	if err == nil || !strings.Contains(err.Error(), "max_connections") {
		t.Fatalf("Create with a bad setting: %v, want the server's complaint", err)
	}
	left, _ := filepath.Glob(filepath.Join(parent, dirPrefix+"*"))
	if len(left) > 0 {
		t.Errorf("failed Create left %v", left)
	}
	if len(j.Changes()) != 1 {
		t.Errorf("journal entries: %+v", j.Changes())
	}
	// Refused before anything is journaled: a parent postgres cannot enter,
	// and settings that would move the cluster.
	closed := t.TempDir()
	os.Chmod(closed, 0o700)
	if _, err := Create(ctx, j, Options{Dir: closed}); err == nil || !strings.Contains(err.Error(), "cannot enter") {
		t.Errorf("Create under a directory closed to postgres: %v", err)
	}
	if _, err := Create(ctx, j, Options{Settings: map[string]string{"port": "5432"}}); err == nil {
		t.Error("Create accepted a port override")
	}
	if _, err := Create(ctx, nil, Options{}); err == nil {
		t.Error("Create without a journal succeeded")
	}
	if len(j.Changes()) != 1 {
		t.Errorf("refused Creates were journaled: %+v", j.Changes())
	}
}

// BenchmarkLoad measures what BytesPerScale states — the size of one pgbench
// scale unit, as the slope between two scales — and the load rate:
//
//	go test -run '^$' -bench Load -benchtime 1x ./internal/pgcluster/
func BenchmarkLoad(b *testing.B) {
	integration(b)
	ctx := context.Background()
	j, _ := testJournal(b)
	c, err := Create(ctx, j, Options{SharedBuffers: giB, MaxClients: 4})
	if err != nil {
		b.Fatal(err)
	}
	defer c.Remove(ctx)
	const sizeSQL = `SELECT sum(pg_total_relation_size(oid))::bigint FROM pg_class WHERE relname LIKE 'pgbench\_%' AND relkind = 'r'`
	const lo, hi = 10, 50
	var perScale, secs float64
	for range b.N {
		if err := c.Load(ctx, lo); err != nil {
			b.Fatal(err)
		}
		small := query[int64](b, c, BenchDB, sizeSQL)
		start := time.Now()
		if err := c.Load(ctx, hi); err != nil {
			b.Fatal(err)
		}
		secs = time.Since(start).Seconds()
		perScale = float64(query[int64](b, c, BenchDB, sizeSQL)-small) / (hi - lo)
	}
	b.ReportMetric(perScale, "bytes/scale")
	b.ReportMetric(secs/hi, "s/scale")
	if d := perScale/BytesPerScale - 1; d > 0.02 || d < -0.02 {
		b.Errorf("measured %.0f bytes per scale unit; BytesPerScale says %d", perScale, BytesPerScale)
	}
}
