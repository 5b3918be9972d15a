package contention

import (
	"context"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/dbhost/dbhost/internal/engine"
	"github.com/dbhost/dbhost/internal/host"
)

// fixedCPU replays recorded per-CPU perf counts.
type fixedCPU map[int]uint64

func (f fixedCPU) read() (map[int]uint64, error) { return f, nil }
func (f fixedCPU) source() string                { return perfSource }
func (f fixedCPU) close()                        {}

// fixedCount replays a recorded query counter.
type fixedCount uint64

func (f fixedCount) read(context.Context) (uint64, error) { return uint64(f), nil }
func (f fixedCount) close()                               {}

var epoch = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// fixtureSampler is a sampler over recorded snapshot i: its files through
// the host model, its perf and query counts as recorded.
func fixtureSampler(t testing.TB, rec recording, i int, root string) *Sampler {
	t.Helper()
	if root == "" {
		root = filepath.Join("testdata", "rec", rec.Snapshots[i].Dir)
	}
	h, err := host.Open(root)
	if err != nil {
		t.Fatal(err)
	}
	s := &Sampler{h: h, cpu: fixedCPU(rec.Snapshots[i].CPUs)}
	for j, ri := range rec.Instances {
		in := &engine.Instance{Engine: ri.Engine, Flavor: ri.Flavor, PID: ri.PID, Port: ri.Port}
		own := map[int]bool{}
		for _, p := range ri.Own {
			own[p] = true
		}
		q := &querySource{c: fixedCount(rec.Snapshots[i].Queries[j]), source: ri.Source, own: own, ownQueries: 1, transactions: ri.Transactions}
		s.targets = append(s.targets, &target{in: in, q: q})
	}
	return s
}

func fixtureSnapshot(t testing.TB, rec recording, i int) *Snapshot {
	t.Helper()
	sn := fixtureSampler(t, rec, i, "").Sample(context.Background())
	sn.at = epoch.Add(rec.Snapshots[i].At)
	return sn
}

func fixtureReport(t testing.TB, rec recording, i, j int, c Capacity) *Report {
	t.Helper()
	return Compare(fixtureSnapshot(t, rec, i), fixtureSnapshot(t, rec, j), c)
}

// statField reads a line's first number from a recorded /proc/stat,
// independently of procfs.
func statField(t testing.TB, dir, key string) uint64 {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", "rec", dir, "proc", "stat"))
	if err != nil {
		t.Fatal(err)
	}
	for _, ln := range strings.Split(string(b), "\n") {
		f := strings.Fields(ln)
		if len(f) > 1 && f[0] == key {
			n, err := strconv.ParseUint(f[1], 10, 64)
			if err != nil {
				t.Fatal(err)
			}
			return n
		}
	}
	t.Fatalf("no %s in %s/proc/stat", key, dir)
	return 0
}

// taskCounts reads every recorded thread's switches, by "pid/tid".
func taskCounts(t testing.TB, dir string) map[string]uint64 {
	t.Helper()
	out := map[string]uint64{}
	files, _ := filepath.Glob(filepath.Join("testdata", "rec", dir, "proc", "*", "task", "*", "status"))
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		var n uint64
		for _, ln := range strings.Split(string(b), "\n") {
			if k, v, ok := strings.Cut(ln, ":"); ok && (k == "voluntary_ctxt_switches" || k == "nonvoluntary_ctxt_switches") {
				x, _ := strconv.ParseUint(strings.TrimSpace(v), 10, 64)
				n += x
			}
		}
		parts := strings.Split(f, string(filepath.Separator))
		out[parts[len(parts)-4]+"/"+parts[len(parts)-2]] = n
	}
	return out
}

func near(a, b float64) bool { return math.Abs(a-b) <= 1e-9*math.Max(1, math.Abs(b)) }

