package metrics_test

import (
	"bytes"
	"math"
	"slices"
	"strconv"
	"strings"
	"testing"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/dbhost/dbhost/internal/check"
	"github.com/dbhost/dbhost/internal/engine"
	"github.com/dbhost/dbhost/internal/facts"
	"github.com/dbhost/dbhost/internal/fixture"
	"github.com/dbhost/dbhost/internal/host"
	"github.com/dbhost/dbhost/internal/metrics"
	"github.com/dbhost/dbhost/internal/report"
)

// families runs the collectors (all defaults, minus off) on a recorded
// host and parses what a scrape would read.
func families(t *testing.T, f *facts.Facts, fs []check.Finding, toggles map[string]bool) map[string]*dto.MetricFamily {
	t.Helper()
	set, err := metrics.NewSet(toggles)
	if err != nil {
		t.Fatal(err)
	}
	p := expfmt.NewTextParser(model.UTF8Validation)
	mfs, err := p.TextToMetricFamilies(strings.NewReader(expose(t, set, f, fs)))
	if err != nil {
		t.Fatalf("parse: %v", err)
	}
	return mfs
}

// expose is what a scrape reads from the set's collectors.
func expose(t *testing.T, set *metrics.Set, f *facts.Facts, fs []check.Finding) string {
	t.Helper()
	var buf bytes.Buffer
	if err := report.WriteMetrics(&buf, set.Collect(&metrics.Input{Facts: f, Findings: fs})); err != nil {
		t.Fatal(err)
	}
	return buf.String()
}

func recorded(t *testing.T, name string, toggles map[string]bool) map[string]*dto.MetricFamily {
	return families(t, fixture.Facts(t, name), fixture.Findings(t, name), toggles)
}

// value finds the series with exactly these labels.
func value(mfs map[string]*dto.MetricFamily, name string, labels ...string) (float64, bool) {
	for _, m := range mfs[name].GetMetric() {
		got := map[string]string{}
		for _, l := range m.Label {
			got[l.GetName()] = l.GetValue()
		}
		match := len(got) == len(labels)/2
		for i := 0; i+1 < len(labels); i += 2 {
			match = match && got[labels[i]] == labels[i+1]
		}
		if match {
			return m.GetGauge().GetValue(), true
		}
	}
	return 0, false
}

func TestSysctlFollowsTheHost(t *testing.T) {
	for _, c := range []struct {
		host string
		want float64
	}{{"mem-swappiness-1", 1}, {"mem-swappiness-0", 0}, {"baseline", 60}} {
		mfs := recorded(t, c.host, nil)
		if v, ok := value(mfs, "dbhost_sysctl", "name", "vm.swappiness"); !ok || v != c.want {
			t.Errorf("%s: vm.swappiness %v (present %v), want %v", c.host, v, ok, c.want)
		}
		// Multi-valued parameters (tcp_rmem) are not numbers: not exported.
		if _, ok := value(mfs, "dbhost_sysctl", "name", "net.ipv4.tcp_rmem"); ok {
			t.Errorf("%s: a multi-valued parameter was exported", c.host)
		}
	}
}

func TestTHPStateSet(t *testing.T) {
	for host, want := range map[string]string{"mem-thp-always": "always", "mem-thp-never": "never", "baseline": "madvise"} {
		mfs := recorded(t, host, nil)
		ones := 0
		for _, opt := range []string{"always", "madvise", "never"} {
			v, ok := value(mfs, "dbhost_thp", "setting", "enabled", "value", opt)
			if !ok {
				t.Errorf("%s: no series for enabled=%s", host, opt)
			}
			if v == 1 {
				ones++
				if opt != want {
					t.Errorf("%s: enabled=%s selected, want %s", host, opt, want)
				}
			}
		}
		if ones != 1 {
			t.Errorf("%s: %d selected values, want 1", host, ones)
		}
	}
}

func TestStatusPerFinding(t *testing.T) {
	fs := fixture.Findings(t, "mem-swappiness-1")
	mfs := families(t, fixture.Facts(t, "mem-swappiness-1"), fs, nil)
	seen := 0
	for _, f := range fs {
		v, ok := value(mfs, "dbhost_check_status", "check", f.ID, "subject", f.Subject, "severity", f.Severity.String())
		if !ok || v != metrics.StatusValue(f.Status) {
			t.Errorf("%s %s: %v (present %v), want %v", f.ID, f.Subject, v, ok, f.Status)
		}
		seen++
	}
	if seen == 0 || len(mfs["dbhost_check_status"].GetMetric()) != seen {
		t.Errorf("%d series for %d findings", len(mfs["dbhost_check_status"].GetMetric()), seen)
	}
	if v, _ := value(mfs, "dbhost_check_status", "check", "mem.swappiness", "subject", "host", "severity", "warning"); v != 0 {
		t.Errorf("mem.swappiness at 1 reads %v, want 0 (pass)", v)
	}
	mfs = recorded(t, "mem-swapfile", nil)
	if v, ok := value(mfs, "dbhost_check_status", "check", "mem.swappiness", "subject", "host", "severity", "warning"); !ok || v != 1 {
		t.Errorf("mem.swappiness at 60 reads %v (present %v), want 1 (fail)", v, ok)
	}
}

