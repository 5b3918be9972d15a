package check

import (
	"fmt"
	"math"
	"net"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/dbhost/dbhost/internal/engine"
	"github.com/dbhost/dbhost/internal/engine/mysql"
	"github.com/dbhost/dbhost/internal/facts"
	"github.com/dbhost/dbhost/internal/fix"
	"github.com/dbhost/dbhost/internal/galera"
)

// The cluster checks of a Galera / Percona XtraDB Cluster node: is it
// serving, what failure stops its cluster, do its timeouts fit the
// network, can a node that was away rejoin without a full copy, and is
// what Galera needs of the server (ROW, lock mode 2, primary keys, SST,
// encryption) in place. They read the node's variables and the wsrep
// status read live with them (engine.GaleraStatus); a snapshot replays
// both. The port binding is galera.ports (mysql.go).

func init() {
	Register(Check{
		ID:        "galera.cluster.primary",
		Title:     "The Galera node is Synced in a Primary component",
		Problem:   "The Galera node is not Synced in a Primary component",
		Severity:  Critical,
		AppliesTo: []string{"galera"},
		Doc: `Reads wsrep_cluster_status, wsrep_local_state_comment and wsrep_ready (live). A node
serves only in a Primary component: after failures or a network split, the side
that does not hold more than half of the last Primary component's weight turns
non-Primary and refuses queries (to prevent a split brain) until it sees the others
again or a person bootstraps it. Critical when the node is not Primary. A Primary
node that is not Synced (Joining, Joined, Donor/Desynced) is catching up or giving
a state transfer: a load balancer must not send it traffic, which is where
clustercheck-style probes that accept any state mislead. Needs a live connection.`,
		Refs: []string{
			"https://galeracluster.com/library/documentation/monitoring-cluster.html",
			"https://galeracluster.com/library/documentation/crash-recovery.html",
		},
		Run: checkGaleraPrimary,
	})
	Register(Check{
		ID:        "galera.cluster.quorum",
		Title:     "The Galera cluster survives the loss of any one member",
		Problem:   "One failure, or a network split, stops the Galera cluster",
		Severity:  Warning,
		AppliesTo: []string{"galera"},
		Doc: `Builds the cluster's layout from the node's status (members, wsrep_cluster_weight)
and its pc.weight and gmcast.segment (several nodes of one cluster on this host are
merged), and computes what it survives with Galera's rule: after members
disappear, the rest stays Primary only with more than half of the last Primary
component's weight. It fails when a single member's failure stops the cluster (one
or two nodes, a node with too much weight), or when, without an arbitrator, the
voting weight can split into two equal halves (an even number of nodes, or weights
that tie: a network split stops both sides). Three data nodes survive one failure at
once or one by one; three plus an arbitrator (garbd) survive two one by one, still
one at once.
The finding names what would help (an arbitrator, a weight); dbhost galera
tolerance prints the whole table. Members other than this node are seen through
its status: their weights are derived from wsrep_cluster_weight and said to be
assumed. Needs a live connection.`,
		Refs: []string{
			"https://galeracluster.com/library/documentation/weighted-quorum.html",
			"https://galeracluster.com/library/documentation/arbitrator.html",
		},
		Run: checkGaleraQuorum,
	})
	Register(Check{
		ID:        "galera.cluster.segments",
		Title:     "A split between Galera segments leaves one side Primary",
		Problem:   "A split between Galera segments leaves no side Primary",
		Severity:  Warning,
		AppliesTo: []string{"galera"},
		Doc: `With members in more than one gmcast.segment (data centres), cuts each segment off
from the rest in turn and applies the quorum rule with the members' pc.weight. Two
data centres with equal weight (2 + 2 nodes) lose both sides when the link between
them fails: each holds exactly half. Put an arbitrator in a third location, or give
the main data centre more weight (pc.weight), so that one side always keeps more
than half. Passes with a single segment. Other members' segments are seen only
from their own variables: on a node alone on this host they are assumed to be 0,
and the check then says it cannot judge. Needs a live connection.`,
		Refs: []string{
			"https://galeracluster.com/library/documentation/weighted-quorum.html",
			"https://galeracluster.com/library/kb/wan-replication.html",
		},
		Run: checkGaleraSegments,
	})
	Register(Check{
		ID:        "galera.evs_timeouts",
		Title:     "Galera's failure-detection timeouts fit the network",
		Problem:   "Galera's failure-detection timeouts do not fit the network",
		Severity:  Warning,
		AppliesTo: []string{"galera"},
		Doc: `Reads evs.keepalive_period, evs.inactive_check_period, evs.suspect_timeout and
evs.inactive_timeout from wsrep_provider_options (Galera's defaults: PT1S, PT0.5S,
PT5S, PT15S) and the replication latency Galera measures (wsrep_evs_repl_latency,
its maximum). A member silent for evs.suspect_timeout is suspected and, once the
others agree, evicted; evs.inactive_timeout is the hard limit. The periods must be
shorter than the suspect timeout and the suspect timeout not longer than the
inactive timeout, or a node is declared dead before it is ever checked; all of
them must exceed the network's worst round trip, and the suspect timeout must leave
room for latency spikes: under ten times the measured maximum, a slow moment evicts
healthy nodes (and every eviction of a node that comes back costs a state
transfer). The suspect timeout is also the time the cluster needs to notice a
failure: failures closer together than that count as simultaneous. The fix raises
the timeouts in the one wsrep_provider_options line (restart).`,
		Refs: []string{
			"https://galeracluster.com/library/documentation/galera-parameters.html#evs-suspect-timeout",
			"https://galeracluster.com/library/kb/wan-latency.html",
			"https://galeracluster.com/library/kb/wan-replication.html",
		},
		Run: checkGaleraEVS,
	})
	Register(Check{
		ID:        "galera.gcache",
		Title:     "Galera's gcache holds an hour of writes (a node rejoins by IST)",
		Problem:   "Galera's gcache holds less than an hour of writes (a returning node needs a full SST)",
		Severity:  Warning,
		AppliesTo: []string{"galera"},
		Doc: `Compares gcache.size (wsrep_provider_options, default 128M) with the node's write
rate: wsrep_replicated_bytes plus wsrep_received_bytes over the server's Uptime.
The gcache keeps the recent write sets; a node that was away rejoins by an
incremental state transfer (IST) only while its donor still holds every write set
it missed. Otherwise it needs a full state snapshot transfer (SST): the whole
database copied, the donor busy or blocked meanwhile. The threshold is one hour: a
reboot for a kernel update, a maintenance window, a restart after a crash should
not cost a full copy. The rate is an average since start: peaks fill the cache
faster, hence the fix's 25 % margin. The gcache file (galera.cache in the data
directory) takes gcache.size of disk. Unknown while the server has been up for
less than ten minutes (no rate yet). Needs a live connection.`,
		Refs: []string{
			"https://galeracluster.com/library/documentation/state-transfer.html#state-transfer-gcache",
			"https://galeracluster.com/library/kb/customizing-gcache-size.html",
		},
		Run: checkGaleraGcache,
	})
	Register(Check{
		ID:        "galera.flow_control",
		Title:     "Galera replication is rarely paused by flow control",
		Problem:   "Galera replication is often paused by flow control",
		Severity:  Warning,
		AppliesTo: []string{"galera"},
		Doc: `Reads wsrep_flow_control_paused: the fraction of time since the last FLUSH STATUS
(or start) during which replication was paused because some node's receive queue
exceeded gcs.fc_limit. While paused, no node of the cluster commits a write: the
whole cluster runs at the speed of its slowest node. It fails from 0.1 (paused a
tenth of the time). wsrep_local_recv_queue_avg shows whether this node is the one
falling behind (an average above 1 means write sets wait for its appliers). The
cure is on the slow node: more applier threads (galera.slave_threads), faster
storage, or no long transactions. Needs a live connection.`,
		Refs: []string{
			"https://galeracluster.com/library/documentation/node-states.html#flow-control",
			"https://galeracluster.com/library/documentation/monitoring-cluster.html#checking-the-replication-health",
		},
		Run: checkGaleraFlowControl,
	})
	Register(Check{
		ID:        "galera.slave_threads",
		Title:     "Galera applies write sets in parallel (wsrep_slave_threads)",
		Problem:   "Galera applies write sets with one thread (wsrep_slave_threads)",
		Severity:  Info,
		AppliesTo: []string{"galera"},
		Doc: `Reads wsrep_slave_threads (wsrep_applier_threads since MariaDB 10.6), the host's
CPU count and wsrep_cert_deps_distance, how many write sets could on average be
applied in parallel. With one applier thread a node applies the others' writes one
after the other: it falls behind and throttles the whole cluster by flow control.
It fails with one thread on a host with several CPUs when the write sets allow
parallel applying (distance of 2 or more, or not measured yet). The fix proposes
the smaller of twice the CPUs and the measured distance (at least 2); the setting
is dynamic.`,
		Refs: []string{
			"https://galeracluster.com/library/documentation/mysql-wsrep-options.html#wsrep-slave-threads",
			"https://mariadb.com/kb/en/galera-cluster-system-variables/#wsrep_slave_threads",
		},
		Run: checkGaleraSlaveThreads,
	})
	Register(Check{
		ID:        "galera.binlog_format",
		Title:     "Galera node uses row-based replication (binlog_format=ROW)",
		Problem:   "Galera node does not use row-based replication (binlog_format is not ROW)",
		Severity:  Warning,
		AppliesTo: []string{"galera"},
		Doc: `Reads binlog_format. Galera replicates row events: with STATEMENT or MIXED,
statements whose effect depends on the node (NOW(), RAND(), a LIMIT without ORDER
BY) can diverge between nodes, and MariaDB refuses or warns depending on the
version. ROW is required.`,
		Refs: []string{"https://mariadb.com/kb/en/mariadb-galera-cluster-known-limitations/", "https://galeracluster.com/library/documentation/mysql-wsrep-options.html"},
		Run:  checkGaleraBinlogFormat,
	})
	Register(Check{
		ID:        "galera.autoinc_lock_mode",
		Title:     "Galera node uses interleaved auto-increment locks (innodb_autoinc_lock_mode=2)",
		Problem:   "Galera node takes table-level auto-increment locks (innodb_autoinc_lock_mode is not 2)",
		Severity:  Warning,
		AppliesTo: []string{"galera"},
		Doc: `Reads innodb_autoinc_lock_mode (MariaDB's default is 1). Modes 0 and 1 take a
table-level AUTO-INC lock for inserts of unknown row counts (INSERT ... SELECT,
LOAD DATA); the parallel appliers of Galera then wait on each other and can
deadlock. Galera needs 2 (interleaved), which is safe with row-based replication.
Not dynamic: the fix restarts the server.`,
		Refs: []string{"https://mariadb.com/kb/en/mariadb-galera-cluster-known-limitations/", "https://dev.mysql.com/doc/refman/8.0/en/innodb-auto-increment-handling.html"},
		Run:  checkGaleraAutoincLockMode,
	})
	Register(Check{
		ID:        "galera.primary_keys",
		Title:     "Every replicated table has a primary key and uses InnoDB",
		Problem:   "Tables without a primary key, or not in InnoDB, are replicated badly or not at all",
		Severity:  Warning,
		AppliesTo: []string{"galera"},
		Doc: `Lists the user tables (system schemas left out) without a primary key and those not
in InnoDB, from information_schema (live, bounded by the connection timeout; the
count is complete, the names stop at 20). Galera identifies the rows of a write
set by their primary key: without one, every other node finds each updated or
deleted row by scanning, certification can conflict on unrelated rows, and
DELETEs on such tables are known to fail to replicate or stall appliers. Tables in
MyISAM, Aria or MEMORY are not replicated at all (MariaDB replicates MyISAM only
experimentally): the nodes silently diverge. Add a primary key (an invisible
auto-increment column does), convert to InnoDB; MariaDB's
innodb_force_primary_key=ON refuses new tables without one.`,
		Refs: []string{"https://mariadb.com/kb/en/mariadb-galera-cluster-known-limitations/", "https://galeracluster.com/library/training/tutorials/differences.html"},
		Run:  checkGaleraPrimaryKeys,
	})
	Register(Check{
		ID:        "galera.sst",
		Title:     "Galera's state transfer keeps its credentials private and spares the donor",
		Problem:   "Galera's state transfer exposes its credentials or blocks the donor",
		Severity:  Warning,
		AppliesTo: []string{"galera"},
		Doc: `Reads wsrep_sst_method and where wsrep_sst_auth (user:password of the state
transfer) is set. Critical when that option file can be read by every local user,
or when it is given on the server's command line (every user sees the command
line in /proc): the account has the privileges to copy the whole database. The
value itself is never shown. The methods rsync and mysqldump block the donor for
the whole copy (rsync under a global read lock, mysqldump through the SQL layer),
so a joining node takes a serving node away; mariabackup (MariaDB) and xtrabackup
(Percona) copy online and need the credentials, kept in a file readable only by
root and the server's account (mode 0640 or tighter).`,
		Refs: []string{
			"https://mariadb.com/kb/en/introduction-to-state-snapshot-transfers-ssts/",
			"https://mariadb.com/kb/en/mariabackup-sst-method/",
			"https://galeracluster.com/library/documentation/sst.html",
		},
		Run: checkGaleraSST,
	})
	Register(Check{
		ID:        "galera.ssl",
		Title:     "Galera replication traffic is encrypted (socket.ssl)",
		Problem:   "Galera replication traffic is not encrypted",
		Severity:  Warning,
		AppliesTo: []string{"galera"},
		Doc: `Reads socket.ssl, socket.ssl_cert and socket.ssl_key in wsrep_provider_options
(and MariaDB's wsrep_ssl_mode=SERVER with the server's certificate). Without them
group communication and IST carry every row written, in clear, between the nodes;
anyone on the path reads the data and can inject into an unauthenticated
protocol. A node whose cluster address and group-communication address are
loopback only (a cluster on one host) passes. Enabling it is a change for the
whole cluster at once (nodes with and without SSL do not talk), so the fix is a
plan for a person: certificates on every node, then a rolling restart as
Galera's documentation describes.`,
		Refs: []string{
			"https://galeracluster.com/library/documentation/ssl-config.html",
			"https://mariadb.com/kb/en/securing-communications-in-galera-cluster/",
		},
		Run: checkGaleraSSL,
	})
}

