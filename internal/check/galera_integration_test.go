package check_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/dbhost/dbhost/internal/check"
	"github.com/dbhost/dbhost/internal/engine"
	"github.com/dbhost/dbhost/internal/facts"
	"github.com/dbhost/dbhost/internal/galeralab"
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

// Three data nodes and garbd in a lab, all on this host: each node's view
// is merged with the others', so the data nodes' weights and segments are
// read from themselves; the arbitrator (no client address) is recognised.
// The seed's table: one failure at once, two one by one.
func TestGaleraChecksLab(t *testing.T) {
	if testing.Short() {
		t.Skip("integration: starts a Galera lab")
	}
	t.Parallel() // beside TestGaleraPortsLab: see startLab
	_, errG := os.Stat("/usr/bin/garbd")
	testdb.Need(t, "galera-arbitrator-4", errG == nil)
	lab := startLab(t, galeralab.Config{Name: "checks", Nodes: 3, Arbitrator: true})
	start, _ := lab.Times()
	t.Logf("lab of 3 nodes and garbd Synced in %v", start.Round(time.Millisecond))

	h, err := host.Open("/")
	if err != nil {
		t.Fatal(err)
	}
	f := facts.Gather(context.Background(), h, check.GatherOptions(engine.Options{}))
	ours := map[string]bool{}
	for _, n := range lab.Nodes() {
		if !n.Arbitrator {
			ours[fmt.Sprintf("mysql:%d", n.Port)] = true
		}
	}
	seen := 0
	for _, fd := range check.Run(f, check.Selector{Only: []string{"galera.cluster"}}) {
		if !ours[fd.Subject] {
			continue // another server on this host
		}
		seen++
		if fd.Status != check.Pass {
			t.Errorf("%s %s: %s: %s", fd.ID, fd.Subject, fd.Status, fd.Reason)
		}
		if fd.ID == "galera.cluster.quorum" && !strings.Contains(fd.Reason, "(3 data node(s), 1 arbitrator(s), weight 4) survives 1 failure(s) at once and 2 one by one") {
			t.Errorf("%s: %s", fd.Subject, fd.Reason)
		}
		for _, e := range fd.Evidence {
			// garbd is no server dbhost reads: its weight alone is assumed.
			if e.Key == "members" && (strings.Count(e.Value, "assumed") != 1 || !strings.Contains(e.Value, "garbd (arbitrator, weight 1, segment 0, assumed)")) {
				t.Errorf("%s: members %s: want every data node read from itself, garbd assumed", fd.Subject, e.Value)
			}
		}
	}
	if seen != 9 {
		t.Errorf("%d cluster findings on the lab's nodes, want 3 checks × 3 nodes", seen)
	}
}

// startLab starts a Galera lab in a temporary root for the rest of the
// test (root, galera-4 and the host lock, as every lab test needs) and
// stops it when the test ends.
//
// The two lab tests run side by side (t.Parallel, called before the lock
// is taken): each lab has its own subnet and namespaces, most of a start
// is waiting for the nodes to join, and each test judges only its own
// lab's servers.
func startLab(t *testing.T, cfg galeralab.Config) *galeralab.Lab {
	t.Helper()
	testdb.Need(t, "root (network namespaces)", os.Geteuid() == 0)
	_, errP := os.Stat(testdb.GaleraProvider)
	testdb.Need(t, "galera-4", errP == nil)
	testdb.HoldHost(t)
	root, err := os.MkdirTemp("", "dbhost-"+cfg.Name+"lab-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(root) })
	if err := os.Chmod(root, 0o711); err != nil { // the nodes run as mysql
		t.Fatal(err)
	}
	cfg.Root = root
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	lab, err := galeralab.Start(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := lab.Stop(context.Background()); err != nil {
			t.Errorf("stop the lab: %v", err)
		}
	})
	return lab
}
