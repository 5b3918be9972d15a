package check_test

import (
	"context"
	"strconv"
	"strings"
	"testing"

	"github.com/dbhost/dbhost/internal/check"
	"github.com/dbhost/dbhost/internal/engine"
	"github.com/dbhost/dbhost/internal/facts"
	"github.com/dbhost/dbhost/internal/fix"
	"github.com/dbhost/dbhost/internal/fixture"
	"github.com/dbhost/dbhost/internal/host"
	"github.com/dbhost/dbhost/internal/testdb"
)

// privateMySQL returns the subject of the fixture's private MariaDB (the
// one testdb started in a /tmp/dbhost-mariadb-* directory; the machine's
// shared server is recorded next to it).
func privateMySQL(t *testing.T, name string) string {
	t.Helper()
	var subj string
	for _, in := range fixture.Facts(t, name).ByEngine(engine.MySQL) {
		if strings.HasPrefix(in.DataDir, "/tmp/dbhost-mariadb-") {
			if subj != "" {
				t.Fatalf("%s: two private MariaDB servers", name)
			}
			subj = in.Name()
		}
	}
	if subj == "" {
		t.Fatalf("%s: no private MariaDB recorded", name)
	}
	return subj
}

// mysqlCase is one recorded host and the verdict expected on its private
// server, with words the reason must contain.
type mysqlCase struct {
	fixture string
	status  check.Status
	reason  []string
}

func runMySQLCases(t *testing.T, id string, cases []mysqlCase) []check.Finding {
	t.Helper()
	var out []check.Finding
	for _, c := range cases {
		subj := privateMySQL(t, c.fixture)
		fd, ok := fixture.Find(t, c.fixture, id, subj)
		if !ok {
			t.Errorf("%s on %s: no finding for %s", id, c.fixture, subj)
			continue
		}
		if fd.Status != c.status {
			t.Errorf("%s on %s: %s (%s), want %s", id, c.fixture, fd.Status, fd.Reason, c.status)
		}
		for _, w := range c.reason {
			if !strings.Contains(fd.Reason, w) {
				t.Errorf("%s on %s: reason %q lacks %q", id, c.fixture, fd.Reason, w)
			}
		}
		if fd.Status == check.Fail && (fd.Fix == nil || fd.Fix.Empty()) {
			t.Errorf("%s on %s: failure without a fix", id, c.fixture)
		}
		out = append(out, fd)
	}
	return out
}

func configChange(fd check.Finding, key string) (fix.ConfigChange, bool) {
	if fd.Fix == nil {
		return fix.ConfigChange{}, false
	}
	for _, c := range fd.Fix.Config {
		if c.Key == key {
			return c, true
		}
	}
	return fix.ConfigChange{}, false
}

func TestMySQLFlushMethod(t *testing.T) {
	fds := runMySQLCases(t, "mysql.flush_method", []mysqlCase{
		{"mysql-private", check.Fail, []string{"fsync", "cached twice", "O_DIRECT"}},
		{"mysql-defaults-file", check.Pass, []string{"O_DIRECT"}},
		{"mysql-nonroot", check.Unknown, []string{"version", "is not run", "writable by group or others"}},
	})
	if len(fds) == 0 {
		return
	}
	c, ok := configChange(fds[0], "innodb_flush_method")
	if !ok || c.Value != "O_DIRECT" || !c.Restart {
		t.Errorf("fix %+v", fds[0].Fix)
	}
	// mysql-private runs with --no-defaults: a snippet alone would not
	// apply, the fix says to use the command line.
	if !strings.Contains(fds[0].Fix.Manual, "--innodb-flush-method=O_DIRECT") {
		t.Errorf("fix for a --no-defaults server: %q", fds[0].Fix.Manual)
	}
	// The defaults-file server read O_DIRECT from its include directory.
	fd, _ := fixture.Find(t, "mysql-defaults-file", "mysql.flush_method", privateMySQL(t, "mysql-defaults-file"))
	if !strings.Contains(fd.Evidence[0].Source, "conf.d/10-flush.cnf:2") {
		t.Errorf("evidence %+v does not name the include file", fd.Evidence)
	}
}

// ALL_O_DIRECT (Percona Server 5.x) and the test-only nosync cannot be set
// on the MariaDB this VM runs; the judgment is tested on facts built from
// a recorded instance with only that setting changed.
func TestMySQLFlushMethodValues(t *testing.T) {
	c, _ := check.Lookup("mysql.flush_method")
	for _, tc := range []struct {
		value    string
		status   check.Status
		severity check.Severity
		reason   string
	}{
		{"ALL_O_DIRECT", check.Fail, 0, "performed badly"},
		{"nosync", check.Fail, check.Critical, "lose committed transactions"},
		{"O_DIRECT_NO_FSYNC", check.Pass, 0, "cached once"},
		{"O_DSYNC", check.Fail, 0, "page cache"},
	} {
		f := withSetting(t, "mysql-private", "innodb_flush_method", tc.value)
		res := c.Run(f)
		var got *check.Result
		for i := range res {
			if strings.HasPrefix(f.Instances[0].DataDir, "/tmp/dbhost-mariadb-") && res[i].Subject == f.Instances[0].Name() {
				got = &res[i]
			}
		}
		if got == nil {
			t.Fatalf("%s: no result", tc.value)
		}
		if got.Status != tc.status || got.Severity != tc.severity || !strings.Contains(got.Reason, tc.reason) {
			t.Errorf("%s: %s/%v %q", tc.value, got.Status, got.Severity, got.Reason)
		}
	}
}

