package deploy

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"gopkg.in/yaml.v3"
)

const dashboardFile = "grafana/dbhost-fleet.json"

// What Grafana needs of a dashboard to import it, as far as this one uses
// it (@grafana/schema's Dashboard, Panel, RowPanel, VariableModel).
type dsRef struct {
	Type string `json:"type"`
	UID  string `json:"uid"`
}

type gridPos struct {
	H, W, X, Y int
}

type target struct {
	RefID        string `json:"refId"`
	Expr         string `json:"expr"`
	Datasource   *dsRef `json:"datasource"`
	LegendFormat string `json:"legendFormat"`
}

type panel struct {
	ID          int      `json:"id"`
	Type        string   `json:"type"`
	Title       string   `json:"title"`
	Description string   `json:"description"`
	Datasource  *dsRef   `json:"datasource"`
	GridPos     *gridPos `json:"gridPos"`
	Targets     []target `json:"targets"`
	Collapsed   bool     `json:"collapsed"`
	Panels      []panel  `json:"panels"`
}

type variable struct {
	Type       string          `json:"type"`
	Name       string          `json:"name"`
	Datasource *dsRef          `json:"datasource"`
	Query      json.RawMessage `json:"query"`
	Definition string          `json:"definition"`
	Refresh    int             `json:"refresh"`
}

type dashboard struct {
	ID            *int    `json:"id"`
	UID           string  `json:"uid"`
	Title         string  `json:"title"`
	SchemaVersion int     `json:"schemaVersion"`
	Panels        []panel `json:"panels"`
	Templating    struct {
		List []variable `json:"list"`
	} `json:"templating"`
	Time *struct {
		From string `json:"from"`
		To   string `json:"to"`
	} `json:"time"`
}

// Panel types this dashboard may use: Grafana's built-in ones, no plugin.
var builtinPanels = map[string]bool{"row": true, "stat": true, "table": true, "timeseries": true,
	"bargauge": true, "gauge": true, "state-timeline": true, "status-history": true, "barchart": true,
	"piechart": true, "text": true, "heatmap": true}

// Grafana's own variables that may appear, and a value each takes for the
// checks below ($__all is the value "All" of a multi-value variable).
var builtinVars = map[string]string{"__rate_interval": "5m", "__interval": "1m", "__range": "1h", "__all": ".+"}

var (
	varRef      = regexp.MustCompile(`\$\{([A-Za-z_]\w*)(?::\w+)?\}|\$([A-Za-z_]\w*)|\[\[([A-Za-z_]\w*)(?::\w+)?\]\]`)
	matcherVar  = regexp.MustCompile(`(=~|!~)"(?:\$\{([A-Za-z_]\w*)\}|\$([A-Za-z_]\w*))"`)
	labelValues = regexp.MustCompile(`^label_values\((.+),\s*([A-Za-z_]\w*)\)$`)
	uidChars    = regexp.MustCompile(`^[A-Za-z0-9_-]{1,40}$`)
)

func readDashboard(t *testing.T) (dashboard, []byte) {
	t.Helper()
	b, err := os.ReadFile(dashboardFile)
	if err != nil {
		t.Fatal(err)
	}
	var d dashboard
	dec := json.NewDecoder(bytes.NewReader(b))
	if err := dec.Decode(&d); err != nil {
		t.Fatalf("%s: %v", dashboardFile, err)
	}
	return d, b
}

// varQuery is a query variable's query: a string, or {"query": "..."}.
func varQuery(t *testing.T, v variable) string {
	var s string
	if json.Unmarshal(v.Query, &s) == nil {
		return s
	}
	var o struct {
		Query string `json:"query"`
	}
	if err := json.Unmarshal(v.Query, &o); err != nil {
		t.Errorf("variable %s: query %s", v.Name, v.Query)
	}
	return o.Query
}

// dashExpr is one PromQL expression of the dashboard, where it is, and the
// expression with template variables given values.
type dashExpr struct {
	where, expr, concrete string
}

