package apply

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/dbhost/dbhost/internal/change"
	"github.com/dbhost/dbhost/internal/check"
	"github.com/dbhost/dbhost/internal/engine"
	"github.com/dbhost/dbhost/internal/engine/mysql"
	"github.com/dbhost/dbhost/internal/engine/postgres"
	"github.com/dbhost/dbhost/internal/facts"
	"github.com/dbhost/dbhost/internal/fix"
	"github.com/dbhost/dbhost/internal/host"
	"github.com/dbhost/dbhost/internal/journal"
	"github.com/dbhost/dbhost/internal/testdb"
)

// pgCheck fails on a private server whose password_encryption is md5 (an
// ALTER SYSTEM entry the test makes); its fix is scram-sha-256, a setting
// a reload applies.
const pgCheck = "pg.hardening.md5"

// pgLive gathers the live host and returns the private server's pgCheck
// finding, the fix context and the servers to plan settings on.
func pgLive(t *testing.T, s *testdb.Server) (check.Finding, fix.Context, *Servers) {
	t.Helper()
	f := liveFacts(t)
	subject := fmt.Sprintf("postgres:%d", s.Port)
	for _, fd := range check.Run(f, check.Selector{Only: []string{pgCheck}}) {
		if fd.Subject == subject {
			return fd, fix.ContextFrom(f), &Servers{Instances: f.Instances}
		}
	}
	t.Fatalf("%s judged nothing for %s", pgCheck, subject)
	return check.Finding{}, fix.Context{}, nil
}

func readAuto(t *testing.T, s *testdb.Server) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(s.DataDir, postgres.AutoConf))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func pgFailing(t *testing.T) (*testdb.Server, check.Finding, fix.Context, *Servers) {
	t.Helper()
	testdb.Need(t, "root", os.Geteuid() == 0)
	s := testdb.Postgres(t, testdb.Options{})
	s.PGSet(t, "password_encryption", "md5")
	fd, fc, srv := pgLive(t, s)
	if fd.Status != check.Fail {
		t.Fatalf("%s does not fail with password_encryption md5: %s", pgCheck, fd.Reason)
	}
	return s, fd, fc, srv
}

// TestLivePGSettingApplyRollback: the plan changes password_encryption by
// ALTER SYSTEM instead of writing the conf.d snippet; apply makes the
// server run with it (the check passes); rollback leaves
// postgresql.auto.conf byte for byte as before and the server at 4.
func TestLivePGSettingApplyRollback(t *testing.T) {
	s, fd, fc, srv := pgFailing(t)
	before := readAuto(t, s)
	p, err := BuildWith("/", fc, []check.Finding{fd}, srv)
	if err != nil {
		t.Fatal(err)
	}
	if len(p.Settings) != 1 || len(p.Files) != 0 {
		t.Fatalf("plan: settings %+v files %v not applied %v", p.Settings, paths(p), p.NotApplied)
	}
	sp := p.Settings[0]
	if sp.Key != "password_encryption" || sp.Old != "md5" || sp.New != "scram-sha-256" || sp.Saved == nil || *sp.Saved != "md5" ||
		sp.Restart || sp.Server.DataDir != s.DataDir {
		t.Fatalf("setting plan %+v", sp)
	}
	for _, n := range p.NotApplied {
		if strings.Contains(n, "database setting password_encryption") || strings.Contains(n, "conf.d") {
			t.Errorf("still listed as not applied: %s", n)
		}
	}
	state := t.TempDir()
	cs, err := Apply(p, Options{StateDir: state, Reaudit: func() []check.Finding {
		fd, _, _ := pgLive(t, s)
		return []check.Finding{fd}
	}})
	if err != nil {
		t.Fatal(err)
	}
	if got := s.SQL(t, "SHOW password_encryption"); got != "scram-sha-256" {
		t.Fatalf("password_encryption is %s after apply", got)
	}
	if len(cs.After) != 1 || cs.After[0].Status != string(check.Pass) {
		t.Fatalf("re-audit after apply: %+v", cs.After)
	}
	if !strings.Contains(readAuto(t, s), "password_encryption = 'scram-sha-256'") {
		t.Fatalf("%s after apply:\n%s", postgres.AutoConf, readAuto(t, s))
	}
	if _, err := Rollback(state, cs.ID, Options{}); err != nil {
		t.Fatal(err)
	}
	if after := readAuto(t, s); after != before {
		t.Fatalf("rollback changed %s:\nbefore:\n%s\nafter:\n%s", postgres.AutoConf, before, after)
	}
	if got := s.SQL(t, "SHOW password_encryption"); got != "md5" {
		t.Fatalf("password_encryption is %s after rollback", got)
	}
}

