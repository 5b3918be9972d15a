package galeraprove

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/dbhost/dbhost/internal/engine"
	"github.com/dbhost/dbhost/internal/galera"
)

// How a node's view is known to show a failure: its component has exactly
// the members it can still reach, whether Primary or not. This rests on
// what the lab, not the model, says (who runs, who is cut off), so the
// wait ends on the truth either way and a wrong prediction shows as a
// mismatch instead of a timeout. A killed member stays in the others'
// view until evs.suspect_timeout; a member shut down cleanly leaves it at
// once.

// settleHold is how many looks in a row every node must show a settled
// view: Galera installs a component in steps, and a view seen once may be
// on its way to another.
const settleHold = 2

// view is one node's view at one look.
type view struct {
	name  string
	reach int
	st    *engine.GaleraStatus
	err   error
}

func (v view) settled() bool {
	return v.err == nil && v.st != nil && v.st.ClusterSize == v.reach &&
		(v.st.ClusterStatus == "Primary" || v.st.ClusterStatus == "non-Primary")
}

// observation is the last look at every running data node.
type observation struct {
	views   []view
	settled bool
	// at is when the views first showed the settled state that held (or
	// the last look when they never did).
	at time.Time
}

func (o observation) summary() string {
	parts := make([]string, len(o.views))
	for i, v := range o.views {
		parts[i] = v.name + " " + v.short()
	}
	return strings.Join(parts, ", ")
}

func (v view) short() string {
	switch {
	case v.err != nil:
		return "unreadable"
	case v.st == nil:
		return "not read"
	}
	return fmt.Sprintf("%s/%d", v.st.ClusterStatus, v.st.ClusterSize)
}

// reach returns, for every running data node, how many running members it
// can reach: every running member, or those on its side of a partition.
func (p *prover) reach(s galera.Scenario) map[string]int {
	running := map[string]bool{}
	for _, m := range p.layout.Members {
		running[m.Name] = p.lab.Running(m.Name)
	}
	out := map[string]int{}
	for _, n := range p.data {
		if !running[n] {
			continue
		}
		var names []string
		if s.Kind == galera.Partition {
			for _, side := range s.Sides {
				if contains(side, n) {
					names = side
				}
			}
		} else {
			for _, m := range p.layout.Members {
				names = append(names, m.Name)
			}
		}
		c := 0
		for _, m := range names {
			if running[m] {
				c++
			}
		}
		out[n] = c
	}
	return out
}

// observe looks at the running data nodes until their views have settled
// and held for settleHold looks, or until the deadline.
func (p *prover) observe(ctx context.Context, s galera.Scenario, deadline time.Duration) observation {
	end := time.Now().Add(deadline)
	var o observation
	held := 0
	var first time.Time
	for {
		now := time.Now()
		// Who runs is asked at every look: a member that stops on its
		// own changes what the others can reach.
		reach := p.reach(s)
		names := make([]string, 0, len(reach))
		for _, n := range p.data {
			if _, ok := reach[n]; ok {
				names = append(names, n)
			}
		}
		o.views = o.views[:0]
		all := true
		for _, n := range names {
			st, err := p.status(ctx, n)
			v := view{name: n, reach: reach[n], st: st, err: err}
			o.views = append(o.views, v)
			all = all && v.settled()
		}
		if all {
			if held == 0 {
				first = now
			}
			held++
		} else {
			held = 0
		}
		if held >= settleHold {
			o.settled, o.at = true, first
			return o
		}
		if ctx.Err() != nil || time.Now().After(end) {
			o.at = now
			return o
		}
		if sleep(ctx, p.o.poll) != nil {
			o.at = now
			return o
		}
	}
}

// judge compares the observation with the prediction, node by node and
// for the cluster, and fills the result.
func judge(res *Result, o observation, data []string) {
	res.Settled = o.settled
	match := o.settled
	for _, v := range o.views {
		n := NodeResult{Name: v.name, Reach: v.reach, Predicted: res.Prediction.Primary[v.name], Settled: v.settled()}
		if v.err != nil {
			n.Error = v.err.Error()
			res.Notes = append(res.Notes, fmt.Sprintf("%s could not be read: %v", v.name, v.err))
		} else if v.st != nil {
			n.ClusterStatus, n.ClusterSize, n.LocalState = v.st.ClusterStatus, v.st.ClusterSize, v.st.LocalState
		}
		if _, ok := res.Prediction.Primary[v.name]; !ok {
			res.Notes = append(res.Notes, fmt.Sprintf("the model made no prediction for %s, which runs", v.name))
			match = false
		}
		n.Match = v.err == nil && n.Primary() == n.Predicted
		match = match && n.Match
		res.Survived = res.Survived || n.Primary()
		res.Nodes = append(res.Nodes, n)
	}
	// A data node the model expects to run and the lab does not have
	// running is a mismatch too (the lab lost more than the scenario).
	// An arbitrator's verdict is not observed: garbd has no client
	// socket to read its view from.
	for _, name := range sortedNames(res.Prediction.Primary) {
		if contains(data, name) && !res.hasNode(name) {
			res.Notes = append(res.Notes, fmt.Sprintf("%s should be running and is not", name))
			match = false
		}
	}
	res.Match = match && res.Survived == res.Prediction.Survives
}

func (r *Result) hasNode(name string) bool {
	for _, n := range r.Nodes {
		if n.Name == name {
			return true
		}
	}
	return false
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}