// TestDashboardStructure checks what Grafana needs to import the dashboard
// and what makes it work anywhere: the data source is the variable
// ${datasource}, panels do not overlap, every variable used exists and
// every one defined is used.
func TestDashboardStructure(t *testing.T) {
	d, raw := readDashboard(t)
	if d.SchemaVersion < 36 {
		t.Errorf("schemaVersion %d: want 36 or later (data source references as objects)", d.SchemaVersion)
	}
	if !uidChars.MatchString(d.UID) || d.Title == "" {
		t.Errorf("uid %q, title %q: want a uid of 1-40 letters, digits, - and _, and a title", d.UID, d.Title)
	}
	if d.ID != nil {
		t.Errorf("id %d: an exported dashboard has id null (the importing Grafana gives one)", *d.ID)
	}
	if d.Time == nil || d.Time.From == "" || d.Time.To == "" {
		t.Error("no time range")
	}
	if len(d.Panels) < 10 {
		t.Fatalf("%d panels", len(d.Panels))
	}
	want := dsRef{Type: "prometheus", UID: "${datasource}"}

	// Variables: defined once each, the data source first.
	defined := map[string]int{}
	for i, v := range d.Templating.List {
		if _, dup := defined[v.Name]; dup || v.Name == "" {
			t.Errorf("variable %q defined twice or unnamed", v.Name)
		}
		defined[v.Name] = i
		switch v.Type {
		case "datasource":
			if q := varQuery(t, v); q != "prometheus" {
				t.Errorf("variable %s: data source type %q, want prometheus", v.Name, q)
			}
		case "query":
			if v.Datasource == nil || *v.Datasource != want {
				t.Errorf("variable %s: datasource %v, want %v", v.Name, v.Datasource, want)
			}
			if q := varQuery(t, v); q == "" || q != v.Definition {
				t.Errorf("variable %s: query %q, definition %q: want the same, not empty", v.Name, q, v.Definition)
			}
			if v.Refresh != 1 && v.Refresh != 2 {
				t.Errorf("variable %s: refresh %d, want 1 (on load) or 2 (on time range change)", v.Name, v.Refresh)
			}
		default:
			t.Errorf("variable %s: type %q", v.Name, v.Type)
		}
	}
	if i, ok := defined["datasource"]; !ok || d.Templating.List[i].Type != "datasource" {
		t.Error("no variable datasource of type datasource")
	}
	// A variable's query may use the variables before it only.
	for i, v := range d.Templating.List {
		for _, ref := range refs(varQuery(t, v) + " " + uidOf(v.Datasource)) {
			if j, ok := defined[ref]; ok && j >= i {
				t.Errorf("variable %s uses %s, defined after it", v.Name, ref)
			}
		}
	}

	ids := map[int]string{}
	var boxes []panel
	var walk func(ps []panel, inRow bool)
	walk = func(ps []panel, inRow bool) {
		for _, p := range ps {
			where := fmt.Sprintf("panel %d %q", p.ID, p.Title)
			if p.ID <= 0 {
				t.Errorf("%s: id must be a positive integer", where)
			} else if other, dup := ids[p.ID]; dup {
				t.Errorf("%s: id also used by %q", where, other)
			}
			ids[p.ID] = p.Title
			if !builtinPanels[p.Type] {
				t.Errorf("%s: type %q is not a built-in panel", where, p.Type)
			}
			if p.Title == "" {
				t.Errorf("%s: no title", where)
			}
			g := p.GridPos
			if g == nil || g.W < 1 || g.H < 1 || g.X < 0 || g.Y < 0 || g.X+g.W > 24 {
				t.Errorf("%s: gridPos %+v: want w, h >= 1, x, y >= 0, x+w <= 24", where, g)
				continue
			}
			if !inRow {
				boxes = append(boxes, p)
			}
			if p.Type == "row" {
				if g.H != 1 || g.W != 24 || g.X != 0 || len(p.Targets) != 0 {
					t.Errorf("%s: a row is h 1, w 24, x 0 and has no queries", where)
				}
				if !p.Collapsed && len(p.Panels) != 0 {
					t.Errorf("%s: an open row keeps no panels (they follow it)", where)
				}
				walk(p.Panels, true)
				continue
			}
			if p.Description == "" {
				t.Errorf("%s: no description", where)
			}
			if p.Type == "text" {
				continue
			}
			if p.Datasource == nil || *p.Datasource != want {
				t.Errorf("%s: datasource %v, want %v", where, p.Datasource, want)
			}
			if len(p.Targets) == 0 {
				t.Errorf("%s: no query", where)
			}
			refIDs := map[string]bool{}
			for _, q := range p.Targets {
				if q.RefID == "" || refIDs[q.RefID] {
					t.Errorf("%s: refId %q empty or repeated", where, q.RefID)
				}
				refIDs[q.RefID] = true
				if strings.TrimSpace(q.Expr) == "" {
					t.Errorf("%s %s: no expr", where, q.RefID)
				}
				if q.Datasource == nil || *q.Datasource != want {
					t.Errorf("%s %s: datasource %v, want %v", where, q.RefID, q.Datasource, want)
				}
			}
		}
	}
	walk(d.Panels, false)

	for i, a := range boxes {
		for _, b := range boxes[i+1:] {
			ga, gb := a.GridPos, b.GridPos
			if ga.X < gb.X+gb.W && gb.X < ga.X+ga.W && ga.Y < gb.Y+gb.H && gb.Y < ga.Y+ga.H {
				t.Errorf("panels %d %q %+v and %d %q %+v overlap", a.ID, a.Title, *ga, b.ID, b.Title, *gb)
			}
		}
	}

	// Every variable used is defined (or Grafana's), every one defined is
	// used outside its own definition.
	var all map[string]any
	if err := json.Unmarshal(raw, &all); err != nil {
		t.Fatal(err)
	}
	templating := all["templating"]
	delete(all, "templating")
	used := map[string]bool{}
	for _, s := range stringsIn(all) {
		for _, r := range refs(s) {
			used[r] = true
		}
	}
	for _, s := range stringsIn(templating) {
		for _, r := range refs(s) {
			used[r] = true // a variable used by another one is used
		}
	}
	for r := range used {
		if _, ok := defined[r]; !ok {
			if _, ok := builtinVars[r]; !ok {
				t.Errorf("variable $%s is used but not defined", r)
			}
		}
	}
	for name := range defined {
		if !used[name] {
			t.Errorf("variable %s is defined but not used", name)
		}
	}
}