// ---- shared ----

// galeraNodes are the MySQL instances that are Galera nodes.
func galeraNodes(f *facts.Facts) []*facts.Instance {
	var out []*facts.Instance
	for _, in := range f.ByEngine(engine.MySQL) {
		if in.MySQL != nil && in.MySQL.Galera {
			out = append(out, in)
		}
	}
	return out
}

// galeraStatusWhy says why the node's wsrep status is not known, or "".
func galeraStatusWhy(in *facts.Instance) string {
	switch {
	case in.MySQL.GaleraStatus != nil:
		return ""
	case in.MySQL.GaleraErr != "":
		return "the wsrep status could not be read: " + in.MySQL.GaleraErr
	case in.SettingsSource != "live":
		return "the wsrep status is only visible over a connection to the server, and none was made (" + myOr(in.LiveErr, "no live connection") + "); run dbhost as root or give credentials with --mysql"
	}
	return "the wsrep status is missing although the server was reached (a snapshot recorded before dbhost read it)"
}

// galeraVals are the node's settings by lower-case name, as the galera
// package reads them.
func galeraVals(in *facts.Instance) map[string]string {
	vals := make(map[string]string, len(in.Settings))
	for k, s := range in.Settings {
		vals[k] = s.Value
	}
	return vals
}

// providerOpts parses the node's effective wsrep_provider_options.
func providerOpts(in *facts.Instance) map[string]string {
	return galera.ParseProviderOptions(in.SettingValue("wsrep_provider_options"))
}

