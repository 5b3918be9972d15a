package metrics

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/dbhost/dbhost/internal/engine"
	"github.com/dbhost/dbhost/internal/facts"
)

func init() { register("instances", true, instancesCollector{}) }

var (
	instanceDesc = desc("instance_info", "1 for each trusted database instance dbhost found, with its engine, flavor and version. Untrusted instances are counted in dbhost_untrusted_instances, never listed.",
		"subject", "engine", "flavor", "version")
	unnamedDesc = desc("unnamed_instances",
		"Trusted database instances of the last audit that have no series of their own: their port could not be read (a run without root, an unreadable configuration) and a name from their data directory or PID would change with privileges or at every start. Their findings are counted in dbhost_findings.",
		"engine")
	untrustedDesc = desc("untrusted_instances",
		"Database instances of the last audit that dbhost does not trust (any local user can start a process with a server's name), by engine: those described and judged plus those only counted. They are never listed by name.",
		"engine")
	notDescribedDesc = desc("untrusted_instances_not_described",
		"Untrusted database instances of the last audit that were counted, not described: discovery describes only the first few untrusted instances. A gauge: the count of one audit, not a running total.",
		"engine")
)

// instancesCollector lists the trusted instances, one series each, and
// counts the untrusted ones by engine. An untrusted instance chooses its
// own name, data directory and version, and any local user can start
// thousands: listed one by one they would make series without bound and
// carry text the user picked.
type instancesCollector struct{}

func (instancesCollector) Update(in *Input, ch chan<- prometheus.Metric) error {
	seen := map[string]bool{}
	unnamed := map[engine.Engine]int{}
	for _, i := range trustedInstances(in.Facts) {
		if !i.StableName() {
			unnamed[i.Engine]++
			continue
		}
		if n := i.Name(); !seen[n] {
			seen[n] = true
			ch <- gauge(instanceDesc(), 1, n, string(i.Engine), i.Flavor, i.Version)
		}
	}
	untrusted := map[engine.Engine]int{}
	for _, i := range in.Facts.Instances {
		if !i.Trusted() {
			untrusted[i.Engine]++
		}
	}
	// Every engine has its two series, also at 0: the series do not come
	// and go with what users start.
	for _, e := range engine.Engines {
		n := in.Facts.NotDescribed[e]
		ch <- gauge(untrustedDesc(), float64(untrusted[e]+n), string(e))
		ch <- gauge(notDescribedDesc(), float64(n), string(e))
		ch <- gauge(unnamedDesc(), float64(unnamed[e]), string(e))
	}
	return nil
}

// trustedInstances are the instances whose names, settings and files may
// reach a series: the others only add to the untrusted counts.
func trustedInstances(f *facts.Facts) []*facts.Instance {
	trusted, _ := f.SplitTrust()
	return trusted
}

// labelled are the trusted instances with a stable name (see
// engine.Instance.StableName): the ones that get series of their own.
func labelled(f *facts.Facts) []*facts.Instance {
	var out []*facts.Instance
	for _, i := range trustedInstances(f) {
		if i.StableName() {
			out = append(out, i)
		}
	}
	return out
}
