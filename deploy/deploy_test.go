package deploy

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/dbhost/dbhost/internal/testdb"
)

// repoRoot is the repository's top directory: go test runs in deploy/.
func repoRoot(t testing.TB) string {
	t.Helper()
	dir, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, "go.mod")); err != nil {
		t.Fatalf("repository root: %v", err)
	}
	return dir
}

// tool returns the path of a program the test needs. Without it the test
// skips, and fails under DBHOST_INTEGRATION=require (make test installs it
// with scripts/install-test-deps).
func tool(t testing.TB, name, debPackage string) string {
	t.Helper()
	p, err := exec.LookPath(name)
	testdb.Need(t, name+" (Debian package "+debPackage+")", err == nil)
	return p
}

// run runs a program in dir and returns what it wrote to stdout and to
// stderr, apart.
func run(dir, name string, args ...string) (stdout, stderr string, err error) {
	cmd := exec.Command(name, args...)
	cmd.Dir = dir
	var o, e bytes.Buffer
	cmd.Stdout, cmd.Stderr = &o, &e
	err = cmd.Run()
	return o.String(), e.String(), err
}

// docMetric is a metric row of a table in docs/metrics.md: | `name` | type |.
var docMetric = regexp.MustCompile("(?m)^\\| `([a-z_:][a-z0-9_:]*)` \\| (gauge|counter|histogram|summary) \\|")

// documentedMetrics returns the metric names docs/metrics.md specifies: the
// contract of dbhost serve, which the rules and the dashboard may use.
func documentedMetrics(t testing.TB) map[string]bool {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(repoRoot(t), "docs", "metrics.md"))
	if err != nil {
		t.Fatal(err)
	}
	names := map[string]bool{}
	for _, m := range docMetric.FindAllStringSubmatch(string(b), -1) {
		names[m[1]] = true
	}
	return names
}

func TestDocumentedMetrics(t *testing.T) {
	names := documentedMetrics(t)
	for _, want := range []string{"dbhost_check_status", "dbhost_findings", "dbhost_sysctl", "dbhost_thp",
		"dbhost_block_scheduler", "dbhost_db_limit", "dbhost_audit_last_success_timestamp_seconds", "dbhost_collector_success"} {
		if !names[want] {
			t.Errorf("docs/metrics.md: %s not found (%d names read)", want, len(names))
		}
	}
	for n := range names {
		if !strings.HasPrefix(n, "dbhost_") {
			t.Errorf("docs/metrics.md: %s read as a metric", n)
		}
	}
}

// PromQL words that are not metric names. Keywords and aggregation
// operators are case-insensitive; a function is a name followed by "(".
var (
	promqlKeywords = map[string]bool{"and": true, "or": true, "unless": true, "bool": true, "offset": true,
		"by": true, "without": true, "on": true, "ignoring": true, "group_left": true, "group_right": true,
		"inf": true, "nan": true, "atan2": true}
	promqlLabelLists = map[string]bool{"by": true, "without": true, "on": true, "ignoring": true,
		"group_left": true, "group_right": true}
	promqlAggregations = map[string]bool{"sum": true, "min": true, "max": true, "avg": true, "group": true,
		"stddev": true, "stdvar": true, "count": true, "count_values": true, "bottomk": true, "topk": true,
		"quantile": true, "limitk": true, "limit_ratio": true}
)