// TestFixtureHostRates checks the host figures of two recorded intervals
// against the recorded files read without procfs.
func TestFixtureHostRates(t *testing.T) {
	rec := loadRecording(t)
	c := Assumed("test")
	for _, p := range [][2]int{{0, 1}, {2, 3}} {
		a, b := rec.Snapshots[p[0]], rec.Snapshots[p[1]]
		r := fixtureReport(t, rec, p[0], p[1], c)
		secs := (b.At - a.At).Seconds()
		if !near(r.Seconds, secs) {
			t.Fatalf("interval %v s, recorded %v s", r.Seconds, secs)
		}
		hf := r.Host
		want := float64(statField(t, b.Dir, "ctxt")-statField(t, a.Dir, "ctxt")) / secs
		if !hf.Switches.OK() || !near(hf.Switches.Value, want) || hf.CPUs != 2 || !near(hf.SwitchesPerCore.Value, want/2) {
			t.Errorf("%s-%s: host %+v, want %.1f/s over 2 CPUs", a.Dir, b.Dir, hf.Switches, want)
		}
		if hf.RunQueue.RunningStart != statField(t, a.Dir, "procs_running") || hf.RunQueue.RunningEnd != statField(t, b.Dir, "procs_running") || hf.RunQueue.Load[0] <= 0 {
			t.Errorf("run queue %+v", hf.RunQueue)
		}
		if hf.Averaged || hf.PerCPUSource != perfSource || len(hf.PerCPU) != 2 {
			t.Fatalf("per-CPU %q averaged %v: %+v", hf.PerCPUSource, hf.Averaged, hf.PerCPU)
		}
		sum := 0.0
		for _, cf := range hf.PerCPU {
			w := float64(b.CPUs[cf.CPU]-a.CPUs[cf.CPU]) / secs
			if !near(cf.Switches, w) || !near(cf.Share, w/AssumedPerCore) || cf.Busy < 0 || cf.Busy > 100 {
				t.Errorf("cpu%d %+v, want %.1f switches/s", cf.CPU, cf, w)
			}
			sum += cf.Switches
		}
		// Recorded perf counts and ctxt describe the same interval.
		if !within(sum, hf.Switches.Value, 0.15) {
			t.Errorf("%s-%s: per-CPU sum %.0f/s, ctxt %.0f/s", a.Dir, b.Dir, sum, hf.Switches.Value)
		}
		lo, hi := math.Min(hf.PerCPU[0].Busy, hf.PerCPU[1].Busy), math.Max(hf.PerCPU[0].Busy, hf.PerCPU[1].Busy)
		if hf.Busy.Value < lo-0.5 || hf.Busy.Value > hi+0.5 {
			t.Errorf("host busy %.1f %% outside its CPUs' %.1f..%.1f", hf.Busy.Value, lo, hi)
		}
	}
}

