package mysql_test

import (
	"os/exec"
	"strings"
	"testing"

	"github.com/dbhost/dbhost/internal/engine"
	"github.com/dbhost/dbhost/internal/testdb"
)

// A one-node Galera cluster read live: the counters the cluster checks
// read, its member list, and the user tables Galera replicates badly (a
// table without a primary key, a MyISAM table), system schemas left out.
func TestGaleraNodeLive(t *testing.T) {
	if testing.Short() {
		t.Skip("integration: starts a Galera node")
	}
	s := testdb.MariaDB(t, testdb.Options{Galera: true})
	client, err := exec.LookPath("mariadb")
	if err != nil {
		client = "mysql"
	}
	sqlText := "CREATE DATABASE app; CREATE TABLE app.keyed (id INT PRIMARY KEY, v INT) ENGINE=InnoDB;" +
		"CREATE TABLE app.log (at DATETIME, msg TEXT) ENGINE=InnoDB; CREATE TABLE app.cache (k INT PRIMARY KEY) ENGINE=MyISAM;" +
		"INSERT INTO app.keyed VALUES (1, 1), (2, 2);"
	if out, err := exec.Command(client, "--no-defaults", "--socket="+s.Socket, "--user=root", "--execute="+sqlText).CombinedOutput(); err != nil {
		t.Fatalf("%s: %v\n%s", client, err, out)
	}
	in := discover(t, liveHost(t), s.PID, engine.Options{})
	if in.SettingsSource != "live" || in.MySQL == nil || !in.MySQL.Galera {
		t.Fatalf("Galera node not read live: %q %q", in.SettingsSource, in.LiveErr)
	}
	g := in.MySQL.GaleraStatus
	if g == nil {
		t.Fatalf("no Galera status: %s", in.MySQL.GaleraErr)
	}
	if g.ClusterStatus != "Primary" || g.ClusterSize != 1 || g.ClusterWeight != 1 || g.LocalIndex != 0 {
		t.Errorf("status %+v", g)
	}
	// The inserts replicate (one write set each statement at least).
	if g.ReplicatedBytes <= 0 {
		t.Errorf("wsrep_replicated_bytes %d after writes", g.ReplicatedBytes)
	}
	if len(g.Members) != 1 || g.Members[0].UUID == "" {
		t.Errorf("members %+v, want this node", g.Members)
	}
	// The test node sets no wsrep_node_incoming_address: Galera says AUTO.
	if len(g.IncomingAddresses) != 1 || g.IncomingAddresses[0] != g.Members[0].IncomingAddress {
		t.Errorf("incoming addresses %v, want this node's (%+v)", g.IncomingAddresses, g.Members)
	}
	if g.ReplLatency != nil {
		t.Logf("wsrep_evs_repl_latency %+v", *g.ReplLatency)
	}
	tb := in.MySQL.Tables
	if tb == nil || tb.Err != "" {
		t.Fatalf("tables %+v", tb)
	}
	if tb.WithoutPKCount != 1 || strings.Join(tb.WithoutPK, ",") != "app.log" {
		t.Errorf("without PK %d %v, want app.log", tb.WithoutPKCount, tb.WithoutPK)
	}
	if tb.NonInnoDBCount != 1 || strings.Join(tb.NonInnoDB, ",") != "app.cache (MyISAM)" {
		t.Errorf("non-InnoDB %d %v, want app.cache (MyISAM)", tb.NonInnoDBCount, tb.NonInnoDB)
	}
}
