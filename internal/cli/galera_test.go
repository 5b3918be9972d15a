package cli

import (
	"encoding/json"
	"path/filepath"
	"reflect"
	"testing"
	"time"

	"github.com/dbhost/dbhost/internal/testdb"
)

// A Galera node's live cluster status is in the audit JSON as
// instances[].galera with the key names roll-out gates read; a collected
// snapshot replays it; a plain server, or a node audited without a
// connection, has no galera object.
func TestAuditGaleraStatus(t *testing.T) {
	if testing.Short() {
		t.Skip("integration: starts a Galera node and a MariaDB")
	}
	start := time.Now()
	node := testdb.MariaDB(t, testdb.Options{Galera: true})
	t.Logf("single-node Galera cluster bootstrapped and Synced in %v", time.Since(start).Round(time.Millisecond))
	plain := testdb.MariaDB(t, testdb.Options{})

	want := map[string]any{"cluster_status": "Primary", "local_state": "Synced", "cluster_size": float64(1),
		"ready": true, "connected": true}
	judge := func(what, js string, connected bool) {
		t.Helper()
		var doc struct {
			Instances []map[string]any `json:"instances"`
		}
		if err := json.Unmarshal([]byte(js), &doc); err != nil {
			t.Fatalf("%s: %v\n%s", what, err, js)
		}
		seen := 0
		for _, in := range doc.Instances {
			pid, _ := in["pid"].(float64)
			g, has := in["galera"]
			switch int(pid) {
			case node.PID:
				seen++
				if !connected {
					if has {
						t.Errorf("%s: galera %v without a connection", what, g)
					}
					continue
				}
				if in["settings_source"] != "live" {
					t.Fatalf("%s: Galera node not read live: %v", what, in["live_error"])
				}
				gm, _ := g.(map[string]any)
				uuid, _ := gm["cluster_state_uuid"].(string)
				got := map[string]any{}
				for k := range want {
					got[k] = gm[k]
				}
				if !reflect.DeepEqual(got, want) || len(uuid) != 36 {
					t.Errorf("%s: galera %v (uuid %q, error %v), want %v", what, g, uuid, in["galera_error"], want)
				}
				// What the cluster checks read comes along (a snapshot too).
				for _, k := range []string{"cluster_weight", "members", "incoming_addresses", "flow_control_paused"} {
					if _, ok := gm[k]; !ok {
						t.Errorf("%s: galera has no %s: %v", what, k, gm)
					}
				}
			case plain.PID:
				seen++
				if has || in["settings_source"] != "live" && connected {
					t.Errorf("%s: plain MariaDB: galera %v, settings from %v", what, g, in["settings_source"])
				}
			}
		}
		if seen != 2 {
			t.Errorf("%s: %d of the two private servers listed", what, seen)
		}
	}
	// The checks a roll-out gate passes: the status must not depend on
	// which checks run.
	audit := []string{"audit", "--only", "net.keepalive,net.fin_timeout", "--format", "json", "--fail-on", "none"}
	_, js, stderr := runCLI(t, audit...)
	judge("live audit", js, true)
	if t.Failed() {
		l := node.Log()
		t.Logf("stderr: %s\nend of the Galera node's log:\n%s", stderr, l[max(0, len(l)-3000):])
	}
	_, js, _ = runCLI(t, append(audit, "--no-connect")...)
	judge("audit --no-connect", js, false)

	snap := filepath.Join(t.TempDir(), "snap.tar.gz")
	if code, _, stderr := runCLI(t, "collect", "-o", snap); code != ExitOK {
		t.Fatalf("collect: exit %d: %s", code, stderr)
	}
	_, js, _ = runCLI(t, append(audit, "--from", snap)...)
	judge("audit --from", js, true)
}