// TestLivePGSettingChangedSincePlan: an ALTER SYSTEM by someone else
// between plan and apply is refused, by name, and nothing changes.
func TestLivePGSettingChangedSincePlan(t *testing.T) {
	s, fd, fc, srv := pgFailing(t)
	p, err := BuildWith("/", fc, []check.Finding{fd}, srv)
	if err != nil || len(p.Settings) != 1 {
		t.Fatalf("plan: %+v, %v", p, err)
	}
	s.SQL(t, "ALTER SYSTEM SET password_encryption = 'scram-sha-256'")
	edited := readAuto(t, s)
	state := t.TempDir()
	_, err = Apply(p, Options{StateDir: state})
	if err == nil || !strings.Contains(err.Error(), "password_encryption") || !strings.Contains(err.Error(), "changed since the plan") {
		t.Fatalf("apply over an edited setting: %v", err)
	}
	if readAuto(t, s) != edited {
		t.Fatal("the refused apply changed postgresql.auto.conf")
	}
	if sets, _ := History(state); len(sets) != 0 {
		t.Fatalf("a refused apply left change sets: %+v", sets)
	}
}

// TestLivePGSettingKilledApplyIsRecovered kills an apply right after
// ALTER SYSTEM; Recover, in this process, logs in again and puts the entry
// back.
func TestLivePGSettingKilledApplyIsRecovered(t *testing.T) {
	if state := os.Getenv("DBHOST_TEST_PG_CHILD"); state != "" {
		port, _ := strconv.Atoi(os.Getenv("DBHOST_TEST_PG_PORT"))
		s := &testdb.Server{Port: port}
		fd, fc, srv := pgLive(t, s)
		p, err := BuildWith("/", fc, []check.Finding{fd}, srv)
		if err != nil {
			t.Fatal(err)
		}
		Apply(p, Options{StateDir: state, hook: func(step string) {
			if strings.HasPrefix(step, "saved ") {
				syscall.Kill(os.Getpid(), syscall.SIGKILL)
			}
		}})
		t.Fatal("the child was not killed")
	}
	s, _, _, _ := pgFailing(t)
	before := readAuto(t, s)
	state := t.TempDir()
	cmd := exec.Command(os.Args[0], "-test.run=^TestLivePGSettingKilledApplyIsRecovered$", "-test.count=1")
	cmd.Env = append(os.Environ(), "DBHOST_TEST_PG_CHILD="+state, "DBHOST_TEST_PG_PORT="+strconv.Itoa(s.Port))
	out, err := cmd.CombinedOutput()
	if ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus); !ok || !ws.Signaled() || ws.Signal() != syscall.SIGKILL {
		t.Fatalf("child did not die of SIGKILL: %v\n%s", err, out)
	}
	if readAuto(t, s) == before || s.SQL(t, "SHOW password_encryption") != "scram-sha-256" {
		t.Fatal("the killed apply had not changed the setting")
	}
	ids, err := Recover(state, Options{})
	if err != nil || len(ids) != 1 {
		t.Fatalf("Recover = %v, %v", ids, err)
	}
	if after := readAuto(t, s); after != before {
		t.Fatalf("recover left %s:\n%s\nwas:\n%s", postgres.AutoConf, after, before)
	}
	if got := s.SQL(t, "SHOW password_encryption"); got != "md5" {
		t.Fatalf("password_encryption is %s after recover", got)
	}
}

// TestRestartsListed: a restart setting is listed, never done without
// --allow-restart, and never done for a server that runs under no unit.
func TestRestartsListed(t *testing.T) {
	unit := ServerRef{Engine: string(engine.Postgres), Name: "postgres:5432", Unit: "postgresql@15-main.service"}
	bare := ServerRef{Engine: string(engine.Postgres), Name: "postgres:5433"}
	settings := []SettingPlan{
		{Server: unit, Key: "shared_buffers", Restart: true, SavedByServer: true},
		{Server: unit, Key: "random_page_cost", SavedByServer: true},
		{Server: bare, Key: "huge_pages", Restart: true, SavedByServer: true},
		{Server: bare, Key: "max_connections", Restart: true, Unchanged: true, SavedByServer: true},
	}
	got := strings.Join(restarts(settings, false, changer(t, nil)), "\n")
	want := "postgres:5432 needs a restart for shared_buffers: not restarted (give --allow-restart, or systemctl restart postgresql@15-main.service)\n" +
		"postgres:5433 needs a restart for huge_pages: not restarted (give --allow-restart, or restart it yourself)"
	if got != want {
		t.Errorf("restarts without --allow-restart:\n%s\nwant:\n%s", got, want)
	}
	got = strings.Join(restarts(settings[2:], true, changer(t, nil)), "\n")
	if !strings.Contains(got, "postgres:5433 needs a restart for huge_pages: not restarted: it runs under no systemd unit") {
		t.Errorf("restarts of a server without unit: %s", got)
	}
}