func uidOf(r *dsRef) string {
	if r == nil {
		return ""
	}
	return r.UID
}

// refs returns the names of the variables s refers to ($x, ${x}, ${x:fmt},
// [[x]]).
func refs(s string) []string {
	var out []string
	for _, m := range varRef.FindAllStringSubmatch(s, -1) {
		out = append(out, m[1]+m[2]+m[3])
	}
	return out
}

// stringsIn returns every string in a decoded JSON value.
func stringsIn(v any) []string {
	switch v := v.(type) {
	case string:
		return []string{v}
	case []any:
		var out []string
		for _, x := range v {
			out = append(out, stringsIn(x)...)
		}
		return out
	case map[string]any:
		var out []string
		for _, x := range v {
			out = append(out, stringsIn(x)...)
		}
		return out
	}
	return nil
}

// dashboardExprs returns the PromQL of every panel query and of every
// label_values variable query, with variables given values: a multi-value
// variable may only be the whole value of a =~ or !~ matcher (where
// Grafana puts a regex), and becomes .+ there; Grafana's intervals become
// durations.
func dashboardExprs(t *testing.T, d dashboard) []dashExpr {
	t.Helper()
	defined := map[string]bool{}
	for _, v := range d.Templating.List {
		defined[v.Name] = true
	}
	concrete := func(where, expr string) string {
		s := matcherVar.ReplaceAllStringFunc(expr, func(m string) string {
			sub := matcherVar.FindStringSubmatch(m)
			if name := sub[2] + sub[3]; defined[name] {
				return sub[1] + `".+"`
			}
			return m
		})
		for name, val := range builtinVars {
			s = strings.ReplaceAll(s, "${"+name+"}", val)
			s = strings.ReplaceAll(s, "$"+name, val)
		}
		if left := varRef.FindString(s); left != "" {
			t.Errorf("%s: %s is not the whole value of a =~ matcher: %s", where, left, expr)
		}
		return s
	}
	var out []dashExpr
	var walk func(ps []panel)
	walk = func(ps []panel) {
		for _, p := range ps {
			for _, q := range p.Targets {
				where := fmt.Sprintf("panel %d %q query %s", p.ID, p.Title, q.RefID)
				out = append(out, dashExpr{where, q.Expr, concrete(where, q.Expr)})
			}
			walk(p.Panels)
		}
	}
	walk(d.Panels)
	for _, v := range d.Templating.List {
		if v.Type != "query" {
			continue
		}
		q := varQuery(t, v)
		m := labelValues.FindStringSubmatch(q)
		if m == nil {
			t.Errorf("variable %s: query %q: want label_values(selector, label)", v.Name, q)
			continue
		}
		where := "variable " + v.Name
		out = append(out, dashExpr{where, m[1], concrete(where, m[1])})
	}
	return out
}

