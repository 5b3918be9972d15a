package metrics

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/dbhost/dbhost/internal/check"
)

func init() { register("checks", true, checksCollector{}) }

var (
	statusDesc = desc("check_status",
		"A finding's status: 0 pass, 1 fail, 2 unknown (dbhost could not judge it). Compare with ==, never sum.",
		"check", "subject", "severity")
	findingsDesc = desc("findings", "Findings of the last audit by status and severity.", "status", "severity")
)

// StatusValue maps a finding's status to dbhost_check_status's value.
func StatusValue(s check.Status) float64 {
	switch s {
	case check.Pass:
		return 0
	case check.Fail:
		return 1
	}
	return 2
}

// checksCollector: one series per finding, and counts by status and
// severity (every combination, so a count that drops to 0 stays a series).
type checksCollector struct{}

func (checksCollector) Update(in *Input, ch chan<- prometheus.Metric) error {
	type key struct{ status, sev string }
	counts := map[key]int{}
	for _, s := range []check.Status{check.Pass, check.Fail, check.Unknown} {
		for _, sev := range []check.Severity{check.Info, check.Warning, check.Critical} {
			counts[key{string(s), sev.String()}] = 0
		}
	}
	seen := map[[2]string]bool{}
	for _, f := range in.Findings {
		// One check judges one subject once; should two findings ever
		// share both, the first (check.Sort puts failures first) wins,
		// as a duplicate series would fail the whole scrape.
		id := [2]string{f.ID, label(f.Subject)}
		if seen[id] {
			continue
		}
		seen[id] = true
		ch <- gauge(statusDesc, StatusValue(f.Status), f.ID, f.Subject, f.Severity.String())
		counts[key{string(f.Status), f.Severity.String()}]++
	}
	for k, n := range counts {
		ch <- gauge(findingsDesc, float64(n), k.status, k.sev)
	}
	return nil
}
