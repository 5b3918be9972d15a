package exporter_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dbhost/dbhost/internal/check"
	"github.com/dbhost/dbhost/internal/engine"
	"github.com/dbhost/dbhost/internal/exporter"
	"github.com/dbhost/dbhost/internal/facts"
	"github.com/dbhost/dbhost/internal/fixture"
	"github.com/dbhost/dbhost/internal/metrics"
)

// recordedAudit audits a recorded host and counts its calls.
func recordedAudit(t *testing.T, name string, calls *atomic.Int32) exporter.AuditFunc {
	in := &metrics.Input{Facts: fixture.Facts(t, name), Findings: fixture.Findings(t, name)}
	return func(context.Context) (*metrics.Input, error) {
		calls.Add(1)
		return in, nil
	}
}

func newExporter(t *testing.T, audit exporter.AuditFunc, timeout time.Duration) *exporter.Exporter {
	t.Helper()
	set, err := metrics.NewSet(nil)
	if err != nil {
		t.Fatal(err)
	}
	e, err := exporter.New(exporter.Config{Set: set, Audit: audit, Interval: time.Hour, Timeout: timeout, Version: "test"})
	if err != nil {
		t.Fatal(err)
	}
	return e
}

func get(t *testing.T, h http.Handler, path string) (int, string) {
	t.Helper()
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest("GET", path, nil))
	b, _ := io.ReadAll(rec.Result().Body)
	return rec.Code, string(b)
}

func TestScrapeServesTheLastAudit(t *testing.T) {
	var calls atomic.Int32
	e := newExporter(t, recordedAudit(t, "mem-swapfile", &calls), 0)
	h := e.Handler()
	if code, body := get(t, h, "/healthz"); code != 503 || !strings.Contains(body, "first audit") {
		t.Errorf("healthz before any audit: %d %q", code, body)
	}
	_, body := get(t, h, "/metrics")
	if strings.Contains(body, "dbhost_check_status") || !strings.Contains(body, `dbhost_build_info{`) {
		t.Errorf("before the first audit /metrics has findings or lacks build info:\n%s", body)
	}
	e.AuditOnce(context.Background())
	for range 5 {
		_, body = get(t, h, "/metrics")
	}
	if calls.Load() != 1 {
		t.Errorf("%d audits for one AuditOnce and five scrapes: a scrape must not audit", calls.Load())
	}
	for _, want := range []string{
		`dbhost_check_status{check="mem.swappiness",severity="warning",subject="host"} 1`,
		`dbhost_sysctl{name="vm.swappiness"} 60`,
		`dbhost_collector_success{collector="checks"} 1`,
		"dbhost_audit_last_success_timestamp_seconds ",
		"process_resident_memory_bytes ",
	} {
		if !strings.Contains(body, want) {
			t.Errorf("/metrics lacks %q", want)
		}
	}
	if code, body := get(t, h, "/healthz"); code != 200 || body != "ok\n" {
		t.Errorf("healthz after an audit: %d %q", code, body)
	}
	if code, body := get(t, h, "/"); code != 200 || !strings.Contains(body, "failing") || !strings.Contains(body, "postgres:5432") {
		t.Errorf("index: %d\n%s", code, body)
	}
	if code, _ := get(t, h, "/nothing"); code != 404 {
		t.Errorf("unknown path: %d", code)
	}
}

// A failed audit keeps the last good metrics (and their success time,
// which the stale alert watches).
func TestFailedAuditKeepsLastGood(t *testing.T) {
	var calls atomic.Int32
	good := recordedAudit(t, "mem-swapfile", &calls)
	fail := atomic.Bool{}
	e := newExporter(t, func(ctx context.Context) (*metrics.Input, error) {
		if fail.Load() {
			return nil, errors.New("boom")
		}
		return good(ctx)
	}, 0)
	e.AuditOnce(context.Background())
	_, before := get(t, e.Handler(), "/metrics")
	fail.Store(true)
	e.AuditOnce(context.Background())
	_, after := get(t, e.Handler(), "/metrics")
	ts := func(s string) string {
		for _, l := range strings.Split(s, "\n") {
			if strings.HasPrefix(l, "dbhost_audit_last_success_timestamp_seconds ") {
				return l
			}
		}
		return ""
	}
	if ts(before) == "" || ts(before) != ts(after) || !strings.Contains(after, `check="mem.swappiness"`) {
		t.Errorf("after a failed audit: success %q -> %q", ts(before), ts(after))
	}
	if _, page := get(t, e.Handler(), "/"); !strings.Contains(page, "failed: boom") {
		t.Error("the page does not say the last attempt failed")
	}
}

