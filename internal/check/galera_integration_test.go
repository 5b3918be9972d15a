package check_test

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/dbhost/dbhost/internal/check"
	"github.com/dbhost/dbhost/internal/engine"
	"github.com/dbhost/dbhost/internal/facts"
	"github.com/dbhost/dbhost/internal/host"
	"github.com/dbhost/dbhost/internal/testdb"
)

// A live one-node Galera cluster judged by the cluster checks: Synced and
// Primary, but one member (quorum fails), its SST credentials in a
// world-readable option file (critical, the password nowhere in the
// facts or findings); a table without a primary key, created live, flips
// galera.primary_keys.
func TestGaleraChecksLive(t *testing.T) {
	if testing.Short() {
		t.Skip("integration: starts a Galera node")
	}
	const secret = "Live-SST-Secret-3x"
	dir, err := os.MkdirTemp("", "dbhost-mycnf-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	cnf := filepath.Join(dir, "my.cnf")
	body := "[mysqld]\nbinlog_format = ROW\ninnodb_autoinc_lock_mode = 2\nwsrep_sst_method = mariabackup\nwsrep_sst_auth = sst:" + secret + "\n"
	if err := os.WriteFile(cnf, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	s := testdb.MariaDB(t, testdb.Options{Galera: true, DefaultsFile: cnf})
	subj := "mysql:" + strconv.Itoa(s.Port)

	judge := func() map[string]check.Finding {
		t.Helper()
		h, err := host.Open("/")
		if err != nil {
			t.Fatal(err)
		}
		f := facts.Gather(context.Background(), h, check.GatherOptions(engine.Options{}))
		fds := check.Run(f, check.Selector{Only: []string{"galera"}})
		for _, v := range []any{f, fds} {
			if b, _ := json.Marshal(v); strings.Contains(string(b), secret) {
				t.Errorf("the SST password is in the %T", v)
			}
		}
		out := map[string]check.Finding{}
		for _, fd := range fds {
			if fd.Subject == subj {
				out[fd.ID] = fd
			}
		}
		return out
	}
	want := map[string]check.Status{
		"galera.cluster.primary": check.Pass, "galera.cluster.quorum": check.Fail, "galera.cluster.segments": check.Pass,
		"galera.evs_timeouts": check.Pass, "galera.flow_control": check.Pass, "galera.binlog_format": check.Pass,
		"galera.autoinc_lock_mode": check.Pass, "galera.sst": check.Fail, "galera.ssl": check.Pass, "galera.primary_keys": check.Pass,
		"galera.ports": check.Pass,
	}
	got := judge()
	for id, st := range want {
		if fd := got[id]; fd.Status != st {
			t.Errorf("%s: %s, want %s: %s", id, fd.Status, st, fd.Reason)
		}
	}
	if fd := got["galera.sst"]; fd.Severity != check.Critical || !strings.Contains(fd.Reason, cnf) {
		t.Errorf("galera.sst: severity %s, reason %q: want critical, naming %s", fd.Severity, fd.Reason, cnf)
	}

	client, err := exec.LookPath("mariadb")
	if err != nil {
		client = "mysql"
	}
	if out, err := exec.Command(client, "--no-defaults", "--socket="+s.Socket, "--user=root",
		"--execute=CREATE DATABASE app; CREATE TABLE app.events (at DATETIME, what TEXT) ENGINE=InnoDB").CombinedOutput(); err != nil {
		t.Fatalf("%s: %v\n%s", client, err, out)
	}
	if fd := judge()["galera.primary_keys"]; fd.Status != check.Fail || !strings.Contains(fd.Reason, "app.events") {
		t.Errorf("galera.primary_keys after a table without a key: %s: %s", fd.Status, fd.Reason)
	}
}