// TestFixtureInstances checks per-instance switches, came/went and query
// rates against the recorded task status files and counters.
func TestFixtureInstances(t *testing.T) {
	rec := loadRecording(t)
	pg, my := rec.Instances[0], rec.Instances[1]
	if pg.Engine != engine.Postgres || my.Engine != engine.MySQL || len(pg.Own) != 1 {
		t.Fatalf("recording holds %+v", rec.Instances)
	}
	for _, p := range [][2]int{{0, 1}, {1, 2}, {2, 3}} {
		a, b := rec.Snapshots[p[0]], rec.Snapshots[p[1]]
		r := fixtureReport(t, rec, p[0], p[1], Assumed("test"))
		secs := r.Seconds
		ca, cb := taskCounts(t, a.Dir), taskCounts(t, b.Dir)
		// Independent sums: every recorded process belongs to one of the
		// two instances; dbhost's own backend is left out.
		want := map[string]uint64{}
		came := map[string]int{}
		for k, n := range cb {
			pid, _ := strconv.Atoi(strings.Split(k, "/")[0])
			inst := "postgres"
			if pid == my.PID {
				inst = "mysql"
			}
			if pid == pg.Own[0] {
				continue
			}
			if m, ok := ca[k]; ok {
				want[inst] += n - m
			} else {
				came[inst]++
			}
		}
		for i, in := range r.Instances {
			ri := rec.Instances[i]
			if in.Err != "" || in.Queries.Err != "" {
				t.Fatalf("%s: %q %q", in.Name, in.Err, in.Queries.Err)
			}
			if in.SwitchCount != want[in.Engine] || !near(in.Switches, float64(want[in.Engine])/secs) || in.ThreadsCame != came[in.Engine] {
				t.Errorf("%s-%s %s: %d switches (%.1f/s), %d threads came; want %d, %d", a.Dir, b.Dir, in.Name, in.SwitchCount, in.Switches, in.ThreadsCame, want[in.Engine], came[in.Engine])
			}
			if !near(in.Voluntary+in.Involuntary, in.Switches) {
				t.Errorf("%s: voluntary %.1f + involuntary %.1f != %.1f", in.Name, in.Voluntary, in.Involuntary, in.Switches)
			}
			q := b.Queries[i] - a.Queries[i] - 1
			if in.Queries.Count != q || !near(in.Queries.PerSecond, float64(q)/secs) || in.Queries.Source != ri.Source {
				t.Errorf("%s: queries %+v, want %d", in.Name, in.Queries, q)
			}
			if q > 0 && (in.PerQuery == nil || !near(*in.PerQuery, 2*float64(in.SwitchCount)/float64(q))) {
				t.Errorf("%s: per query %v", in.Name, deref(in.PerQuery))
			}
		}
	}
	// pgbench's four clients connected between t1 and t2: their backends
	// came, and are not counted in that interval.
	r := fixtureReport(t, rec, 1, 2, Assumed("test"))
	if in := r.Instances[0]; in.ProcessesCame < 4 || in.ThreadsCame < 4 {
		t.Errorf("t1-t2: %d processes / %d threads came, want pgbench's 4 backends", in.ProcessesCame, in.ThreadsCame)
	}
	// MariaDB ran 300 SELECT 1 between t2 and t3.
	r = fixtureReport(t, rec, 2, 3, Assumed("test"))
	if in := r.Instances[1]; in.Queries.Count != 300 || in.Processes != 1 || in.Threads < 5 {
		t.Errorf("t2-t3 MariaDB: %d queries over %d processes / %d threads, want 300 over one process", in.Queries.Count, in.Processes, in.Threads)
	}
}

// TestFixtureVerdicts judges the recorded intervals.
func TestFixtureVerdicts(t *testing.T) {
	rec := loadRecording(t)
	idle := fixtureReport(t, rec, 0, 1, Assumed("test"))
	for _, in := range idle.Instances {
		v, ok := verdict(idle, IDPerQuery, in.Name)
		if !ok || v.Status != Info || !strings.HasPrefix(v.Summary, "idle: no ") || v.Value != nil {
			t.Errorf("idle %s: %+v", in.Name, v)
		}
	}
	busy := fixtureReport(t, rec, 2, 3, Assumed("test"))
	if v, _ := verdict(busy, IDPerCore, "host"); v.Status != OK || v.Value == nil || *v.Value > MaxShare {
		t.Errorf("per core under pgbench on the assumed capacity: %+v", v)
	}
	for _, in := range busy.Instances {
		v, _ := verdict(busy, IDPerQuery, in.Name)
		if v.Value == nil || *v.Value < MinPerQuery || v.Status == Unknown {
			t.Errorf("busy %s: %+v", in.Name, v)
		}
		if in.Engine == "postgres" && !strings.Contains(v.Summary, "per transaction") {
			t.Errorf("pg_stat_database counts transactions; the verdict says %q", v.Summary)
		}
	}
	// Against a capacity a hundredth of the assumed one, the same rates
	// spend more than 10 % of a core switching.
	small := Assumed("test")
	small.PerCore /= 100
	busy = fixtureReport(t, rec, 2, 3, small)
	if v, _ := verdict(busy, IDPerCore, "host"); v.Status != Warning {
		t.Errorf("per core against %.0f/s: %+v", small.PerCore, v)
	}
}

