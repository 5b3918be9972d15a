// Package exporter is dbhost serve: it audits the host in the background on
// an interval and serves the last result as Prometheus metrics. A scrape
// only encodes what the last audit found: it never reads the host or opens
// a database connection, so its cost does not depend on the host.
package exporter

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/dbhost/dbhost/internal/check"
	"github.com/dbhost/dbhost/internal/metrics"
)

// AuditFunc gathers the host's facts and judges them. It must honour ctx:
// database reads are bounded by their own timeouts, the whole audit by
// ctx's deadline.
type AuditFunc func(ctx context.Context) (*metrics.Input, error)

// Config is what an exporter runs.
type Config struct {
	Set   *metrics.Set
	Audit AuditFunc
	// Interval between the starts of two audits; Jitter (a fraction of
	// it) spreads a fleet's audits so that they do not start together.
	Interval time.Duration
	Jitter   float64
	// Timeout bounds one audit; an audit that overruns is abandoned and
	// counts as failed, and the last good result is still served.
	Timeout time.Duration
	Version string
	Logger  *slog.Logger
	// Withhold, when set, names the checks whose findings get no series
	// (metrics.Withhold): serve's security verdicts on an open listener.
	Withhold func(id string) bool
}

// Exporter holds the last audit's metrics.
type Exporter struct {
	cfg   Config
	last  atomic.Pointer[result]
	reg   *prometheus.Registry
	ready chan struct{} // closed after the first audit, good or bad
	// busy is set while an audit goroutine runs, also one abandoned at
	// its deadline: audits never pile up behind a hung read.
	busy atomic.Bool
}

// result is one audit's outcome, as served until the next.
type result struct {
	metrics []prometheus.Metric // of the last audit that completed
	success time.Time           // when it finished
	took    time.Duration
	summary summary
	// failed is the last attempt's error, when it failed after success.
	failed     string
	failedAt   time.Time
	attempts   int
	successful int
}

// summary is what the index page shows: like the metrics, it names only
// trusted instances and only counts the untrusted ones and their findings.
type summary struct {
	pass, fail, unknown int
	waived              int // failing, accepted by a waiver: not in fail
	instances           []string
	untrusted           int // untrusted instances, described or only counted
	untrustedFindings   int
}

// New builds an exporter; Run starts its audits.
func New(cfg Config) (*Exporter, error) {
	if cfg.Set == nil || cfg.Audit == nil {
		return nil, errors.New("exporter: a collector set and an audit are required")
	}
	if cfg.Interval <= 0 {
		return nil, fmt.Errorf("exporter: interval %v must be positive", cfg.Interval)
	}
	if cfg.Timeout <= 0 || cfg.Timeout > cfg.Interval {
		cfg.Timeout = cfg.Interval
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	e := &Exporter{cfg: cfg, reg: prometheus.NewRegistry(), ready: make(chan struct{})}
	e.last.Store(&result{})
	e.reg.MustRegister(
		cached{e},
		metrics.Static{metrics.BuildInfo(cfg.Version)},
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
	)
	return e, nil
}

// cached serves the last audit's metrics.
type cached struct{ e *Exporter }

func (cached) Describe(chan<- *prometheus.Desc) {}
func (c cached) Collect(ch chan<- prometheus.Metric) {
	metrics.Static(c.e.last.Load().metrics).Collect(ch)
}

// Run audits now and then every interval (with jitter) until ctx ends.
func (e *Exporter) Run(ctx context.Context) {
	for {
		e.AuditOnce(ctx)
		d := e.cfg.Interval
		if e.cfg.Jitter > 0 {
			d += time.Duration((rand.Float64()*2 - 1) * e.cfg.Jitter * float64(d))
		}
		t := time.NewTimer(d)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
	}
}

// AuditOnce runs one audit and keeps its metrics. An audit that fails or
// overruns its timeout leaves the last good metrics in place (their
// success timestamp then ages, which is what the stale alert watches).
func (e *Exporter) AuditOnce(ctx context.Context) {
	defer func() {
		select {
		case <-e.ready:
		default:
			close(e.ready)
		}
	}()
	start := time.Now()
	in, err := e.audit(ctx)
	took := time.Since(start)
	prev := e.last.Load()
	next := *prev
	next.attempts++
	if err != nil {
		next.failed, next.failedAt = err.Error(), time.Now()
		e.last.Store(&next)
		e.cfg.Logger.Warn("audit failed; serving the last good result", "err", err, "took", took)
		return
	}
	ms := metrics.Withhold(e.cfg.Set.Collect(in), e.cfg.Withhold)
	now := time.Now()
	ms = append(ms, metrics.AuditMeta(took, now)...)
	next.metrics, next.success, next.took, next.failed = ms, now, took, ""
	next.successful++
	next.summary = summarize(in)
	e.last.Store(&next)
	e.cfg.Logger.Debug("audit done", "took", took, "findings", len(in.Findings))
}

// audit runs the audit under the timeout. It waits for the audit to
// return; if the audit ignores its context (a read blocked in the kernel),
// it is abandoned at the deadline and the next one starts only after it.
func (e *Exporter) audit(ctx context.Context) (*metrics.Input, error) {
	if !e.busy.CompareAndSwap(false, true) {
		return nil, errors.New("the previous audit is still running (blocked past its deadline)")
	}
	ctx, cancel := context.WithTimeout(ctx, e.cfg.Timeout)
	defer cancel()
	type out struct {
		in  *metrics.Input
		err error
	}
	done := make(chan out, 1)
	go func() {
		defer e.busy.Store(false)
		defer func() {
			if r := recover(); r != nil {
				done <- out{nil, fmt.Errorf("audit panicked: %v", r)}
			}
		}()
		in, err := e.cfg.Audit(ctx)
		done <- out{in, err}
	}()
	select {
	case o := <-done:
		if o.err == nil && o.in == nil {
			o.err = errors.New("audit returned nothing")
		}
		return o.in, o.err
	case <-ctx.Done():
		// Wait a little for a clean return, then give up on it.
		select {
		case o := <-done:
			if o.err == nil {
				return o.in, nil
			}
			return nil, o.err
		case <-time.After(time.Second):
			return nil, fmt.Errorf("audit did not finish within %v", e.cfg.Timeout)
		}
	}
}

func summarize(in *metrics.Input) summary {
	var s summary
	for _, f := range in.Findings {
		switch {
		case f.Untrusted:
			s.untrustedFindings++
		case f.Status == check.Pass:
			s.pass++
		case f.Status == check.Fail && f.Waiver != nil:
			s.waived++
		case f.Status == check.Fail:
			s.fail++
		default:
			s.unknown++
		}
	}
	for _, i := range in.Facts.Instances {
		if i.Trusted() {
			s.instances = append(s.instances, i.Name())
		} else {
			s.untrusted++
		}
	}
	for _, n := range in.Facts.NotDescribed {
		s.untrusted += n
	}
	return s
}

// Ready is closed once the first audit has ended.
func (e *Exporter) Ready() <-chan struct{} { return e.ready }

// Gatherer is what /metrics serves.
func (e *Exporter) Gatherer() prometheus.Gatherer { return e.reg }
