package cli

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/dbhost/dbhost/internal/engine"
	"github.com/dbhost/dbhost/internal/facts"
	"github.com/dbhost/dbhost/internal/journal"
	"github.com/dbhost/dbhost/internal/testdb"
)

// The live host plan proof (issue 20, item 7): a private PostgreSQL with
// huge_pages=try, a small shared_buffers and a pool too small for it, and
// two private Redis servers, on a budget small enough for this VM.
// `fix --apply --allow-restart` must leave PostgreSQL restarted with
// huge_pages=on and the planned shared_buffers in huge pages, both Redis
// servers within their shares, and `fix --rollback` must put everything
// back.
//
// The machine's own servers (and other tests') are not the test's to
// change: the in-process commands see the private servers only
// (Env.Servers); the others count as the host's other processes.

// hostPlanChecks are the memory checks the plan involves: the pool and
// huge_pages (mem.hugepages.postgres), the sizes (pg.shared_buffers,
// redis.maxmemory) and the budget they share (mem.db_budget). The
// overcommit checks are left out: strict overcommit on a machine other jobs
// use is not this test's to try.
var hostPlanChecks = []string{"mem.hugepages.postgres", "pg.shared_buffers", "pg.work_mem", "redis.maxmemory", "mem.db_budget"}

// Shares of the host budget (--budget), small enough for any VM the suite
// runs on and large enough that the plan grows shared_buffers beyond the
// server's 16MB.
const (
	hostPlanPGShare     = "512MiB"
	hostPlanRedisShare1 = 64 << 20
	hostPlanRedisShare2 = 32 << 20
	hostPlanPool        = "4" // 8 MiB: below what 16MB of shared_buffers needs
)

// Journal kinds of what the test does that is not a kernel knob: the
// cgroup that plays the unit, and the postmaster pg_ctl restarts (testdb
// does not own it). Restored with the kernel values, on signals too.
const (
	kindUnitCgroup = "test.hostplan.unit-cgroup"
	kindPGStop     = "test.hostplan.pg-stop"
)

var hostPlanKinds = journal.Kinds{kindUnitCgroup: undoUnitCgroup, kindPGStop: undoPGStop}

// unitCgroup is a cgroup named like a systemd service, made for the test.
type unitCgroup struct {
	Dir  string `json:"dir"`  // the group
	Root string `json:"root"` // its hierarchy's root, where its processes go back
}

// undoUnitCgroup moves any process left in the group back to the root and
// removes the group. Idempotent.
func undoUnitCgroup(data json.RawMessage) error {
	var u unitCgroup
	if err := json.Unmarshal(data, &u); err != nil {
		return err
	}
	var err error
	for i := 0; i < 50; i++ {
		if _, e := os.Stat(u.Dir); errors.Is(e, fs.ErrNotExist) {
			return nil
		}
		b, _ := os.ReadFile(filepath.Join(u.Dir, "cgroup.procs"))
		for _, pid := range strings.Fields(string(b)) {
			os.WriteFile(filepath.Join(u.Root, "cgroup.procs"), []byte(pid), 0)
		}
		if err = os.Remove(u.Dir); err == nil {
			return nil
		}
		time.Sleep(100 * time.Millisecond)
	}
	return fmt.Errorf("remove cgroup %s: %w", u.Dir, err)
}

// pgStop stops a postmaster pg_ctl started. Idempotent: nothing when its
// data directory holds no postmaster.pid.
type pgStop struct {
	PGCtl   string `json:"pg_ctl"`
	DataDir string `json:"data_dir"`
}

func undoPGStop(data json.RawMessage) error {
	var p pgStop
	if err := json.Unmarshal(data, &p); err != nil {
		return err
	}
	if _, err := os.Stat(filepath.Join(p.DataDir, "postmaster.pid")); err != nil {
		return nil
	}
	out, err := exec.Command("runuser", "-u", "postgres", "--", p.PGCtl, "stop", "-D", p.DataDir, "-m", "immediate", "-w", "-s").CombinedOutput()
	if err != nil && bytes.Contains(out, []byte("No such file")) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("pg_ctl stop %s: %v %s", p.DataDir, err, out)
	}
	return nil
}