// TestVerdictThresholds walks the thresholds with figures derived from a
// recorded interval: the recorded switch counts, with the query count or
// the capacity set to land on each side of each threshold.
func TestVerdictThresholds(t *testing.T) {
	rec := loadRecording(t)
	base := fixtureReport(t, rec, 2, 3, Assumed("test"))
	my := base.Instances[1]
	if my.Queries.Count != 300 {
		t.Fatalf("recorded MariaDB counted %d queries, want 300", my.Queries.Count)
	}
	for _, tc := range []struct {
		perQuery     float64
		transactions bool
		want         string
	}{
		{1.5, false, Info}, {2, false, OK}, {9.9, false, OK}, {10, false, OK}, {10.5, false, Warning}, {40, false, Warning},
		{1.5, true, Info}, {5, true, OK}, {10.5, true, Info}, {40, true, Info},
	} {
		// The recorded 300 queries, with the switches that give the ratio.
		in := my
		in.Queries.Transactions = tc.transactions
		in.SwitchCount = uint64(math.Round(tc.perQuery * float64(in.Queries.Count) / 2))
		in.Switches = float64(in.SwitchCount) / base.Seconds
		pq := 2 * float64(in.SwitchCount) / float64(in.Queries.Count)
		in.PerQuery = &pq
		v := perQueryVerdict(in, base.Seconds)
		if v.Status != tc.want || v.Value == nil || !near(*v.Value, pq) || perQueryStatus(pq, tc.transactions) != tc.want {
			t.Errorf("%.2f per query (transactions %v): %s %q, want %s", pq, tc.transactions, v.Status, v.Summary, tc.want)
		}
	}
	// No queries: idle, not a division by zero.
	in := my
	in.Queries.Count, in.PerQuery = 0, nil
	if v := perQueryVerdict(in, base.Seconds); v.Status != Info || v.Value != nil || !strings.Contains(v.Summary, "idle") {
		t.Errorf("idle: %+v", v)
	}
	// An unreachable server: unknown with its reason.
	in.Queries.Err = "connect unix:/x: connection refused"
	if v := perQueryVerdict(in, base.Seconds); v.Status != Unknown || !strings.Contains(v.Summary, "connection refused") {
		t.Errorf("unreachable: %+v", v)
	}

	// Per core: the busiest recorded core against capacities that put it
	// at 5 %, exactly 10 % and just above.
	top := 0.0
	for _, cf := range base.Host.PerCPU {
		top = math.Max(top, cf.Switches)
	}
	for _, tc := range []struct {
		share float64
		want  string
	}{{0.05, OK}, {0.10, OK}, {0.1001, Warning}, {0.5, Warning}} {
		c := Assumed("test")
		c.PerCore = top / tc.share
		v := perCoreVerdict(base.Host, c)
		if v.Status != tc.want || v.Value == nil || math.Abs(*v.Value-tc.share) > 1e-9 || shareStatus(tc.share) != tc.want {
			t.Errorf("share %.4f: %s %v %q", tc.share, v.Status, deref(v.Value), v.Summary)
		}
	}

	// Spinning: the recorded MariaDB switch rate with half a core or more
	// of CPU and a capacity that makes it under 1 % of that CPU's
	// switching: the reminder; below half a core, none.
	for _, tc := range []struct {
		cores, share float64
		want         bool
	}{{0.9, 0.005, true}, {0.5, 0.0099, true}, {0.9, 0.02, false}, {0.4, 0.001, false}} {
		c := Assumed("test")
		c.PerCore = my.Switches / (tc.cores * tc.share)
		v, ok := spinVerdict(my.Name, tc.cores, my.Switches, tc.cores >= BusyCores, c)
		if ok != tc.want || (ok && (v.Status != Info || !strings.Contains(v.Reason, "spin"))) {
			t.Errorf("%.1f cores, share %.4f: %v %+v", tc.cores, tc.share, ok, v)
		}
	}
}

