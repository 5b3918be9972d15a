package check_test

import (
	"fmt"

	"github.com/dbhost/dbhost/internal/check"
	"github.com/dbhost/dbhost/internal/engine"
	"github.com/dbhost/dbhost/internal/facts"
)

// The Galera node of the galera-node recordings (and of the hosts derived
// from them), and of galera-node-nonroot.
const (
	galeraNode        = "mysql:41785"
	galeraNodeNonroot = "mysql:46571"
)

// wsrep edits the recorded wsrep status of a Galera node.
func wsrep(subject string, edit func(g *engine.GaleraStatus)) func(*facts.Facts) {
	return func(f *facts.Facts) { edit(instance(f, subject).MySQL.GaleraStatus) }
}

// galeraPeers adds to the host the other members of galera-node-dc's
// cluster as Galera nodes of their own (copies of node1 with their name,
// port and gmcast.segment), so that every member's weight and segment is
// read from itself; segs gives each member's segment, node1 included.
func galeraPeers(segs map[string]int) func(*facts.Facts) {
	return func(f *facts.Facts) {
		self := instance(f, galeraNode)
		self.Set("wsrep_provider_options", fmt.Sprintf("gmcast.segment = %d; pc.weight = 1", segs["node1"]), "live")
		for i, name := range []string{"node2", "node3", "node4"} {
			ei := *self.Instance
			ei.Settings = map[string]engine.Setting{}
			for k, v := range self.Settings {
				ei.Settings[k] = v
			}
			ei.Port, ei.PID = self.Port+1+i, self.PID+1+i
			cp := *self
			cp.Instance = &ei
			cp.Set("wsrep_node_name", name, "live")
			cp.Set("wsrep_node_address", fmt.Sprintf("10.20.0.%d", 12+i), "live")
			cp.Set("wsrep_provider_options", fmt.Sprintf("gmcast.segment = %d; pc.weight = 1", segs[name]), "live")
			f.Instances = append(f.Instances, &cp)
		}
	}
}