// withSetting copies a recorded host's private MySQL instance with one
// setting replaced.
func withSetting(t *testing.T, name, key, value string) *facts.Facts {
	t.Helper()
	src := fixture.Facts(t, name)
	subj := privateMySQL(t, name)
	f := &facts.Facts{Source: src.Source, Manifest: src.Manifest, AsRoot: src.AsRoot, Storage: src.Storage}
	for _, in := range src.Instances {
		if in.Name() != subj {
			continue
		}
		ei := *in.Instance
		ei.Settings = map[string]engine.Setting{}
		for k, v := range in.Settings {
			ei.Settings[k] = v
		}
		ei.Settings[key] = engine.Setting{Value: value, Source: "live"}
		cp := *in
		cp.Instance = &ei
		f.Instances = append(f.Instances, &cp)
	}
	return f
}

func TestMySQLAnonymousUsers(t *testing.T) {
	fds := runMySQLCases(t, "mysql.hardening.anonymous_users", []mysqlCase{
		{"mysql-hardening-fail", check.Fail, []string{"''@'localhost'"}},
		{"mysql-private", check.Pass, nil},
		{"mysql-nonroot", check.Unknown, []string{"connection", "run dbhost as root"}},
	})
	if len(fds) > 0 && !strings.Contains(fds[0].Fix.Manual, "DROP USER ''@'localhost';") {
		t.Errorf("fix %q", fds[0].Fix.Manual)
	}
}

func TestMySQLRemoteRoot(t *testing.T) {
	fds := runMySQLCases(t, "mysql.hardening.remote_root", []mysqlCase{
		{"mysql-hardening-fail", check.Fail, []string{"'root'@'%'"}},
		{"mysql-private", check.Pass, nil},
		{"mysql-nonroot", check.Unknown, []string{"connection"}},
	})
	if len(fds) > 0 && (!strings.Contains(fds[0].Fix.Manual, "DROP USER 'root'@'%';") || strings.Contains(fds[0].Reason, "localhost")) {
		t.Errorf("fix %q reason %q", fds[0].Fix.Manual, fds[0].Reason)
	}
}

func TestMySQLEmptyPasswords(t *testing.T) {
	fds := runMySQLCases(t, "mysql.hardening.empty_passwords", []mysqlCase{
		{"mysql-hardening-fail", check.Fail, []string{"'app'@'%'"}},
		// root authenticates by unix_socket only: no password, fine.
		{"mysql-private", check.Pass, nil},
		{"mysql-nonroot", check.Unknown, []string{"connection"}},
	})
	if len(fds) == 0 {
		return
	}
	fd := fds[0]
	// root@'%' of that fixture is socket-only and mysql.sys-like locked
	// accounts do not count.
	if strings.Contains(fd.Reason, "'root'") {
		t.Errorf("socket-only root flagged: %s", fd.Reason)
	}
	if !strings.Contains(fd.Fix.Manual, "ALTER USER 'app'@'%' IDENTIFIED BY") {
		t.Errorf("fix %q", fd.Fix.Manual)
	}
	for _, e := range fd.Evidence {
		if strings.Contains(strings.ToLower(e.Value), "*") && strings.Contains(e.Value, "password:") {
			t.Errorf("evidence looks like a credential: %v", e)
		}
	}
}

func TestMySQLTestDB(t *testing.T) {
	runMySQLCases(t, "mysql.hardening.test_db", []mysqlCase{
		{"mysql-hardening-fail", check.Fail, []string{"test database exists"}},
		{"mysql-private", check.Pass, nil},
		{"mysql-nonroot", check.Unknown, []string{"data directory"}},
	})
}

func TestMySQLSkipGrantTables(t *testing.T) {
	fds := runMySQLCases(t, "mysql.hardening.skip_grant_tables", []mysqlCase{
		{"mysql-skip-grant-tables", check.Fail, []string{"no passwords"}},
		{"mysql-private", check.Pass, nil},
		{"mysql-nonroot", check.Unknown, []string{"my.cnf: permission denied"}},
	})
	if len(fds) > 0 && !strings.Contains(fds[0].Fix.Manual, "command line") {
		t.Errorf("fix %q does not point at the command line", fds[0].Fix.Manual)
	}
}

