package main

import (
	"encoding/json"
	"errors"
	"strings"

	"github.com/dbhost/dbhost/internal/fixture/derive"
)

// Galera states this VM's one-node cluster does not reach by itself: a
// node cut off from its cluster, under load, on a slow network; a member
// of a four-node cluster across two data centres. Each edits only the
// recorded live probe of galera-node's Galera node.

func init() {
	derivations = append(derivations,
		derive.Derivation{
			Name: "galera-node-degraded",
			Base: "galera-node",
			Note: "derived from galera-node: the Galera node's live read says non-Primary (Initialized, not ready) after a day up with 48 GiB replicated (gcache.size 64M holds under two minutes), flow control paused 35 % of the time with a receive queue of 4.2, wsrep_cert_deps_distance 8.5, replication latency up to 0.9 s, binlog_format STATEMENT, innodb_autoinc_lock_mode 1, wsrep_cluster_address naming three nodes on 10.20.0.0/24, and the tables query timed out",
			Edit: func(a *derive.Archive) error {
				return editGaleraLive(a, func(d map[string]any, vars map[string]any, g map[string]any) {
					g["cluster_status"], g["local_state"], g["ready"], g["cluster_size"] = "non-Primary", "Initialized", false, 1
					g["flow_control_paused"], g["local_recv_queue_avg"], g["cert_deps_distance"] = 0.35, 4.2, 8.5
					g["uptime_seconds"], g["replicated_bytes"], g["received_bytes"] = 86400, int64(48)<<30, 0
					g["repl_latency"] = map[string]any{"min": 0.0012, "avg": 0.21, "max": 0.9, "stddev": 0.12, "samples": 120}
					vars["binlog_format"], vars["innodb_autoinc_lock_mode"] = "STATEMENT", "1"
					vars["wsrep_cluster_address"] = "gcomm://10.20.0.11,10.20.0.12,10.20.0.13"
					d["tables"] = map[string]any{"without_pk_count": 0, "non_innodb_count": 0, "error": "information_schema.TABLES: context deadline exceeded"}
				})
			},
		},
		derive.Derivation{
			Name: "galera-node-dc",
			Base: "galera-node",
			Note: "derived from galera-node: its option file holding wsrep_sst_auth is mode 0640; the Galera node (node1, gmcast.segment=1 at runtime) is Synced in a Primary component of four data nodes, node2 to node4 on 10.20.0.0/24 (wsrep_cluster_weight 4), up two hours with 100 MiB replicated and flow control paused 1 % of the time",
			Edit: func(a *derive.Archive) error {
				return editGaleraLive(a, func(d map[string]any, vars map[string]any, g map[string]any) {
					g["cluster_size"], g["cluster_weight"], g["local_index"] = 4, 4, 0
					g["incoming_addresses"] = []string{"127.0.0.1:3306", "10.20.0.12:3306", "10.20.0.13:3306", "10.20.0.14:3306"}
					var ms []map[string]any
					for i, n := range []string{"node1", "node2", "node3", "node4"} {
						ms = append(ms, map[string]any{"uuid": "0000000" + string(rune('1'+i)) + "-dc00-11f1-8000-000000000000", "name": n, "incoming_address": g["incoming_addresses"].([]string)[i]})
					}
					g["members"] = ms
					g["flow_control_paused"], g["uptime_seconds"], g["replicated_bytes"] = 0.01, 7200, int64(100)<<20
					setMode(a, "tmp/dbhost-mycnf-", "/my.cnf", 0o640)
					po, _ := vars["wsrep_provider_options"].(string)
					vars["wsrep_provider_options"] = strings.Replace(po, "gmcast.segment = 0", "gmcast.segment = 1", 1)
				})
			},
		},
	)
}

// editGaleraLive edits the live probe of the recording's Galera node (the
// one with a galera object): its JSON document, variables and status.
func editGaleraLive(a *derive.Archive, edit func(d, vars, g map[string]any)) error {
	for key, p := range a.Probes {
		if !strings.HasPrefix(key, "probe:mysql:live:") {
			continue
		}
		var d map[string]any
		if err := json.Unmarshal(p.Out, &d); err != nil {
			return err
		}
		g, ok := d["galera"].(map[string]any)
		if !ok {
			continue
		}
		vars, _ := d["variables"].(map[string]any)
		if !strings.Contains(vars["wsrep_provider_options"].(string), "gmcast.segment = 0") {
			return errors.New("the recorded wsrep_provider_options has no gmcast.segment = 0")
		}
		edit(d, vars, g)
		b, err := json.Marshal(d)
		if err != nil {
			return err
		}
		a.Probes[key] = derive.Probe{Out: b}
		return nil
	}
	return errors.New("no live probe of a Galera node recorded")
}

// setMode sets the recorded mode of the file whose lstat probe key starts
// with prefix and ends with suffix.
func setMode(a *derive.Archive, prefix, suffix string, mode uint32) {
	for key, p := range a.Probes {
		if !strings.HasPrefix(key, "lstat:"+prefix) || !strings.HasSuffix(key, suffix) {
			continue
		}
		var fi map[string]any
		if json.Unmarshal(p.Out, &fi) != nil {
			continue
		}
		fi["mode"] = mode
		b, _ := json.Marshal(fi)
		a.Probes[key] = derive.Probe{Out: b}
	}
}
