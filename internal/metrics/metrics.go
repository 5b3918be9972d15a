// Package metrics turns one audit into Prometheus metrics. Collectors
// register by name with their default, as node_exporter's do; the exporter
// (dbhost serve) and the textfile format (audit --format prom) both build
// their metrics here, so the two never disagree. docs/metrics.md is the
// reference for every name and label.
package metrics

import (
	"fmt"
	"math"
	"runtime"
	"runtime/debug"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/dbhost/dbhost/internal/check"
	"github.com/dbhost/dbhost/internal/facts"
	"github.com/dbhost/dbhost/internal/host"
	"github.com/dbhost/dbhost/internal/termsafe"
	"github.com/dbhost/dbhost/internal/waiver"
)

const namespace = "dbhost"

// Input is one audit: the facts and the findings judged from them.
type Input struct {
	Facts    *facts.Facts
	Findings []check.Finding
	// Waivers is the waiver file's state in this audit (dbhost serve;
	// nil when the audit read no waivers).
	Waivers *waiver.Status
}

// A Collector emits one kind of metric from an audit. It returns an error
// when its source could not be read at all; a host without the thing (no
// huge page pools, no database) is not an error and emits nothing.
type Collector interface {
	Update(in *Input, ch chan<- prometheus.Metric) error
}

type entry struct {
	name      string
	defaultOn bool
	c         Collector
}

var (
	mu       sync.Mutex
	registry = map[string]entry{}
)

// register adds a collector; each collector's file calls it in init, with
// its default beside the code.
func register(name string, defaultOn bool, c Collector) {
	mu.Lock()
	defer mu.Unlock()
	if _, dup := registry[name]; dup {
		panic("metrics: collector registered twice: " + name)
	}
	registry[name] = entry{name, defaultOn, c}
}

// Info names a registered collector and its default.
type Info struct {
	Name      string
	DefaultOn bool
}

// Collectors lists the registered collectors, sorted by name.
func Collectors() []Info {
	mu.Lock()
	defer mu.Unlock()
	out := make([]Info, 0, len(registry))
	for _, e := range registry {
		out = append(out, Info{e.name, e.defaultOn})
	}
	sort.Slice(out, func(a, b int) bool { return out[a].Name < out[b].Name })
	return out
}

// Set is the collectors one exporter runs.
type Set struct {
	entries []entry
}

// NewSet picks collectors: their defaults, overridden by enabled (name ->
// on/off, from --collector.NAME / --no-collector.NAME). An unknown name is
// an error.
func NewSet(enabled map[string]bool) (*Set, error) {
	mu.Lock()
	defer mu.Unlock()
	for name := range enabled {
		if _, ok := registry[name]; !ok {
			return nil, fmt.Errorf("unknown collector %q", name)
		}
	}
	s := &Set{}
	for _, e := range registry {
		on := e.defaultOn
		if v, ok := enabled[e.name]; ok {
			on = v
		}
		if on {
			s.entries = append(s.entries, e)
		}
	}
	sort.Slice(s.entries, func(a, b int) bool { return s.entries[a].name < s.entries[b].name })
	return s, nil
}

// Names lists the collectors the set runs.
func (s *Set) Names() []string {
	out := make([]string, len(s.entries))
	for i, e := range s.entries {
		out[i] = e.name
	}
	return out
}

var (
	successDesc  = desc("collector_success", "1 when the collector's last run succeeded, 0 when it failed.", "collector")
	durationDesc = desc("collector_duration_seconds", "How long the collector's last run took.", "collector")
)

// Collect runs every collector of the set on the audit and returns their
// metrics with each collector's success and duration. A collector that
// panics fails alone.
func (s *Set) Collect(in *Input) []prometheus.Metric {
	var out []prometheus.Metric
	for _, e := range s.entries {
		ch := make(chan prometheus.Metric, 64)
		var got []prometheus.Metric
		done := make(chan struct{})
		go func() {
			for m := range ch {
				got = append(got, m)
			}
			close(done)
		}()
		start := time.Now()
		err := update(e.c, in, ch)
		close(ch)
		<-done
		ok := 1.0
		if err != nil {
			ok = 0
		}
		out = append(out, got...)
		out = append(out,
			prometheus.MustNewConstMetric(successDesc(), prometheus.GaugeValue, ok, e.name),
			prometheus.MustNewConstMetric(durationDesc(), prometheus.GaugeValue, time.Since(start).Seconds(), e.name))
	}
	return out
}