// hostPlanLive is the test's host: the journal, the private servers, the
// unit their PostgreSQL runs under and the stand-in systemctl.
type hostPlanLive struct {
	t      *testing.T
	h      *testdb.HostJournal
	pg     *testdb.Server
	r1, r2 *testdb.Server
	unit   string // the unit's name (dbhost-test-pg-PORT.service)
	cgroup unitCgroup
	stand  string // the stand-in systemctl
	calls  string // what it was asked, one line per call
}

// setupHostPlan starts the servers and makes the host fail the plan's
// checks. Every change is undone when the test ends, also on SIGINT and
// SIGTERM (the journal).
func setupHostPlan(t *testing.T) *hostPlanLive {
	t.Helper()
	if testing.Short() {
		t.Skip("integration test: changes the host and restarts a server")
	}
	testdb.Need(t, "root", os.Geteuid() == 0)
	bin, err := testdb.PostgresBin()
	testdb.Need(t, "PostgreSQL binaries", err == nil)
	_, err = exec.LookPath("redis-server")
	testdb.Need(t, "redis-server (apt-get install redis-server)", err == nil)
	_, err = exec.LookPath("redis-cli")
	testdb.Need(t, "redis-cli", err == nil)
	_, err = os.Stat("/proc/sys/vm/nr_hugepages")
	testdb.Need(t, "huge pages (/proc/sys/vm/nr_hugepages)", err == nil)
	testdb.Need(t, "2 MiB huge pages", hugePageKB(t) == 2048)

	h := testdb.JournalLending(t, hostPlanKinds)
	for _, d := range liveEtcDirs {
		guardTree(t, d)
	}
	guardState(t)
	l := &hostPlanLive{t: t, h: h}
	// A pool too small for the server, none to overcommit: huge_pages=try
	// falls back to 4 KiB pages.
	for _, kv := range [][2]string{{"/proc/sys/vm/nr_overcommit_hugepages", "0"}, {"/proc/sys/vm/nr_hugepages", hostPlanPool}} {
		if err := h.Set(kv[0], kv[1]); err != nil {
			t.Fatal(err)
		}
	}
	if got := readTrim(t, "/proc/sys/vm/nr_hugepages"); got != hostPlanPool {
		t.Fatalf("vm.nr_hugepages is %s after setting %s", got, hostPlanPool)
	}
	// shared_buffers and huge_pages in postgresql.conf, where ALTER SYSTEM
	// changes them (on the command line they could not be planned).
	l.pg = testdb.Postgres(t, testdb.Options{ConfSettings: map[string]string{"shared_buffers": "16MB", "huge_pages": "try"}})
	pgctl := filepath.Join(bin, "pg_ctl")
	// pg_ctl restart starts a postmaster testdb does not own: stop it
	// before testdb removes the directory (and on signals, journaled).
	if err := h.Record(kindPGStop, "stop the restarted postmaster of "+l.pg.DataDir, pgStop{PGCtl: pgctl, DataDir: l.pg.DataDir}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { undoPGStop(mustJSON(pgStop{PGCtl: pgctl, DataDir: l.pg.DataDir})) })
	l.unit = fmt.Sprintf("dbhost-test-pg-%d.service", l.pg.Port)
	l.cgroup = makeUnitCgroup(t, h, l.unit)
	l.enterUnit(postmasterPID(t, l.pg))
	// Unbounded Redis servers: the plan bounds each within its share.
	l.r1 = testdb.Redis(t, testdb.Options{Settings: map[string]string{"maxmemory": "0"}})
	l.r2 = testdb.Redis(t, testdb.Options{Settings: map[string]string{"maxmemory": "0"}})
	l.standIn(pgctl)
	return l
}

func mustJSON(v any) json.RawMessage {
	b, _ := json.Marshal(v)
	return b
}