// TestDashboardQueries: every query of the dashboard uses only the metrics
// of docs/metrics.md (and up), and is valid PromQL: each becomes a
// recording rule of a temporary rules file that promtool checks.
func TestDashboardQueries(t *testing.T) {
	d, _ := readDashboard(t)
	exprs := dashboardExprs(t, d)
	known := documentedMetrics(t)
	known["up"] = true
	for _, e := range exprs {
		checkMetrics(t, e.where, e.expr, known)
	}

	promtool := tool(t, "promtool", "prometheus")
	type rec struct {
		Record string `yaml:"record"`
		Expr   string `yaml:"expr"`
	}
	var rules []rec
	for i, e := range exprs {
		rules = append(rules, rec{fmt.Sprintf("dashboard:query_%d", i), e.concrete})
	}
	dir := t.TempDir()
	writeYAML(t, filepath.Join(dir, "dashboard-rules.yml"),
		map[string]any{"groups": []any{map[string]any{"name": "dashboard", "rules": rules}}})
	out, errOut, err := run(dir, promtool, "check", "rules", "--lint=none", "dashboard-rules.yml")
	if err != nil || errOut != "" || !strings.Contains(out, fmt.Sprintf("SUCCESS: %d rules found", len(rules))) {
		for i, e := range exprs {
			if strings.Contains(out+errOut, fmt.Sprintf(`"dashboard:query_%d"`, i)) {
				t.Logf("dashboard:query_%d is %s: %s", i, e.where, e.concrete)
			}
		}
		t.Fatalf("promtool check rules: %v\n%s%s", err, out, errOut)
	}
}

