package bench

import (
	"context"
	"io"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/dbhost/dbhost/internal/exporter"
	"github.com/dbhost/dbhost/internal/fixture"
	"github.com/dbhost/dbhost/internal/metrics"
)

// BenchmarkScrape is one /metrics request to dbhost serve after an audit
// of a recorded host: encoding the cached result plus the Go and process
// collectors. bench/compare-scrape.sh measures it over HTTP beside
// node_exporter.
func BenchmarkScrape(b *testing.B) {
	in := &metrics.Input{Facts: fixture.Facts(b, "baseline"), Findings: fixture.Findings(b, "baseline")}
	set, err := metrics.NewSet(nil)
	if err != nil {
		b.Fatal(err)
	}
	e, err := exporter.New(exporter.Config{Set: set, Interval: time.Hour, Version: "bench",
		Audit: func(context.Context) (*metrics.Input, error) { return in, nil }})
	if err != nil {
		b.Fatal(err)
	}
	e.AuditOnce(context.Background())
	h := e.Handler()
	req := httptest.NewRequest("GET", "/metrics", nil)
	b.ReportAllocs()
	for b.Loop() {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		io.Copy(io.Discard, rec.Body)
	}
}

// BenchmarkMetricsFromAudit turns an audit's findings and facts into
// metrics: what serve adds to each background audit.
func BenchmarkMetricsFromAudit(b *testing.B) {
	in := &metrics.Input{Facts: fixture.Facts(b, "baseline"), Findings: fixture.Findings(b, "baseline")}
	set, err := metrics.NewSet(nil)
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		set.Collect(in)
	}
}