// makeUnitCgroup makes a cgroup named like a systemd service where facts
// reads a process's unit (the name=systemd hierarchy, or else cgroup v2):
// the least the host needs so that dbhost takes the private server for one
// a unit runs, as a packaged server is. PID 1 need not be systemd: nothing
// but the name is used. The group is at the hierarchy's root, journaled
// before it is made, and removed (its processes moved back) when the test
// ends.
func makeUnitCgroup(t *testing.T, h *testdb.HostJournal, unit string) unitCgroup {
	t.Helper()
	root, why := unitHierarchy()
	testdb.Need(t, "a cgroup hierarchy to run the private server under a unit: "+why, root != "")
	u := unitCgroup{Dir: filepath.Join(root, unit), Root: root}
	if err := h.Record(kindUnitCgroup, "cgroup "+u.Dir, u); err != nil {
		t.Fatal(err)
	}
	err := os.Mkdir(u.Dir, 0o755)
	testdb.Need(t, fmt.Sprintf("a writable cgroup hierarchy at %s (mkdir: %v)", root, err), err == nil)
	return u
}

// unitHierarchy returns the mount point of the hierarchy facts reads a
// unit from: name=systemd when this process is in one, else cgroup2 (or
// "" and why not).
func unitHierarchy() (string, string) {
	b, err := os.ReadFile("/proc/self/cgroup")
	if err != nil {
		return "", err.Error()
	}
	named := strings.Contains(string(b), ":name=systemd:")
	mi, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return "", err.Error()
	}
	v2 := ""
	for _, line := range strings.Split(string(mi), "\n") {
		pre, post, ok := strings.Cut(line, " - ")
		f, g := strings.Fields(pre), strings.Fields(post)
		if !ok || len(f) < 5 || len(g) < 3 || f[3] != "/" {
			continue
		}
		switch {
		case named && g[0] == "cgroup" && strings.Contains(","+g[2]+",", ",name=systemd,"):
			return f[4], ""
		case g[0] == "cgroup2" && v2 == "":
			v2 = f[4]
		}
	}
	if named {
		return "", "this process is in a name=systemd hierarchy that is not mounted here"
	}
	if v2 == "" {
		return "", "no cgroup2 or name=systemd mount in /proc/self/mountinfo"
	}
	return v2, ""
}

// enterUnit moves a server's processes (the postmaster and its children)
// into the unit's group.
func (l *hostPlanLive) enterUnit(pid int) {
	l.t.Helper()
	for _, p := range append([]int{pid}, children(pid)...) {
		err := os.WriteFile(filepath.Join(l.cgroup.Dir, "cgroup.procs"), []byte(strconv.Itoa(p)), 0)
		if err != nil && (p == pid || !errors.Is(err, syscall.ESRCH)) { // a backend may have ended
			l.t.Fatalf("moving %d into %s: %v", p, l.cgroup.Dir, err)
		}
	}
	if got := unitOf(l.t, pid); got != l.unit {
		l.t.Fatalf("PID %d runs under %q after the move, want %s", pid, got, l.unit)
	}
}

// children lists the processes whose parent is pid.
func children(pid int) []int {
	ents, _ := os.ReadDir("/proc")
	var out []int
	for _, e := range ents {
		p, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", p))
		if err != nil {
			continue
		}
		s := string(b)
		if i := strings.LastIndexByte(s, ')'); i > 0 {
			if f := strings.Fields(s[i+1:]); len(f) > 1 && f[1] == strconv.Itoa(pid) {
				out = append(out, p)
			}
		}
	}
	return out
}

// unitOf is the service a process runs under, as dbhost reads it.
func unitOf(t testing.TB, pid int) string {
	t.Helper()
	var unit string
	for _, in := range liveFactsOf(t) {
		if in.PID == pid && in.Unit != nil && in.Unit.How == "cgroup" {
			unit = in.Unit.Name
		}
	}
	return unit
}

func liveFactsOf(t testing.TB) []*facts.Instance {
	t.Helper()
	var out bytes.Buffer
	f, closeHost, ok := (&sourceFlags{root: "/"}).gather(t.Context(), Env{Stdout: &out, Stderr: &out}, "test")
	if !ok {
		t.Fatalf("gathering facts: %s", out.String())
	}
	defer closeHost()
	return f.Instances
}

