package galera

import (
	"sort"
	"strings"

	"github.com/dbhost/dbhost/internal/engine"
)

// NodeView is one Galera node as read on this host: its name (the
// instance's, mysql:3306), its wsrep variables and its status.
type NodeView struct {
	Name   string
	Vars   map[string]string
	Status *engine.GaleraStatus
}

// Cluster is the nodes of one cluster read on this host and their merged
// layout.
type Cluster struct {
	// StateUUID is wsrep_cluster_state_uuid ("" when the node reported
	// none: it is a cluster of its own).
	StateUUID string
	Nodes     []string
	Layout    Layout
}

// View is a Galera node of the host as dbhost read it (nil when the
// instance is no Galera node or its status was not read).
func View(in *engine.Instance) *NodeView {
	if in == nil || in.MySQL == nil || !in.MySQL.Galera || in.MySQL.GaleraStatus == nil {
		return nil
	}
	vars := map[string]string{}
	for k, s := range in.Settings {
		if strings.HasPrefix(k, "wsrep_") {
			vars[k] = s.Value
		}
	}
	return &NodeView{Name: in.Name(), Vars: vars, Status: in.MySQL.GaleraStatus}
}

// Group puts nodes with the same wsrep_cluster_state_uuid in one cluster
// and merges their views (FromNode, Merge); clusters come sorted by UUID.
func Group(nodes []NodeView) []Cluster {
	type group struct {
		Cluster
		views []Layout
	}
	groups := map[string]*group{}
	var keys []string
	for _, n := range nodes {
		key := "\x00" + n.Name // no history to match: a cluster of its own
		if n.Status != nil && n.Status.StateUUID != "" {
			key = n.Status.StateUUID
		}
		g := groups[key]
		if g == nil {
			g = &group{}
			if n.Status != nil {
				g.StateUUID = n.Status.StateUUID
			}
			groups[key] = g
			keys = append(keys, key)
		}
		g.Nodes = append(g.Nodes, n.Name)
		g.views = append(g.views, FromNode(n.Vars, n.Status))
	}
	sort.Strings(keys)
	out := make([]Cluster, 0, len(keys))
	for _, k := range keys {
		g := groups[k]
		g.Layout = Merge(g.views...)
		out = append(out, g.Cluster)
	}
	return out
}
