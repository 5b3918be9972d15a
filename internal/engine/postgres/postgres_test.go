package postgres_test

import (
	"bytes"
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
	"time"

	"github.com/dbhost/dbhost/internal/engine"
	"github.com/dbhost/dbhost/internal/engine/postgres"
	"github.com/dbhost/dbhost/internal/fixture"
	"github.com/dbhost/dbhost/internal/host"
	"github.com/dbhost/dbhost/internal/testdb"
)

func detector(t *testing.T) engine.Detector {
	t.Helper()
	for _, d := range engine.Profiles() {
		if d.Engine() == engine.Postgres {
			return d
		}
	}
	t.Fatal("no PostgreSQL detector registered")
	return nil
}

// discover inspects every postmaster the detector matches on h.
func discover(t *testing.T, h *host.Host, opts engine.Options) ([]*engine.Instance, *engine.Table) {
	t.Helper()
	tab, err := engine.ReadTable(h)
	if err != nil {
		t.Fatal(err)
	}
	d := detector(t)
	var out []*engine.Instance
	for _, p := range tab.Procs {
		if !d.Match(p, tab) {
			continue
		}
		in, err := d.Inspect(context.Background(), h, p, tab, opts)
		if err != nil {
			t.Fatalf("inspect %d: %v", p.PID, err)
		}
		out = append(out, in)
	}
	return out, tab
}

// inspectPID inspects one postmaster only: tests must not depend on other
// servers running on the machine.
func inspectPID(t *testing.T, h *host.Host, pid int, opts engine.Options) *engine.Instance {
	t.Helper()
	tab, err := engine.ReadTable(h)
	if err != nil {
		t.Fatal(err)
	}
	p, ok := tab.Get(pid)
	if !ok {
		t.Fatalf("pid %d not in the process table", pid)
	}
	d := detector(t)
	if !d.Match(p, tab) {
		t.Fatalf("pid %d (%s) not matched as a postmaster", pid, p.Comm)
	}
	for _, c := range tab.Children(pid) {
		if cp, _ := tab.Get(c); d.Match(cp, tab) {
			t.Fatalf("backend %d matched as a postmaster", c)
		}
	}
	in, err := d.Inspect(context.Background(), h, p, tab, opts)
	if err != nil {
		t.Fatal(err)
	}
	return in
}

func openFixture(t *testing.T, name string) *host.Host {
	t.Helper()
	h, err := host.OpenSnapshot(fixture.Path(name))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { h.Close() })
	return h
}

// TestMatchBaseline: on the recorded baseline host, exactly the shared
// cluster's postmaster is matched, none of its backends. The baseline
// predates the detector, so Inspect has little to read there; it must
// still not fail.
func TestMatchBaseline(t *testing.T) {
	h := openFixture(t, "baseline")
	insts, tab := discover(t, h, engine.Options{})
	if len(insts) != 1 {
		t.Fatalf("found %d postmasters, want 1", len(insts))
	}
	pm := insts[0]
	var backends int
	for _, p := range tab.ByComm("postgres") {
		if p.PID != pm.PID {
			if p.PPID != pm.PID {
				t.Errorf("postgres process %d is not a child of the postmaster %d", p.PID, pm.PID)
			}
			backends++
		}
	}
	if backends == 0 || len(pm.Children) != backends {
		t.Errorf("children %v, backends %d", pm.Children, backends)
	}
	if pm.User != "postgres" || pm.Flavor != "PostgreSQL" {
		t.Errorf("instance %+v", pm)
	}
}