// standIn installs the stand-in systemctl: root's, in a directory only
// root can change (dbhost runs no other), it joins the unit's group as
// systemd would start the service there, then restarts the private server
// with pg_ctl, which keeps the server's command line (postmaster.opts).
func (l *hostPlanLive) standIn(pgctl string) {
	l.t.Helper()
	dir := testdb.RootOnlyDir(l.t, "systemctl")
	l.calls = filepath.Join(dir, "calls")
	l.stand = filepath.Join(dir, "systemctl")
	script := fmt.Sprintf(`#!/bin/sh
echo "$*" >> %s
[ "$1" = restart ] && [ "$2" = %s ] || { echo "stand-in systemctl: only restart %s" >&2; exit 1; }
echo $$ > %s || exit 1
exec runuser -u postgres -- %s restart -D %s -m fast -w -t 120 -s -l %s
`, l.calls, l.unit, l.unit, filepath.Join(l.cgroup.Dir, "cgroup.procs"), pgctl, l.pg.DataDir, filepath.Join(l.pg.Dir, "restart.log"))
	if err := os.WriteFile(l.stand, []byte(script), 0o755); err != nil {
		l.t.Fatal(err)
	}
}

// restartByHand restarts the server as its administrator would, through
// the stand-in systemctl.
func (l *hostPlanLive) restartByHand() {
	l.t.Helper()
	if out, err := exec.Command(l.stand, "restart", l.unit).CombinedOutput(); err != nil {
		l.t.Fatalf("systemctl restart %s: %v\n%s\nlog:\n%s", l.unit, err, out, readFileString(filepath.Join(l.pg.Dir, "restart.log")))
	}
}

// startByHand starts the server again after a failed restart, as its
// administrator would once the rollback put the settings back.
func (l *hostPlanLive) startByHand() {
	l.t.Helper()
	bin, _ := testdb.PostgresBin()
	cmd := exec.Command("sh", "-c", "echo $$ > \"$1\" && exec runuser -u postgres -- \"$2\" start -D \"$3\" -w -t 120 -s -l \"$4\"", "sh",
		filepath.Join(l.cgroup.Dir, "cgroup.procs"), filepath.Join(bin, "pg_ctl"), l.pg.DataDir, filepath.Join(l.pg.Dir, "restart.log"))
	if out, err := cmd.CombinedOutput(); err != nil {
		l.t.Fatalf("pg_ctl start: %v\n%s\nlog:\n%s", err, out, readFileString(filepath.Join(l.pg.Dir, "restart.log")))
	}
}

// checkRestarted judges the server after the apply: restarted under its
// unit, with huge_pages=on and the planned shared_buffers, its shared
// memory in huge pages. It reports whether the server runs at all (a
// restart that failed leaves it down: said with its log).
func (l *hostPlanLive) checkRestarted(before pgState, hpBefore, hpAfter hugePages, wantBuf string) (pgState, bool) {
	t := l.t
	t.Helper()
	if _, err := os.Stat(filepath.Join(l.pg.DataDir, "postmaster.pid")); err != nil {
		t.Errorf("PostgreSQL does not run after the apply (pool %s); its restart log:\n%s", hpAfter, readFileString(filepath.Join(l.pg.Dir, "restart.log")))
		return pgState{}, false
	}
	after := l.pgState()
	switch {
	case after.pid == before.pid || after.started <= before.started:
		t.Errorf("PostgreSQL was not restarted: pid %d started %s", after.pid, after.started)
	case unitOf(t, after.pid) != l.unit:
		t.Errorf("the restarted server does not run under %s", l.unit)
	}
	if after.hugePages != "on" || after.sharedBuf != wantBuf {
		t.Errorf("after the restart: huge_pages %s, shared_buffers %s; planned on, %s", after.hugePages, after.sharedBuf, wantBuf)
	}
	// The server's shared memory is in huge pages: the pool's pages in use
	// grew by what PostgreSQL says its shared memory takes.
	if grown := hpAfter.inUse() - hpBefore.inUse(); grown < after.needPages || grown > after.needPages+2 {
		t.Errorf("huge pages in use grew by %d, PostgreSQL's shared memory takes %d", grown, after.needPages)
	}
	if after.smapsHugeKB <= 0 {
		t.Errorf("the postmaster maps no hugetlb memory (smaps)")
	}
	return after, true
}

