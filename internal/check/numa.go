package check

import (
	"fmt"
	"sort"
	"strings"

	"github.com/dbhost/dbhost/internal/engine"
	"github.com/dbhost/dbhost/internal/facts"
	"github.com/dbhost/dbhost/internal/fix"
)

// Thresholds of numa.imbalance.
const (
	// imbalanceShare: the process keeps at least this share of its
	// resident memory on one node.
	imbalanceShare = 0.80
	// imbalanceSize: and that is at least this share of the node's RAM,
	// i.e. large enough to squeeze the node.
	imbalanceSize = 0.25
)

func init() {
	Register(Check{
		ID:        "mem.numa_balancing",
		Title:     "Automatic NUMA balancing is off on multi-node database hosts",
		Problem:   "Automatic NUMA balancing is on on a multi-node database host",
		Severity:  Info,
		AppliesTo: []string{"host", "numa"},
		Doc: `Reads kernel.numa_balancing on hosts with more than one NUMA node
(/sys/devices/system/node/node*). Automatic NUMA balancing unmaps pages periodically
to see which node touches them (NUMA hinting faults) and migrates them; for a
database whose buffer pool is shared by threads on every node this means extra page
faults and migrations with no stable home for the pages, seen as latency jitter.
Database vendors' tuning guides turn it off and place memory explicitly (interleave,
see numa.interleave). On a single-node host the setting does nothing and the check
passes.`,
		Refs:    []string{"https://docs.kernel.org/admin-guide/sysctl/kernel.html#numa-balancing"},
		Sysctls: []string{"kernel.numa_balancing"},
		Run:     checkNUMABalancing,
	})
	Register(Check{
		ID:        "numa.interleave",
		Title:     "MongoDB and MySQL interleave memory across NUMA nodes",
		Problem:   "MongoDB or MySQL does not interleave memory across NUMA nodes",
		Severity:  Warning,
		AppliesTo: []string{"mongodb", "mysql", "numa"},
		Doc: `Only on hosts with more than one NUMA node. mongod should run under
"numactl --interleave=all": dbhost reads the memory policy of its largest mapping from
/proc/PID/numa_maps (MongoDB itself warns at start-up unless the first line says
interleave). MySQL/MariaDB should run with innodb_numa_interleave=ON (or under
numactl --interleave=all where the build lacks the variable). With the default
local-first policy a buffer pool larger than one node fills that node, and the kernel
reclaims or swaps there while other nodes have free memory ("swap insanity").
Single-node hosts pass.`,
		Refs: []string{"https://www.mongodb.com/docs/manual/administration/production-notes/#mongodb-and-numa-hardware",
			"https://dev.mysql.com/doc/refman/8.0/en/innodb-parameters.html#sysvar_innodb_numa_interleave"},
		Run: checkNUMAInterleave,
	})
	Register(Check{
		ID:        "numa.imbalance",
		Title:     "Database memory is not piled up on one NUMA node",
		Problem:   "Database memory is piled up on one NUMA node",
		Severity:  Warning,
		AppliesTo: []string{"postgres", "mysql", "mongodb", "redis", "numa"},
		Doc: `Only on hosts with more than one NUMA node. Sums the resident pages of each
database's main process per node from /proc/PID/numa_maps (N<node>=<pages> times the
mapping's page size) and compares them with each node's free memory
(/sys/devices/system/node/node*/meminfo). Fails when at least 80 % of the process's
memory sits on one node, that is at least a quarter of the node's RAM, and another
node has at least twice as much free memory: the crowded node is the one that will
reclaim and swap while memory stays free next door, which is how a buffer pool
larger than one node's memory makes a host swap with free RAM. Interleaving
(numa.interleave) spreads the pages.`,
		Refs: []string{"https://docs.kernel.org/admin-guide/mm/numa_memory_policy.html",
			"https://man7.org/linux/man-pages/man7/numa.7.html"},
		Run: checkNUMAImbalance,
	})
}

func nodeEvidence(f *facts.Facts) []Evidence {
	var ev []Evidence
	for _, n := range f.Memory.NUMA.Nodes {
		ev = append(ev, Ev(fmt.Sprintf("node%d", n.ID), fmt.Sprintf("CPUs %s, %s RAM, %s free, distances %v", n.CPUs, humanBytes(n.MemTotal), humanBytes(n.MemFree), n.Distances),
			fmt.Sprintf("/sys/devices/system/node/node%d", n.ID)))
	}
	return ev
}

// numaNodes returns the node count, or why it is unknown.
func numaNodes(f *facts.Facts) (int, string) {
	if f.Memory.NUMA.Err != "" {
		return 0, "cannot read the NUMA nodes: " + f.Memory.NUMA.Err
	}
	if len(f.Memory.NUMA.Nodes) > 1 {
		for _, nd := range f.Memory.NUMA.Nodes {
			if nd.Err != "" {
				return 0, fmt.Sprintf("cannot read node%d: %s", nd.ID, nd.Err)
			}
		}
	}
	return max(1, len(f.Memory.NUMA.Nodes)), ""
}