// An audit that hangs past its deadline, ignoring its context (a read
// blocked in the kernel), is abandoned; the next attempt does not start a
// second one beside it.
func TestHungAuditIsAbandoned(t *testing.T) {
	release := make(chan struct{})
	var started atomic.Int32
	e := newExporter(t, func(context.Context) (*metrics.Input, error) {
		started.Add(1)
		<-release
		return nil, errors.New("released")
	}, 200*time.Millisecond)
	start := time.Now()
	e.AuditOnce(context.Background())
	if d := time.Since(start); d > 3*time.Second {
		t.Errorf("AuditOnce took %v with a 200ms timeout", d)
	}
	e.AuditOnce(context.Background())
	if n := started.Load(); n != 1 {
		t.Errorf("%d audits started while the first was hung", n)
	}
	if code, body := get(t, e.Handler(), "/healthz"); code != 503 || !strings.Contains(body, "no audit has completed") {
		t.Errorf("healthz with a hung audit: %d %q", code, body)
	}
	close(release)
}

func TestRunStopsWithContext(t *testing.T) {
	var calls atomic.Int32
	e := newExporter(t, recordedAudit(t, "baseline", &calls), 0)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { e.Run(ctx); close(done) }()
	<-e.Ready()
	cancel()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("Run did not return after its context ended")
	}
}

// The page, like the metrics, names trusted instances only: an untrusted
// one (any user can start one, named as they like) is counted.
func TestPageCountsUntrusted(t *testing.T) {
	base := fixture.Facts(t, "baseline")
	f := base.WithInstances(append(slices.Clone(base.Instances), &facts.Instance{Instance: &engine.Instance{
		Engine: engine.Postgres, PID: 1 << 22, Port: 45678, DataDir: "/tmp/look-alike",
		Trust: engine.Trust{Basis: engine.TrustNone, Why: "runs as nobody"},
	}}))
	f.NotDescribed = map[engine.Engine]int{engine.Postgres: 41}
	fs := []check.Finding{{ID: "limits.nofile", Subject: "postgres:45678", Severity: check.Warning, Status: check.Fail, Untrusted: true}}
	e := newExporter(t, func(context.Context) (*metrics.Input, error) {
		return &metrics.Input{Facts: f, Findings: fs}, nil
	}, 0)
	e.AuditOnce(context.Background())
	_, page := get(t, e.Handler(), "/")
	if strings.Contains(page, "45678") || strings.Contains(page, "look-alike") {
		t.Errorf("the page names an untrusted instance:\n%s", page)
	}
	for _, want := range []string{"0 failing", "1 about untrusted instances", "42 untrusted, not named", "<code>postgres:5432</code>"} {
		if !strings.Contains(page, want) {
			t.Errorf("the page lacks %q:\n%s", want, page)
		}
	}
	_, body := get(t, e.Handler(), "/metrics")
	for _, want := range []string{
		`dbhost_untrusted_instances{engine="postgres"} 42`,
		`dbhost_untrusted_instances_not_described{engine="postgres"} 41`,
		`dbhost_untrusted_findings{severity="warning",status="fail"} 1`,
	} {
		if !strings.Contains(body, want) {
			t.Errorf("/metrics lacks %q", want)
		}
	}
	if strings.Contains(body, "45678") {
		t.Error("/metrics names an untrusted instance")
	}
}

// The page counts a waived failure apart from the live ones, as the audit
// does.
func TestPageCountsWaived(t *testing.T) {
	f := fixture.Facts(t, "baseline")
	fs := []check.Finding{
		{ID: "mem.swappiness", Subject: "host", Severity: check.Warning, Status: check.Fail, Waiver: &check.Waiver{Reason: "batch host"}},
		{ID: "mem.thp.enabled", Subject: "host", Severity: check.Warning, Status: check.Fail},
		{ID: "mem.dirty", Subject: "host", Severity: check.Warning, Status: check.Pass},
	}
	e := newExporter(t, func(context.Context) (*metrics.Input, error) {
		return &metrics.Input{Facts: f, Findings: fs}, nil
	}, 0)
	e.AuditOnce(context.Background())
	_, page := get(t, e.Handler(), "/")
	if !strings.Contains(page, "1 failing</span>, 1 waived, ") {
		t.Errorf("the page does not count 1 failing and 1 waived:\n%s", page)
	}
}
