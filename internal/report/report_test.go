package report_test

import (
	"bytes"
	"encoding/json"
	"os/exec"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil/promlint"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/dbhost/dbhost/internal/check"
	"github.com/dbhost/dbhost/internal/fixture"
	"github.com/dbhost/dbhost/internal/report"
	"github.com/dbhost/dbhost/internal/testdb"
)

func audit(t *testing.T, name string) *report.Audit {
	t.Helper()
	fs := fixture.Findings(t, name)
	return &report.Audit{Facts: fixture.Facts(t, name), Findings: fs, Checks: len(check.All())}
}

func render(t *testing.T, format string, a *report.Audit, o report.Options) string {
	t.Helper()
	var buf bytes.Buffer
	if err := report.Render(&buf, format, a, o); err != nil {
		t.Fatal(err)
	}
	return buf.String()
}

func TestPromIsValidTextfile(t *testing.T) {
	a := audit(t, "baseline")
	out := render(t, "prom", a, report.Options{})
	problems, err := promlint.New(strings.NewReader(out)).Lint()
	if err != nil {
		t.Fatalf("promlint: %v\n%s", err, out)
	}
	for _, p := range problems {
		t.Errorf("promlint: %s: %s", p.Metric, p.Text)
	}
	p := expfmt.NewTextParser(model.UTF8Validation)
	mfs, err := p.TextToMetricFamilies(strings.NewReader(out))
	if err != nil {
		t.Fatalf("parse: %v", err)
	}
	status := mfs["dbhost_check_status"]
	if status == nil {
		t.Fatalf("no dbhost_check_status in:\n%s", out)
	}
	// One gauge per finding: 0 pass, 1 fail, 2 unknown.
	want := map[string]float64{}
	for _, f := range a.Findings {
		want[f.ID+"|"+f.Subject] = map[check.Status]float64{check.Pass: 0, check.Fail: 1, check.Unknown: 2}[f.Status]
	}
	if len(status.Metric) != len(want) || len(want) == 0 {
		t.Errorf("%d gauges, want %d", len(status.Metric), len(want))
	}
	for _, m := range status.Metric {
		labels := labelMap(m)
		k := labels["check"] + "|" + labels["subject"]
		if v, ok := want[k]; !ok || v != m.GetGauge().GetValue() || labels["severity"] == "" {
			t.Errorf("gauge %v = %v, want %v (present %v)", labels, m.GetGauge().GetValue(), v, ok)
		}
	}
	// The counts add up to the findings.
	total := 0.0
	for _, m := range mfs["dbhost_findings"].GetMetric() {
		total += m.GetGauge().GetValue()
	}
	if int(total) != len(a.Findings) {
		t.Errorf("dbhost_findings adds up to %v, want %d", total, len(a.Findings))
	}
	// Prometheus owns instance and job: no series may carry them.
	for name, mf := range mfs {
		for _, m := range mf.Metric {
			if l := labelMap(m); l["instance"] != "" || l["job"] != "" {
				t.Errorf("%s has a label Prometheus owns: %v", name, l)
			}
		}
	}
	// The real promtool (make test installs it; without it the test can
	// only fail under DBHOST_INTEGRATION=require).
	promtool, err := exec.LookPath("promtool")
	testdb.Need(t, "promtool (Debian package prometheus)", err == nil)
	{
		cmd := exec.Command(promtool, "check", "metrics")
		cmd.Stdin = strings.NewReader(out)
		if b, err := cmd.CombinedOutput(); err != nil {
			t.Errorf("promtool check metrics: %v\n%s", err, b)
		}
	}
}

func TestJSONSchemaFields(t *testing.T) {
	a := audit(t, "mem-swapfile")
	var doc map[string]any
	if err := json.Unmarshal([]byte(render(t, "json", a, report.Options{})), &doc); err != nil {
		t.Fatal(err)
	}
	if doc["schema"] != report.JSONSchema {
		t.Errorf("schema %v", doc["schema"])
	}
	findings, ok := doc["findings"].([]any)
	if !ok || len(findings) == 0 {
		t.Fatalf("findings: %v", doc["findings"])
	}
	sawFix := false
	for _, f := range findings {
		m := f.(map[string]any)
		for _, k := range []string{"id", "subject", "status", "severity", "title", "evidence", "reason"} {
			if _, ok := m[k]; !ok {
				t.Errorf("finding %v lacks %q", m["id"], k)
			}
		}
		switch m["status"] {
		case "pass", "fail", "unknown":
		default:
			t.Errorf("status %v", m["status"])
		}
		if m["id"] == "mem.swappiness" {
			fx, ok := m["fix"].(map[string]any)
			if !ok {
				t.Fatalf("mem.swappiness has no fix: %v", m)
			}
			sawFix = true
			files := fx["files"].([]any)
			if len(files) == 0 || !strings.Contains(files[0].(map[string]any)["content"].(string), "vm.swappiness = 1") {
				t.Errorf("fix files: %v", files)
			}
		}
	}
	if !sawFix {
		t.Error("mem.swappiness finding missing")
	}
	for _, k := range []string{"host", "instances", "summary", "notes"} {
		if _, ok := doc[k]; !ok {
			t.Errorf("document lacks %q", k)
		}
	}
}

func TestTextColourOnlyWhenAsked(t *testing.T) {
	a := audit(t, "mem-swapfile")
	plain := render(t, "text", a, report.Options{})
	if strings.Contains(plain, "\x1b[") {
		t.Error("escape codes without colour")
	}
	if !strings.Contains(plain, "mem.swappiness") || !strings.Contains(plain, "Summary:") {
		t.Errorf("text output:\n%s", plain)
	}
	if strings.Contains(plain, "(/proc/sys/vm/swappiness)") {
		t.Error("evidence shown without -v")
	}
	verbose := render(t, "text", a, report.Options{Verbose: true, Color: true})
	if !strings.Contains(verbose, "\x1b[") || !strings.Contains(verbose, "/proc/sys/vm/swappiness") {
		t.Error("verbose coloured output lacks colour or evidence")
	}
}

func labelMap(m *dto.Metric) map[string]string {
	labels := map[string]string{}
	for _, l := range m.Label {
		labels[l.GetName()] = l.GetValue()
	}
	return labels
}