func checkNUMABalancing(f *facts.Facts) []Result {
	r := f.SysctlReading("kernel.numa_balancing")
	ev := append([]Evidence{EvReading("kernel.numa_balancing", r)}, nodeEvidence(f)...)
	n, why := numaNodes(f)
	if why != "" {
		return []Result{UnknownR(SubjectHost, why, ev...)}
	}
	if n == 1 {
		return []Result{PassR(SubjectHost, "The host has a single NUMA node: there is nothing to balance, whatever kernel.numa_balancing says.", ev...)}
	}
	if !r.OK() && memNotPresent(r) {
		return []Result{PassR(SubjectHost, fmt.Sprintf("The kernel has no automatic NUMA balancing (no %s) on this %d-node host.", r.Source, n), ev...)}
	}
	v, why := r.IntIn(0, 3) // off, normal, memory tiering, both
	if why != "" {
		return []Result{UnknownR(SubjectHost, "cannot judge kernel.numa_balancing: "+why, ev...)}
	}
	if v == 0 {
		return []Result{PassR(SubjectHost, fmt.Sprintf("Automatic NUMA balancing is off on this %d-node host: no hinting faults or page migrations under the database.", n), ev...)}
	}
	return []Result{FailR(SubjectHost, fmt.Sprintf("kernel.numa_balancing is %d on this %d-node host: the kernel periodically unmaps pages to watch which node uses them and migrates them, which for a buffer pool shared by threads on every node means extra page faults and migrations (latency jitter) without a stable home for the pages. Turn it off and place memory explicitly (numa.interleave).", v, n),
		sysctlFix(f, "Turn off automatic NUMA balancing", "kernel.numa_balancing", "0"), ev...)}
}

// interleaved reports whether a numa_maps policy spreads pages.
func interleaved(policy string) bool {
	return strings.HasPrefix(policy, "interleave") || strings.HasPrefix(policy, "weighted interleave")
}

func numactlFix(in *facts.Instance) *fix.Fix {
	unit := memUnit(in)
	exe := in.Exe
	if exe == "" && len(in.Cmdline) > 0 {
		exe = in.Cmdline[0]
	}
	m := fmt.Sprintf("Start %s under \"numactl --interleave=all\" (package numactl).", in.Name())
	if unit != "" {
		m += fmt.Sprintf(" With systemd: a drop-in /etc/systemd/system/%s.d/numa.conf with [Service], an empty \"ExecStart=\" line and \"ExecStart=/usr/bin/numactl --interleave=all %s ...\" (the unit's original command line), then systemctl daemon-reload and restart.", unit, exe)
	}
	m += " Keep vm.zone_reclaim_mode at 0."
	return &fix.Fix{Summary: "Interleave " + in.Name() + "'s memory across NUMA nodes", Manual: m}
}

func checkNUMAInterleave(f *facts.Facts) []Result {
	var out []Result
	n, why := numaNodes(f)
	for _, in := range f.Instances {
		if in.Engine != engine.MongoDB && in.Engine != engine.MySQL {
			continue
		}
		subj, desc := in.Name(), memInstDesc(in)
		ev := []Evidence{Ev("memory policy", memOr(in.Mem.NUMAPolicy, "unread"), fmt.Sprintf("/proc/%d/numa_maps", in.PID))}
		switch {
		case why != "":
			out = append(out, UnknownR(subj, why, ev...))
			continue
		case n == 1:
			out = append(out, PassR(subj, desc+" runs on a single-node host: there is only one node to take memory from, so interleaving changes nothing.", ev...))
			continue
		}
		if interleaved(in.Mem.NUMAPolicy) {
			out = append(out, PassR(subj, fmt.Sprintf("%s interleaves its memory across the %d nodes (policy %s).", desc, n, in.Mem.NUMAPolicy), ev...))
			continue
		}
		if in.Engine == engine.MySQL {
			if s, ok := in.Setting("innodb_numa_interleave"); ok {
				ev = append(ev, Ev("innodb_numa_interleave", s.Value, memOr(s.Source, in.SettingsSource)))
				if on, _ := memOnOff(s.Value); on {
					out = append(out, PassR(subj, fmt.Sprintf("%s has innodb_numa_interleave = ON: InnoDB allocates its buffer pool interleaved across the %d nodes.", desc, n), ev...))
					continue
				}
				out = append(out, FailR(subj, fmt.Sprintf("%s has innodb_numa_interleave = %s on this %d-node host: its buffer pool is allocated node-local, fills one node, and the kernel reclaims or swaps there while other nodes have free memory.", desc, s.Value, n),
					&fix.Fix{Summary: "Interleave the InnoDB buffer pool", Config: []fix.ConfigChange{{Instance: subj, Engine: string(in.Engine), Key: "innodb_numa_interleave", Value: "ON", Restart: true}}}, ev...))
				continue
			}
		}
		if in.Mem.NUMAErr != "" {
			out = append(out, UnknownR(subj, "cannot read the memory policy of "+desc+": "+in.Mem.NUMAErr, ev...))
			continue
		}
		reason := fmt.Sprintf("%s runs with memory policy %q on this %d-node host: its memory is allocated on the node of the CPU that first touches it, a cache larger than one node fills that node, and the kernel reclaims or swaps there while other nodes have free memory.", desc, memOr(in.Mem.NUMAPolicy, "default"), n)
		if in.Engine == engine.MongoDB {
			reason += " mongod warns about this at start-up and asks to be started under numactl --interleave=all."
		} else {
			reason += " This build has no innodb_numa_interleave: start the server under numactl --interleave=all."
		}
		out = append(out, FailR(subj, reason, numactlFix(in), ev...))
	}
	return out
}

