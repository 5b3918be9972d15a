package knob_test

import (
	"context"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/dbhost/dbhost/internal/change"
	"github.com/dbhost/dbhost/internal/engine"
	"github.com/dbhost/dbhost/internal/knob"
	"github.com/dbhost/dbhost/internal/testdb"
)

func integration(t *testing.T) {
	t.Helper()
	if testing.Short() {
		t.Skip("integration test: starts a database server")
	}
}

func pgTarget(s *testdb.Server) knob.Target {
	return knob.Target{Engine: engine.Postgres, DataDir: s.DataDir,
		PG: &engine.Endpoint{Engine: engine.Postgres, Host: s.Socket, Port: s.Port, User: "postgres", DB: "postgres"}}
}

// show reads a parameter on a new connection.
func show(t *testing.T, s *testdb.Server, name string) string {
	t.Helper()
	ctx := context.Background()
	c, err := pgx.Connect(ctx, "host="+s.Socket+" port="+strconv.Itoa(s.Port)+" user=postgres dbname=postgres")
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(ctx)
	var v string
	if err := c.QueryRow(ctx, "SELECT current_setting($1)", name).Scan(&v); err != nil {
		t.Fatal(err)
	}
	return v
}

// eventually waits for a reload to reach new sessions.
func eventually(t *testing.T, s *testdb.Server, name, want string) {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for {
		got := show(t, s, name)
		if got == want {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s = %q, want %q", name, got, want)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func autoconf(t *testing.T, s *testdb.Server) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(s.DataDir, "postgresql.auto.conf"))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// Parameters that a reload sets: ALTER SYSTEM, reload, read back on a new
// connection; the journal puts the file and the live values back.
func TestPGReload(t *testing.T) {
	integration(t)
	s := testdb.Postgres(t, testdb.Options{})
	j, _ := tempChanger(t)
	ctx := context.Background()
	before := autoconf(t, s)
	wm, rpc := show(t, s, "work_mem"), show(t, s, "random_page_cost")
	a := knob.NewApplier(liveHost(t), j, pgTarget(s))
	set := []knob.Setting{{Name: "pg.work_mem", Value: "8MB"}, {Name: "pg.random_page_cost", Value: "1.5"}, {Name: "pg.DateStyle", Value: "iso, dmy"}}
	res, err := a.Apply(ctx, set, false)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"pg.work_mem": "8MB", "pg.random_page_cost": "1.5", "pg.datestyle": "ISO, DMY"}
	for k, v := range want {
		if res.Values[k] != v {
			t.Errorf("Applied %s = %q, want %q", k, res.Values[k], v)
		}
	}
	if res.Restarted {
		t.Error("restarted for parameters a reload sets")
	}
	if got := show(t, s, "work_mem"); got != "8MB" {
		t.Errorf("work_mem on a new connection: %s", got)
	}
	if !strings.Contains(autoconf(t, s), "work_mem = '8MB'") {
		t.Errorf("postgresql.auto.conf:\n%s", autoconf(t, s))
	}
	cur, err := a.Current(ctx, []string{"pg.work_mem", "pg.random_page_cost"})
	if err != nil || cur["pg.work_mem"] != "8MB" || cur["pg.random_page_cost"] != "1.5" {
		t.Errorf("Current = %v, %v", cur, err)
	}
	fp, err := a.Fingerprint(ctx, nil)
	if err != nil || fp["pg.work_mem"] != "8MB" || fp["pg.shared_buffers"] != "32MB" {
		t.Errorf("Fingerprint: %v, %v", fp, err)
	}
	if err := j.Restore(); err != nil {
		t.Fatal(err)
	}
	if got := autoconf(t, s); got != before {
		t.Errorf("postgresql.auto.conf after restore:\n%s\nwant:\n%s", got, before)
	}
	eventually(t, s, "work_mem", wm)
	eventually(t, s, "random_page_cost", rpc)
}

// A parameter read only at start needs a restart: refused without one,
// applied with one, and put back with one.
func TestPGRestartParam(t *testing.T) {
	integration(t)
	s := testdb.Postgres(t, testdb.Options{})
	j, _ := tempChanger(t)
	ctx := context.Background()
	set := []knob.Setting{{Name: "pg.max_locks_per_transaction", Value: "128"}, {Name: "pg.work_mem", Value: "16MB"}}

	tg := pgTarget(s)
	err := knob.NewApplier(liveHost(t), j, tg).Check(ctx, set)
	if err == nil || !strings.Contains(err.Error(), "pg.max_locks_per_transaction: takes effect only after a server restart, and this server may not be restarted") {
		t.Errorf("Check without a restart: %v", err)
	}
	if _, err := knob.NewApplier(liveHost(t), j, tg).Apply(ctx, set, false); err == nil || len(j.Journal().Changes()) != 0 {
		t.Fatalf("Apply without a restart: %v, journal %v", err, j.Journal().Changes())
	}

	tg.Restart = s.Restart
	a := knob.NewApplier(liveHost(t), j, tg)
	pid := s.PID
	res, err := a.Apply(ctx, set, false)
	if err != nil {
		t.Fatal(err)
	}
	if !res.Restarted || s.PID == pid {
		t.Errorf("not restarted (pid %d → %d)", pid, s.PID)
	}
	if res.Values["pg.max_locks_per_transaction"] != "128" || show(t, s, "max_locks_per_transaction") != "128" {
		t.Errorf("Applied %v", res.Values)
	}
	// The same value again changes nothing that needs a restart.
	pid = s.PID
	if res, err := a.Apply(ctx, set[:1], false); err != nil || res.Restarted || s.PID != pid {
		t.Errorf("unchanged value: restarted=%v, %v", res.Restarted, err)
	}
	// force restarts anyway.
	if res, err := a.Apply(ctx, set[1:], true); err != nil || !res.Restarted || s.PID == pid {
		t.Errorf("forced restart: restarted=%v, %v", res.Restarted, err)
	}
	pid = s.PID
	if err := j.Restore(); err != nil {
		t.Fatal(err)
	}
	if s.PID == pid {
		t.Error("restore did not restart the server")
	}
	if got := show(t, s, "max_locks_per_transaction"); got != "64" {
		t.Errorf("after restore: max_locks_per_transaction = %s", got)
	}
	if got := show(t, s, "work_mem"); got != "4MB" {
		t.Errorf("after restore: work_mem = %s", got)
	}
}

// Values the server would refuse or ignore fail loudly.
func TestPGRefused(t *testing.T) {
	integration(t)
	s := testdb.Postgres(t, testdb.Options{})
	j, _ := tempChanger(t)
	ctx := context.Background()
	tg := pgTarget(s)
	tg.Restart = s.Restart
	a := knob.NewApplier(liveHost(t), j, tg)
	for _, c := range []struct{ set, err string }{
		{"pg.work_mem=lots", `pg.work_mem: "lots" is not a number`},
		{"pg.work_mem=1kB", "below the minimum 64kB"},
		{"pg.no_such_param=1", "no such parameter"},
		{"pg.block_size=4096", "read-only parameter"},
		// testdb starts the server with -c shared_buffers=32MB.
		{"pg.shared_buffers=64MB", "set on the server's command line, which overrides ALTER SYSTEM"},
	} {
		_, set, err := knob.ParseArm("a: " + c.set)
		if err != nil {
			t.Fatal(err)
		}
		if err := a.Check(ctx, set); err == nil || !strings.Contains(err.Error(), c.err) {
			t.Errorf("Check(%s) = %v, want %q", c.set, err, c.err)
		}
	}
	if len(j.Journal().Changes()) != 0 {
		t.Fatalf("journaled: %v", j.Journal().Changes())
	}
	before := autoconf(t, s)
	// A value only the server can judge: the time zone database.
	_, err := a.Apply(ctx, []knob.Setting{{Name: "pg.timezone", Value: "Nowhere/Bogus"}}, false)
	if err == nil || !strings.Contains(err.Error(), `pg.timezone: the server refused "Nowhere/Bogus"`) {
		t.Errorf("invalid time zone: %v", err)
	}
	if err := j.Restore(); err != nil {
		t.Fatal(err)
	}
	if got := autoconf(t, s); got != before {
		t.Errorf("postgresql.auto.conf changed:\n%s", got)
	}
}

// A password in postgresql.auto.conf never reaches the journal.
func TestPGAutoconfWithPassword(t *testing.T) {
	integration(t)
	s := testdb.Postgres(t, testdb.Options{})
	j, file := tempChanger(t)
	ctx := context.Background()
	conf := filepath.Join(s.DataDir, "postgresql.auto.conf")
	b, _ := os.ReadFile(conf)
	secret := "primary_conninfo = 'host=db1 user=rep password=Sup3rSecret'\n"
	if err := os.WriteFile(conf, append(b, secret...), 0o600); err != nil {
		t.Fatal(err)
	}
	a := knob.NewApplier(liveHost(t), j, pgTarget(s))
	_, err := a.Apply(ctx, []knob.Setting{{Name: "pg.work_mem", Value: "8MB"}}, false)
	if err == nil || !strings.Contains(err.Error(), "holds a password") || strings.Contains(err.Error(), "Sup3rSecret") {
		t.Errorf("Apply: %v", err)
	}
	if jb, _ := os.ReadFile(file); strings.Contains(string(jb), "Sup3rSecret") {
		t.Error("the password reached the journal")
	}
	if got, _ := os.ReadFile(conf); !strings.HasSuffix(string(got), secret) || strings.Contains(string(got), "8MB") {
		t.Errorf("postgresql.auto.conf changed:\n%s", got)
	}
}

// A run killed after changing parameters is undone by a new process from
// the journal alone: the file, the live values, and a restart for the
// parameter read at start (with the recorded restart command).
func TestPGRecoverNewProcess(t *testing.T) {
	integration(t)
	s := testdb.Postgres(t, testdb.Options{})
	bin, err := testdb.PostgresBin()
	if err != nil {
		t.Fatal(err)
	}
	argv := []string{filepath.Join(bin, "pg_ctl"), "restart", "-D", s.DataDir, "-m", "fast", "-w", "-t", "60", "-l", filepath.Join(s.Dir, "pg_ctl.log")}
	// pg_ctl's server is not the one testdb started: stop it here.
	t.Cleanup(func() {
		cmd := exec.Command(argv[0], "stop", "-D", s.DataDir, "-m", "immediate")
		asPostgres(t, cmd)
		cmd.Run()
	})
	j, file := tempChanger(t)
	ctx := context.Background()
	before := autoconf(t, s)
	tg := pgTarget(s)
	tg.RestartArgv, tg.RestartUser = argv, "postgres"
	tg.Restart = func(ctx context.Context) error {
		cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
		asPostgres(t, cmd)
		out, err := os.CreateTemp("", "pgctl")
		if err != nil {
			return err
		}
		defer os.Remove(out.Name())
		cmd.Stdout, cmd.Stderr = out, out
		return cmd.Run()
	}
	a := knob.NewApplier(liveHost(t), j, tg)
	set := []knob.Setting{{Name: "pg.work_mem", Value: "32MB"}, {Name: "pg.max_locks_per_transaction", Value: "256"}}
	if _, err := a.Apply(ctx, set, false); err != nil {
		t.Fatal(err)
	}
	if show(t, s, "max_locks_per_transaction") != "256" {
		t.Fatal("not applied")
	}
	onlyChangeKinds(t, j, change.KindSetting, change.KindRestart)
	recoverInNewProcess(t, file)
	if got := autoconf(t, s); got != before {
		t.Errorf("postgresql.auto.conf after recover:\n%s", got)
	}
	if got := show(t, s, "max_locks_per_transaction"); got != "64" {
		t.Errorf("after recover: max_locks_per_transaction = %s", got)
	}
	if got := show(t, s, "work_mem"); got != "4MB" {
		t.Errorf("after recover: work_mem = %s", got)
	}
	// Undo is idempotent: running it again (the cleanup's Restore of the
	// in-memory journal) changes nothing and does not restart.
	pid := postmasterPID(t, s)
	if err := j.Restore(); err != nil {
		t.Fatal(err)
	}
	if got := postmasterPID(t, s); got != pid {
		t.Errorf("a second undo restarted the server (%d → %d)", pid, got)
	}
}

func postmasterPID(t *testing.T, s *testdb.Server) int {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(s.DataDir, "postmaster.pid"))
	if err != nil {
		t.Fatal(err)
	}
	pid, _ := strconv.Atoi(strings.SplitN(string(b), "\n", 2)[0])
	return pid
}

func asPostgres(t *testing.T, cmd *exec.Cmd) {
	u, err := user.Lookup("postgres")
	if err != nil {
		t.Fatal(err)
	}
	uid, _ := strconv.Atoi(u.Uid)
	gid, _ := strconv.Atoi(u.Gid)
	cmd.Dir = "/"
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}, Setpgid: true}
}