// providerEv is the evidence of one provider option: its value and
// whether the node's options set it or Galera's default applies.
func providerEv(in *facts.Instance, key, def string) (Evidence, string) {
	if v, ok := providerOpts(in)[key]; ok {
		return Ev(key, v, "wsrep_provider_options ("+in.Settings["wsrep_provider_options"].Source+")"), v
	}
	return Ev(key, def, "Galera default"), def
}

// clusterLayout is the cluster as the node sees it, merged with the views
// of the other nodes of the same cluster on this host (same state UUID):
// their own weights and segments replace what this node assumed. The
// grouping is galera.Group's, as for dbhost galera tolerance and the
// exporter.
func clusterLayout(f *facts.Facts, in *facts.Instance) galera.Layout {
	var views []galera.NodeView
	for _, o := range galeraNodes(f) {
		if v := galera.View(o.Instance); v != nil {
			views = append(views, *v)
		}
	}
	for _, c := range galera.Group(views) {
		if slices.Contains(c.Nodes, in.Name()) {
			return c.Layout
		}
	}
	return galera.FromNode(galeraVals(in), in.MySQL.GaleraStatus)
}

func layoutEv(l galera.Layout) Evidence {
	var ms []string
	for _, m := range l.Members {
		d := m.Name
		var attrs []string
		if m.Arbitrator {
			attrs = append(attrs, "arbitrator")
		}
		attrs = append(attrs, fmt.Sprintf("weight %d", m.Weight), fmt.Sprintf("segment %d", m.Segment))
		if m.Assumed {
			attrs = append(attrs, "assumed")
		}
		ms = append(ms, d+" ("+strings.Join(attrs, ", ")+")")
	}
	return Ev("members", strings.Join(ms, "; "), "live: wsrep status and wsrep_provider_options")
}

// ---- galera.cluster.primary ----

func checkGaleraPrimary(f *facts.Facts) []Result {
	var out []Result
	for _, in := range galeraNodes(f) {
		out = append(out, judgeGaleraPrimary(in))
	}
	return out
}

func judgeGaleraPrimary(in *facts.Instance) Result {
	subj := in.Name()
	if why := galeraStatusWhy(in); why != "" {
		return UnknownR(subj, why)
	}
	g := in.MySQL.GaleraStatus
	ev := []Evidence{
		Ev("wsrep_cluster_status", g.ClusterStatus, "live: SHOW GLOBAL STATUS"),
		Ev("wsrep_local_state_comment", g.LocalState, "live: SHOW GLOBAL STATUS"),
		Ev("wsrep_ready", myPick(g.Ready, "ON", "OFF"), "live: SHOW GLOBAL STATUS"),
		Ev("wsrep_cluster_size", strconv.Itoa(g.ClusterSize), "live: SHOW GLOBAL STATUS"),
	}
	if g.ClusterStatus != "Primary" {
		fx := &fix.Fix{
			Summary: "Bring " + subj + " back into a Primary component",
			Manual: "First find out whether another part of the cluster is still Primary (ask every node for wsrep_cluster_status): if one is, repair the network or restart this node so that it rejoins. " +
				"Only if no node is Primary anywhere, bootstrap from the node with the most recent data (the highest wsrep_last_committed, or seqno in grastate.dat): SET GLOBAL wsrep_provider_options='pc.bootstrap=YES' on that one node, never on two.",
		}
		return FailR(subj, fmt.Sprintf("The node is %s: it refuses queries because its component (%d member(s)) does not hold more than half of the last Primary component's weight. A failure or network split took the majority away, or the cluster lost quorum as a whole.", myOr(g.ClusterStatus, "in no component"), g.ClusterSize), fx, ev...)
	}
	if g.LocalState != "Synced" || !g.Ready {
		r := FailR(subj, fmt.Sprintf("The node is in a Primary component but %s (wsrep_ready %s): it is catching up or serving a state transfer, and must not get client traffic until it is Synced. A health probe that accepts this state sends clients to stale or blocked data.", myOr(g.LocalState, "in no known state"), myPick(g.Ready, "ON", "OFF")),
			&fix.Fix{Summary: "Wait for " + subj + " to be Synced", Manual: "Watch wsrep_local_state_comment until it says Synced; a node that stays Joining or Donor/Desynced for long points at a slow state transfer (see galera.gcache and galera.sst). Health probes must check wsrep_local_state_comment = Synced, not only wsrep_ready."}, ev...)
		r.Severity = Warning
		return r
	}
	return PassR(subj, fmt.Sprintf("The node is Synced in a Primary component of %d member(s) and accepts queries.", g.ClusterSize), ev...)
}

// ---- galera.cluster.quorum ----

func checkGaleraQuorum(f *facts.Facts) []Result {
	var out []Result
	for _, in := range galeraNodes(f) {
		out = append(out, judgeGaleraQuorum(f, in))
	}
	return out
}

