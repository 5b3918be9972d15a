package report

import (
	"io"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/common/expfmt"

	"github.com/dbhost/dbhost/internal/check"
	"github.com/dbhost/dbhost/internal/termsafe"
)

// renderProm writes node_exporter textfile-collector format: one gauge per
// judged finding (1 fail, 0 pass) and one per finding that could not be
// judged, so an alert can tell "fixed" from "unknown".
func renderProm(w io.Writer, a *Audit, _ Options) error {
	reg := prometheus.NewPedanticRegistry()
	failed := prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "dbhost_check_failed",
		Help: "1 when the dbhost check fails for the subject, 0 when it passes.",
	}, []string{"id", "subject", "severity"})
	unknown := prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "dbhost_check_unknown",
		Help: "1 when dbhost could not judge the check for the subject.",
	}, []string{"id", "subject", "severity"})
	ts := prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "dbhost_audit_timestamp_seconds",
		Help: "When the audited facts were observed, in seconds since the epoch.",
	})
	instances := prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "dbhost_instance_info",
		Help: "Database instances dbhost found, with their engine and version.",
	}, []string{"instance", "engine", "flavor", "version"})
	reg.MustRegister(failed, unknown, ts, instances)
	for _, f := range a.Findings {
		lv := labels(f.ID, f.Subject, f.Severity.String())
		switch f.Status {
		case check.Fail:
			failed.WithLabelValues(lv...).Set(1)
		case check.Pass:
			failed.WithLabelValues(lv...).Set(0)
		case check.Unknown:
			unknown.WithLabelValues(lv...).Set(1)
		}
	}
	ts.Set(float64(a.Facts.Manifest.CollectedAt.UnixMilli()) / 1000)
	for _, in := range a.Facts.Instances {
		instances.WithLabelValues(labels(in.Name(), string(in.Engine), in.Flavor, in.Version)...).Set(1)
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

// labels escapes label values: a subject or version comes from what others
// control (a data directory name, a server's answer), and a control
// character or invalid UTF-8 in a label would reach whoever reads the
// metrics (and invalid UTF-8 makes client_golang panic).
func labels(vs ...string) []string {
	for i, v := range vs {
		vs[i] = termsafe.Escape(v)
	}
	return vs
}