func update(c Collector, in *Input, ch chan<- prometheus.Metric) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("collector panicked: %v", r)
		}
	}()
	return c.Update(in, ch)
}

var buildInfoDesc = desc("build_info", "1, labelled with the dbhost version, the Go version and the source revision it was built from.", "version", "goversion", "revision")

// BuildInfo is dbhost_build_info for the given version.
func BuildInfo(version string) prometheus.Metric {
	rev := "unknown"
	if bi, ok := debug.ReadBuildInfo(); ok {
		for _, s := range bi.Settings {
			if s.Key == "vcs.revision" {
				rev = s.Value
			}
		}
	}
	return prometheus.MustNewConstMetric(buildInfoDesc(), prometheus.GaugeValue, 1, label(version), runtime.Version(), rev)
}

var (
	auditDurationDesc = desc("audit_duration_seconds", "How long the last audit took: gathering the facts and judging them.")
	auditSuccessDesc  = desc("audit_last_success_timestamp_seconds", "When the last audit that completed finished, in seconds since the epoch.")
)

// AuditMeta is dbhost_audit_duration_seconds and
// dbhost_audit_last_success_timestamp_seconds.
func AuditMeta(duration time.Duration, lastSuccess time.Time) []prometheus.Metric {
	return []prometheus.Metric{
		prometheus.MustNewConstMetric(auditDurationDesc(), prometheus.GaugeValue, duration.Seconds()),
		prometheus.MustNewConstMetric(auditSuccessDesc(), prometheus.GaugeValue, float64(lastSuccess.UnixMilli())/1000),
	}
}

// desc is a metric's description, made on first use: the package's
// descriptions are many, and only serve reads them.
func desc(name, help string, labels ...string) func() *prometheus.Desc {
	return (&lazyDesc{name: name, help: help, labels: labels}).get
}

// lazyDesc makes a description once. (Not sync.OnceValue, which would put
// closures of its own at each call site, in the binary.)
type lazyDesc struct {
	name, help string
	labels     []string
	once       sync.Once
	d          *prometheus.Desc
}

func (l *lazyDesc) get() *prometheus.Desc {
	l.once.Do(func() { l.d = prometheus.NewDesc(prometheus.BuildFQName(namespace, "", l.name), l.help, l.labels, nil) })
	return l.d
}

// label escapes a label value that others control (a data directory
// name, a server's version string): a control character or invalid UTF-8
// must not reach whoever reads the metrics, and invalid UTF-8 makes
// client_golang refuse the whole scrape.
// A line break is escaped too: a label value is one line.
func label(v string) string { return lineBreaks.Replace(termsafe.Escape(v)) }

var lineBreaks = strings.NewReplacer("\n", `\n`, "\t", `\t`)

// gauge is a const gauge whose label values are escaped.
func gauge(d *prometheus.Desc, v float64, labels ...string) prometheus.Metric {
	for i := range labels {
		labels[i] = label(labels[i])
	}
	return prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, labels...)
}

// stateSet lists the options of a kernel choice line ("always [madvise]
// never") and the selected one (facts.Active: the bracketed word, or the
// line's only word).
func stateSet(r host.Reading) (opts []string, selected string) {
	for _, f := range strings.Fields(r.Value) {
		opts = append(opts, strings.Trim(f, "[]"))
	}
	return opts, facts.Active(r)
}

// limitValue maps an rlimit to a float: "unlimited" is +Inf.
func limitValue(v uint64) float64 {
	if v == math.MaxUint64 {
		return math.Inf(1)
	}
	return float64(v)
}

// Static is a collector over a fixed list of metrics: an audit's result,
// served until the next one. It describes nothing, so a registry takes it
// as unchecked and checks each scrape's series instead.
type Static []prometheus.Metric

// Describe implements prometheus.Collector.
func (Static) Describe(chan<- *prometheus.Desc) {}

// Collect implements prometheus.Collector.
func (s Static) Collect(ch chan<- prometheus.Metric) {
	for _, m := range s {
		ch <- m
	}
}