// whatIfText names the changes that would help, best first.
func whatIfText(t galera.Tolerance) string {
	var ws []string
	for _, w := range t.WhatIf {
		ws = append(ws, fmt.Sprintf("%s (then %d at once, %d one by one)", w.Change, w.AtOnce, w.OneByOne))
		if len(ws) == 3 {
			break
		}
	}
	return strings.Join(ws, "; ")
}

func judgeGaleraQuorum(f *facts.Facts, in *facts.Instance) Result {
	subj := in.Name()
	if why := galeraStatusWhy(in); why != "" {
		return UnknownR(subj, why)
	}
	l := clusterLayout(f, in)
	t := galera.Analyze(l)
	ev := []Evidence{
		layoutEv(l),
		Ev("tolerates at once", strconv.Itoa(t.AtOnce), "computed"),
		Ev("tolerates one by one", strconv.Itoa(t.OneByOne), "computed"),
		Ev("worst single failure", t.Worst+myPick(t.WorstSurvives, " (survived)", " (stops the cluster)"), "computed"),
	}
	for _, n := range l.Notes {
		ev = append(ev, Ev("note", n, "layout"))
	}
	if len(l.Members) == 0 || len(l.Members) > galera.MaxMembers {
		return UnknownR(subj, "the cluster's layout could not be judged: "+strings.Join(t.Findings, "; "), ev...)
	}
	var problems []string
	if t.AtOnce < 1 {
		if len(l.Members) == 1 {
			problems = append(problems, "the cluster has a single member: its failure is the cluster's")
		} else {
			problems = append(problems, fmt.Sprintf("losing %s alone stops the cluster", t.Worst))
		}
	}
	// An arbitrator is the usual answer to an even count; with one, an
	// even split is left as a caveat (the arbitrator's location decides).
	if t.EvenSplit && t.Arbitrators == 0 {
		problems = append(problems, "the voting weight can split into two equal halves, and a network split between them stops both sides")
	}
	if len(problems) == 0 {
		reason := fmt.Sprintf("The cluster (%d data node(s), %d arbitrator(s), weight %d) survives %d failure(s) at once and %d one by one", t.DataNodes, t.Arbitrators, t.Weight, t.AtOnce, t.OneByOne)
		if t.EvenSplit {
			return PassR(subj, reason+"; a network split into two equal halves would still stop both sides: run the arbitrator where it breaks the tie (a third location).", ev...)
		}
		return PassR(subj, reason+"; no split leaves two equal halves.", ev...)
	}
	reason := fmt.Sprintf("The cluster (%d data node(s), %d arbitrator(s), weight %d) survives %d failure(s) at once and %d one by one: %s.", t.DataNodes, t.Arbitrators, t.Weight, t.AtOnce, t.OneByOne, strings.Join(problems, "; "))
	manual := "Add a member so that the voting weight is odd and no single member holds half of it: a third data node, or the arbitrator garbd (galera-arbitrator-4) on a separate machine; or raise one node's pc.weight. Run `dbhost galera tolerance` to compare layouts."
	if w := whatIfText(t); w != "" {
		reason += " What would help: " + w + "."
	}
	for _, m := range l.Members {
		if m.Assumed {
			reason += " Weights of members not read from themselves are assumed (see the notes)."
			break
		}
	}
	return FailR(subj, reason, &fix.Fix{Summary: "Let the Galera cluster of " + subj + " survive a failure and a split", Manual: manual}, ev...)
}

// ---- galera.cluster.segments ----

func checkGaleraSegments(f *facts.Facts) []Result {
	var out []Result
	for _, in := range galeraNodes(f) {
		out = append(out, judgeGaleraSegments(f, in))
	}
	return out
}

func judgeGaleraSegments(f *facts.Facts, in *facts.Instance) Result {
	subj := in.Name()
	segEv, own := providerEv(in, "gmcast.segment", "0")
	if why := galeraStatusWhy(in); why != "" {
		return UnknownR(subj, why, segEv)
	}
	l := clusterLayout(f, in)
	t := galera.Analyze(l)
	ev := []Evidence{segEv, layoutEv(l)}
	var assumed []string
	for _, m := range l.Members {
		if m.Assumed {
			assumed = append(assumed, m.Name)
		}
	}
	if own != "0" && len(assumed) > 0 {
		return UnknownR(subj, fmt.Sprintf("This node is in segment %s, but the segments of %s are not visible from it (assumed 0): audit each node, or describe the layout to dbhost galera tolerance --members.", own, strings.Join(assumed, ", ")), ev...)
	}
	if len(t.Segments) == 0 {
		return PassR(subj, "All known members are in one segment: there is no split between data centres to survive.", ev...)
	}
	var none []string
	for _, s := range t.Segments {
		ev = append(ev, Ev(fmt.Sprintf("segment %d cut off", s.Segment), "Primary side: "+s.IsolatedPrimary+myPick(s.LoseSurvives, "; its loss is survived", "; its loss stops the cluster"), strings.Join(s.Members, ", ")))
		if s.IsolatedPrimary == "none" {
			none = append(none, strconv.Itoa(s.Segment))
		}
	}
	if len(assumed) > 0 && len(none) > 0 {
		return UnknownR(subj, fmt.Sprintf("Cutting off segment %s would leave no side Primary if the assumed weights and segments of %s hold; they are not visible from this node.", strings.Join(none, ", "), strings.Join(assumed, ", ")), ev...)
	}
	if len(none) == 0 {
		return PassR(subj, "Whichever segment is cut off from the rest, one side keeps more than half of the weight and stays Primary.", ev...)
	}
	reason := fmt.Sprintf("When segment %s is cut off from the rest, neither side holds more than half of the weight: both turn non-Primary and the whole cluster stops serving.", strings.Join(none, ", "))
	if w := whatIfText(t); w != "" {
		reason += " What would help: " + w + "."
	}
	fx := &fix.Fix{
		Summary: "Let one side of a segment split keep Primary",
		Manual:  "Run the arbitrator garbd in a third location (its own gmcast.segment), or raise pc.weight on the nodes of the main data centre so that it holds more than half of the total weight; change pc.weight on every node alike (SET GLOBAL wsrep_provider_options='pc.weight=N' is dynamic, and the option files keep it).",
	}
	return FailR(subj, reason, fx, ev...)
}

// ---- wsrep_provider_options fixes ----

// providerWant is one provider option a check wants changed.
type providerWant struct{ key, value string }

// providerWants are the provider options every Galera check that fails on
// this node wants changed. wsrep_provider_options is one line: each of
// these checks' fixes writes the whole line with all of them, so that a
// plan holds one value for it (two lines would conflict, and the option
// file keeps only the last).
func providerWants(in *facts.Instance) []providerWant {
	var out []providerWant
	_, w := judgeGaleraPortsWants(in)
	out = append(out, w...)
	_, w = judgeGaleraGcache(in)
	out = append(out, w...)
	_, w = judgeGaleraEVS(in)
	out = append(out, w...)
	return out
}