func TestMySQLSymbolicLinks(t *testing.T) {
	fds := runMySQLCases(t, "mysql.hardening.symbolic_links", []mysqlCase{
		{"mysql-private", check.Fail, []string{"default of MariaDB"}},
		{"mysql-defaults-file", check.Pass, nil},
		{"mysql-nonroot", check.Unknown, []string{"version"}},
	})
	if len(fds) > 0 {
		if c, ok := configChange(fds[0], "symbolic_links"); !ok || c.Value != "0" {
			t.Errorf("fix %+v", fds[0].Fix)
		}
	}
}

func TestMySQLSkipNameResolve(t *testing.T) {
	fds := runMySQLCases(t, "mysql.hardening.skip_name_resolve", []mysqlCase{
		// Listens on 0.0.0.0 and has an account by host name.
		{"mysql-hardening-fail", check.Fail, []string{"DNS", "'report'@'db.example.com'"}},
		{"mysql-defaults-file", check.Pass, []string{"is ON"}},
		// OFF, but only loopback and the socket.
		{"mysql-private", check.Pass, []string{"loopback"}},
		{"mysql-nonroot", check.Unknown, []string{"could not be read"}},
	})
	if len(fds) > 0 {
		if c, ok := configChange(fds[0], "skip_name_resolve"); !ok || c.Value != "ON" || !c.Restart {
			t.Errorf("fix %+v", fds[0].Fix)
		}
	}
}

func TestGaleraPorts(t *testing.T) {
	fds := runMySQLCases(t, "galera.ports", []mysqlCase{
		{"mysql-galera", check.Fail, []string{"0.0.0.0:4567"}},
		{"mysql-galera-bound", check.Pass, []string{"127.0.0.1:"}},
		{"mysql-galera-nonroot", check.Unknown, []string{"could not be read"}},
	})
	if len(fds) > 0 && !strings.Contains(fds[0].Fix.Manual, "wsrep_node_address") {
		t.Errorf("fix %q", fds[0].Fix.Manual)
	}
	// Not a Galera node: no verdict at all.
	if st := fixture.Statuses(t, "mysql-private", "galera.ports"); len(st) != 0 {
		t.Errorf("galera.ports on plain servers: %v", st)
	}
}

// With wsrep_node_address known, the fix binds gmcast.listen_addr to it
// and keeps the provider options the files set.
func TestGaleraPortsFixKeepsProviderOptions(t *testing.T) {
	f := withSetting(t, "mysql-galera", "wsrep_node_address", "10.1.2.3")
	in := f.Instances[0]
	in.MySQL = &engine.MySQLInfo{Galera: true, Configured: map[string]engine.Setting{
		"wsrep_provider_options": {Value: "gcache.size=1G; gmcast.listen_addr=tcp://0.0.0.0:4567", Source: "file:/etc/mysql/conf.d/galera.cnf:3"},
	}}
	c, _ := check.Lookup("galera.ports")
	res := c.Run(f)
	if len(res) != 1 || res[0].Status != check.Fail || res[0].Fix == nil {
		t.Fatalf("results %+v", res)
	}
	got := map[string]string{}
	for _, cc := range res[0].Fix.Config {
		got[cc.Key] = cc.Value
	}
	if got["wsrep_provider_options"] != "gcache.size=1G;gmcast.listen_addr=tcp://10.1.2.3:4567" || got["wsrep_sst_receive_address"] != "10.1.2.3" {
		t.Errorf("fix config %v", got)
	}
}

// A live audit of a private MariaDB fails on fsync, symbolic links and
// name resolution; a server started with the fixes' settings passes.
func TestMySQLLiveFixesFlip(t *testing.T) {
	if testing.Short() {
		t.Skip("integration: starts MariaDB servers")
	}
	ids := []string{"mysql.flush_method", "mysql.hardening.symbolic_links", "mysql.hardening.skip_name_resolve"}
	audit := func(s *testdb.Server) map[string]check.Finding {
		h, err := host.Open("/")
		if err != nil {
			t.Fatal(err)
		}
		f := facts.Gather(context.Background(), h, check.GatherOptions(engine.Options{}))
		out := map[string]check.Finding{}
		for _, fd := range check.Run(f, check.Selector{Only: ids}) {
			if fd.Subject == "mysql:"+strconv.Itoa(s.Port) {
				out[fd.ID] = fd
			}
		}
		return out
	}
	before := testdb.MariaDB(t, testdb.Options{Settings: map[string]string{"innodb-flush-method": "fsync", "bind-address": "0.0.0.0"}})
	settings := map[string]string{"bind-address": "0.0.0.0"}
	for _, id := range ids {
		fd, ok := audit(before)[id]
		if !ok || fd.Status != check.Fail {
			t.Fatalf("%s before: %+v", id, fd)
		}
		for _, c := range fd.Fix.Config {
			settings[strings.ReplaceAll(c.Key, "_", "-")] = c.Value
		}
	}
	before.Stop(t)
	after := testdb.MariaDB(t, testdb.Options{Settings: settings})
	got := audit(after)
	for _, id := range ids {
		if fd := got[id]; fd.Status != check.Pass {
			t.Errorf("%s after applying %v: %s (%s)", id, settings, fd.Status, fd.Reason)
		}
	}
}
