package ansible

import (
	"context"
	"database/sql"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"

	"github.com/dbhost/dbhost/internal/testdb"
)

// dbhost_health on a real Galera node (a private single-node cluster), the
// dbhost built from this tree reading its wsrep status live: healthy while
// it is Synced in a Primary component of the size recorded before; failing,
// with the node and its state named, while it is desynced (as a donor is),
// and passing again within the gate's timeout once it is back in sync;
// failing, with both sizes named, when it was expected in a larger cluster
// than it is now in.
//
// dbhost finds every server on the host, this machine's own included; the
// expect is narrowed to the private node, so only it must answer, and the
// machine's servers (no Galera nodes; no other test's, the host lock held
// alone) are left alone.
func TestModulesGalera(t *testing.T) {
	if testing.Short() {
		t.Skip("integration test: builds dbhost and starts a Galera node")
	}
	testdb.Need(t, "root", os.Geteuid() == 0)
	py := modulesPython(t)
	bin := filepath.Join(testdb.RootOnlyDir(t, "dbhost-galera-"), "dbhost")
	build := exec.Command("go", "build", "-o", bin, "./cmd/dbhost")
	build.Dir = modulesRepo(t)
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	holdHostAlone(t)
	node := testdb.MariaDB(t, testdb.Options{Galera: true})
	name := "mysql:" + strconv.Itoa(node.Port)
	db := galeraConn(t, node.Socket)
	defer func() {
		if t.Failed() {
			l := node.Log()
			t.Logf("end of the Galera node's log:\n%s", l[max(0, len(l)-3000):])
		}
	}()
	// A cheap check, so that each audit is quick; a waiver file makes its
	// verdict on this machine's kernel no matter (a waived failure passes),
	// while the check must still be judged.
	only := []string{"net.keepalive"}
	waivers := filepath.Join(t.TempDir(), "waivers.yaml")
	if err := os.WriteFile(waivers, []byte("waivers:\n  - check: net.keepalive\n    subject: host\n    reason: the gate's Galera test judges the node, not this machine's kernel\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	gate := func(expect map[string]any, timeout, delay int) (map[string]any, bool, []string) {
		t.Helper()
		args := map[string]any{"binary": bin, "only": only, "waivers": waivers, "timeout": timeout, "delay": delay}
		if expect != nil {
			args["expect"] = expect
		}
		r, failed := modulesRun(t, py, "dbhost_health", args)
		var failures []string
		decode(t, r["failures"], &failures)
		return r, failed, failures
	}

	// Before: what a roll-out records, the node answering in a cluster of 1.
	r, _, failures := gate(nil, 0, 0)
	var expect struct {
		Instances []string       `json:"instances"`
		Galera    map[string]int `json:"galera"`
	}
	decode(t, r["expect"], &expect)
	if !contains(expect.Instances, name) || expect.Galera[name] != 1 {
		t.Fatalf("expect %+v, want %s answering with a cluster of 1 (failures %q)", expect, name, failures)
	}
	want := map[string]any{"instances": []string{name}, "galera": map[string]int{name: 1}}
	r, failed, failures := gate(want, 0, 0)
	if failed || r["healthy"] != true {
		t.Fatalf("gate on the Synced node: failed %v: %q", failed, failures)
	}
	galeraIs(t, r, name, "Primary", "Synced", 1)
	var checks []struct {
		ID, Subject string
		Waived      bool
	}
	decode(t, r["checks"], &checks)
	if len(checks) != 1 || checks[0].ID != "net.keepalive" || checks[0].Subject != "host" {
		t.Errorf("checks judged: %+v, want net.keepalive on host", checks)
	}

	// Desynced, as a node is while it donates a state transfer: the gate
	// names the node and its state.
	setDesync(t, db, true)
	t.Cleanup(func() { setDesync(t, db, false) })
	if s := localState(t, db); s != "Donor/Desynced" {
		t.Fatalf("wsrep_desync=ON: local state %q, want Donor/Desynced", s)
	}
	r, failed, failures = gate(want, 0, 0)
	wantFailure := name + ": Galera node is Donor/Desynced, not Synced"
	if !failed || !contains(failures, wantFailure) {
		t.Fatalf("gate on the desynced node: failed %v, failures %q, want %q", failed, failures, wantFailure)
	}
	galeraIs(t, r, name, "Primary", "Donor/Desynced", 1)

	// Back in sync while the gate waits: it retries and passes. The node
	// is resynced only after the gate's first audit has run and ended, so
	// that at least one try saw it desynced.
	resynced := make(chan error, 1)
	go func() {
		start := time.Now()
		if err := waitAudit(bin, 30*time.Second); err != nil {
			resynced <- err
			return
		}
		time.Sleep(time.Until(start.Add(2 * time.Second)))
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_, err := db.ExecContext(ctx, "SET GLOBAL wsrep_desync=OFF")
		resynced <- err
	}()
	r, failed, failures = gate(want, 20, 1)
	if err := <-resynced; err != nil {
		t.Fatalf("resync while the gate waits: %v", err)
	}
	attempts, _ := r["attempts"].(float64)
	if failed || r["healthy"] != true || attempts < 2 {
		t.Fatalf("gate while the node resyncs: failed %v after %v tries in %v s: %q", failed, r["attempts"], r["elapsed"], failures)
	}
	galeraIs(t, r, name, "Primary", "Synced", 1)
	t.Logf("gate passed after %v tries in %v s", r["attempts"], r["elapsed"])

	// Expected in a cluster of 3 (a node back in a smaller cluster than
	// before the change): the gate names both sizes.
	r, failed, failures = gate(map[string]any{"instances": []string{name}, "galera": map[string]int{name: 3}}, 0, 0)
	wantFailure = name + ": Galera cluster has 1 node, had 3 before the change"
	if !failed || !contains(failures, wantFailure) {
		t.Fatalf("gate expecting a cluster of 3: failed %v, failures %q, want %q", failed, failures, wantFailure)
	}
	if len(failures) != 1 {
		t.Errorf("gate expecting a cluster of 3: failures %q, want only %q", failures, wantFailure)
	}
	galeraIs(t, r, name, "Primary", "Synced", 1)
}

// galeraConn connects to a private node as root over its socket (socket
// authentication), one connection, so that session state stays put.
func galeraConn(t *testing.T, socket string) *sql.DB {
	t.Helper()
	cfg := mysql.NewConfig()
	cfg.Net, cfg.Addr, cfg.User = "unix", socket, "root"
	cfg.Timeout = 5 * time.Second
	conn, err := mysql.NewConnector(cfg)
	if err != nil {
		t.Fatal(err)
	}
	db := sql.OpenDB(conn)
	db.SetMaxOpenConns(1)
	t.Cleanup(func() { db.Close() })
	return db
}

func setDesync(t *testing.T, db *sql.DB, on bool) {
	t.Helper()
	v := "OFF"
	if on {
		v = "ON"
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := db.ExecContext(ctx, "SET GLOBAL wsrep_desync="+v); err != nil {
		t.Errorf("SET GLOBAL wsrep_desync=%s: %v", v, err)
	}
}

func localState(t *testing.T, db *sql.DB) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var k, v string
	if err := db.QueryRowContext(ctx, "SHOW GLOBAL STATUS LIKE 'wsrep_local_state_comment'").Scan(&k, &v); err != nil {
		t.Fatal(err)
	}
	return v
}

// galeraIs checks the gate's returned instances and sizes for one node.
func galeraIs(t *testing.T, r map[string]any, name, status, state string, size int) {
	t.Helper()
	var instances []struct {
		Name           string
		SettingsSource string `json:"settings_source"`
		Galera         *struct {
			ClusterStatus string `json:"cluster_status"`
			LocalState    string `json:"local_state"`
			ClusterSize   int    `json:"cluster_size"`
			Ready         bool
		}
	}
	decode(t, r["instances"], &instances)
	var sizes map[string]int
	decode(t, r["galera"], &sizes)
	for _, in := range instances {
		if in.Name != name {
			continue
		}
		g := in.Galera
		if in.SettingsSource != "live" || g == nil || g.ClusterStatus != status || g.LocalState != state ||
			g.ClusterSize != size || !g.Ready || sizes[name] != size {
			t.Errorf("%s: %+v galera %+v sizes %v, want %s %s size %d ready", name, in, g, sizes, status, state, size)
		}
		return
	}
	t.Errorf("%s not among the gate's instances %+v", name, instances)
}

// waitAudit waits until a process runs bin (the gate's dbhost audit) and
// has ended.
func waitAudit(bin string, limit time.Duration) error {
	deadline := time.Now().Add(limit)
	pid := ""
	for time.Now().Before(deadline) {
		if pid == "" {
			ents, _ := os.ReadDir("/proc")
			for _, e := range ents {
				if exe, err := os.Readlink(filepath.Join("/proc", e.Name(), "exe")); err == nil && exe == bin {
					pid = e.Name()
					break
				}
			}
		} else if _, err := os.Stat(filepath.Join("/proc", pid)); err != nil {
			return nil
		}
		time.Sleep(20 * time.Millisecond)
	}
	return fmt.Errorf("no run of %s began and ended within %v", bin, limit)
}
