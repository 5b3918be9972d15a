package report

import (
	"io"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/common/expfmt"

	"github.com/dbhost/dbhost/internal/metrics"
)

// renderProm writes node_exporter textfile-collector format: the metrics
// dbhost serve exports (docs/metrics.md), from the default collectors.
func renderProm(w io.Writer, a *Audit, o Options) error {
	set, err := metrics.NewSet(nil)
	if err != nil {
		return err
	}
	ms := set.Collect(&metrics.Input{Facts: a.Facts, Findings: a.Findings})
	ms = append(ms, metrics.BuildInfo(o.Version))
	ms = append(ms, metrics.AuditMeta(a.Duration, time.Now())...)
	return WriteMetrics(w, ms)
}

// WriteMetrics writes metrics in the Prometheus text format, sorted, after
// the registry's consistency checks (a duplicate series is an error, not a
// file Prometheus would reject later).
func WriteMetrics(w io.Writer, ms []prometheus.Metric) error {
	reg := prometheus.NewPedanticRegistry()
	if err := reg.Register(metrics.Static(ms)); err != nil {
		return err
	}
	mfs, err := reg.Gather()
	if err != nil {
		return err
	}
	enc := expfmt.NewEncoder(w, expfmt.NewFormat(expfmt.TypeTextPlain))
	for _, mf := range mfs {
		if err := enc.Encode(mf); err != nil {
			return err
		}
	}
	return nil
}