// TestAveragedFallback: without per-CPU counters the total is divided
// evenly and the figures say so, with the reason.
func TestAveragedFallback(t *testing.T) {
	rec := loadRecording(t)
	snap := func(i int) *Snapshot {
		s := fixtureSampler(t, rec, i, "")
		s.cpu, s.cpuWhy = openCPUCounters(s.h) // a recorded tree is not the live system
		if s.cpu != nil {
			t.Fatalf("per-CPU counters on a recorded tree: %s", s.cpu.source())
		}
		sn := s.Sample(context.Background())
		sn.at = epoch.Add(rec.Snapshots[i].At)
		return sn
	}
	r := Compare(snap(2), snap(3), Assumed("test"))
	hf := r.Host
	if !hf.Averaged || !strings.HasPrefix(hf.PerCPUSource, averagedSource) ||
		!strings.Contains(hf.PerCPUSource, "live system") || !strings.Contains(hf.PerCPUSource, "/proc/schedstat") {
		t.Fatalf("source %q averaged %v", hf.PerCPUSource, hf.Averaged)
	}
	for _, cf := range hf.PerCPU {
		if !near(cf.Switches, hf.Switches.Value/2) {
			t.Errorf("cpu%d %.1f, want %.1f", cf.CPU, cf.Switches, hf.Switches.Value/2)
		}
	}
	if v, _ := verdict(r, IDPerCore, "host"); !strings.Contains(v.Summary, "averaged") {
		t.Errorf("verdict %q does not say the figure is averaged", v.Summary)
	}
}

// copyTree copies a recorded snapshot so a test can damage it.
func copyTree(t testing.TB, src string) string {
	t.Helper()
	dst := t.TempDir()
	err := filepath.Walk(src, func(p string, fi os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, p)
		if fi.IsDir() {
			return os.MkdirAll(filepath.Join(dst, rel), 0o755)
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		return os.WriteFile(filepath.Join(dst, rel), b, 0o644)
	})
	if err != nil {
		t.Fatal(err)
	}
	return dst
}