// Explicit huge pages together with PostgreSQL's huge_pages: the pool is
// filled before the restart that needs it, and emptied after the restart
// that gives it back.
func TestPGHugePages(t *testing.T) {
	integration(t)
	j := hostChanger(t)
	s := testdb.Postgres(t, testdb.Options{})
	ctx := context.Background()
	tg := pgTarget(s)
	tg.Restart = s.Restart
	a := knob.NewApplier(liveHost(t), j, tg)
	before, err := a.Fingerprint(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	total, _ := strconv.Atoi(before["hugepages.2M.total"])
	// 32 MB of shared_buffers and the rest of the shared memory fit in 64
	// pages of 2 MB.
	set := []knob.Setting{{Name: "hugepages.2M", Value: strconv.Itoa(total + 64)}, {Name: "pg.huge_pages", Value: "on"}}
	res, err := a.Apply(ctx, set, false)
	if err != nil {
		t.Fatal(err)
	}
	if !res.Restarted || res.Values["pg.huge_pages"] != "on" {
		t.Errorf("Applied %v, restarted %v", res.Values, res.Restarted)
	}
	fp, err := a.Fingerprint(ctx, []string{"hugepages.2M"})
	if err != nil {
		t.Fatal(err)
	}
	free, _ := strconv.Atoi(fp["hugepages.2M.free"])
	rsvd, _ := strconv.Atoi(fp["hugepages.2M.rsvd"])
	if fp["hugepages.2M"] != strconv.Itoa(total+64) || total+64-free+rsvd == 0 {
		t.Errorf("the server took no huge page: %v", fp)
	}
	if d := knob.Drift(before, fp); len(d) == 0 {
		t.Error("no drift between the arms")
	}
	// Back to the base arm, as an experiment alternates: the pool shrinks
	// while the server still maps it, and the restart lets go of it.
	base := []knob.Setting{{Name: "hugepages.2M", Value: before["hugepages.2M.total"]}, {Name: "pg.huge_pages", Value: before["pg.huge_pages"]}}
	if res, err := a.Apply(ctx, base, false); err != nil || !res.Restarted {
		t.Fatalf("base arm: %v, restarted %v", err, res.Restarted)
	}
	if got := read(t, huge2M); got != before["hugepages.2M.total"] {
		t.Errorf("base arm: the pool has %s pages, want %s", got, before["hugepages.2M.total"])
	}
	if _, err := a.Apply(ctx, set, false); err != nil {
		t.Fatal(err)
	}
	if err := j.Restore(); err != nil {
		t.Fatal(err)
	}
	if got := show(t, s, "huge_pages"); got != before["pg.huge_pages"] {
		t.Errorf("after restore huge_pages = %s, want %s", got, before["pg.huge_pages"])
	}
	if got := read(t, huge2M); got != before["hugepages.2M.total"] {
		t.Errorf("after restore the pool has %s pages, want %s", got, before["hugepages.2M.total"])
	}
}