// env is what the in-process commands get: the stand-in systemctl and the
// private servers alone.
func (l *hostPlanLive) env(out, errb *bytes.Buffer) Env {
	return Env{Stdout: out, Stderr: errb, Systemctl: []string{l.stand}, HostLock: l.h.HostLock, Servers: func(in *facts.Instance) bool {
		switch in.Engine {
		case engine.Postgres:
			return in.Port == l.pg.Port && in.DataDir == l.pg.DataDir
		case engine.Redis:
			return in.Port == l.r1.Port || in.Port == l.r2.Port
		}
		return false
	}}
}

// run runs dbhost in this process, under the test's host lock (Env.HostLock).
func (l *hostPlanLive) run(args ...string) (int, string, string) {
	l.t.Helper()
	var out, errb bytes.Buffer
	code := 0
	code = Main(append([]string{"dbhost"}, args...), l.env(&out, &errb))
	return code, out.String(), errb.String()
}

func (l *hostPlanLive) budget() string {
	return fmt.Sprintf("postgres:%d=%s,redis:%d=%d,redis:%d=%d", l.pg.Port, hostPlanPGShare,
		l.r1.Port, hostPlanRedisShare1, l.r2.Port, hostPlanRedisShare2)
}

// pgState is what the test reads of the private PostgreSQL.
type pgState struct {
	pid                           int
	started, hugePages, sharedBuf string
	needPages                     int // shared_memory_size_in_huge_pages
	smapsHugeKB                   int // hugetlb memory the postmaster has touched
}

func (l *hostPlanLive) pgState() pgState {
	l.t.Helper()
	s := pgState{pid: postmasterPID(l.t, l.pg)}
	s.started = l.pg.SQL(l.t, "SELECT pg_postmaster_start_time()")
	s.hugePages = l.pg.SQL(l.t, "SHOW huge_pages")
	s.sharedBuf = l.pg.SQL(l.t, "SHOW shared_buffers")
	s.needPages, _ = strconv.Atoi(l.pg.SQL(l.t, "SHOW shared_memory_size_in_huge_pages"))
	s.smapsHugeKB = smapsHugetlbKB(s.pid)
	return s
}

// postmasterPID reads the first line of postmaster.pid (the server's PID
// after any restart).
func postmasterPID(t testing.TB, s *testdb.Server) int {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(s.DataDir, "postmaster.pid"))
	if err != nil {
		t.Fatal(err)
	}
	line, _, _ := strings.Cut(string(b), "\n")
	pid, err := strconv.Atoi(strings.TrimSpace(line))
	if err != nil {
		t.Fatalf("postmaster.pid: %q", line)
	}
	return pid
}

// smapsHugetlbKB sums the hugetlb memory a process has mapped and touched.
func smapsHugetlbKB(pid int) int {
	f, err := os.Open(fmt.Sprintf("/proc/%d/smaps", pid))
	if err != nil {
		return -1
	}
	defer f.Close()
	n := 0
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), ":")
		if ok && (k == "Shared_Hugetlb" || k == "Private_Hugetlb") {
			kb, _ := strconv.Atoi(strings.TrimSuffix(strings.TrimSpace(v), " kB"))
			n += kb
		}
	}
	return n
}

// hugePages is the 2 MiB pool as /proc/meminfo shows it.
type hugePages struct{ total, free, rsvd, surp int }

// inUse counts the pages taken: touched (total - free) and promised to a
// mapping but not touched yet (reserved).
func (p hugePages) inUse() int { return p.total - p.free + p.rsvd }

func (p hugePages) String() string {
	return fmt.Sprintf("total %d, free %d, reserved %d, surplus %d: %d in use", p.total, p.free, p.rsvd, p.surp, p.inUse())
}

func readHugePages(t testing.TB) hugePages {
	t.Helper()
	var p hugePages
	for _, line := range strings.Split(readFileString("/proc/meminfo"), "\n") {
		k, v, _ := strings.Cut(line, ":")
		n, _ := strconv.Atoi(strings.TrimSpace(v))
		switch k {
		case "HugePages_Total":
			p.total = n
		case "HugePages_Free":
			p.free = n
		case "HugePages_Rsvd":
			p.rsvd = n
		case "HugePages_Surp":
			p.surp = n
		}
	}
	return p
}