func checkNUMAImbalance(f *facts.Facts) []Result {
	var out []Result
	n, why := numaNodes(f)
	nodes := map[int]facts.NUMANode{}
	for _, nd := range f.Memory.NUMA.Nodes {
		nodes[nd.ID] = nd
	}
	for _, in := range f.Instances {
		subj, desc := in.Name(), memInstDesc(in)
		switch {
		case why != "":
			out = append(out, UnknownR(subj, why))
			continue
		case n == 1:
			out = append(out, PassR(subj, desc+" runs on a single-node host: all its memory is on the one node there is."))
			continue
		case in.Mem.NUMAErr != "":
			out = append(out, UnknownR(subj, "cannot read where the memory of "+desc+" lives: "+in.Mem.NUMAErr))
			continue
		}
		var total uint64
		ids := make([]int, 0, len(in.Mem.NodeBytes))
		for id, b := range in.Mem.NodeBytes {
			total += b
			ids = append(ids, id)
		}
		sort.Ints(ids)
		var parts []string
		top, topB := -1, uint64(0)
		for _, id := range ids {
			b := in.Mem.NodeBytes[id]
			parts = append(parts, fmt.Sprintf("node%d %s", id, humanBytes(b)))
			if top < 0 || b > topB {
				top, topB = id, b
			}
		}
		ev := append([]Evidence{Ev("resident memory per node", memOr(strings.Join(parts, ", "), "none"), fmt.Sprintf("/proc/%d/numa_maps", in.PID)),
			Ev("memory policy", memOr(in.Mem.NUMAPolicy, "unknown"), fmt.Sprintf("/proc/%d/numa_maps", in.PID))}, nodeEvidence(f)...)
		if total == 0 || top < 0 {
			out = append(out, PassR(subj, desc+" has no resident memory counted in numa_maps.", ev...))
			continue
		}
		topNode, ok := nodes[top]
		share := float64(topB) / float64(total)
		crowded := ok && share >= imbalanceShare && float64(topB) >= imbalanceSize*float64(topNode.MemTotal)
		var roomy []string
		for _, nd := range f.Memory.NUMA.Nodes {
			if nd.ID != top && ok && nd.MemFree >= 2*topNode.MemFree && nd.MemFree*10 >= nd.MemTotal {
				roomy = append(roomy, fmt.Sprintf("node%d has %s free", nd.ID, humanBytes(nd.MemFree)))
			}
		}
		if !crowded || len(roomy) == 0 {
			out = append(out, PassR(subj, fmt.Sprintf("%s keeps %.0f %% of its %s resident memory on node%d; no node is crowded by it while another sits free (rule: >= 80 %% on one node, >= 25 %% of that node's RAM, another node with twice its free memory).", desc, 100*share, humanBytes(total), top), ev...))
			continue
		}
		reason := fmt.Sprintf("%s keeps %.0f %% of its %s resident memory on node%d (%.0f %% of that node's %s RAM; %s free there), while %s. When it grows further, the kernel reclaims cache and swaps on node%d although other nodes have free memory.",
			desc, 100*share, humanBytes(total), top, memPct(topB, topNode.MemTotal), humanBytes(topNode.MemTotal), humanBytes(topNode.MemFree), strings.Join(roomy, ", "), top)
		var fx *fix.Fix
		if in.Engine == engine.MySQL {
			if _, has := in.Setting("innodb_numa_interleave"); has {
				fx = &fix.Fix{Summary: "Interleave the InnoDB buffer pool", Config: []fix.ConfigChange{{Instance: subj, Engine: string(in.Engine), Key: "innodb_numa_interleave", Value: "ON", Restart: true}}}
			}
		}
		if fx == nil {
			fx = numactlFix(in)
		}
		out = append(out, FailR(subj, reason, fx, ev...))
	}
	return out
}
