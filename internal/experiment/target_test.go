package experiment

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/dbhost/dbhost/internal/host"
)

// dbhost restarts a server it did not start only through its systemd
// service, found from the postmaster's cgroup (testdata/record.sh).
func TestServiceUnit(t *testing.T) {
	for _, tc := range []struct{ host, unit, why string }{
		{"pg-systemd", "postgresql@15-main.service", ""},
		{"pg", "", "not in a systemd service"},
	} {
		h, err := host.Open("testdata/hosts/" + tc.host)
		if err != nil {
			t.Fatal(err)
		}
		files, _ := filepath.Glob("testdata/hosts/" + tc.host + "/var/run/postgresql/*.pid")
		if len(files) != 1 {
			t.Fatalf("%s: pid files %v", tc.host, files)
		}
		pidFile := strings.TrimPrefix(files[0], "testdata/hosts/"+tc.host)
		unit, why := serviceUnit(h, pidFile)
		if unit != tc.unit || !strings.Contains(why, tc.why) {
			t.Errorf("%s: unit %q, why %q; want %q, %q", tc.host, unit, why, tc.unit, tc.why)
		}
	}
	h, _ := host.Open("testdata/hosts/pg")
	if unit, why := serviceUnit(h, "/var/run/postgresql/none.pid"); unit != "" || !strings.Contains(why, "cannot read") {
		t.Errorf("missing pid file: %q %q", unit, why)
	}
	if unit, why := serviceUnit(h, ""); unit != "" || why == "" {
		t.Errorf("no pid file: %q %q", unit, why)
	}
}

// Connection strings: the benchmark uses the DSN's database only when it
// names one; passwords stay out of everything printed.
func TestTargets(t *testing.T) {
	for dsn, want := range map[string]bool{
		"host=/tmp port=5 user=postgres":             false,
		"host=/tmp dbname=bench":                     true,
		"postgres://u:secret@localhost:5432/bench":   true,
		"postgresql://u@localhost:5432/?sslmode=off": false,
		"postgres://u@localhost/?dbname=bench":       true,
	} {
		if got := namesDB(dsn); got != want {
			t.Errorf("namesDB(%q) = %v", dsn, got)
		}
	}
	wt, err := pgTarget("postgres://alice:s3cretpw@db.example:6543/bench", "")
	if err != nil {
		t.Fatal(err)
	}
	if wt.Host != "db.example" || wt.Port != 6543 || wt.User != "alice" || wt.Password != "s3cretpw" || wt.DB != "bench" {
		t.Errorf("pg target %+v", wt)
	}
	if strings.Contains(wt.String(), "s3cretpw") {
		t.Errorf("password in %s", wt)
	}
	mt, err := mysqlTarget("bob:pw1234@unix(/run/mysqld/mysqld.sock)/shop", "bench")
	if err != nil {
		t.Fatal(err)
	}
	if mt.Host != "/run/mysqld/mysqld.sock" || mt.User != "bob" || mt.DB != "bench" || mt.Password != "pw1234" {
		t.Errorf("mysql target %+v", mt)
	}
	mt, err = mysqlTarget("tcp(127.0.0.1:3307)/", "")
	if err != nil || mt.Host != "127.0.0.1" || mt.Port != 3307 || mt.User != "root" {
		t.Errorf("mysql tcp target %+v %v", mt, err)
	}
	if _, err := mysqlTarget("not a dsn", ""); err == nil {
		t.Error("bad MySQL DSN accepted")
	}
}
