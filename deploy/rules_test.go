package deploy

import (
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"gopkg.in/yaml.v3"
)

const (
	rulesDir  = "prometheus"
	rulesFile = "dbhost-rules.yml"
)

// rulesTestFiles are promtool's unit tests of rulesFile.
var rulesTestFiles = []string{"dbhost-rules.test.yml", "dbhost-rules-day.test.yml"}

type rule struct {
	Alert       string            `yaml:"alert"`
	Record      string            `yaml:"record"`
	Expr        string            `yaml:"expr"`
	For         string            `yaml:"for"`
	Labels      map[string]string `yaml:"labels"`
	Annotations map[string]string `yaml:"annotations"`
}

type ruleFile struct {
	Groups []struct {
		Name  string `yaml:"name"`
		Rules []rule `yaml:"rules"`
	} `yaml:"groups"`
}

type ruleTestFile struct {
	RuleFiles []string `yaml:"rule_files"`
	Tests     []struct {
		AlertRuleTest []struct {
			EvalTime  string `yaml:"eval_time"`
			Alertname string `yaml:"alertname"`
			ExpAlerts []struct {
				ExpLabels map[string]string `yaml:"exp_labels"`
			} `yaml:"exp_alerts"`
		} `yaml:"alert_rule_test"`
		PromqlExprTest []struct {
			Expr string `yaml:"expr"`
		} `yaml:"promql_expr_test"`
	} `yaml:"tests"`
}

func readYAML(t *testing.T, file string, v any) {
	t.Helper()
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal(b, v); err != nil {
		t.Fatalf("%s: %v", file, err)
	}
}

// TestRulesCheck: promtool accepts the rules, lint warnings included.
func TestRulesCheck(t *testing.T) {
	promtool := tool(t, "promtool", "prometheus")
	out, errOut, err := run(rulesDir, promtool, "check", "rules", "--lint=all", "--lint-fatal", rulesFile)
	if err != nil || errOut != "" || !strings.Contains(out, "SUCCESS") {
		t.Fatalf("promtool check rules: %v\n%s%s", err, out, errOut)
	}
}

// TestRulesUnit runs promtool's unit tests of the rules: each alert firing
// and not firing (brand-new host, recovered check, unchanged setting...).
func TestRulesUnit(t *testing.T) {
	t.Parallel()
	promtool := tool(t, "promtool", "prometheus")
	for _, f := range rulesTestFiles {
		t.Run(f, func(t *testing.T) {
			t.Parallel()
			out, errOut, err := run(rulesDir, promtool, "test", "rules", f)
			if err != nil || errOut != "" || !strings.Contains(out, "SUCCESS") {
				t.Fatalf("promtool test rules %s: %v\n%s%s", f, err, out, errOut)
			}
		})
	}
}

