package metrics

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/dbhost/dbhost/internal/galera"
)

func init() { register("galera", true, galeraCollector{}) }

var galeraToleranceDesc = desc("galera_tolerance",
	"How many members of the Galera node's cluster may go while a data node stays in a Primary component, by mode: at_once (any that many failing together), one_by_one (failing in any order, each noticed before the next), clean_shutdown (leaving cleanly, one at a time). An arbitrator counts as a member. The cluster's layout is what its nodes on this host read (dbhost galera tolerance); 0 at_once: a single failure can stop the cluster.",
	"subject", "mode")

// galeraCollector exports each trusted Galera node's cluster tolerance.
// Nodes of one cluster on this host are read together, as 'dbhost galera
// tolerance' reads them; a node whose wsrep status was not read (no live
// connection, a snapshot without it) has no series.
type galeraCollector struct{}

func (galeraCollector) Update(in *Input, ch chan<- prometheus.Metric) error {
	var views []galera.NodeView
	for _, i := range labelled(in.Facts) {
		if v := galera.View(i.Instance); v != nil {
			views = append(views, *v)
		}
	}
	seen := map[string]bool{}
	for _, c := range galera.Group(views) {
		t := galera.Analyze(c.Layout)
		if len(c.Layout.Members) > galera.MaxMembers {
			continue // not judged
		}
		for _, n := range c.Nodes {
			if seen[n] {
				continue
			}
			seen[n] = true
			ch <- gauge(galeraToleranceDesc(), float64(t.AtOnce), n, "at_once")
			ch <- gauge(galeraToleranceDesc(), float64(t.OneByOne), n, "one_by_one")
			ch <- gauge(galeraToleranceDesc(), float64(t.CleanShutdown), n, "clean_shutdown")
		}
	}
	return nil
}
