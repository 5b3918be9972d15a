package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/dbhost/dbhost/internal/galeralab"
	"github.com/dbhost/dbhost/internal/testdb"
)

// Galera cluster-check scenarios: a one-node cluster whose option file
// holds what the cluster checks judge (the SST credentials, binlog format,
// lock mode, provider options), with user tables Galera replicates badly.

// galeraSSTSecret is the password the fixture's option file holds: it must
// appear nowhere in the recording (internal/check's redaction test).
const galeraSSTSecret = "Fixture-SST-Secret-7Q"

func init() {
	register(Scenario{
		Name:  "galera-node",
		Note:  "private one-node Galera cluster bound to 127.0.0.1 (wsrep_on, provider and cluster address on the command line); its --defaults-file, mode 0644 (readable by every user), sets binlog_format=ROW, innodb_autoinc_lock_mode=2, wsrep_sst_method=mariabackup, wsrep_sst_auth=sst:SECRET and wsrep_provider_options (gmcast.listen_addr and ist.recv_addr on 127.0.0.1, gcache.size=64M); schema app has orders (InnoDB, primary key), audit_log (InnoDB, no primary key) and sessions (MyISAM); read live as root",
		Setup: func(r *Run) error { return startGaleraNode(r, 0o644) },
	})
	register(Scenario{
		Name:   "galera-node-nonroot",
		Note:   "the one-node Galera cluster of galera-node with its --defaults-file mode 0640 (mysql's), collected as user nobody: no live connection, the option file unreadable, so only the command line's wsrep settings are known",
		AsUser: "nobody",
		Setup:  func(r *Run) error { return startGaleraNode(r, 0o640) },
	})
	register(Scenario{
		Name:  "galera-lab3",
		Note:  "a three-node Galera lab (dbhost's galeralab: MariaDB nodes node1..node3 in network namespaces on 10.238.X.0/24, one segment, pc.weight 1, SST by rsync), every node Synced in one Primary component; read live as root over each node's socket",
		Setup: func(r *Run) error { return startGaleraLab(r, galeralab.Config{Name: "fixture3", Nodes: 3}) },
	})
	register(Scenario{
		Name: "galera-lab-2dc",
		Note: "a four-node Galera lab over two segments (node1 and node3 in gmcast.segment 0, node2 and node4 in segment 1, pc.weight 1): cutting the segments apart leaves each side exactly half; read live as root over each node's socket",
		Setup: func(r *Run) error {
			return startGaleraLab(r, galeralab.Config{Name: "fixture2dc", Nodes: 4, Segments: 2})
		},
	})
}

// startGaleraLab starts a lab for the recording and stops it afterwards.
func startGaleraLab(r *Run, cfg galeralab.Config) error {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	lab, err := galeralab.Start(ctx, cfg)
	if err != nil {
		return err
	}
	r.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		if err := lab.Stop(ctx); err != nil {
			fmt.Fprintln(os.Stderr, "stop the lab:", err)
		}
	})
	return nil
}

// startGaleraNode starts the node of the galera-node scenarios, its option
// file of the given mode.
func startGaleraNode(r *Run, mode os.FileMode) error {
	gcomm := testdb.FreePort(r.tb)
	sst := testdb.FreePort(r.tb)
	dir, err := myConfTree(r, mode, map[string]string{
		"my.cnf": "[mysqld]\nbinlog_format = ROW\ninnodb_autoinc_lock_mode = 2\nwsrep_sst_method = mariabackup\n" +
			"wsrep_sst_auth = sst:" + galeraSSTSecret + "\n" +
			fmt.Sprintf("wsrep_provider_options = \"gmcast.listen_addr=tcp://127.0.0.1:%d;ist.recv_addr=127.0.0.1:%d;gcache.size=64M\"\n", gcomm, gcomm+1) +
			fmt.Sprintf("wsrep_sst_receive_address = 127.0.0.1:%d\n", sst),
	})
	if err != nil {
		return err
	}
	s := r.MariaDB(testdb.Options{DefaultsFile: filepath.Join(dir, "my.cnf"), Settings: map[string]string{
		"wsrep-on":                    "ON",
		"wsrep-provider":              testdb.GaleraProvider,
		"wsrep-cluster-address":       "gcomm://",
		"wsrep-cluster-name":          "dbhost-fixture",
		"wsrep-node-name":             "node1",
		"wsrep-node-address":          "127.0.0.1",
		"wsrep-node-incoming-address": "127.0.0.1",
	}})
	return mySQL(r, s,
		"CREATE DATABASE app",
		"CREATE TABLE app.orders (id BIGINT PRIMARY KEY, total DECIMAL(10,2)) ENGINE=InnoDB",
		"CREATE TABLE app.audit_log (at DATETIME, who VARCHAR(64), what TEXT) ENGINE=InnoDB",
		"CREATE TABLE app.sessions (id CHAR(32) PRIMARY KEY, data BLOB) ENGINE=MyISAM",
		"INSERT INTO app.orders VALUES (1, 10.00), (2, 20.00), (3, 30.00)",
		"INSERT INTO app.audit_log VALUES (NOW(), 'app', 'created orders')",
	)
}
