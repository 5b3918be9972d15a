package metrics

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/dbhost/dbhost/internal/check"
	"github.com/dbhost/dbhost/internal/waiver"
)

func init() { register("checks", true, checksCollector{}) }

var (
	statusDesc = desc("check_status",
		"A finding's status: 0 pass, 1 fail, 2 unknown (dbhost could not judge it). Compare with ==, never sum. Findings about the host and trusted servers only; those about untrusted instances are counted in dbhost_untrusted_findings.",
		"check", "subject", "severity")
	waivedDesc = desc("check_waived",
		"1 for a finding accepted on this host by a waiver (its dbhost_check_status is exported unchanged); no series for the others. Alerts skip failures with this marker.",
		"check", "subject", "severity")
	waiverExpiryDesc = desc("check_waiver_expiry_timestamp_seconds",
		"When a finding's waiver expires (Unix time); no series for a waiver without an expiry. After it, the audit stops marking the finding waived.",
		"check", "subject", "severity")
	findingsDesc = desc("findings",
		"Findings of the last audit about the host and its trusted database servers, by status and severity. Findings about untrusted instances are not included: dbhost_untrusted_findings counts them.",
		"status", "severity")
	waiversValidDesc = desc("waivers_valid",
		"1 when the waiver file loaded as it is now, 0 when it does not (the last file that loaded still applies; the log says why). No series when serve reads no waiver file.")
	waiverEntriesDesc = desc("waiver_entries",
		"Waiver file entries for this host that do not accept a failure in the last audit: expired (the finding fails again), stale (it names no finding), unneeded (its findings pass).",
		"state")
	untrustedFindingsDesc = desc("untrusted_findings",
		"Findings of the last audit about untrusted database instances (advice, never a fix), by status and severity; not included in dbhost_findings.",
		"status", "severity")
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

// checksCollector: one series per finding about the host or a trusted
// server, and counts by status and severity (every combination, so a count
// that drops to 0 stays a series). Findings about untrusted instances are
// only counted, apart: their subject is a name the instance chose, and any
// local user can start as many as they like.
type checksCollector struct{}

func (checksCollector) Update(in *Input, ch chan<- prometheus.Metric) error {
	type key struct{ status, sev string }
	zero := func() map[key]int {
		m := map[key]int{}
		for _, s := range []check.Status{check.Pass, check.Fail, check.Unknown} {
			for _, sev := range []check.Severity{check.Info, check.Warning, check.Critical} {
				m[key{string(s), sev.String()}] = 0
			}
		}
		return m
	}
	counts, untrusted := zero(), zero()
	// Run marks the findings about untrusted instances; the subjects are
	// matched too, for findings judged by hand or read from elsewhere.
	subjects := map[string]bool{}
	unnamed := map[string]bool{} // trusted, counted, no series: see labelled
	for _, i := range in.Facts.Instances {
		switch {
		case !i.Trusted():
			subjects[i.Name()] = true
		case !i.StableName():
			unnamed[i.Name()] = true
		}
	}
	seen := map[[2]string]bool{}
	for _, f := range in.Findings {
		k := key{string(f.Status), f.Severity.String()}
		if f.Untrusted || subjects[f.Subject] {
			untrusted[k]++
			continue
		}
		// One check judges one subject once; should two findings ever
		// share both, the first (check.Sort puts failures first) wins,
		// as a duplicate series would fail the whole scrape.
		id := [2]string{f.ID, label(f.Subject)}
		if seen[id] {
			continue
		}
		seen[id] = true
		counts[k]++
		if unnamed[f.Subject] {
			continue
		}
		ch <- gauge(statusDesc(), StatusValue(f.Status), f.ID, f.Subject, f.Severity.String())
		if w := f.Waiver; w != nil {
			ch <- gauge(waivedDesc(), 1, f.ID, f.Subject, f.Severity.String())
			if !w.Expires.IsZero() {
				ch <- gauge(waiverExpiryDesc(), float64(w.Expires.Unix()), f.ID, f.Subject, f.Severity.String())
			}
		}
	}
	for k, n := range counts {
		ch <- gauge(findingsDesc(), float64(n), k.status, k.sev)
	}
	for k, n := range untrusted {
		ch <- gauge(untrustedFindingsDesc(), float64(n), k.status, k.sev)
	}
	waiverState(in.Waivers, ch)
	return nil
}

// waiverState exports the waiver file's health: a file that stopped
// loading, or entries that expired or match nothing, want an operator.
func waiverState(st *waiver.Status, ch chan<- prometheus.Metric) {
	if st == nil {
		return
	}
	valid := 0.0
	if st.Valid {
		valid = 1
	}
	ch <- gauge(waiversValidDesc(), valid)
	var o waiver.Outcome
	if st.Outcome != nil {
		o = *st.Outcome
	}
	for _, s := range []struct {
		state string
		n     int
	}{{"expired", len(o.Expired)}, {"stale", len(o.Stale)}, {"unneeded", len(o.Unneeded)}} {
		ch <- gauge(waiverEntriesDesc(), float64(s.n), s.state)
	}
}