// providerFix sets wsrep_provider_options to the options as the files
// write them with every change the failing Galera checks want, in one
// order whichever check asks (own: the asking check's), so that all of
// them propose the very same line.
func providerFix(in *facts.Instance, summary string, own []providerWant) *fix.Fix {
	mine := map[string]bool{}
	for _, w := range own {
		mine[strings.ToLower(w.key)] = true
	}
	all := providerWants(in)
	for _, w := range own {
		if !slices.ContainsFunc(all, func(x providerWant) bool { return strings.EqualFold(x.key, w.key) }) {
			all = append(all, w)
		}
	}
	var set, others []string
	line := ""
	if in.MySQL != nil {
		line = in.MySQL.Configured["wsrep_provider_options"].Value
	}
	for _, w := range all {
		set = append(set, w.key+"="+w.value)
		if !mine[strings.ToLower(w.key)] {
			others = append(others, w.key+"="+w.value)
		}
		line = withProviderOption(line, w.key, w.value)
	}
	if gaps := configGaps(in); len(gaps) > 0 {
		// The line as the files write it is unknown: writing one would
		// drop the options dbhost could not read.
		return &fix.Fix{Summary: summary, Manual: "Part of the configuration could not be read (" + strings.Join(gaps, "; ") + "): in the option file that sets wsrep_provider_options, add " + strings.Join(set, ";") + " to that one line, keeping its other options, then restart the node."}
	}
	fx := myConfigFix(in, summary, true, "wsrep_provider_options", line)
	if len(others) > 0 {
		fx.Summary += " (the same wsrep_provider_options line also carries " + strings.Join(others, ", ") + ", which other Galera findings ask for)"
	}
	return fx
}

// ---- galera.evs_timeouts ----

// evsDefaults are Galera 4's defaults.
var evsDefaults = [][2]string{
	{"evs.keepalive_period", "PT1S"},
	{"evs.inactive_check_period", "PT0.5S"},
	{"evs.suspect_timeout", "PT5S"},
	{"evs.inactive_timeout", "PT15S"},
}

// rttMargin: the suspect timeout must be this many times the worst
// measured replication latency.
const rttMargin = 10

func checkGaleraEVS(f *facts.Facts) []Result {
	var out []Result
	for _, in := range galeraNodes(f) {
		r, w := judgeGaleraEVS(in)
		if r.Status == Fail && len(w) > 0 {
			r.Fix = providerFix(in, "Set Galera's failure-detection timeouts to fit the network", w)
		}
		out = append(out, r)
	}
	return out
}

// isoSeconds writes a duration as Galera's ISO 8601 period.
func isoSeconds(d time.Duration) string {
	return "PT" + strconv.FormatFloat(d.Seconds(), 'f', -1, 64) + "S"
}

func judgeGaleraEVS(in *facts.Instance) (Result, []providerWant) {
	subj := in.Name()
	var ev []Evidence
	d := map[string]time.Duration{}
	for _, kd := range evsDefaults {
		e, v := providerEv(in, kd[0], kd[1])
		ev = append(ev, e)
		x, err := galera.ParseDuration(v)
		if err != nil {
			return UnknownR(subj, kd[0]+": "+err.Error(), ev...), nil
		}
		d[kd[0]] = x
	}
	keep, check, suspect, inactive := d["evs.keepalive_period"], d["evs.inactive_check_period"], d["evs.suspect_timeout"], d["evs.inactive_timeout"]
	var problems []string
	if keep >= suspect {
		problems = append(problems, fmt.Sprintf("evs.keepalive_period (%v) is not shorter than evs.suspect_timeout (%v): an idle but healthy member looks silent", keep, suspect))
	}
	if check >= suspect {
		problems = append(problems, fmt.Sprintf("evs.inactive_check_period (%v) is not shorter than evs.suspect_timeout (%v)", check, suspect))
	}
	if suspect > inactive {
		problems = append(problems, fmt.Sprintf("evs.suspect_timeout (%v) is longer than evs.inactive_timeout (%v): a member is declared dead before it is suspected", suspect, inactive))
	}
	var rtt time.Duration
	g := in.MySQL.GaleraStatus
	if g != nil && g.ReplLatency != nil {
		rtt = time.Duration(g.ReplLatency.Max * float64(time.Second))
		ev = append(ev, Ev("wsrep_evs_repl_latency max", rtt.String(), fmt.Sprintf("live: SHOW GLOBAL STATUS (%d samples)", g.ReplLatency.Samples)))
		if suspect < rttMargin*rtt {
			problems = append(problems, fmt.Sprintf("evs.suspect_timeout (%v) is less than %d times the worst measured replication latency (%v): a latency spike evicts healthy members", suspect, rttMargin, rtt.Round(time.Millisecond)))
		}
		if keep <= rtt || check <= rtt {
			problems = append(problems, fmt.Sprintf("a period (keepalive %v, inactive check %v) does not exceed the worst measured latency (%v)", keep, check, rtt.Round(time.Millisecond)))
		}
	}
	if len(problems) > 0 {
		// Proposal: the suspect timeout covers the latency, the periods
		// stay below it, the inactive timeout at three times it (Galera's
		// default ratio).
		ns := max(suspect, 5*time.Second, (rttMargin*rtt).Round(time.Second)+time.Second)
		var w []providerWant
		if ns != suspect {
			w = append(w, providerWant{"evs.suspect_timeout", isoSeconds(ns)})
		}
		if inactive < ns {
			w = append(w, providerWant{"evs.inactive_timeout", isoSeconds(max(3*ns, 15*time.Second))})
		}
		// Periods: twice the latency, at least Galera's one second, at
		// most half the suspect timeout.
		period := min(max(time.Second, (2*rtt).Round(100*time.Millisecond)), ns/2)
		if keep >= ns || keep <= rtt {
			w = append(w, providerWant{"evs.keepalive_period", isoSeconds(period)})
		}
		if check >= ns || check <= rtt {
			w = append(w, providerWant{"evs.inactive_check_period", isoSeconds(period)})
		}
		return FailR(subj, strings.Join(problems, "; ")+". Every eviction of a node that comes back costs a state transfer.", nil, ev...), w
	}
	if rtt == 0 {
		return UnknownR(subj, "The timeouts are in order (keepalive and inactive check below the suspect timeout, suspect not above inactive), but the replication latency was not measured (no live wsrep status, or no samples yet), so they could not be weighed against the network.", ev...), nil
	}
	return PassR(subj, fmt.Sprintf("The timeouts are in order and evs.suspect_timeout (%v) is at least %d times the worst measured replication latency (%v).", suspect, rttMargin, rtt.Round(time.Microsecond)), ev...), nil
}

// ---- galera.gcache ----

// gcacheWant is how long a node may be away and still rejoin by IST.
const gcacheWant = time.Hour

// gcacheMinUptime: below it the average write rate says nothing.
const gcacheMinUptime = 600

func checkGaleraGcache(f *facts.Facts) []Result {
	var out []Result
	for _, in := range galeraNodes(f) {
		r, w := judgeGaleraGcache(in)
		if r.Status == Fail && len(w) > 0 {
			r.Fix = providerFix(in, "Size Galera's gcache for an hour of writes", w)
		}
		out = append(out, r)
	}
	return out
}