// TestDamagedInput: an unparsable /proc/stat, a vanished main process and a
// thread ID reused with lower counts are reported, not crashed on.
func TestDamagedInput(t *testing.T) {
	rec := loadRecording(t)
	a := fixtureSnapshot(t, rec, 2)

	bad := copyTree(t, filepath.Join("testdata", "rec", "t3"))
	if err := os.WriteFile(filepath.Join(bad, "proc", "stat"), []byte("cpu  1 2\nctxt notanumber\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	// The MariaDB server exits; one PostgreSQL thread's counts go down
	// (its ID now names another thread).
	if err := os.RemoveAll(filepath.Join(bad, "proc", strconv.Itoa(rec.Instances[1].PID))); err != nil {
		t.Fatal(err)
	}
	pgPID := rec.Instances[0].PID
	st := filepath.Join(bad, "proc", strconv.Itoa(pgPID), "task", strconv.Itoa(pgPID), "status")
	b, err := os.ReadFile(st)
	if err != nil {
		t.Fatal(err)
	}
	var lines []string
	for _, ln := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(ln, "voluntary_ctxt_switches:") {
			ln = "voluntary_ctxt_switches:\t0"
		}
		lines = append(lines, ln)
	}
	if err := os.WriteFile(st, []byte(strings.Join(lines, "\n")), 0o644); err != nil {
		t.Fatal(err)
	}
	s := fixtureSampler(t, rec, 3, bad)
	bs := s.Sample(context.Background())
	bs.at = epoch.Add(rec.Snapshots[3].At)
	r := Compare(a, bs, Assumed("test"))

	if r.Host.Switches.OK() || !strings.Contains(r.Host.Switches.Err, "ctxt") {
		t.Errorf("unparsable /proc/stat: %+v", r.Host.Switches)
	}
	if v, _ := verdict(r, IDPerCore, "host"); v.Status != Unknown {
		t.Errorf("per-core verdict on an unparsable /proc/stat: %+v", v)
	}
	pg, my := r.Instances[0], r.Instances[1]
	if my.Err == "" || !strings.Contains(my.Err, "not running") {
		t.Errorf("vanished MariaDB: %q", my.Err)
	}
	if v, _ := verdict(r, IDPerQuery, my.Name); v.Status != Unknown {
		t.Errorf("per-query verdict of a vanished server: %+v", v)
	}
	if pg.ThreadsCame != 1 || pg.ThreadsWent != 1 || pg.Err != "" {
		t.Errorf("reused thread ID: came %d went %d err %q", pg.ThreadsCame, pg.ThreadsWent, pg.Err)
	}
	full := fixtureReport(t, rec, 2, 3, Assumed("test"))
	if pg.Processes != full.Instances[0].Processes || pg.Threads != full.Instances[0].Threads-1 {
		t.Errorf("%d processes / %d threads counted, want %d / %d", pg.Processes, pg.Threads, full.Instances[0].Processes, full.Instances[0].Threads-1)
	}
}

// TestSchedstat parses /proc/schedstat. This kernel has none; the text is
// derived from the recorded per-CPU perf counts written in the kernel's
// version 15 layout (cpuN yld 0 sched goidle ttwu ttwu_local run wait
// timeslices).
func TestSchedstat(t *testing.T) {
	rec := loadRecording(t)
	cpus := rec.Snapshots[3].CPUs
	var b strings.Builder
	b.WriteString("version 15\ntimestamp 4295\n")
	for c := 0; c < len(cpus); c++ {
		idle := cpus[c] / 3
		fmt.Fprintf(&b, "cpu%d 0 0 %d %d 10 5 1000 2000 %d\n", c, cpus[c]+7, idle, cpus[c]-idle)
		fmt.Fprintf(&b, "domain0 3 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0\n")
	}
	got, err := parseSchedstat(b.String())
	if err != nil {
		t.Fatal(err)
	}
	for c, n := range cpus {
		if got[c] != n {
			t.Errorf("cpu%d: %d, want %d", c, got[c], n)
		}
	}
	for _, bad := range []string{"version 14\ncpu0 0 0 1 1 1 1 1 1 1\n", "version 15\ncpu0 1 2\n", "version 15\n", "version 15\ncpu0 0 0 1 x 1 1 1 1 1\n"} {
		if _, err := parseSchedstat(bad); err == nil {
			t.Errorf("%q parsed", bad)
		}
	}
}

// TestHostSpin: a busy host with few switches gets the spinning reminder
// only when its databases are what keeps it busy.
func TestHostSpin(t *testing.T) {
	rec := loadRecording(t)
	c := Assumed("test")
	r := fixtureReport(t, rec, 2, 3, c)
	hostCores := r.Host.Busy.Value / 100 * float64(r.Host.CPUs)
	if r.Host.Busy.Value < BusyPercent {
		t.Fatalf("recorded host %.0f %% busy under pgbench", r.Host.Busy.Value)
	}
	// A capacity that makes the recorded switching 0.5 % of the busy cores.
	c.PerCore = r.Host.Switches.Value / (hostCores * 0.005)
	r = fixtureReport(t, rec, 2, 3, c)
	has := func(r *Report) bool { _, ok := verdict(r, IDSpin, "host"); return ok }
	var db float64
	for _, in := range r.Instances {
		db += in.CPUCores
	}
	if got, want := has(r), db >= hostCores/2; got != want {
		t.Errorf("databases use %.2f of %.2f busy cores: spin reminder %v, want %v", db, hostCores, got, want)
	}
	r.Instances[0].CPUCores = hostCores // the databases keep the host busy
	r.Verdicts = judge(r)
	if !has(r) {
		t.Errorf("no spin reminder for a host its databases keep busy: %+v", r.Verdicts)
	}
	r.Instances[0].CPUCores, r.Instances[1].CPUCores = 0.01, 0.01 // something else does
	r.Verdicts = judge(r)
	if has(r) {
		t.Errorf("spin reminder for a host busy with other work")
	}
}