func hugePageKB(t testing.TB) int {
	for _, line := range strings.Split(readFileString("/proc/meminfo"), "\n") {
		if v, ok := strings.CutPrefix(line, "Hugepagesize:"); ok {
			n, _ := strconv.Atoi(strings.TrimSuffix(strings.TrimSpace(v), " kB"))
			return n
		}
	}
	return 0
}

func readFileString(p string) string {
	b, _ := os.ReadFile(p)
	return string(b)
}

func readTrim(t testing.TB, p string) string {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(string(b))
}

// redisMaxmemory asks a private Redis for its maxmemory in bytes.
func redisMaxmemory(t testing.TB, s *testdb.Server) uint64 {
	t.Helper()
	out, err := exec.Command("redis-cli", "-s", s.Socket, "CONFIG", "GET", "maxmemory").Output()
	if err != nil {
		t.Fatalf("redis-cli -s %s CONFIG GET maxmemory: %v", s.Socket, err)
	}
	f := strings.Fields(string(out))
	if len(f) != 2 {
		t.Fatalf("CONFIG GET maxmemory: %q", out)
	}
	n, err := strconv.ParseUint(f[1], 10, 64)
	if err != nil {
		t.Fatalf("CONFIG GET maxmemory: %q", out)
	}
	return n
}

// files is the state a rollback must put back byte for byte: every entry
// of the directories apply writes into and the servers' own configuration
// files.
func (l *hostPlanLive) files() string {
	l.t.Helper()
	var out []string
	for _, d := range liveEtcDirs {
		filepath.WalkDir(d, func(p string, _ fs.DirEntry, err error) error {
			if err == nil {
				out = append(out, entryLine(p))
			}
			return nil
		})
	}
	for _, p := range []string{filepath.Join(l.pg.DataDir, "postgresql.auto.conf"), filepath.Join(l.pg.DataDir, "postgresql.conf"), l.r1.Conf, l.r2.Conf} {
		out = append(out, entryLine(p))
	}
	sort.Strings(out)
	return strings.Join(out, "\n") + "\n"
}

// plannedSetting finds "setting NAME KEY: OLD -> NEW by" in --plan's
// output and returns NEW ("" when not planned).
func plannedSetting(plan, name, key string) string {
	re := regexp.MustCompile(`(?m)^setting ` + regexp.QuoteMeta(name) + ` ` + regexp.QuoteMeta(key) + `: \S+ -> (\S+) by `)
	if m := re.FindStringSubmatch(plan); m != nil {
		return m[1]
	}
	return ""
}

// plannedValue finds "value PATH: OLD -> NEW (for" and returns NEW.
func plannedValue(plan, path string) string {
	re := regexp.MustCompile(`(?m)^value ` + regexp.QuoteMeta(path) + `: \S+ -> (\S+) \(for `)
	if m := re.FindStringSubmatch(plan); m != nil {
		return m[1]
	}
	return ""
}

