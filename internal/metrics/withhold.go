package metrics

import (
	"slices"
	"strings"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/dbhost/dbhost/internal/check"
)

// securityDomains are the parts of a check ID that make it a security
// verdict: its domain (security.*), a hardening group (pg.hardening.*) or
// authentication (redis.auth). Such a finding tells whoever reads it where
// the host is open: "mysql.hardening.empty_passwords fails on mysql:3306".
var securityDomains = []string{"security", "hardening", "auth"}

// SecurityCheck reports whether a check ID is a security verdict: one of
// its dot-separated parts is a security domain.
func SecurityCheck(id string) bool {
	for _, part := range strings.Split(id, ".") {
		if slices.Contains(securityDomains, part) {
			return true
		}
	}
	return false
}

// SecurityChecks lists the catalog's security verdicts, sorted.
func SecurityChecks() []string {
	var out []string
	for _, c := range check.All() {
		if SecurityCheck(c.ID) {
			out = append(out, c.ID)
		}
	}
	return out
}

var withheldDesc = desc("security_findings_withheld",
	"Findings of security checks whose series this exporter does not serve (0: it serves them all): it listens beyond loopback without TLS or basic authentication (--web.config.file) and was not told --web.expose-security-findings. dbhost_findings still counts them.")

// Withhold drops the per-finding series (status, waiver marker and expiry)
// of the checks for which withhold is true and appends
// dbhost_security_findings_withheld, the number of findings dropped. A nil
// withhold drops nothing (the gauge is then 0).
func Withhold(ms []prometheus.Metric, withhold func(id string) bool) []prometheus.Metric {
	out := ms[:0:0]
	n := 0
	for _, m := range ms {
		d := m.Desc()
		if withhold != nil && (d == statusDesc() || d == waivedDesc() || d == waiverExpiryDesc()) {
			var pb dto.Metric
			if err := m.Write(&pb); err == nil && withhold(labelValue(&pb, "check")) {
				if d == statusDesc() {
					n++
				}
				continue
			}
		}
		out = append(out, m)
	}
	return append(out, prometheus.MustNewConstMetric(withheldDesc(), prometheus.GaugeValue, float64(n)))
}

func labelValue(m *dto.Metric, name string) string {
	for _, l := range m.GetLabel() {
		if l.GetName() == name {
			return l.GetValue()
		}
	}
	return ""
}