func TestFixturePrivate(t *testing.T) {
	h := openFixture(t, "pg-private")
	insts, _ := discover(t, h, engine.Options{})
	var shared, private *engine.Instance
	for _, in := range insts {
		if in.Port == 5432 {
			shared = in
		} else {
			private = in
		}
	}
	if shared == nil || private == nil || len(insts) != 2 {
		t.Fatalf("instances: %d", len(insts))
	}
	// The shared Debian cluster.
	if shared.Postgres.Cluster != "15/main" || shared.DataDir != "/var/lib/postgresql/15/main" ||
		shared.ConfigFiles[0] != "/etc/postgresql/15/main/postgresql.conf" || shared.IncludeDir != "/etc/postgresql/15/main/conf.d" {
		t.Errorf("shared: cluster %q datadir %q files %v include %q", shared.Postgres.Cluster, shared.DataDir, shared.ConfigFiles, shared.IncludeDir)
	}
	// The private one: live settings with their files and lines.
	if private.SettingsSource != "live" || !strings.Contains(private.LiveVia, "as user postgres") || private.Major() != 15 {
		t.Fatalf("private: source %q via %q err %q version %q", private.SettingsSource, private.LiveVia, private.LiveErr, private.Version)
	}
	want := map[string]string{
		"random_page_cost":         "live:" + filepath.Join(private.DataDir, "conf.d/50-dbhost-test.conf") + ":1",
		"effective_io_concurrency": "live:" + filepath.Join(private.DataDir, "postgresql.auto.conf") + ":3",
		"work_mem":                 "live:cmdline",
	}
	for name, src := range want {
		if s, _ := private.Setting(name); s.Source != src {
			t.Errorf("%s source %q, want %q", name, s.Source, src)
		}
	}
	if b, ok := postgres.Bytes(private, "shared_buffers"); !ok || b != 32<<20 {
		t.Errorf("shared_buffers = %d bytes", b)
	}
	if b, ok := postgres.Bytes(private, "work_mem"); !ok || b != 16<<20 {
		t.Errorf("work_mem = %d bytes", b)
	}
	var app *engine.PGDatabase
	for i, db := range private.Postgres.Databases {
		if db.Name == "app" {
			app = &private.Postgres.Databases[i]
		}
	}
	if app == nil || app.Provider != "libc" || app.Collate != "en_US.UTF-8" || app.RecordedVersion == "" || app.RecordedVersion != app.ActualVersion {
		t.Errorf("app database: %+v", app)
	}
	if private.Paths["data"] != private.DataDir || private.Paths["wal"] != filepath.Join(private.DataDir, "pg_wal") {
		t.Errorf("paths %v", private.Paths)
	}
}

// TestFixturePeer: root is refused by peer authentication; settings come
// from files and the command line, with their sources.
func TestFixturePeer(t *testing.T) {
	h := openFixture(t, "pg-peer")
	insts, _ := discover(t, h, engine.Options{})
	for _, in := range insts {
		if in.Port == 5432 {
			continue
		}
		if in.SettingsSource != "files" || !strings.Contains(in.LiveErr, "Peer authentication failed") {
			t.Fatalf("source %q err %q", in.SettingsSource, in.LiveErr)
		}
		checks := map[string][2]string{
			"shared_buffers":   {"32MB", "cmdline"},
			"max_connections":  {"20", "cmdline"},
			"huge_pages":       {"try", "default"},
			"random_page_cost": {"4", "default"},
		}
		for name, w := range checks {
			if s, _ := in.Setting(name); s.Value != w[0] || s.Source != w[1] {
				t.Errorf("%s = %+v, want %v", name, s, w)
			}
		}
		if s, _ := in.Setting("dynamic_shared_memory_type"); !strings.HasPrefix(s.Source, "file:"+filepath.Join(in.DataDir, "postgresql.conf")+":") {
			t.Errorf("dynamic_shared_memory_type = %+v", s)
		}
		if in.Version != "15" || !strings.HasSuffix(in.VersionSource, "/PG_VERSION") {
			t.Errorf("version %q from %q", in.Version, in.VersionSource)
		}
		return
	}
	t.Fatal("no private cluster in pg-peer")
}

// TestFixtureNonroot: as nobody, /proc/PID/exe, the data directory and the
// private socket are closed; the version comes from the binary's path.
func TestFixtureNonroot(t *testing.T) {
	h := openFixture(t, "pg-nonroot")
	insts, _ := discover(t, h, engine.Options{})
	if len(insts) != 2 {
		t.Fatalf("instances: %d", len(insts))
	}
	for _, in := range insts {
		if in.Port == 5432 {
			continue
		}
		if in.Version != "15" || !strings.HasPrefix(in.VersionSource, "path:") {
			t.Errorf("version %q from %q", in.Version, in.VersionSource)
		}
		if !strings.Contains(in.LiveErr, "permission denied") || len(in.ConfigErrors) == 0 {
			t.Errorf("live err %q config errors %v", in.LiveErr, in.ConfigErrors)
		}
		if s, _ := in.Setting("work_mem"); s.Value != "16MB" || s.Source != "cmdline" {
			t.Errorf("work_mem %+v", s)
		}
	}
}

