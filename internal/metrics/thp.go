package metrics

import (
	"errors"
	"strconv"
	"strings"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/dbhost/dbhost/internal/host"
)

func init() { register("thp", true, thpCollector{}) }

var (
	thpDesc = desc("thp", "Transparent huge page settings as state sets: 1 for the selected value, 0 for the others the kernel offers.",
		"setting", "value")
	ptesNoneDesc = desc("thp_khugepaged_max_ptes_none", "khugepaged's max_ptes_none: how many unmapped pages it fills to build a huge page.")
)

type thpCollector struct{}

func (thpCollector) Update(in *Input, ch chan<- prometheus.Metric) error {
	t := in.Facts.Memory.THP
	settings := []struct {
		name string
		r    host.Reading
	}{
		{"enabled", t.Enabled}, {"defrag", t.Defrag}, {"shmem_enabled", t.ShmemEnabled}, {"khugepaged_defrag", t.KhugepagedDefrag},
	}
	var failed []string
	for _, s := range settings {
		if !s.r.OK() {
			if !strings.HasSuffix(s.r.Err, "not present on this host") {
				failed = append(failed, s.name)
			}
			continue
		}
		opts, sel := stateSet(s.r)
		for _, o := range opts {
			v := 0.0
			if o == sel {
				v = 1
			}
			ch <- gauge(thpDesc(), v, s.name, o)
		}
	}
	if n, err := strconv.ParseFloat(strings.TrimSpace(t.MaxPtesNone.Value), 64); t.MaxPtesNone.OK() && err == nil {
		ch <- gauge(ptesNoneDesc(), n)
	}
	if len(failed) > 0 {
		return errors.New("unreadable: " + strings.Join(failed, ", "))
	}
	return nil
}