// mariaDBIncluding starts a private MariaDB whose option file includes a
// conf.d directory only root can change, as a packaged server's does.
func mariaDBIncluding(t *testing.T) (s *testdb.Server, confd string) {
	t.Helper()
	dir := testdb.RootOnlyDir(t, "mycnf")
	confd = filepath.Join(dir, "conf.d")
	if err := os.Mkdir(confd, 0o755); err != nil {
		t.Fatal(err)
	}
	cnf := filepath.Join(dir, "my.cnf")
	if err := os.WriteFile(cnf, []byte("[mysqld]\n!includedir "+confd+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	return testdb.MariaDB(t, testdb.Options{DefaultsFile: cnf}), confd
}

func dirListing(t *testing.T, dir string) string {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range ents {
		b, _ := os.ReadFile(filepath.Join(dir, e.Name()))
		info, _ := e.Info()
		out = append(out, fmt.Sprintf("%s %v %x", e.Name(), info.Mode(), b))
	}
	return strings.Join(out, "\n")
}

// TestLiveMySQLOptionFileApplyRollback: a restart setting of a MariaDB is
// written into the directory its option file includes (0644, readable by
// the server's account), the restart is listed and, for a server that runs
// under no systemd unit, not done even with AllowRestart; rollback removes
// the file.
func TestLiveMySQLOptionFileApplyRollback(t *testing.T) {
	testdb.Need(t, "root", os.Geteuid() == 0)
	s, confd := mariaDBIncluding(t)
	const id = "mysql.hardening.symbolic_links"
	f := liveFacts(t)
	var fd *check.Finding
	for _, x := range check.Run(f, check.Selector{Only: []string{id}}) {
		if x.Subject == fmt.Sprintf("mysql:%d", s.Port) {
			fd = &x
		}
	}
	if fd == nil || fd.Status != check.Fail {
		t.Fatalf("%s on the private server: %+v", id, fd)
	}
	p, err := BuildWith("/", fix.ContextFrom(f), []check.Finding{*fd}, &Servers{Instances: f.Instances})
	if err != nil {
		t.Fatal(err)
	}
	if len(p.Settings) != 1 || !p.Settings[0].Restart || len(p.Files) != 1 || filepath.Dir(p.Files[0].Path) != confd ||
		p.Files[0].Mode != 0o644 || !strings.Contains(p.Files[0].Content, "symbolic_links = 0") {
		t.Fatalf("plan: settings %+v files %+v not applied %v", p.Settings, p.Files, p.NotApplied)
	}
	before := dirListing(t, confd)
	state := t.TempDir()
	cs, err := Apply(p, Options{StateDir: state, AllowRestart: true})
	if err != nil {
		t.Fatal(err)
	}
	st, err := os.Stat(p.Files[0].Path)
	if err != nil || st.Mode().Perm() != 0o644 {
		t.Fatalf("%s after apply: %v %v", p.Files[0].Path, st, err)
	}
	if len(cs.Restarts) != 1 || !strings.Contains(cs.Restarts[0], "runs under no systemd unit") {
		t.Fatalf("restarts: %q", cs.Restarts)
	}
	if _, err := Rollback(state, cs.ID, Options{}); err != nil {
		t.Fatal(err)
	}
	if after := dirListing(t, confd); after != before {
		t.Fatalf("rollback left %s:\n%s\nwas:\n%s", confd, after, before)
	}
}

// TestLiveMySQLSetGlobal: SET GLOBAL of a dynamic variable, read back,
// and the journal's undo puts the old value back.
func TestLiveMySQLSetGlobal(t *testing.T) {
	testdb.Need(t, "root", os.Geteuid() == 0)
	s, _ := mariaDBIncluding(t)
	h, in := liveInstance(t, engine.MySQL, s.Port)
	ctx := context.Background()
	srv, err := engine.OpenSettings(ctx, h, in.Instance, engine.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	cur, err := srv.Get(ctx, "innodb_io_capacity")
	if err != nil || cur.Value == "1000" {
		t.Fatalf("innodb_io_capacity %q, %v", cur.Value, err)
	}
	ref := ServerRef{Engine: string(engine.MySQL), Name: in.Name(), DataDir: in.DataDir, Port: in.Port}
	sp := SettingPlan{Server: ref, Key: "innodb_io_capacity", Old: cur.Value, New: "1000"}
	if err := srv.Change(ctx, sp.Key, sp.New, false); err != nil {
		t.Fatal(err)
	}
	if ok, _, err := srv.Applied(ctx, sp.Key, sp.New, false); !ok || err != nil {
		t.Fatalf("applied = %v, %v", ok, err)
	}
	if err := undoSetting(ref, sp.Key, sp.Old); err != nil {
		t.Fatal(err)
	}
	if now, _ := srv.Get(ctx, "innodb_io_capacity"); now.Value != cur.Value {
		t.Fatalf("innodb_io_capacity is %s after the undo, was %s", now.Value, cur.Value)
	}
	if _, err := mysql.Literal("x'; DROP TABLE t; --"); err == nil {
		t.Error("literal took a quote")
	}
}

// TestLivePGCommandLineWins: a setting given on the server's command line
// (-c shared_buffers=32MB here) is not planned: ALTER SYSTEM would change
// nothing, and the plan says so.
func TestLivePGCommandLineWins(t *testing.T) {
	testdb.Need(t, "root", os.Geteuid() == 0)
	s := testdb.Postgres(t, testdb.Options{})
	f := liveFacts(t)
	inst := fmt.Sprintf("postgres:%d", s.Port)
	var sel []check.Finding
	for _, x := range check.Run(f, check.Selector{Only: []string{"pg.shared_buffers"}}) {
		if x.Subject == inst && x.Status == check.Fail {
			sel = append(sel, x)
		}
	}
	if len(sel) != 1 {
		t.Fatalf("pg.shared_buffers does not fail for %s at 32MB", inst)
	}
	p, err := BuildWith("/", fix.ContextFrom(f), sel, &Servers{Instances: f.Instances})
	if err != nil {
		t.Fatal(err)
	}
	want := "database setting shared_buffers = "
	for _, n := range p.NotApplied {
		if strings.Contains(n, want) && strings.HasSuffix(n, "not applied: it is set on the server's command line, which wins over ALTER SYSTEM: change it there") {
			if len(p.Settings) != 0 {
				t.Fatalf("planned anyway: %+v", p.Settings)
			}
			return
		}
	}
	t.Fatalf("not applied lacks the command line:\n%s", strings.Join(p.NotApplied, "\n"))
}

// TestLivePGRestartSetting: a postmaster setting is saved and left
// pending (the apply waits for the server to say so), and the journal's
// undo removes the entry: postgresql.auto.conf as before. (PostgreSQL
// keeps pending_restart set once a postmaster setting was changed in a
// file, even after the entry is removed again.)
func TestLivePGRestartSetting(t *testing.T) {
	testdb.Need(t, "root", os.Geteuid() == 0)
	s := testdb.Postgres(t, testdb.Options{})
	before := readAuto(t, s)
	_, in := liveInstance(t, engine.Postgres, s.Port)
	ref := ServerRef{Engine: string(engine.Postgres), Name: in.Name(), DataDir: in.DataDir, Port: in.Port}
	sp := SettingPlan{Server: ref, Key: "max_prepared_transactions", Old: "0", New: "7", Restart: true, SavedByServer: true}
	j := applyPending(t, sp)
	pending := func() string {
		return s.SQL(t, "SELECT pending_restart FROM pg_settings WHERE name = 'max_prepared_transactions'")
	}
	if pending() != "t" || s.SQL(t, "SHOW max_prepared_transactions") != "0" {
		t.Fatalf("after apply: pending %s, value %s", pending(), s.SQL(t, "SHOW max_prepared_transactions"))
	}
	if err := j.Restore(); err != nil {
		t.Fatal(err)
	}
	if after := readAuto(t, s); after != before {
		t.Fatalf("undo left %s:\n%s", postgres.AutoConf, after)
	}
	if v := s.SQL(t, "SHOW max_prepared_transactions"); v != "0" {
		t.Fatalf("max_prepared_transactions is %s after the undo", v)
	}
}

// TestLivePGAllowRestart: with AllowRestart, a server with a pending
// restart setting is restarted through its unit's systemctl (here a
// stand-in, root's, that restarts the private server with pg_ctl, as the
// unit would), and apply waits until it runs with the new value; a
// systemctl others can change is not run.
func TestLivePGAllowRestart(t *testing.T) {
	testdb.Need(t, "root", os.Geteuid() == 0)
	bin, err := testdb.PostgresBin()
	testdb.Need(t, "PostgreSQL binaries", err == nil)
	s := testdb.Postgres(t, testdb.Options{})
	// pg_ctl restart starts a postmaster testdb does not own: stop it first.
	t.Cleanup(func() {
		exec.Command("runuser", "-u", "postgres", "--", filepath.Join(bin, "pg_ctl"), "stop", "-D", s.DataDir, "-m", "immediate", "-s").Run()
	})
	dir := testdb.RootOnlyDir(t, "systemctl")
	calls := filepath.Join(dir, "calls")
	stand := filepath.Join(dir, "systemctl")
	script := "#!/bin/sh\necho \"$*\" >> " + calls + "\n" +
		"exec runuser -u postgres -- " + filepath.Join(bin, "pg_ctl") + " restart -D " + s.DataDir + " -m fast -w -s -l " + filepath.Join(s.Dir, "restart.log") + "\n"
	if err := os.WriteFile(stand, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}

	_, in := liveInstance(t, engine.Postgres, s.Port)
	ref := ServerRef{Engine: string(engine.Postgres), Name: in.Name(), DataDir: in.DataDir, Port: in.Port, PID: in.PID,
		Unit: "dbhost-test-pg.service"}
	sp := SettingPlan{Server: ref, Key: "max_prepared_transactions", Old: "0", New: "7", Restart: true, SavedByServer: true}
	applyPending(t, sp)
	got := restarts([]SettingPlan{sp}, true, changer(t, []string{stand}))
	if len(got) != 1 || !strings.HasSuffix(got[0], "restarted through dbhost-test-pg.service; it runs with the new values") {
		t.Fatalf("restarts: %q", got)
	}
	if b, _ := os.ReadFile(calls); string(b) != "restart dbhost-test-pg.service\n" {
		t.Fatalf("systemctl calls: %q", b)
	}
	if v := s.SQL(t, "SHOW max_prepared_transactions"); v != "7" {
		t.Fatalf("max_prepared_transactions is %s after the restart", v)
	}

	os.Chmod(stand, 0o757)
	got = restarts([]SettingPlan{sp}, true, changer(t, []string{stand}))
	if len(got) != 1 || !strings.Contains(got[0], "not restarted") || !strings.Contains(got[0], "writable by group or others") {
		t.Fatalf("restarts with an untrusted systemctl: %q", got)
	}
}

// liveInstance gathers the live host and returns it with the private
// server of eng on port, as discovery describes it.
func liveInstance(t *testing.T, eng engine.Engine, port int) (*host.Host, *facts.Instance) {
	t.Helper()
	h, err := host.Open("/")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { h.Close() })
	for _, x := range facts.Gather(context.Background(), h, facts.Options{}).Instances {
		if x.Engine == eng && x.Port == port {
			return h, x
		}
	}
	t.Fatalf("the private %s server on port %d was not discovered", eng, port)
	return nil, nil
}

// applyPending changes a setting as an apply does, journaled, and returns
// the journal.
func applyPending(t *testing.T, sp SettingPlan) *journal.Journal {
	t.Helper()
	c := changer(t, nil)
	live := newLiveServers(c.Config())
	defer live.close()
	if err := live.apply(c, []SettingPlan{sp}); err != nil {
		t.Fatal(err)
	}
	return c.Journal()
}

// changer is a change layer journaling into the test's directory, its
// restarts run by the systemctl of paths.
func changer(t *testing.T, systemctl []string) *change.Changer {
	t.Helper()
	c, err := change.Open(filepath.Join(t.TempDir(), "journal.json"), change.Config{Systemctl: systemctl})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// undoSetting runs the journal's undo of a setting, as a rollback in a
// later process does.
func undoSetting(ref ServerRef, key, old string) error {
	b, _ := json.Marshal(map[string]any{"server": ref, "key": key, "old": old, "saved": nil})
	return change.Kinds(change.Config{})[change.KindSetting](b)
}

// TestLivePGQuoting: a value with a quote and a backslash reaches
// postgresql.auto.conf as it is, also where standard_conforming_strings
// is off (backslashes in plain quoted literals are escapes there), and Restore
// removes the entry again.
func TestLivePGQuoting(t *testing.T) {
	testdb.Need(t, "root", os.Geteuid() == 0)
	s := testdb.Postgres(t, testdb.Options{})
	s.PGSet(t, "standard_conforming_strings", "off")
	before := readAuto(t, s)
	h, in := liveInstance(t, engine.Postgres, s.Port)
	ctx := context.Background()
	c, err := engine.OpenSettings(ctx, h, in.Instance, engine.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	const v = `it's a\b`
	if err := c.Change(ctx, "application_name", v, false); err != nil {
		t.Fatal(err)
	}
	st, err := c.Get(ctx, "application_name")
	if err != nil || st.Saved == nil || *st.Saved != v {
		t.Fatalf("saved %v, %v; want %q", st.Saved, err, v)
	}
	if err := c.Restore(ctx, "application_name", engine.SettingState{}, false); err != nil {
		t.Fatal(err)
	}
	if after := readAuto(t, s); after != before {
		t.Fatalf("%s after restore:\n%s", postgres.AutoConf, after)
	}
}

// TestLiveRedisConfigSet: CONFIG SET of maxmemory through the Redis
// settings connection, seen applied although Redis shows bytes, and the
// journal's undo (which finds the server again without a live read, as a
// later rollback does) puts the old value back. A plan does not change it:
// Redis includes no directory dbhost writes option files into, so a
// CONFIG SET would be lost at the next restart, and the plan says so.
func TestLiveRedisConfigSet(t *testing.T) {
	testdb.Need(t, "root", os.Geteuid() == 0)
	s := testdb.Redis(t, testdb.Options{Settings: map[string]string{"maxmemory": "64mb"}})
	h, in := liveInstance(t, engine.Redis, s.Port)
	ctx := context.Background()
	srv, err := engine.OpenSettings(ctx, h, in.Instance, engine.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	cur, err := srv.Get(ctx, "maxmemory")
	if err != nil || cur.Value != "67108864" {
		t.Fatalf("maxmemory %q, %v", cur.Value, err)
	}
	ref := ServerRef{Engine: string(engine.Redis), Name: in.Name(), DataDir: in.DataDir, Port: in.Port, PID: in.PID, Start: change.StartTime(h, in.PID)}
	sp := SettingPlan{Server: ref, Key: "maxmemory", Old: cur.Value, New: "1957mb"}
	if err := srv.Change(ctx, sp.Key, sp.New, false); err != nil {
		t.Fatal(err)
	}
	if ok, _, err := srv.Applied(ctx, sp.Key, sp.New, false); !ok || err != nil {
		t.Fatalf("applied = %v, %v", ok, err)
	}
	if now, _ := srv.Get(ctx, "maxmemory"); now.Value != "2052063232" {
		t.Fatalf("maxmemory is %s after CONFIG SET 1957mb", now.Value)
	}
	if err := undoSetting(ref, sp.Key, sp.Old); err != nil {
		t.Fatal(err)
	}
	if now, _ := srv.Get(ctx, "maxmemory"); now.Value != cur.Value {
		t.Fatalf("maxmemory is %s after the undo, was %s", now.Value, cur.Value)
	}

	f := liveFacts(t)
	fd := check.Finding{ID: "redis.test", Subject: in.Name(), Status: check.Fail,
		Fix: &fix.Fix{Config: []fix.ConfigChange{{Instance: in.Name(), Engine: string(engine.Redis), Key: "maxmemory", Value: "1957mb"}}}}
	p, err := BuildWith("/", fix.ContextFrom(f), []check.Finding{fd}, &Servers{Instances: f.Instances})
	if err != nil {
		t.Fatal(err)
	}
	// Set now by CONFIG SET, runtime only: no file is written (Redis reads
	// no directory of snippets), and the rendered line a person merges into
	// redis.conf is listed as not written.
	if len(p.Settings) != 1 || !p.Settings[0].RuntimeOnly || p.Settings[0].New != "1957mb" || len(p.Files) != 0 {
		t.Fatalf("plan: settings %+v files %v", p.Settings, paths(p))
	}
	notApplied := strings.Join(p.NotApplied, "\n")
	if !strings.Contains(notApplied, "is not written") || !strings.Contains(notApplied, "redis") {
		t.Errorf("not applied, want the rendered redis.conf line named:\n%s", notApplied)
	}
}