// TestRulesContent checks what promtool does not: the rules use only the
// metrics of docs/metrics.md, every alert has a severity and templated
// annotations, and every rule has a unit test where it fires and one where
// it does not.
func TestRulesContent(t *testing.T) {
	var rf ruleFile
	readYAML(t, filepath.Join(rulesDir, rulesFile), &rf)
	known := documentedMetrics(t)
	known["up"] = true
	var rules []rule
	for _, g := range rf.Groups {
		for _, r := range g.Rules {
			rules = append(rules, r)
			if r.Record != "" {
				known[r.Record] = true
			}
		}
	}
	if len(rules) == 0 {
		t.Fatal("no rules read")
	}

	// What the unit tests cover.
	firing := map[string][]map[string]string{} // alertname: exp_labels of expected alerts
	quiet := map[string]bool{}                 // alertname: a test expects none
	tested := map[string]bool{}                // recording rule names in promql_expr_test
	for _, f := range rulesTestFiles {
		var tf ruleTestFile
		readYAML(t, filepath.Join(rulesDir, f), &tf)
		if len(tf.RuleFiles) != 1 || tf.RuleFiles[0] != rulesFile {
			t.Errorf("%s: rule_files %q, want [%s]", f, tf.RuleFiles, rulesFile)
		}
		for _, tc := range tf.Tests {
			for _, a := range tc.AlertRuleTest {
				if len(a.ExpAlerts) == 0 {
					quiet[a.Alertname] = true
				}
				for _, e := range a.ExpAlerts {
					firing[a.Alertname] = append(firing[a.Alertname], e.ExpLabels)
				}
			}
			for _, p := range tc.PromqlExprTest {
				for _, n := range metricNames(p.Expr) {
					tested[n] = true
				}
			}
		}
	}

	severities := map[string]bool{"critical": true, "warning": true, "info": true}
	for _, r := range rules {
		name := r.Alert + r.Record
		checkMetrics(t, name, r.Expr, known)
		if r.Record != "" {
			if !tested[r.Record] {
				t.Errorf("recording rule %s has no promql_expr_test", r.Record)
			}
			continue
		}
		if !severities[r.Labels["severity"]] {
			t.Errorf("%s: severity label %q, want critical, warning or info", name, r.Labels["severity"])
		}
		if !strings.Contains(r.Annotations["summary"], "{{ $labels.instance }}") {
			t.Errorf("%s: summary %q does not name the instance", name, r.Annotations["summary"])
		}
		if len(r.Annotations["description"]) < 40 {
			t.Errorf("%s: description %q", name, r.Annotations["description"])
		}
		// A firing test for this very rule: its labels (severity, kind)
		// are in an expected alert's labels.
		fires := false
		for _, labels := range firing[r.Alert] {
			sub := maps.Clone(labels)
			maps.DeleteFunc(sub, func(k, _ string) bool { _, ok := r.Labels[k]; return !ok })
			if maps.Equal(sub, r.Labels) {
				fires = true
			}
		}
		if !fires {
			t.Errorf("%s %v: no unit test where it fires", name, r.Labels)
		}
		if !quiet[r.Alert] {
			t.Errorf("%s: no unit test where it does not fire", name)
		}
	}
	if len(firing) == 0 || len(quiet) == 0 {
		t.Error("no alert tests read")
	}
}

// docsAnchor is a row of docs/checks.md's index: the check ID and the
// anchor of its section.
var docsAnchor = regexp.MustCompile("\\[`([a-z0-9_.]+)`\\]\\(#([^)]+)\\)")

// TestRunbookLinks: the finding alerts link to the check's section of
// docs/checks.md, whose anchor is the ID without its dots (GitHub's rule
// for a heading of lower-case letters, digits, '.' and '_'); every ID of
// the catalog has that anchor. The critical alert has the link.
func TestRunbookLinks(t *testing.T) {
	b, err := os.ReadFile(filepath.Join(repoRoot(t), "docs", "checks.md"))
	if err != nil {
		t.Fatal(err)
	}
	rows := docsAnchor.FindAllStringSubmatch(string(b), -1)
	if len(rows) < 50 {
		t.Fatalf("%d check links in docs/checks.md", len(rows))
	}
	for _, m := range rows {
		if want := strings.ReplaceAll(m[1], ".", ""); m[2] != want {
			t.Errorf("docs/checks.md links %s to #%s; the rules link #%s", m[1], m[2], want)
		}
		if !strings.Contains(string(b), "\n## "+m[1]+"\n") {
			t.Errorf("docs/checks.md has no section ## %s", m[1])
		}
	}
	var rf ruleFile
	readYAML(t, filepath.Join(rulesDir, rulesFile), &rf)
	const link = `https://github.com/dbhost/dbhost/blob/main/docs/checks.md#{{ reReplaceAll "[.]" "" $labels.check }}`
	linked := map[string]bool{}
	for _, g := range rf.Groups {
		for _, r := range g.Rules {
			if u, ok := r.Annotations["runbook_url"]; ok {
				if u != link {
					t.Errorf("%s: runbook_url %q, want %q", r.Alert, u, link)
				}
				linked[r.Alert] = true
			}
		}
	}
	if !linked["DbhostCriticalFinding"] || !linked["DbhostNewFailure"] {
		t.Errorf("alerts with a runbook link: %v", linked)
	}
}
