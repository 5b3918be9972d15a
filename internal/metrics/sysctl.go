package metrics

import (
	"errors"
	"sort"
	"strconv"
	"strings"

	"github.com/prometheus/client_golang/prometheus"
)

func init() { register("sysctl", true, sysctlCollector{}) }

var sysctlDesc = desc("sysctl", "A kernel parameter dbhost's checks read, where its value is one number.", "name")

// sysctlCollector exports the kernel parameters the checks declared (a
// bounded, curated set: vm.swappiness, vm.dirty_*, vm.max_map_count, ...),
// those whose value is a single number. Multi-valued ones (tcp_rmem) and
// strings are judged by the checks, not exported.
type sysctlCollector struct{}

func (sysctlCollector) Update(in *Input, ch chan<- prometheus.Metric) error {
	names := make([]string, 0, len(in.Facts.Sysctl))
	for n := range in.Facts.Sysctl {
		names = append(names, n)
	}
	sort.Strings(names)
	read := 0
	for _, n := range names {
		r := in.Facts.Sysctl[n]
		if !r.OK() {
			continue
		}
		read++
		f := strings.Fields(r.Value)
		if len(f) != 1 {
			continue
		}
		v, err := strconv.ParseFloat(f[0], 64)
		if err != nil {
			continue
		}
		ch <- gauge(sysctlDesc(), v, n)
	}
	if read == 0 && len(names) > 0 {
		return errors.New("no kernel parameter could be read")
	}
	return nil
}