// sizeText writes a gcache size as Galera reads it, in whole MiB or GiB.
func sizeText(b int64) string {
	if b%(1<<30) == 0 {
		return strconv.FormatInt(b>>30, 10) + "G"
	}
	return strconv.FormatInt(b>>20, 10) + "M"
}

func judgeGaleraGcache(in *facts.Instance) (Result, []providerWant) {
	subj := in.Name()
	e, v := providerEv(in, "gcache.size", "128M")
	ev := []Evidence{e}
	size, err := galera.ParseSize(v)
	if err != nil {
		return UnknownR(subj, "gcache.size: "+err.Error(), ev...), nil
	}
	if why := galeraStatusWhy(in); why != "" {
		return UnknownR(subj, why, ev...), nil
	}
	g := in.MySQL.GaleraStatus
	written := g.ReplicatedBytes + g.ReceivedBytes
	ev = append(ev,
		Ev("wsrep_replicated_bytes + wsrep_received_bytes", humanBytes(uint64(max(written, 0))), "live: SHOW GLOBAL STATUS"),
		Ev("Uptime", (time.Duration(g.Uptime)*time.Second).String(), "live: SHOW GLOBAL STATUS"))
	if g.Uptime < gcacheMinUptime {
		return UnknownR(subj, fmt.Sprintf("The server has been up only %ds: the write rate, averaged since start, needs at least %ds to mean anything.", g.Uptime, gcacheMinUptime), ev...), nil
	}
	rate := float64(written) / float64(g.Uptime)
	if rate <= 0 {
		return PassR(subj, fmt.Sprintf("No writes were replicated since start: the gcache of %s holds any absence so far.", humanBytes(uint64(size))), ev...), nil
	}
	held := time.Duration(float64(size) / rate * float64(time.Second))
	ev = append(ev, Ev("write rate", humanBytes(uint64(rate))+"/s", "computed"), Ev("gcache holds", held.Round(time.Minute).String(), "computed"))
	if held >= gcacheWant {
		return PassR(subj, fmt.Sprintf("gcache.size %s holds about %v of writes at the average rate since start: a node away for up to that long rejoins by IST.", v, held.Round(time.Minute)), ev...), nil
	}
	// An hour at the average rate, 25 % for peaks and write-set headers,
	// rounded up to 64 MiB.
	want := int64(math.Ceil(rate*gcacheWant.Seconds()*1.25/float64(64<<20))) * (64 << 20)
	want = max(want, 128<<20)
	reason := fmt.Sprintf("gcache.size %s holds only about %v of writes at the average rate since start (%s/s): a node away longer (a reboot, maintenance) cannot rejoin by IST and needs a full state transfer, the whole database copied while its donor is busy. Set gcache.size=%s (an hour with 25 %% margin); the gcache file takes that much disk in the data directory.",
		v, held.Round(time.Minute), humanBytes(uint64(rate)), sizeText(want))
	return FailR(subj, reason, nil, ev...), []providerWant{{"gcache.size", sizeText(want)}}
}

// ---- galera.flow_control ----

// flowControlMax is the paused fraction from which the check fails.
const flowControlMax = 0.1

func checkGaleraFlowControl(f *facts.Facts) []Result {
	var out []Result
	for _, in := range galeraNodes(f) {
		subj := in.Name()
		if why := galeraStatusWhy(in); why != "" {
			out = append(out, UnknownR(subj, why))
			continue
		}
		g := in.MySQL.GaleraStatus
		ev := []Evidence{
			Ev("wsrep_flow_control_paused", strconv.FormatFloat(g.FlowControlPaused, 'f', -1, 64), "live: SHOW GLOBAL STATUS"),
			Ev("wsrep_local_recv_queue_avg", strconv.FormatFloat(g.LocalRecvQueueAvg, 'f', -1, 64), "live: SHOW GLOBAL STATUS"),
		}
		if g.FlowControlPaused < flowControlMax {
			out = append(out, PassR(subj, fmt.Sprintf("Replication was paused by flow control %.1f %% of the time since the counters were reset.", g.FlowControlPaused*100), ev...))
			continue
		}
		who := "Another node is the slow one (this node's receive queue is short): look at wsrep_local_recv_queue_avg on each."
		if g.LocalRecvQueueAvg > 1 {
			who = fmt.Sprintf("This node falls behind: %.1f write sets wait on average for its appliers.", g.LocalRecvQueueAvg)
		}
		fx := &fix.Fix{Summary: "Find the node that throttles the Galera cluster", Manual: "On the node with the longest receive queue: more applier threads (wsrep_slave_threads, see galera.slave_threads), faster storage, no long-running transactions. The counter is reset by FLUSH STATUS, to measure again after a change."}
		out = append(out, FailR(subj, fmt.Sprintf("Replication was paused by flow control %.0f %% of the time: meanwhile no node commits a write, the cluster runs at the pace of its slowest node. %s", g.FlowControlPaused*100, who), fx, ev...))
	}
	return out
}

// ---- galera.slave_threads ----

func checkGaleraSlaveThreads(f *facts.Facts) []Result {
	var out []Result
	for _, in := range galeraNodes(f) {
		out = append(out, judgeGaleraSlaveThreads(f, in))
	}
	return out
}

func judgeGaleraSlaveThreads(f *facts.Facts, in *facts.Instance) Result {
	subj := in.Name()
	name := "wsrep_slave_threads"
	if _, ok := in.Setting("wsrep_applier_threads"); ok {
		name = "wsrep_applier_threads"
	}
	ev := []Evidence{mySettingEv(in, name)}
	s, ok := in.Setting(name)
	if !ok {
		if why := defaultUnsure(in, name); why != "" {
			return UnknownR(subj, why, ev...)
		}
		// Set nowhere dbhost can see: Galera's default is 1.
		s = engine.Setting{Value: "1", Source: "default"}
		ev[0] = Ev(name, "1", "default")
	}
	threads, err := strconv.Atoi(strings.TrimSpace(s.Value))
	if err != nil || threads < 1 {
		return UnknownR(subj, name+" has an unexpected value: "+s.Value, ev...)
	}
	cpus := f.System.CPUs
	ev = append(ev, Ev("cpus", strconv.Itoa(cpus), "/proc/cpuinfo"))
	if cpus <= 0 {
		return UnknownR(subj, "the host's CPU count is unknown", ev...)
	}
	deps := 0.0
	if g := in.MySQL.GaleraStatus; g != nil {
		deps = g.CertDepsDistance
		ev = append(ev, Ev("wsrep_cert_deps_distance", strconv.FormatFloat(deps, 'f', -1, 64), "live: SHOW GLOBAL STATUS"))
	}
	if threads > 1 || cpus == 1 {
		return PassR(subj, fmt.Sprintf("%s is %d on %d CPU(s).", name, threads, cpus), ev...)
	}
	if in.MySQL.GaleraStatus != nil && deps > 0 && deps < 2 {
		return PassR(subj, fmt.Sprintf("%s is 1, and the write sets seen so far could not be applied in parallel anyway (wsrep_cert_deps_distance %.1f).", name, deps), ev...)
	}
	want := 2 * cpus
	if deps >= 2 {
		want = min(want, int(deps))
	}
	want = max(want, 2)
	return FailR(subj, fmt.Sprintf("%s is 1 on a host with %d CPUs: the node applies the other nodes' writes one after the other, falls behind under load and then throttles the whole cluster by flow control. Set %s=%d (twice the CPUs, at most the measured wsrep_cert_deps_distance).", name, cpus, name, want),
		myConfigFix(in, fmt.Sprintf("Set %s to %d", name, want), false, name, strconv.Itoa(want)), ev...)
}