// ---- integration: private servers on this machine ----

func needPG(t *testing.T) {
	t.Helper()
	if testing.Short() {
		t.Skip("integration test (-short)")
	}
}

func TestIntegrationLive(t *testing.T) {
	needPG(t)
	s := testdb.Postgres(t, testdb.Options{Settings: map[string]string{"work_mem": "12MB"}})
	// A conf.d file and ALTER SYSTEM, applied by a reload.
	conf := filepath.Join(s.DataDir, "conf.d")
	if err := os.MkdirAll(conf, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(conf, "50-test.conf"), []byte("random_page_cost = 1.5\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	appendTo(t, filepath.Join(s.DataDir, "postgresql.conf"), "\ninclude_dir = 'conf.d'\n")
	reload(t, s)

	h, err := host.Open("/")
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	in := inspectPID(t, h, s.PID, engine.Options{})
	t.Logf("inspect with live connection: %v", time.Since(start))
	if in.Port != s.Port || in.DataDir != s.DataDir || in.User != "postgres" {
		t.Errorf("port %d datadir %q user %q", in.Port, in.DataDir, in.User)
	}
	bin, _ := testdb.PostgresBin()
	if major := filepath.Base(filepath.Dir(bin)); strconv.Itoa(in.Major()) != major || in.VersionSource != "live" {
		t.Errorf("version %q (%s), binaries of %s", in.Version, in.VersionSource, major)
	}
	if in.SettingsSource != "live" || !strings.Contains(in.LiveVia, s.Socket) {
		t.Fatalf("settings %q via %q err %q", in.SettingsSource, in.LiveVia, in.LiveErr)
	}
	if in.IncludeDir != conf || in.ConfigFiles[0] != filepath.Join(s.DataDir, "postgresql.conf") {
		t.Errorf("include dir %q files %v", in.IncludeDir, in.ConfigFiles)
	}
	if st, _ := in.Setting("random_page_cost"); st.Value != "1.5" || st.Source != "live:"+filepath.Join(conf, "50-test.conf")+":1" {
		t.Errorf("random_page_cost %+v", st)
	}
	if st, _ := in.Setting("work_mem"); st.Value != "12288" || st.Unit != "kB" || st.Source != "live:cmdline" {
		t.Errorf("work_mem %+v", st)
	}
	if b, _ := postgres.Bytes(in, "shared_buffers"); b != 32<<20 {
		t.Errorf("shared_buffers %d", b)
	}
	if len(in.Postgres.Databases) == 0 {
		t.Errorf("no databases")
	}
}

func TestIntegrationFilesOnly(t *testing.T) {
	needPG(t)
	s := testdb.Postgres(t, testdb.Options{Settings: map[string]string{"work_mem": "12MB"}})
	h, err := host.Open("/")
	if err != nil {
		t.Fatal(err)
	}
	in := inspectPID(t, h, s.PID, engine.Options{NoConnect: true})
	if in.SettingsSource != "files" || !strings.Contains(in.LiveErr, "--no-connect") {
		t.Fatalf("settings %q err %q", in.SettingsSource, in.LiveErr)
	}
	if st, _ := in.Setting("work_mem"); st.Value != "12MB" || st.Source != "cmdline" {
		t.Errorf("work_mem %+v: -c must override the files", st)
	}
	if st, _ := in.Setting("port"); st.Value != strconv.Itoa(s.Port) || st.Source != "cmdline" {
		t.Errorf("port %+v", st)
	}
	if st, _ := in.Setting("huge_pages"); st.Source != "default" {
		t.Errorf("huge_pages %+v", st)
	}
	if in.Port != s.Port || in.Version == "" {
		t.Errorf("port %d version %q", in.Port, in.Version)
	}
}

// TestIntegrationPeerRefused: with peer authentication root cannot log in
// as postgres; dbhost falls back to files and says why.
func TestIntegrationPeerRefused(t *testing.T) {
	needPG(t)
	s := testdb.Postgres(t, testdb.Options{})
	hba := filepath.Join(s.DataDir, "pg_hba.conf")
	if err := os.WriteFile(hba, []byte("local all all peer\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	reload(t, s)
	h, err := host.Open("/")
	if err != nil {
		t.Fatal(err)
	}
	in := inspectPID(t, h, s.PID, engine.Options{Timeout: 2 * time.Second})
	if in.SettingsSource != "files" || !strings.Contains(in.LiveErr, "Peer authentication failed") {
		t.Fatalf("settings %q err %q", in.SettingsSource, in.LiveErr)
	}
}

// TestIntegrationSnapshot: a snapshot replays the same instance, live
// settings included.
func TestIntegrationSnapshot(t *testing.T) {
	needPG(t)
	s := testdb.Postgres(t, testdb.Options{Settings: map[string]string{"work_mem": "12MB"}})
	h, err := host.Open("/")
	if err != nil {
		t.Fatal(err)
	}
	if err := h.StartRecording(); err != nil {
		t.Fatal(err)
	}
	live := inspectPID(t, h, s.PID, engine.Options{})
	if live.SettingsSource != "live" {
		t.Fatalf("not live: %s", live.LiveErr)
	}
	var buf bytes.Buffer
	if err := h.WriteSnapshot(&buf, host.SnapshotInfo{Note: "postgres integration"}); err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(t.TempDir(), "snap.tar.gz")
	if err := os.WriteFile(file, buf.Bytes(), 0o600); err != nil {
		t.Fatal(err)
	}
	snap, err := host.OpenSnapshot(file)
	if err != nil {
		t.Fatal(err)
	}
	defer snap.Close()
	replayed := inspectPID(t, snap, s.PID, engine.Options{NoConnect: true}) // NoConnect has no effect on a snapshot
	a, _ := json.Marshal(live)
	b, _ := json.Marshal(replayed)
	if !bytes.Equal(a, b) {
		t.Errorf("snapshot differs:\nlive %s\nsnap %s", a, b)
	}
}

// TestIntegrationUnprivileged: a login that can read neither pg_authid nor
// the collation version function still gets the settings, the databases
// (from the fallback query), the roles and the public schema; each failed
// part says why, in the server's words.
func TestIntegrationUnprivileged(t *testing.T) {
	needPG(t)
	s := testdb.Postgres(t, testdb.Options{Settings: map[string]string{"work_mem": "12MB"}})
	s.SQL(t, "CREATE ROLE dbhost_probe LOGIN")
	s.SQL(t, "REVOKE EXECUTE ON FUNCTION pg_database_collation_actual_version(oid) FROM PUBLIC")
	t.Setenv("PGUSER", "dbhost_probe")
	h, err := host.Open("/")
	if err != nil {
		t.Fatal(err)
	}
	in := inspectPID(t, h, s.PID, engine.Options{})
	if in.SettingsSource != "live" {
		t.Fatalf("settings %q err %q", in.SettingsSource, in.LiveErr)
	}
	if st, _ := in.Setting("work_mem"); st.Value != "12288" || st.Unit != "kB" {
		t.Errorf("work_mem %+v", st)
	}
	const denied = "permission denied for function pg_database_collation_actual_version"
	if in.LiveErr != "databases: pg_database_collation_actual_version: "+denied {
		t.Errorf("live err %q", in.LiveErr)
	}
	found := false
	for _, d := range in.Postgres.Databases {
		if d.Name == "postgres" {
			found = d.ActualVersion == "" && d.Provider == "libc"
		}
	}
	if !found {
		t.Errorf("databases from the fallback query: %+v", in.Postgres.Databases)
	}
	sec := in.Postgres.Security
	if sec == nil {
		t.Fatal("no security read")
	}
	if sec.RolesErr != "" || len(sec.Superusers) != 1 || sec.Superusers[0].Name != "postgres" {
		t.Errorf("superusers %+v (%q)", sec.Superusers, sec.RolesErr)
	}
	if sec.PublicErr != "" || !sec.PublicSchema || sec.Database != "postgres" {
		t.Errorf("public schema %+v", sec)
	}
	if sec.HashesErr != "permission denied for table pg_authid" || sec.MD5Roles != nil || sec.ScramRoles != 0 {
		t.Errorf("hashes %q md5 %v scram %d", sec.HashesErr, sec.MD5Roles, sec.ScramRoles)
	}
}

func appendTo(t *testing.T, name, text string) {
	t.Helper()
	f, err := os.OpenFile(name, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.WriteString(text); err != nil {
		t.Fatal(err)
	}
}

// reload sends SIGHUP and gives every process time to reread the files.
func reload(t *testing.T, s *testdb.Server) {
	t.Helper()
	if err := syscall.Kill(s.PID, syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	time.Sleep(300 * time.Millisecond)
}

// TestIntegrationGrammarMatchesServer asks the real server (postgres -C) how
// it reads tricky lines, and compares with the parser.
func TestIntegrationGrammarMatchesServer(t *testing.T) {
	needPG(t)
	s := testdb.Postgres(t, testdb.Options{})
	bin, err := testdb.PostgresBin()
	testdb.Need(t, fmt.Sprint(err), err == nil)
	conf := "log_line_prefix = 'it''s \\101\\t%m \\q' # comment\n" +
		"search_path '\"$user\", public'\n" +
		"dynamic_library_path=opt/x-y.z:lib\n" +
		"ssl_ciphers = HIGH:MEDIUM\n" +
		"work_mem 3MB\n" +
		"random_page_cost = .5e1\n"
	file := filepath.Join(s.Dir, "grammar.conf")
	if err := os.WriteFile(file, []byte(conf), 0o644); err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	if errs, _ := postgres.ParseConf([]byte(conf), func(d postgres.Directive) { got[d.Name] = d.Value }); len(errs) > 0 {
		t.Fatalf("syntax errors: %v", errs)
	}
	uid, gid := pgIDs(t)
	for _, name := range []string{"log_line_prefix", "search_path", "dynamic_library_path", "ssl_ciphers", "work_mem", "random_page_cost"} {
		cmd := exec.Command(filepath.Join(bin, "postgres"), "-D", s.DataDir, "-c", "config_file="+file, "-C", name)
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}}
		cmd.Dir = "/"
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("postgres -C %s: %v: %s", name, err, out)
		}
		server := strings.TrimSuffix(string(out), "\n")
		if name == "random_page_cost" {
			server = strings.TrimSuffix(server, ".0") // printed as a float
			if got[name] == ".5e1" {
				got[name] = "5"
			}
		}
		if name == "work_mem" { // printed in the base unit, kB
			b, _ := postgres.SettingBytes(name, engine.Setting{Value: got[name]})
			got[name] = strconv.FormatUint(b>>10, 10)
		}
		if server != got[name] {
			t.Errorf("%s: server reads %q, parser %q", name, server, got[name])
		}
	}
}

// TestIntegrationGrammarRejects: lines the parser rejects, the server
// rejects too.
func TestIntegrationGrammarRejects(t *testing.T) {
	needPG(t)
	s := testdb.Postgres(t, testdb.Options{})
	bin, err := testdb.PostgresBin()
	testdb.Need(t, fmt.Sprint(err), err == nil)
	uid, gid := pgIDs(t)
	for i, line := range []string{
		"work_mem = 3 MB",
		"dynamic_library_path = $libdir",
		"random_page_cost = 1e5",
		"log_line_prefix = 'open",
		"listen_addresses = *",
	} {
		if errs, _ := postgres.ParseConf([]byte(line+"\n"), func(postgres.Directive) {}); len(errs) != 1 {
			t.Errorf("parser accepts %q", line)
		}
		file := filepath.Join(s.Dir, fmt.Sprintf("bad%d.conf", i))
		if err := os.WriteFile(file, []byte(line+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		cmd := exec.Command(filepath.Join(bin, "postgres"), "-D", s.DataDir, "-c", "config_file="+file, "-C", "work_mem")
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}}
		cmd.Dir = "/"
		if out, err := cmd.CombinedOutput(); err == nil || !strings.Contains(string(out), "syntax error") {
			t.Errorf("server accepts %q: %s", line, out)
		}
	}
}

func pgIDs(t *testing.T) (int, int) {
	t.Helper()
	out, err := exec.Command("id", "-u", "postgres").Output()
	testdb.Need(t, "the postgres user", err == nil)
	uid, _ := strconv.Atoi(strings.TrimSpace(string(out)))
	out, _ = exec.Command("id", "-g", "postgres").Output()
	gid, _ := strconv.Atoi(strings.TrimSpace(string(out)))
	return uid, gid
}
