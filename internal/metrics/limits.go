package metrics

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/dbhost/dbhost/internal/host"
)

func init() { register("limits", true, limitsCollector{}) }

var limitDesc = desc("db_limit", "A running trusted database server's resource limit; +Inf when unlimited.", "subject", "resource", "type")

// limitsCollector exports the limits the limits.* checks judge, as the
// running server has them (/proc/PID/limits), for trusted servers only.
type limitsCollector struct{}

var limitResources = []struct{ name, key string }{
	{"nofile", host.LimitNofile}, {"nproc", host.LimitNproc}, {"memlock", host.LimitMemlock},
}

func (limitsCollector) Update(in *Input, ch chan<- prometheus.Metric) error {
	seen := map[string]bool{}
	for _, i := range labelled(in.Facts) {
		n := i.Name()
		if seen[n] || i.Limits == nil {
			continue
		}
		seen[n] = true
		for _, r := range limitResources {
			l, ok := i.Limits[r.key]
			if !ok {
				continue
			}
			ch <- gauge(limitDesc(), limitValue(l.Soft), n, r.name, "soft")
			ch <- gauge(limitDesc(), limitValue(l.Hard), n, r.name, "hard")
		}
	}
	return nil
}