func TestLimitsAndBlock(t *testing.T) {
	mfs := recorded(t, "limits-nofile-1024", nil)
	f := fixture.Facts(t, "limits-nofile-1024")
	n := 0
	for _, in := range f.Instances {
		l, ok := in.Limits[host.LimitNofile]
		if !ok {
			continue
		}
		n++
		want := float64(l.Soft)
		if l.Soft == host.Unlimited {
			want = math.Inf(1)
		}
		if v, ok := value(mfs, "dbhost_db_limit", "subject", in.Name(), "resource", "nofile", "type", "soft"); !ok || v != want {
			t.Errorf("%s nofile soft %v (present %v), want %v", in.Name(), v, ok, want)
		}
	}
	if n == 0 {
		t.Fatal("the recorded host has no instance with limits")
	}
	mfs = recorded(t, "storage-sched-bfq", nil)
	sel := ""
	for _, m := range mfs["dbhost_block_scheduler"].GetMetric() {
		if m.GetGauge().GetValue() == 1 {
			sel += m.Label[1].GetValue()
		}
	}
	if sel != "bfq" {
		t.Errorf("active scheduler %q, want bfq", sel)
	}
	if v, ok := value(mfs, "dbhost_block_read_ahead_bytes", "device", "vda"); !ok || v <= 0 || math.Mod(v, 1024) != 0 {
		t.Errorf("read-ahead of vda: %v (present %v)", v, ok)
	}
}

func TestToggles(t *testing.T) {
	mfs := recorded(t, "baseline", map[string]bool{"sysctl": false})
	if _, ok := mfs["dbhost_sysctl"]; ok {
		t.Error("--no-collector.sysctl still exports dbhost_sysctl")
	}
	if _, ok := value(mfs, "dbhost_collector_success", "collector", "sysctl"); ok {
		t.Error("a disabled collector reports success")
	}
	if v, ok := value(mfs, "dbhost_collector_success", "collector", "thp"); !ok || v != 1 {
		t.Errorf("thp success %v (present %v)", v, ok)
	}
	if _, err := metrics.NewSet(map[string]bool{"sysctls": true}); err == nil || !strings.Contains(err.Error(), `"sysctls"`) {
		t.Errorf("unknown collector: %v", err)
	}
	names := map[string]bool{}
	for _, c := range metrics.Collectors() {
		names[c.Name] = c.DefaultOn
	}
	for _, n := range []string{"checks", "instances", "sysctl", "thp", "hugepages", "block", "limits"} {
		if !names[n] {
			t.Errorf("collector %s not registered on by default", n)
		}
	}
}

// A collector whose source is unreadable says so in its success gauge.
func TestCollectorFailure(t *testing.T) {
	base := fixture.Facts(t, "baseline") // shared by the tests: edit a copy
	f := base.WithInstances(base.Instances)
	f.Memory.HugePagesErr = "/sys/kernel/mm/hugepages: permission denied (run dbhost as root)"
	mfs := families(t, f, nil, nil)
	if v, ok := value(mfs, "dbhost_collector_success", "collector", "hugepages"); !ok || v != 0 {
		t.Errorf("hugepages success %v (present %v), want 0", v, ok)
	}
}

// Label values that others control never break a scrape or a terminal.
func TestHostileLabels(t *testing.T) {
	base := fixture.Facts(t, "baseline") // shared by the tests: edit a copy
	f := base.WithInstances(slices.Clone(base.Instances))
	fi := *f.Instances[0]
	ei := *fi.Instance
	fi.Instance = &ei
	f.Instances[0] = &fi
	in := f.Instances[0]
	in.Version = "15\x1b[31m\xff\n"
	in.DataDir = "/data/\x1b]0;x\x07"
	fs := []check.Finding{{ID: "mem.swappiness", Subject: "postgres:\x00\xfe", Severity: check.Warning, Status: check.Fail}}
	mfs := families(t, f, fs, nil)
	for _, mf := range mfs {
		for _, m := range mf.Metric {
			for _, l := range m.Label {
				if strings.ContainsAny(l.GetValue(), "\x00\x07\x1b\n") || !strconv.CanBackquote(strings.ReplaceAll(l.GetValue(), "`", "")) {
					t.Errorf("%s: label %s=%q", mf.GetName(), l.GetName(), l.GetValue())
				}
			}
		}
	}
}

// The series a host exports are bounded as docs/metrics.md says: at most
// 100 for the host, the fixed aggregates of untrusted instances (two per
// engine, nine finding counts), 50 per trusted database instance and 10
// per database device. Every recorded host is checked; untrusted instances
// add no series (TestUntrustedSeriesBounded).
func TestCardinalityBound(t *testing.T) {
	hosts := fixture.Names(t)
	if len(hosts) < 100 {
		t.Fatalf("recorded hosts: %d", len(hosts))
	}
	aggregates := 2*len(engine.Engines) + 9
	most := 0
	for _, name := range hosts {
		f := fixture.Facts(t, name)
		mfs := families(t, f, fixture.Findings(t, name), nil)
		n := 0
		for _, mf := range mfs {
			n += len(mf.Metric)
		}
		devices := map[string]bool{}
		for _, m := range mfs["dbhost_block_read_ahead_bytes"].GetMetric() {
			devices[m.Label[0].GetValue()] = true
		}
		trusted, _ := f.SplitTrust()
		if bound := 100 + aggregates + 50*len(trusted) + 10*len(devices); n > bound {
			t.Errorf("%s: %d series, over the documented bound %d", name, n, bound)
		}
		most = max(most, n)
	}
	t.Logf("at most %d series on %d recorded hosts", most, len(hosts))
}