// fleet is a small fleet's metrics, as docs/metrics.md gives them: two
// hosts scraped by the job dbhost, one with failing findings, settings that
// change half-way, a failing collector, an exporter down.
var fleet = []struct{ series, values string }{
	{`up{job="dbhost",instance="db1:9437"}`, "1x70"},
	{`up{job="dbhost",instance="db2:9437"}`, "1x30 0x40"},
	{`dbhost_check_status{job="dbhost",instance="db1:9437",check="mem.swappiness",subject="host",severity="warning"}`, "1x70"},
	{`dbhost_check_status{job="dbhost",instance="db1:9437",check="mem.thp",subject="host",severity="critical"}`, "0x30 1x40"},
	{`dbhost_check_status{job="dbhost",instance="db1:9437",check="pg.hba",subject="postgres:5432",severity="critical"}`, "2x70"},
	{`dbhost_check_status{job="dbhost",instance="db2:9437",check="mem.swappiness",subject="host",severity="warning"}`, "0x70"},
	{`dbhost_check_waived{job="dbhost",instance="db1:9437",check="mem.swappiness",subject="host",severity="warning"}`, "1x70"},
	{`dbhost_check_waiver_expiry_timestamp_seconds{job="dbhost",instance="db1:9437",check="mem.swappiness",subject="host",severity="warning"}`, "1800000000x70"},
	{`dbhost_waivers_valid{job="dbhost",instance="db1:9437"}`, "1x30 0x40"},
	{`dbhost_waiver_entries{job="dbhost",instance="db1:9437",state="expired"}`, "0x70"},
	{`dbhost_waiver_entries{job="dbhost",instance="db1:9437",state="stale"}`, "1x70"},
	{`dbhost_waiver_entries{job="dbhost",instance="db1:9437",state="unneeded"}`, "0x70"},
	{`dbhost_findings{job="dbhost",instance="db1:9437",status="fail",severity="warning"}`, "1x70"},
	{`dbhost_findings{job="dbhost",instance="db1:9437",status="fail",severity="critical"}`, "0x30 1x40"},
	{`dbhost_findings{job="dbhost",instance="db1:9437",status="unknown",severity="critical"}`, "1x70"},
	{`dbhost_findings{job="dbhost",instance="db2:9437",status="pass",severity="warning"}`, "1x70"},
	{`dbhost_sysctl{job="dbhost",instance="db1:9437",name="vm.swappiness"}`, "60x30 10x40"},
	{`dbhost_sysctl{job="dbhost",instance="db2:9437",name="vm.swappiness"}`, "1x70"},
	{`dbhost_thp{job="dbhost",instance="db1:9437",setting="enabled",value="always"}`, "1x70"},
	{`dbhost_thp{job="dbhost",instance="db1:9437",setting="enabled",value="never"}`, "0x70"},
	{`dbhost_thp_khugepaged_max_ptes_none{job="dbhost",instance="db1:9437"}`, "511x70"},
	{`dbhost_hugepages_pool_pages{job="dbhost",instance="db1:9437",size_bytes="2097152"}`, "0x30 512x40"},
	{`dbhost_hugepages_free_pages{job="dbhost",instance="db1:9437",size_bytes="2097152"}`, "0x30 100x40"},
	{`dbhost_hugepages_reserved_pages{job="dbhost",instance="db1:9437",size_bytes="2097152"}`, "0x70"},
	{`dbhost_hugepages_surplus_pages{job="dbhost",instance="db1:9437",size_bytes="2097152"}`, "0x70"},
	{`dbhost_block_read_ahead_bytes{job="dbhost",instance="db1:9437",device="vda"}`, "131072x30 4194304x40"},
	{`dbhost_block_nr_requests{job="dbhost",instance="db1:9437",device="vda"}`, "256x70"},
	{`dbhost_block_rotational{job="dbhost",instance="db1:9437",device="vda"}`, "0x70"},
	{`dbhost_block_scheduler{job="dbhost",instance="db1:9437",device="vda",scheduler="none"}`, "1x70"},
	{`dbhost_block_scheduler{job="dbhost",instance="db1:9437",device="vda",scheduler="mq-deadline"}`, "0x70"},
	{`dbhost_db_limit{job="dbhost",instance="db1:9437",subject="postgres:5432",resource="nofile",type="soft"}`, "1024x30 65536x40"},
	{`dbhost_instance_info{job="dbhost",instance="db1:9437",subject="postgres:5432",engine="postgres",flavor="postgresql",version="15.20"}`, "1x70"},
	{`dbhost_galera_tolerance{job="dbhost",instance="db2:9437",subject="mysql:3306",mode="at_once"}`, "1x30 0x40"},
	{`dbhost_galera_tolerance{job="dbhost",instance="db2:9437",subject="mysql:3306",mode="one_by_one"}`, "2x30 1x40"},
	{`dbhost_untrusted_instances{job="dbhost",instance="db1:9437",engine="postgres"}`, "0x30 1000x40"},
	{`dbhost_untrusted_instances_not_described{job="dbhost",instance="db1:9437",engine="postgres"}`, "0x30 984x40"},
	{`dbhost_untrusted_findings{job="dbhost",instance="db1:9437",status="fail",severity="warning"}`, "0x30 16x40"},
	{`dbhost_unnamed_instances{job="dbhost",instance="db1:9437",engine="mongodb"}`, "0x70"},
	{`dbhost_security_findings_withheld{job="dbhost",instance="db1:9437"}`, "0x30 12x40"},
	{`dbhost_build_info{job="dbhost",instance="db1:9437",version="v1.0.0",goversion="go1.26.8",revision="abc1234"}`, "1x70"},
	{`dbhost_audit_duration_seconds{job="dbhost",instance="db1:9437"}`, "0.4x70"},
	{`dbhost_audit_last_success_timestamp_seconds{job="dbhost",instance="db1:9437"}`, "0+60x70"},
	{`dbhost_collector_success{job="dbhost",instance="db1:9437",collector="limits"}`, "0x70"},
	{`dbhost_collector_success{job="dbhost",instance="db1:9437",collector="sysctl"}`, "1x70"},
	{`dbhost_collector_duration_seconds{job="dbhost",instance="db1:9437",collector="sysctl"}`, "0.01x70"},
}