// metricNames returns the metric names an expression selects, in order of
// appearance. It is a lexer, not a parser (promtool checks the syntax):
// strings, label matchers {...}, ranges [...] and the label lists of by,
// without, on, ignoring, group_left and group_right are skipped; a name
// followed by "(" is a function.
func metricNames(expr string) []string {
	var out []string
	s := expr
	i := 0
	skipString := func() {
		q := s[i]
		i++
		for i < len(s) && s[i] != q {
			if s[i] == '\\' && q != '`' {
				i++
			}
			i++
		}
		i++
	}
	skipTo := func(end byte) {
		for i < len(s) && s[i] != end {
			if s[i] == '"' || s[i] == '\'' || s[i] == '`' {
				skipString()
				continue
			}
			i++
		}
		i++
	}
	nextNonSpace := func() byte {
		j := i
		for j < len(s) && (s[j] == ' ' || s[j] == '\t' || s[j] == '\n' || s[j] == '\r') {
			j++
		}
		if j < len(s) {
			return s[j]
		}
		return 0
	}
	isIdentStart := func(c byte) bool { return c == '_' || c == ':' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' }
	isIdent := func(c byte) bool { return isIdentStart(c) || c >= '0' && c <= '9' }
	for i < len(s) {
		c := s[i]
		switch {
		case c == '"' || c == '\'' || c == '`':
			skipString()
		case c == '{':
			skipTo('}')
		case c == '[':
			skipTo(']')
		case c == '#':
			for i < len(s) && s[i] != '\n' {
				i++
			}
		case c >= '0' && c <= '9' || c == '.' && i+1 < len(s) && s[i+1] >= '0' && s[i+1] <= '9':
			for i < len(s) && (isIdent(s[i]) || s[i] == '.') {
				i++
			}
		case isIdentStart(c):
			start := i
			for i < len(s) && isIdent(s[i]) {
				i++
			}
			word := s[start:i]
			lower := strings.ToLower(word)
			next := nextNonSpace()
			switch {
			case promqlLabelLists[lower] && next == '(':
				for s[i] != '(' {
					i++
				}
				skipTo(')')
			case promqlKeywords[lower], promqlAggregations[lower], next == '(':
			default:
				out = append(out, word)
			}
		default:
			i++
		}
	}
	return out
}

func TestMetricNames(t *testing.T) {
	for _, c := range []struct {
		expr string
		want []string
	}{
		{`sum without (check, subject, severity) (dbhost_check_status == bool 1)`, []string{"dbhost_check_status"}},
		{`SUM BY (instance) (dbhost_findings{status="fail"})`, []string{"dbhost_findings"}},
		{`changes(dbhost_sysctl{name="a}b",x=~'c]'}[1h]) > 0`, []string{"dbhost_sysctl"}},
		{`up{job="dbhost"} == 1 unless on (job, instance) dbhost_audit_last_success_timestamp_seconds`,
			[]string{"up", "dbhost_audit_last_success_timestamp_seconds"}},
		{`topk(15, count by (check) (dbhost_check_status == 1)) or vector(0)`, []string{"dbhost_check_status"}},
		{`label_replace(max without (value) (changes(dbhost_thp[1h])) > 0, "setting", "$1", "setting", "(.+)")`, []string{"dbhost_thp"}},
		{`time() - dbhost_audit_last_success_timestamp_seconds offset 1d > 5 * 60e0`, []string{"dbhost_audit_last_success_timestamp_seconds"}},
		{"a / on (x) group_left (y) b_total # comment with c\n + rate(c:d:e[5m:1m])", []string{"a", "b_total", "c:d:e"}},
		{`dbhost_check_statuz{severity="critical"} == 1`, []string{"dbhost_check_statuz"}},
		{`vector(1)`, nil},
	} {
		if got := metricNames(c.expr); !slices.Equal(got, c.want) {
			t.Errorf("metricNames(%q) = %q, want %q", c.expr, got, c.want)
		}
	}
}

// checkMetrics fails the test for each metric of expr that is not in known,
// and for a selection by __name__, which would go around this check.
func checkMetrics(t *testing.T, where, expr string, known map[string]bool) {
	t.Helper()
	if strings.Contains(expr, "__name__") {
		t.Errorf("%s: selects by __name__ (name the metrics): %s", where, expr)
	}
	names := metricNames(expr)
	if len(names) == 0 && !strings.Contains(expr, "vector(") {
		t.Errorf("%s: no metric in %s", where, expr)
	}
	for _, n := range names {
		if !known[n] {
			t.Errorf("%s: metric %s is not in docs/metrics.md: %s", where, n, expr)
		}
	}
}