// ---- galera.binlog_format and galera.autoinc_lock_mode ----

// galeraSettingIs judges a setting Galera needs at one value.
func galeraSettingIs(f *facts.Facts, name, want, why string) []Result {
	var out []Result
	for _, in := range galeraNodes(f) {
		subj := in.Name()
		ev := []Evidence{mySettingEv(in, name)}
		s, ok := in.Setting(name)
		if !ok {
			out = append(out, UnknownR(subj, name+" could not be read (no live connection, and no option file or known default sets it)", ev...))
			continue
		}
		if strings.EqualFold(strings.TrimSpace(s.Value), want) {
			out = append(out, PassR(subj, name+" is "+want+", as Galera needs.", ev...))
			continue
		}
		if u := defaultUnsure(in, name); u != "" {
			out = append(out, UnknownR(subj, u, ev...))
			continue
		}
		out = append(out, FailR(subj, fmt.Sprintf("%s is %s: %s Set %s=%s.", name, s.Value, why, name, want), myConfigFix(in, "Set "+name+" to "+want, true, name, want), ev...))
	}
	return out
}

func checkGaleraBinlogFormat(f *facts.Facts) []Result {
	return galeraSettingIs(f, "binlog_format", "ROW", "Galera replicates row events; with statement-based logging, statements whose result depends on the node (NOW(), RAND(), LIMIT without ORDER BY) make the nodes diverge.")
}

func checkGaleraAutoincLockMode(f *facts.Facts) []Result {
	return galeraSettingIs(f, "innodb_autoinc_lock_mode", "2", "modes 0 and 1 take a table-level AUTO-INC lock for multi-row inserts, on which Galera's parallel appliers wait and can deadlock.")
}

// ---- galera.primary_keys ----

func checkGaleraPrimaryKeys(f *facts.Facts) []Result {
	var out []Result
	for _, in := range galeraNodes(f) {
		subj := in.Name()
		tb := in.MySQL.Tables
		switch {
		case tb == nil && in.SettingsSource != "live":
			out = append(out, UnknownR(subj, "the tables are only visible over a connection to the server, and none was made ("+myOr(in.LiveErr, "no live connection")+")"))
			continue
		case tb == nil:
			out = append(out, UnknownR(subj, "the tables were not read"))
			continue
		case tb.Err != "":
			out = append(out, UnknownR(subj, "the tables could not be listed: "+tb.Err+" (the account needs access to information_schema; a very large schema can exceed the connection timeout)"))
			continue
		}
		ev := []Evidence{
			Ev("tables without a primary key", strconv.Itoa(tb.WithoutPKCount), "live: information_schema"),
			Ev("tables not in InnoDB", strconv.Itoa(tb.NonInnoDBCount), "live: information_schema"),
		}
		if tb.WithoutPKCount == 0 && tb.NonInnoDBCount == 0 {
			out = append(out, PassR(subj, "Every user table is in InnoDB and has a primary key.", ev...))
			continue
		}
		var parts, stmts []string
		if tb.WithoutPKCount > 0 {
			ev = append(ev, Ev("without a primary key", strings.Join(tb.WithoutPK, ", ")+more(tb.WithoutPKCount, len(tb.WithoutPK)), "live: information_schema"))
			parts = append(parts, fmt.Sprintf("%d table(s) have no primary key (%s%s): every other node finds each updated or deleted row by a full scan, and such deletes are known to fail to replicate", tb.WithoutPKCount, strings.Join(tb.WithoutPK, ", "), more(tb.WithoutPKCount, len(tb.WithoutPK))))
			for _, n := range tb.WithoutPK {
				stmts = append(stmts, "ALTER TABLE "+sqlTable(n)+" ADD COLUMN dbhost_id BIGINT UNSIGNED NOT NULL AUTO_INCREMENT PRIMARY KEY INVISIBLE; -- or a primary key on its natural key")
			}
		}
		if tb.NonInnoDBCount > 0 {
			ev = append(ev, Ev("not in InnoDB", strings.Join(tb.NonInnoDB, ", ")+more(tb.NonInnoDBCount, len(tb.NonInnoDB)), "live: information_schema"))
			parts = append(parts, fmt.Sprintf("%d table(s) are not in InnoDB (%s%s): Galera does not replicate them, so the nodes hold different data", tb.NonInnoDBCount, strings.Join(tb.NonInnoDB, ", "), more(tb.NonInnoDBCount, len(tb.NonInnoDB))))
			for _, n := range tb.NonInnoDB {
				n, _, _ = strings.Cut(n, " (")
				stmts = append(stmts, "ALTER TABLE "+sqlTable(n)+" ENGINE=InnoDB;")
			}
		}
		fx := &fix.Fix{
			Summary: "Give the replicated tables of " + subj + " primary keys and InnoDB",
			Manual:  "For each table listed (check first what the application expects; ALTER TABLE rewrites the table and replicates as one large write set, so do it off-peak or with pt-online-schema-change):\n" + strings.Join(stmts, "\n") + "\nMariaDB's innodb_force_primary_key=ON then refuses new tables without one.",
		}
		out = append(out, FailR(subj, strings.Join(parts, "; ")+".", fx, ev...))
	}
	return out
}

// sqlTable quotes "schema.table" as two identifiers for a statement a
// person runs (a name's backticks doubled).
func sqlTable(n string) string {
	schema, table, _ := strings.Cut(n, ".")
	q := func(s string) string { return "`" + strings.ReplaceAll(s, "`", "``") + "`" }
	return q(schema) + "." + q(table)
}

// more says how many names were left out of a list.
func more(count, shown int) string {
	if count > shown {
		return fmt.Sprintf(" and %d more", count-shown)
	}
	return ""
}

// ---- galera.sst ----

func checkGaleraSST(f *facts.Facts) []Result {
	var out []Result
	for _, in := range galeraNodes(f) {
		out = append(out, judgeGaleraSST(in))
	}
	return out
}

