package metrics

import "github.com/prometheus/client_golang/prometheus"

func init() { register("instances", true, instancesCollector{}) }

var instanceDesc = desc("instance_info", "1 for each database instance dbhost found, with its engine, flavor and version.",
	"db_instance", "engine", "flavor", "version")

type instancesCollector struct{}

func (instancesCollector) Update(in *Input, ch chan<- prometheus.Metric) error {
	seen := map[string]bool{}
	for _, i := range in.Facts.Instances {
		if n := i.Name(); !seen[n] {
			seen[n] = true
			ch <- gauge(instanceDesc, 1, n, string(i.Engine), i.Flavor, i.Version)
		}
	}
	return nil
}