func init() {
	big := func(g *engine.GaleraStatus) { g.ReplicatedBytes = 128<<20 + 1<<20 } // 64M over 7200 s: just under an hour
	addCases(
		// galera.cluster.primary
		tcase{name: "synced primary", base: "galera-node", id: "galera.cluster.primary", subject: galeraNode, want: check.Pass, says: []string{"Synced in a Primary component of 1"}},
		tcase{name: "non-primary", base: "galera-node-degraded", id: "galera.cluster.primary", subject: galeraNode, want: check.Fail, says: []string{"non-Primary", "refuses queries"}},
		tcase{name: "donor", base: "galera-node", mutate: wsrep(galeraNode, func(g *engine.GaleraStatus) { g.LocalState = "Donor/Desynced" }),
			id: "galera.cluster.primary", subject: galeraNode, want: check.Fail, says: []string{"Donor/Desynced", "must not get client traffic"}},
		tcase{name: "no connection", base: "galera-node-nonroot", id: "galera.cluster.primary", subject: galeraNodeNonroot, want: check.Unknown, says: []string{"only visible over a connection"}},

		// galera.cluster.quorum
		tcase{name: "one node", base: "galera-node", id: "galera.cluster.quorum", subject: galeraNode, want: check.Fail, says: []string{"single member"}},
		tcase{name: "four nodes, even split", base: "galera-node-dc", id: "galera.cluster.quorum", subject: galeraNode, want: check.Fail, says: []string{"two equal halves", "add an arbitrator"}},
		tcase{name: "four nodes and garbd", base: "galera-node-dc", mutate: wsrep(galeraNode, func(g *engine.GaleraStatus) {
			g.Members = append(g.Members, engine.GaleraMember{Name: "garbd"})
			g.ClusterSize, g.ClusterWeight = 5, 5
		}), id: "galera.cluster.quorum", subject: galeraNode, want: check.Pass, says: []string{"4 data node(s), 1 arbitrator(s), weight 5", "survives 2 failure(s) at once"}},
		tcase{name: "three nodes and garbd", base: "galera-node-dc", mutate: wsrep(galeraNode, func(g *engine.GaleraStatus) {
			g.Members = append(g.Members[:3], engine.GaleraMember{Name: "garbd"})
		}), id: "galera.cluster.quorum", subject: galeraNode, want: check.Pass, says: []string{"1 arbitrator(s)", "survives 1 failure(s) at once and 2 one by one", "would still stop both sides"}},
		tcase{name: "three nodes", base: "galera-node-dc", mutate: wsrep(galeraNode, func(g *engine.GaleraStatus) {
			g.Members, g.ClusterSize, g.ClusterWeight = g.Members[:3], 3, 3
		}), id: "galera.cluster.quorum", subject: galeraNode, want: check.Pass, says: []string{"survives 1 failure(s) at once and 1 one by one"}},
		tcase{name: "heavy node", base: "galera-node-dc", mutate: func(f *facts.Facts) {
			// node1 holds 3 of 6: its loss leaves exactly half.
			instance(f, galeraNode).Set("wsrep_provider_options", "pc.weight = 3", "live")
			wsrep(galeraNode, func(g *engine.GaleraStatus) { g.ClusterWeight = 6 })(f)
		}, id: "galera.cluster.quorum", subject: galeraNode, want: check.Fail, says: []string{"losing node1 alone stops the cluster"}},

		// galera.cluster.segments
		tcase{name: "one segment", base: "galera-node", id: "galera.cluster.segments", subject: galeraNode, want: check.Pass, says: []string{"one segment"}},
		tcase{name: "peers' segments unseen", base: "galera-node-dc", id: "galera.cluster.segments", subject: galeraNode, want: check.Unknown, says: []string{"segment 1", "not visible"}},
		tcase{name: "2-2 over two segments", base: "galera-node-dc", mutate: galeraPeers(map[string]int{"node1": 1, "node2": 1, "node3": 0, "node4": 0}),
			id: "galera.cluster.segments", subject: galeraNode, want: check.Fail, says: []string{"neither side holds more than half"}},
		tcase{name: "1-3 over two segments", base: "galera-node-dc", mutate: galeraPeers(map[string]int{"node1": 1, "node2": 0, "node3": 0, "node4": 0}),
			id: "galera.cluster.segments", subject: galeraNode, want: check.Pass, says: []string{"one side keeps more than half"}},

		// galera.evs_timeouts
		tcase{name: "defaults on loopback", base: "galera-node", id: "galera.evs_timeouts", subject: galeraNode, want: check.Pass, says: []string{"at least 10 times"}},
		tcase{name: "slow network", base: "galera-node-degraded", id: "galera.evs_timeouts", subject: galeraNode, want: check.Fail, says: []string{"less than 10 times", "900ms"}},
		tcase{name: "suspect after inactive", base: "galera-node", mutate: setting(galeraNode, "wsrep_provider_options", "evs.suspect_timeout = PT20S; evs.inactive_timeout = PT15S"),
			id: "galera.evs_timeouts", subject: galeraNode, want: check.Fail, says: []string{"longer than evs.inactive_timeout"}},
		tcase{name: "latency just inside", base: "galera-node", mutate: wsrep(galeraNode, func(g *engine.GaleraStatus) {
			g.ReplLatency = &engine.GaleraLatency{Max: 0.49, Samples: 10}
		}), id: "galera.evs_timeouts", subject: galeraNode, want: check.Pass},
		tcase{name: "latency just outside", base: "galera-node", mutate: wsrep(galeraNode, func(g *engine.GaleraStatus) {
			g.ReplLatency = &engine.GaleraLatency{Max: 0.51, Samples: 10}
		}), id: "galera.evs_timeouts", subject: galeraNode, want: check.Fail, says: []string{"less than 10 times"}},
		tcase{name: "no latency measured", base: "galera-node-nonroot", id: "galera.evs_timeouts", subject: galeraNodeNonroot, want: check.Unknown, says: []string{"not measured"}},

		// galera.gcache
		tcase{name: "a day, 48 GiB", base: "galera-node-degraded", id: "galera.gcache", subject: galeraNode, want: check.Fail, says: []string{"holds only about 2m0s", "gcache.size=2560M"}},
		tcase{name: "two hours, 100 MiB", base: "galera-node-dc", id: "galera.gcache", subject: galeraNode, want: check.Pass, says: []string{"rejoins by IST"}},
		tcase{name: "just under an hour", base: "galera-node-dc", mutate: wsrep(galeraNode, big), id: "galera.gcache", subject: galeraNode, want: check.Fail, says: []string{"gcache.size=128M"}},
		tcase{name: "up for seconds", base: "galera-node", id: "galera.gcache", subject: galeraNode, want: check.Unknown, says: []string{"needs at least 600s"}},

		// galera.flow_control
		tcase{name: "idle", base: "galera-node", id: "galera.flow_control", subject: galeraNode, want: check.Pass},
		tcase{name: "paused 35 %", base: "galera-node-degraded", id: "galera.flow_control", subject: galeraNode, want: check.Fail, says: []string{"35 %", "This node falls behind"}},
		tcase{name: "paused 10 %, queue short", base: "galera-node", mutate: wsrep(galeraNode, func(g *engine.GaleraStatus) { g.FlowControlPaused, g.LocalRecvQueueAvg = 0.1, 0.2 }),
			id: "galera.flow_control", subject: galeraNode, want: check.Fail, says: []string{"Another node is the slow one"}},
		tcase{name: "paused 9 %", base: "galera-node", mutate: wsrep(galeraNode, func(g *engine.GaleraStatus) { g.FlowControlPaused = 0.09 }),
			id: "galera.flow_control", subject: galeraNode, want: check.Pass},

		// galera.slave_threads
		tcase{name: "one thread, parallel write sets", base: "galera-node-degraded", id: "galera.slave_threads", subject: galeraNode, want: check.Fail, says: []string{"wsrep_slave_threads=4"}},
		tcase{name: "distance 3", base: "galera-node-degraded", mutate: wsrep(galeraNode, func(g *engine.GaleraStatus) { g.CertDepsDistance = 3 }),
			id: "galera.slave_threads", subject: galeraNode, want: check.Fail, says: []string{"wsrep_slave_threads=3"}},
		tcase{name: "four threads", base: "galera-node-degraded", mutate: setting(galeraNode, "wsrep_slave_threads", "4"), id: "galera.slave_threads", subject: galeraNode, want: check.Pass},
		tcase{name: "serial write sets", base: "galera-node-degraded", mutate: wsrep(galeraNode, func(g *engine.GaleraStatus) { g.CertDepsDistance = 1.2 }),
			id: "galera.slave_threads", subject: galeraNode, want: check.Pass, says: []string{"could not be applied in parallel"}},
		tcase{name: "one CPU", base: "galera-node-degraded", mutate: func(f *facts.Facts) { f.System.CPUs = 1 }, id: "galera.slave_threads", subject: galeraNode, want: check.Pass},
		tcase{name: "option file unreadable", base: "galera-node-nonroot", id: "galera.slave_threads", subject: galeraNodeNonroot, want: check.Unknown, says: []string{"could not be read"}},

		// galera.binlog_format and galera.autoinc_lock_mode
		tcase{name: "ROW", base: "galera-node", id: "galera.binlog_format", subject: galeraNode, want: check.Pass},
		tcase{name: "STATEMENT", base: "galera-node-degraded", id: "galera.binlog_format", subject: galeraNode, want: check.Fail, says: []string{"binlog_format is STATEMENT"}},
		tcase{name: "MIXED", base: "galera-node", mutate: setting(galeraNode, "binlog_format", "MIXED"), id: "galera.binlog_format", subject: galeraNode, want: check.Fail},
		tcase{name: "unreadable", base: "galera-node-nonroot", id: "galera.binlog_format", subject: galeraNodeNonroot, want: check.Unknown},
		tcase{name: "2", base: "galera-node", id: "galera.autoinc_lock_mode", subject: galeraNode, want: check.Pass},
		tcase{name: "1", base: "galera-node-degraded", id: "galera.autoinc_lock_mode", subject: galeraNode, want: check.Fail, says: []string{"innodb_autoinc_lock_mode is 1"}},
		tcase{name: "0", base: "galera-node", mutate: setting(galeraNode, "innodb_autoinc_lock_mode", "0"), id: "galera.autoinc_lock_mode", subject: galeraNode, want: check.Fail},
		tcase{name: "unreadable", base: "galera-node-nonroot", id: "galera.autoinc_lock_mode", subject: galeraNodeNonroot, want: check.Unknown},

		// galera.primary_keys
		tcase{name: "audit_log and sessions", base: "galera-node", id: "galera.primary_keys", subject: galeraNode, want: check.Fail, says: []string{"app.audit_log", "app.sessions (MyISAM)"}},
		tcase{name: "all keyed InnoDB", base: "galera-node", mutate: func(f *facts.Facts) { instance(f, galeraNode).MySQL.Tables = &engine.MySQLTables{} },
			id: "galera.primary_keys", subject: galeraNode, want: check.Pass},
		tcase{name: "many", base: "galera-node", mutate: func(f *facts.Facts) { instance(f, galeraNode).MySQL.Tables.WithoutPKCount = 25 },
			id: "galera.primary_keys", subject: galeraNode, want: check.Fail, says: []string{"25 table(s)", "and 24 more"}},
		tcase{name: "query timed out", base: "galera-node-degraded", id: "galera.primary_keys", subject: galeraNode, want: check.Unknown, says: []string{"context deadline exceeded"}},

		// galera.sst
		tcase{name: "credentials world-readable", base: "galera-node", id: "galera.sst", subject: galeraNode, want: check.Fail, says: []string{"every local user can read (mode 0644)"}},
		tcase{name: "credentials 0640", base: "galera-node-dc", id: "galera.sst", subject: galeraNode, want: check.Pass, says: []string{"mariabackup", "other users cannot read"}},
		tcase{name: "credentials on the command line", base: "galera-node-dc", mutate: func(f *facts.Facts) {
			instance(f, galeraNode).SSTAuth = &facts.SecretSource{Key: "wsrep_sst_auth", Source: "cmdline"}
		},
			id: "galera.sst", subject: galeraNode, want: check.Fail, says: []string{"command line"}},
		tcase{name: "rsync blocks the donor", base: "galera-node-dc", mutate: setting(galeraNode, "wsrep_sst_method", "rsync"), id: "galera.sst", subject: galeraNode, want: check.Fail, says: []string{"blocks the donor"}},
		tcase{name: "option file unreadable", base: "galera-node-nonroot", id: "galera.sst", subject: galeraNodeNonroot, want: check.Unknown},

		// galera.ssl
		tcase{name: "loopback only", base: "galera-node", id: "galera.ssl", subject: galeraNode, want: check.Pass, says: []string{"loopback only"}},
		tcase{name: "three hosts in clear", base: "galera-node-degraded", id: "galera.ssl", subject: galeraNode, want: check.Fail, says: []string{"in clear"}},
		tcase{name: "three hosts with SSL", base: "galera-node-degraded", mutate: setting(galeraNode, "wsrep_provider_options", "socket.ssl_cert = /etc/mysql/ssl/node.pem; socket.ssl_key = /etc/mysql/ssl/node.key"),
			id: "galera.ssl", subject: galeraNode, want: check.Pass, says: []string{"encrypted"}},
		tcase{name: "provider options unreadable", base: "galera-node-nonroot", id: "galera.ssl", subject: galeraNodeNonroot, want: check.Unknown},
	)
}