// TestLiveHostPlan is the live restart proof of the host plan: the plan
// grows shared_buffers within PostgreSQL's share, sizes the pool for it
// and sets huge_pages=on; the apply writes the pool before the restart it
// does through the unit, so the server comes back in huge pages; both
// Redis servers are bounded within their shares; the rollback puts back
// postgresql.auto.conf byte for byte, the pool, the Redis bounds and every
// file. It fails when the pool is sized for today's shared_buffers (the
// restart with huge_pages=on fails, or the server is not in huge pages),
// when a Redis bound exceeds its share, or when anything is not put back.
func TestLiveHostPlan(t *testing.T) {
	l := setupHostPlan(t)
	only := strings.Join(hostPlanChecks, ",")
	poolBefore := readTrim(t, "/proc/sys/vm/nr_hugepages")
	hpBefore := readHugePages(t)
	before := l.pgState()
	t.Logf("before: pool vm.nr_hugepages %s (%s); postgres:%d pid %d, shared_buffers %s, huge_pages %s, needs %d huge pages, %d kB hugetlb mapped",
		poolBefore, hpBefore, l.pg.Port, before.pid, before.sharedBuf, before.hugePages, before.needPages, before.smapsHugeKB)
	if before.hugePages != "try" || before.sharedBuf != "16MB" || before.smapsHugeKB > 0 {
		t.Fatalf("the private server does not start as the test needs it: %+v", before)
	}
	if hpBefore.inUse() != 0 {
		t.Logf("note: %d huge pages are in use by something else before the apply", hpBefore.inUse())
	}
	autoBefore := readFileString(filepath.Join(l.pg.DataDir, "postgresql.auto.conf"))
	filesBefore := l.files()
	redisBefore := []uint64{redisMaxmemory(t, l.r1), redisMaxmemory(t, l.r2)}

	code, help, _ := l.run("fix", "--help")
	if code != ExitOK || !strings.Contains(help, "--budget") {
		t.Fatalf("dbhost fix has no --budget flag (the budget branch is not merged):\n%s", help)
	}
	budget := l.budget()
	code, plan, errs := l.run("fix", "--plan", "--only", only, "--budget", budget)
	t.Logf("fix --plan --only %s --budget %s: exit %d\n%s%s", only, budget, code, plan, errs)
	if code != ExitFindings {
		t.Fatalf("--plan: exit %d, want %d (changes pending)", code, ExitFindings)
	}
	pgName := fmt.Sprintf("postgres:%d", l.pg.Port)
	wantBuf := plannedSetting(plan, pgName, "shared_buffers")
	wantPool := plannedValue(plan, "/proc/sys/vm/nr_hugepages")
	if wantBuf == "" || wantPool == "" || plannedSetting(plan, pgName, "huge_pages") != "on" {
		t.Fatalf("the plan lacks shared_buffers (%q), huge_pages on or the pool (%q)", wantBuf, wantPool)
	}
	redisWant := []string{plannedSetting(plan, fmt.Sprintf("redis:%d", l.r1.Port), "maxmemory"), plannedSetting(plan, fmt.Sprintf("redis:%d", l.r2.Port), "maxmemory")}
	t.Logf("planned: shared_buffers %s -> %s, vm.nr_hugepages %s -> %s, maxmemory %v", before.sharedBuf, wantBuf, poolBefore, wantPool, redisWant)

	start := time.Now()
	code, out, errs := l.run("fix", "--apply", "--allow-restart", "--only", only, "--budget", budget)
	applyTime := time.Since(start)
	t.Logf("fix --apply --allow-restart: exit %d in %v\n%s%s", code, applyTime.Round(time.Millisecond), out, errs)
	if code != ExitOK && code != ExitFindings {
		t.Fatalf("--apply: exit %d", code)
	}
	if code != ExitOK {
		t.Errorf("--apply: a check still fails in the re-audit (exit %d)", code)
	}
	id := changeSetID(t, out)
	if !strings.Contains(out, "restarted through "+l.unit+"; it runs with the new values") {
		t.Errorf("--apply did not restart %s through %s", pgName, l.unit)
	}
	if b := readFileString(l.calls); b != "restart "+l.unit+"\n" {
		t.Errorf("systemctl calls: %q", b)
	}
	hpAfter := readHugePages(t)
	poolAfter := readTrim(t, "/proc/sys/vm/nr_hugepages")
	if poolAfter != wantPool {
		t.Errorf("vm.nr_hugepages is %s after the apply, planned %s", poolAfter, wantPool)
	}
	after, up := l.checkRestarted(before, hpBefore, hpAfter, wantBuf)
	t.Logf("after apply: pool vm.nr_hugepages %s (%s); pid %d (was %d), started %s (was %s), shared_buffers %s, huge_pages %s, needs %d huge pages, %d kB hugetlb touched",
		poolAfter, hpAfter, after.pid, before.pid, after.started, before.started, after.sharedBuf, after.hugePages, after.needPages, after.smapsHugeKB)
	for i, r := range []*testdb.Server{l.r1, l.r2} {
		share := []uint64{hostPlanRedisShare1, hostPlanRedisShare2}[i]
		got := redisMaxmemory(t, r)
		t.Logf("redis:%d maxmemory %d -> %d (share %d, planned %s)", r.Port, redisBefore[i], got, share, redisWant[i])
		if got == 0 || got > share {
			t.Errorf("redis:%d maxmemory %d after the apply: not within its share of %d", r.Port, got, share)
		}
	}

	start = time.Now()
	code, out, errs = l.run("fix", "--rollback", id)
	rollbackTime := time.Since(start)
	t.Logf("fix --rollback %s: exit %d in %v\n%s%s", id, code, rollbackTime.Round(time.Millisecond), out, errs)
	if code != ExitOK {
		t.Fatalf("--rollback: exit %d", code)
	}
	if got := readFileString(filepath.Join(l.pg.DataDir, "postgresql.auto.conf")); got != autoBefore {
		t.Errorf("postgresql.auto.conf after the rollback:\n%s\nwas:\n%s", got, autoBefore)
	}
	if got := readTrim(t, "/proc/sys/vm/nr_hugepages"); got != poolBefore {
		t.Errorf("vm.nr_hugepages is %s after the rollback, was %s", got, poolBefore)
	}
	for i, r := range []*testdb.Server{l.r1, l.r2} {
		if got := redisMaxmemory(t, r); got != redisBefore[i] {
			t.Errorf("redis:%d maxmemory is %d after the rollback, was %d", r.Port, got, redisBefore[i])
		}
	}
	sameListing(t, "files after --rollback", filesBefore, l.files())
	// The restart settings take their old values back at the next restart
	// (or the first start, when the apply's restart failed): the
	// administrator's, here through the stand-in.
	if up {
		l.restartByHand()
	} else {
		l.startByHand()
	}
	back := l.pgState()
	hpBack := readHugePages(t)
	t.Logf("after rollback and a restart: pool %s (%s); shared_buffers %s, huge_pages %s, %d kB hugetlb",
		readTrim(t, "/proc/sys/vm/nr_hugepages"), hpBack, back.sharedBuf, back.hugePages, back.smapsHugeKB)
	if back.sharedBuf != before.sharedBuf || back.hugePages != before.hugePages || hpBack.inUse() != hpBefore.inUse() {
		t.Errorf("after the rollback and a restart the server runs with shared_buffers %s, huge_pages %s, %d huge pages in use; before: %s, %s, %d",
			back.sharedBuf, back.hugePages, hpBack.inUse(), before.sharedBuf, before.hugePages, hpBefore.inUse())
	}
	t.Logf("FIGURES: pool %s -> %s pages; shared_buffers %s -> %s; huge pages in use after restart %d (PostgreSQL needs %d, %d kB touched); apply %v; rollback %v",
		poolBefore, poolAfter, before.sharedBuf, after.sharedBuf, hpAfter.inUse()-hpBefore.inUse(), after.needPages, after.smapsHugeKB,
		applyTime.Round(time.Millisecond), rollbackTime.Round(time.Millisecond))
}