// TestDashboardQueriesAnswer: on a fleet's metrics (above), every query of
// the dashboard returns something. A label or label value that the
// metrics do not have (severity="crit", resource="open_files") gives an
// empty panel, which promtool's syntax check cannot see: each query
// becomes an alert absent(query), which must not fire. A fallback
// "or vector(0)" is left out: it would hide the rest.
func TestDashboardQueriesAnswer(t *testing.T) {
	t.Parallel()
	d, _ := readDashboard(t)
	exprs := dashboardExprs(t, d)
	promtool := tool(t, "promtool", "prometheus")

	type alert struct {
		Alert string `yaml:"alert"`
		Expr  string `yaml:"expr"`
	}
	var alerts []alert
	var cases []any
	for i, e := range exprs {
		name := fmt.Sprintf("Empty%d", i)
		q := strings.TrimSuffix(strings.TrimSpace(e.concrete), " or vector(0)")
		alerts = append(alerts, alert{name, "absent(" + q + ")"})
		cases = append(cases, map[string]any{"eval_time": "1h", "alertname": name, "exp_alerts": []any{}})
	}
	var series []any
	for _, s := range fleet {
		series = append(series, map[string]string{"series": s.series, "values": s.values})
	}
	dir := t.TempDir()
	writeYAML(t, filepath.Join(dir, "rules.yml"),
		map[string]any{"groups": []any{map[string]any{"name": "dashboard", "rules": alerts}}})
	writeYAML(t, filepath.Join(dir, "test.yml"), map[string]any{
		"rule_files": []string{"rules.yml"}, "evaluation_interval": "1m",
		"tests": []any{map[string]any{"interval": "1m", "input_series": series, "alert_rule_test": cases}},
	})
	out, errOut, err := run(dir, promtool, "test", "rules", "test.yml")
	if err != nil || errOut != "" || !strings.Contains(out, "SUCCESS") {
		for i, e := range exprs {
			if strings.Contains(out+errOut, fmt.Sprintf("alertname: Empty%d,", i)) {
				t.Logf("Empty%d is %s: %s", i, e.where, e.concrete)
			}
		}
		t.Fatalf("a dashboard query returns nothing on the fleet's metrics (EmptyN firing):\n%s%s", out, errOut)
	}

	// The fleet is the documented metrics, all of them.
	var names []string
	for _, s := range fleet {
		names = append(names, metricNames(s.series)...)
	}
	for n := range documentedMetrics(t) {
		if !slices.Contains(names, n) {
			t.Errorf("the test fleet has no %s", n)
		}
	}
}

func writeYAML(t *testing.T, file string, v any) {
	t.Helper()
	b, err := yaml.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(file, b, 0o644); err != nil {
		t.Fatal(err)
	}
}