func judgeGaleraSST(in *facts.Instance) Result {
	subj := in.Name()
	method := strings.ToLower(strings.TrimSpace(in.SettingValue("wsrep_sst_method")))
	ev := []Evidence{mySettingEv(in, "wsrep_sst_method")}
	if method == "" {
		method = "rsync" // Galera's default
	}
	a := in.SSTAuth
	if a != nil {
		v := a.Source
		if a.File != "" && a.Err == "" {
			v = fmt.Sprintf("%s (mode %s, uid %d, gid %d)", a.File, a.Mode, a.UID, a.GID)
		}
		ev = append(ev, Ev("wsrep_sst_auth set in", v, a.Source))
	}
	switch {
	case a != nil && a.Source == "cmdline":
		r := FailR(subj, "wsrep_sst_auth (the state transfer's user and password) is given on the server's command line, which every local user can read in /proc. The account can copy the whole database.",
			&fix.Fix{Summary: "Move wsrep_sst_auth off the command line of " + subj, Manual: "Remove --wsrep-sst-auth from the server's command line (its service unit or start script), put it under [mysqld] in an option file owned by root, group mysql, mode 0640, restart the node, and change that account's password: it has been visible."}, ev...)
		r.Severity = Critical
		return r
	case a.WorldReadable():
		r := FailR(subj, fmt.Sprintf("wsrep_sst_auth (the state transfer's user and password) is in %s, which every local user can read (mode %s). The account can copy the whole database.", a.File, a.Mode),
			&fix.Fix{Summary: "Make the option file holding wsrep_sst_auth private on " + subj, Manual: fmt.Sprintf("chmod o-rwx %s (keep it readable by the server's group, e.g. root:mysql 0640), or move wsrep_sst_auth into such a file; then change the account's password: it has been readable.", a.File)}, ev...)
		r.Severity = Critical
		return r
	case a != nil && a.Err != "":
		return UnknownR(subj, "wsrep_sst_auth is set in "+a.File+", whose mode could not be read: "+a.Err, ev...)
	case a == nil && len(configGaps(in)) > 0:
		return UnknownR(subj, "part of the configuration could not be read ("+strings.Join(configGaps(in), "; ")+"): the state transfer's method and credentials may be set there", ev...)
	}
	switch method {
	case "rsync", "rsync_wan", "mysqldump":
		r := FailR(subj, fmt.Sprintf("The state transfer method is %s, which blocks the donor for the whole copy (%s): every full state transfer takes a second node out of service. mariabackup (MariaDB) or xtrabackup-v2 (Percona) copy while the donor serves; they need an account in wsrep_sst_auth, kept in a file only root and the server can read.", method, myPick(method == "mysqldump", "the dump runs through the SQL layer and the joiner must accept it", "under a global read lock")),
			&fix.Fix{Summary: "Use a non-blocking state transfer on " + subj, Manual: "Create the SST account (MariaDB: CREATE USER 'sst'@'localhost' IDENTIFIED BY '...'; GRANT RELOAD, PROCESS, LOCK TABLES, BINLOG MONITOR ON *.* TO 'sst'@'localhost'), set wsrep_sst_method=mariabackup and wsrep_sst_auth=sst:PASSWORD in an option file owned by root, group mysql, mode 0640, on every node (mariabackup installed), then restart the nodes one by one."}, ev...)
		r.Severity = Info
		return r
	}
	if a == nil {
		return PassR(subj, fmt.Sprintf("The state transfer method is %s, which copies while the donor serves; no wsrep_sst_auth is set in the option files (the method then authenticates as the server's own OS account by unix_socket, which needs such an account).", method), ev...)
	}
	return PassR(subj, fmt.Sprintf("The state transfer method is %s, which copies while the donor serves, and its credentials are in a file other users cannot read.", method), ev...)
}

// ---- galera.ssl ----

func checkGaleraSSL(f *facts.Facts) []Result {
	var out []Result
	for _, in := range galeraNodes(f) {
		out = append(out, judgeGaleraSSL(in))
	}
	return out
}

// loopbackHost reports an address only this host reaches.
func loopbackHost(h string) bool {
	h = strings.Trim(strings.TrimSpace(h), "[]")
	if strings.EqualFold(h, "localhost") {
		return true
	}
	ip := net.ParseIP(h)
	return ip != nil && ip.IsLoopback()
}

// clusterHosts are the hosts of wsrep_cluster_address (gcomm://a,b:4567?opts).
func clusterHosts(addr string) []string {
	addr = strings.TrimSpace(addr)
	_, rest, ok := strings.Cut(addr, "://")
	if !ok {
		return nil
	}
	rest, _, _ = strings.Cut(rest, "?")
	var out []string
	for _, p := range strings.Split(rest, ",") {
		if h, _ := splitAddr(p); strings.TrimSpace(h) != "" {
			out = append(out, h)
		}
	}
	return out
}

func judgeGaleraSSL(in *facts.Instance) Result {
	subj := in.Name()
	po := providerOpts(in)
	ev := []Evidence{mySettingEv(in, "wsrep_cluster_address")}
	on, _ := mysql.IsOn(po["socket.ssl"])
	cert, key := po["socket.ssl_cert"], po["socket.ssl_key"]
	for _, k := range []string{"socket.ssl", "socket.ssl_cert", "socket.ssl_key"} {
		if v, ok := po[k]; ok {
			ev = append(ev, Ev(k, v, "wsrep_provider_options"))
		}
	}
	mode := strings.ToUpper(in.SettingValue("wsrep_ssl_mode"))
	if mode != "" {
		ev = append(ev, mySettingEv(in, "wsrep_ssl_mode"))
	}
	serverSSL := (mode == "SERVER" || mode == "SERVER_X509") && in.SettingValue("ssl_cert") != "" && in.SettingValue("ssl_key") != ""
	if on && (cert != "" || serverSSL) || cert != "" && key != "" || serverSSL {
		return PassR(subj, "Group communication and IST are encrypted (socket.ssl with a certificate and key).", ev...)
	}
	if why := defaultUnsure(in, "wsrep_provider_options"); why != "" {
		return UnknownR(subj, why, ev...)
	}
	g := readGaleraPorts(in)
	hosts := clusterHosts(in.SettingValue("wsrep_cluster_address"))
	local := loopbackHost(g.gcommHost)
	for _, h := range hosts {
		local = local && loopbackHost(h)
	}
	if local {
		return PassR(subj, "Replication traffic is not encrypted, but the cluster address and group communication are loopback only: it never leaves this host.", ev...)
	}
	fx := &fix.Fix{
		Summary: "Encrypt Galera replication traffic of the cluster of " + subj,
		Manual: "On every node: a certificate and key signed by one CA the nodes share, then wsrep_provider_options \"socket.ssl_cert=...;socket.ssl_key=...;socket.ssl_ca=...\" (keep the other options on that line). " +
			"Nodes with and without SSL cannot talk: follow Galera's rolling procedure (socket.ssl_reload, or all nodes restarted with the new options) rather than changing one node.",
	}
	return FailR(subj, "Group communication and IST carry every row written in clear between the nodes, over a network other hosts share (the cluster address or listen address is not loopback): anyone on the path reads the data. Encrypt it with socket.ssl.", fx, ev...)
}
