package metrics

import (
	"errors"
	"strconv"

	"github.com/prometheus/client_golang/prometheus"
)

func init() { register("hugepages", true, hugepagesCollector{}) }

var (
	hpTotalDesc    = desc("hugepages_pool_pages", "Pages in the huge page pool.", "size_bytes")
	hpFreeDesc     = desc("hugepages_free_pages", "Pages of the pool not mapped by any process.", "size_bytes")
	hpReservedDesc = desc("hugepages_reserved_pages", "Pages promised to mappings and not yet faulted in.", "size_bytes")
	hpSurplusDesc  = desc("hugepages_surplus_pages", "Pages above the pool, allocated through overcommit.", "size_bytes")
)

type hugepagesCollector struct{}

func (hugepagesCollector) Update(in *Input, ch chan<- prometheus.Metric) error {
	m := in.Facts.Memory
	for _, p := range m.HugePages {
		if p.Err != "" {
			continue
		}
		size := strconv.FormatUint(p.Bytes(), 10)
		ch <- gauge(hpTotalDesc(), float64(p.Total), size)
		ch <- gauge(hpFreeDesc(), float64(p.Free), size)
		ch <- gauge(hpReservedDesc(), float64(p.Reserved), size)
		ch <- gauge(hpSurplusDesc(), float64(p.Surplus), size)
	}
	if m.HugePagesErr != "" {
		return errors.New(m.HugePagesErr)
	}
	return nil
}