// TestLiveHostPlanHarness proves the harness TestLiveHostPlan stands on:
// the private servers start, dbhost reads the unit the PostgreSQL runs
// under, a restart through the stand-in systemctl brings it back under
// that unit with the same command line, and --plan on the private
// servers alone runs (whatever it plans).
func TestLiveHostPlanHarness(t *testing.T) {
	l := setupHostPlan(t)
	before := l.pgState()
	l.restartByHand()
	after := l.pgState()
	if after.pid == before.pid || after.started <= before.started || unitOf(t, after.pid) != l.unit {
		t.Fatalf("restart through the stand-in: pid %d -> %d, started %s -> %s, unit %q", before.pid, after.pid, before.started, after.started, unitOf(t, after.pid))
	}
	if after.sharedBuf != "16MB" || after.hugePages != "try" {
		t.Fatalf("after the restart: shared_buffers %s, huge_pages %s", after.sharedBuf, after.hugePages)
	}
	code, out, errs := l.run("fix", "--plan", "--only", strings.Join(hostPlanChecks, ","))
	t.Logf("fix --plan: exit %d\n%s%s", code, out, errs)
	for _, s := range []*testdb.Server{l.pg, l.r1, l.r2} {
		if name := fmt.Sprintf("%s:%d", map[string]string{"postgres": "postgres", "redis": "redis"}[s.Engine], s.Port); !strings.Contains(out, name) {
			t.Errorf("--plan does not name %s", name)
		}
	}
	if strings.Contains(out, ":5432 ") || strings.Contains(out, ":6379 ") || strings.Contains(out, ":3306 ") {
		t.Errorf("--plan names a server that is not the test's")
	}
}
