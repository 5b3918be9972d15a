package expreport

import (
	"bytes"
	"encoding/json"
	"math"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/dbhost/dbhost/internal/results"
	"github.com/dbhost/dbhost/internal/stats"
)

// checkCharts checks the charts against the input: one line per trial
// with its samples, one box group per arm (per arm and client count in a
// sweep) with a dot per trial, one effect row per treatment arm with its
// verdict, and the sweep chart exactly when there is a sweep.
func checkCharts(t *testing.T, in Input, doc *node) {
	t.Helper()
	tl := chart(doc, "timeline")
	withSeconds := 0
	var trials []results.Trial // the comparison's: A/A calibration trials have a negative block
	for _, tr := range in.Trials {
		if tr.Block < 0 {
			continue
		}
		trials = append(trials, tr)
		if len(tr.Seconds) > 0 {
			withSeconds++
		}
	}
	if withSeconds == 0 {
		if tl != nil {
			t.Error("timeline chart without samples")
		}
	} else {
		if tl == nil {
			t.Fatal("no timeline chart")
		}
		lines := tl.all(named("polyline"))
		if len(lines) != withSeconds {
			t.Errorf("timeline: %d lines for %d trials with samples", len(lines), withSeconds)
		}
		bySeq := map[string]results.Trial{}
		for _, tr := range trials {
			bySeq[strconv.Itoa(tr.Seq)] = tr
		}
		for _, l := range lines {
			tr, ok := bySeq[l.attr["data-trial"]]
			if !ok {
				t.Errorf("timeline line for unknown trial %q", l.attr["data-trial"])
				continue
			}
			n := len(strings.Fields(l.attr["points"]))
			if want := min(len(tr.Seconds), maxPoints); n != want || l.attr["data-points"] != strconv.Itoa(want) {
				t.Errorf("trial %d: %d points (data-points %s), want %d", tr.Seq, n, l.attr["data-points"], want)
			}
			if excl := tr.Excluded != ""; excl != (l.hasClass("excl") && l.hasClass("dashed")) {
				t.Errorf("trial %d: excluded %v but class %q", tr.Seq, excl, l.attr["class"])
			}
			if !strings.Contains(l.textContent(), "trial "+strconv.Itoa(tr.Seq)+" ") {
				t.Errorf("trial %d: hover text %q", tr.Seq, l.textContent())
			}
		}
	}

	dist := chart(doc, "distribution")
	if len(trials) == 0 {
		if dist != nil {
			t.Error("distribution chart without trials")
		}
	} else {
		if dist == nil {
			t.Fatal("no distribution chart")
		}
		groups := dist.all(func(n *node) bool { return n.name == "g" && n.hasClass("group") })
		type key struct{ arm, clients int }
		want := map[key][2]int{} // counted, all
		sweep := clientCounts(trials) > 1
		for _, tr := range trials {
			k := key{tr.Arm, 0}
			if sweep {
				k.clients = tr.Clients
			}
			c := want[k]
			if tr.Excluded == "" {
				c[0]++
			}
			c[1]++
			want[k] = c
		}
		wantGroups := len(want)
		if !sweep {
			wantGroups = max(len(in.Experiment.Arms), len(want))
		}
		if len(groups) != wantGroups {
			t.Errorf("distribution: %d groups, want %d", len(groups), wantGroups)
		}
		dots, counted, boxes := 0, 0, 0
		for _, g := range groups {
			d := g.all(named("circle"))
			dots += len(d)
			n, _ := strconv.Atoi(g.attr["data-n"])
			counted += n
			if len(g.all(func(n *node) bool { return n.hasClass("box") })) == 1 {
				boxes++
			} else if n > 0 {
				t.Errorf("group with %d trials has no box", n)
			}
			excl := 0
			for _, c := range d {
				if c.hasClass("excl") {
					excl++
				}
			}
			if excl+n != len(d) {
				t.Errorf("group: %d dots, %d counted, %d excluded", len(d), n, excl)
			}
		}
		allN, countedN := 0, 0
		for _, c := range want {
			countedN += c[0]
			allN += c[1]
		}
		if dots != allN || counted != countedN {
			t.Errorf("distribution: %d dots (%d counted), want %d (%d)", dots, counted, allN, countedN)
		}
		if len(dist.all(func(n *node) bool { return n.hasClass("cat") })) != len(groups) {
			t.Error("distribution: a group without its label")
		}
	}

	eff := chart(doc, "effect")
	treatments := len(in.Experiment.Arms) - 1
	if treatments < 1 {
		if eff != nil {
			t.Error("effect chart without treatment arms")
		}
	} else {
		if eff == nil {
			t.Fatal("no effect chart")
		}
		rows := eff.all(func(n *node) bool { return n.name == "g" && n.hasClass("effect") })
		// One row per treatment arm, or per arm and client count when a
		// sweep stored every count's decision.
		type row struct{ arm, clients int }
		var want []row
		verdict := map[row]string{}
		if comps := comparisonsFromJSON(in.Experiment.Decision); clientCounts(trials) > 1 && len(comps) > 0 {
			for _, c := range comps {
				want = append(want, row{c.Arm, c.Clients})
				verdict[row{c.Arm, c.Clients}] = string(c.Decision.Verdict)
			}
		} else {
			for i := range treatments {
				want = append(want, row{i + 1, 0})
				if i < len(in.Decisions) {
					verdict[row{i + 1, 0}] = string(in.Decisions[i].Verdict)
				}
			}
		}
		if len(rows) != len(want) {
			t.Errorf("effect: %d rows, want %d", len(rows), len(want))
		}
		for i, r := range rows {
			got := row{atoi(r.attr["data-arm"]), atoi(r.attr["data-clients"])}
			if i >= len(want) || got != want[i] || r.attr["data-verdict"] != verdict[got] {
				t.Errorf("effect row %d: %+v verdict %q", i, got, r.attr["data-verdict"])
				continue
			}
			if verdict[got] != "" && (len(r.all(func(n *node) bool { return n.hasClass("ci") })) != 1 || len(r.all(func(n *node) bool { return n.hasClass("point") })) != 1) {
				t.Errorf("effect row %d: no interval bar or point", i)
			}
		}
		if in.Decisions != nil && in.Decisions[0].Equivalence > 0 && len(eff.all(func(n *node) bool { return n.hasClass("band") })) != 1 {
			t.Error("effect: no equivalence band")
		}
		if len(eff.all(func(n *node) bool { return n.hasClass("one") })) != 1 {
			t.Error("effect: no line at 1.0")
		}
	}

	sw := chart(doc, "sweep")
	if clientCounts(trials) < 2 {
		if sw != nil {
			t.Error("sweep chart without a sweep")
		}
	} else {
		if sw == nil {
			t.Fatal("no sweep chart")
		}
		lines := sw.all(func(n *node) bool { return n.name == "g" && n.attr["data-points"] != "" })
		if len(lines) != len(in.Experiment.Arms) {
			t.Errorf("sweep: %d lines for %d arms", len(lines), len(in.Experiment.Arms))
		}
		for _, l := range lines {
			if n := len(l.all(func(n *node) bool { return n.hasClass("point") })); strconv.Itoa(n) != l.attr["data-points"] || n != clientCounts(trials) {
				t.Errorf("sweep line of arm %s: %d points (data-points %s), want %d", l.attr["data-arm"], n, l.attr["data-points"], clientCounts(trials))
			}
		}
	}

	// Every chart has a title, a description and text labels.
	for _, svg := range doc.all(named("svg")) {
		if len(svg.all(named("title"))) == 0 || len(svg.all(named("desc"))) == 0 || len(svg.all(named("text"))) < 3 {
			t.Errorf("chart %s lacks title, description or labels", svg.attr["data-chart"])
		}
	}
}

func atoi(s string) int {
	n, err := strconv.Atoi(s)
	if err != nil {
		return -1
	}
	return n
}

func clientCounts(ts []results.Trial) int {
	seen := map[int]bool{}
	for _, t := range ts {
		if t.Clients > 0 {
			seen[t.Clients] = true
		}
	}
	return len(seen)
}

var (
	longDecimals = regexp.MustCompile(`\d\.\d{4,}`)
	ungrouped    = regexp.MustCompile(`(^|[^\d,.:-])\d{5,}($|[^\d])`)
)

// checkNumbers: text people read carries no raw floats (1234.5678) and
// large numbers have separators; code and JSON blocks are exempt.
func checkNumbers(t *testing.T, doc *node) {
	t.Helper()
	for _, n := range doc.all(func(n *node) bool { return strings.TrimSpace(n.text) != "" }) {
		if n.within("code", "pre", "head") {
			continue
		}
		if longDecimals.MatchString(n.text) || ungrouped.MatchString(n.text) {
			t.Errorf("<%s> shows an unformatted number: %q", n.name, strings.TrimSpace(n.text))
		}
	}
}

func TestTwoArmsABBA(t *testing.T) {
	in := scenario{Name: "hugepages", Arms: twoArms(), Effects: []float64{1, 1.10}, PerArm: 8, Seconds: 60, Seed: 1,
		Plan: &stats.Plan{MaxPerArm: 12, Metric: "throughput"}}.build(t)
	if len(in.Decisions) != 1 || in.Decisions[0].Verdict != stats.Better {
		t.Fatalf("the scenario should decide better: %+v", in.Decisions)
	}
	html, doc, md := render(t, in)
	checkCharts(t, in, doc)
	checkNumbers(t, doc)
	d := in.Decisions[0]
	for _, want := range []string{
		"2M", "4k", "hugepages.2M=600", // arms and knobs
		"▲ better", fmtRatio(d.Ratio) + "×", interval(&d), d.Reason, // verdict with its reason
		"thp.enabled", "Wall time", "12 trials per arm (24 in all); used 8 of 12", // fingerprint, timing against budget
		"&#34;max_per_arm&#34;: 12",      // the plan, pretty
		"db-test-1", "storage.scheduler", // host
		"prefers-color-scheme:dark",
	} {
		if !strings.Contains(html, want) {
			t.Errorf("HTML lacks %q", want)
		}
	}
	// Trials table: one row per trial, in order, with its block.
	rows := trialRows(doc)
	if len(rows) != len(in.Trials) {
		t.Fatalf("%d trial rows for %d trials", len(rows), len(in.Trials))
	}
	for i, r := range rows {
		cells := r.all(named("td"))
		tr := in.Trials[i]
		if cells[0].textContent() != strconv.Itoa(tr.Seq) || cells[1].textContent() != strconv.Itoa(tr.Block) ||
			cells[2].textContent() != in.Experiment.Arms[tr.Arm].Name || cells[4].textContent() != fmtOps(tr.OpsPerSec) {
			t.Errorf("trial row %d: %q %q %q %q", i, cells[0].textContent(), cells[1].textContent(), cells[2].textContent(), cells[4].textContent())
		}
	}
	// ABBA: blocks alternate the arm order.
	if in.Trials[0].Arm != 0 || in.Trials[1].Arm != 1 || in.Trials[4].Arm != 1 {
		t.Errorf("not ABBA: %d %d .. %d", in.Trials[0].Arm, in.Trials[1].Arm, in.Trials[4].Arm)
	}
	for _, want := range []string{
		"- **2M** vs **4k**: **better** — throughput " + fmtRatio(d.Ratio) + "x (95% CI " + interval(&d) + ")",
		"8 vs 8 trials", "Wall time ", "| 4k (base) | vm.nr\\_hugepages=0, pg.huge\\_pages=off | 8 |",
	} {
		if !strings.Contains(md, want) {
			t.Errorf("Markdown lacks %q:\n%s", want, md)
		}
	}
	if strings.Contains(md, "**Warnings**") {
		t.Errorf("clean run with warnings:\n%s", md)
	}
	t.Logf("typical report (2 arms x 8 trials x 60 s): %.1f KB HTML, %d B Markdown", float64(len(html))/1024, len(md))
}

func trialRows(doc *node) []*node {
	sec := doc.all(func(n *node) bool { return n.attr["id"] == "trials" })[0]
	var rows []*node
	for _, tb := range sec.all(named("tbody")) {
		rows = append(rows, tb.all(named("tr"))...)
	}
	return rows
}

func TestThreeArms(t *testing.T) {
	arms := []results.Arm{
		{Index: 0, Name: "4k", Knobs: []string{"hugepages.2M=0"}},
		{Index: 1, Name: "2M", Knobs: []string{"hugepages.2M=600", "pg.huge_pages=on"}},
		{Index: 2, Name: "1G", Knobs: []string{"hugepages.1G=2", "pg.huge_pages=on", "pg.huge_page_size=1GB"}},
	}
	in := scenario{Name: "pages", Arms: arms, Effects: []float64{1, 1.06, 1.001}, PerArm: 10, Seconds: 30, Seed: 3, AA: 4,
		Cal: &stats.Calibration{Samples: 10, Median: 2400, NoiseCV: 0.031, Power: 0.8, MDE: 0.042, MaxPerArm: 10,
			Max: 55 * time.Minute, TrialsPerArm: 7.2, Expected: 40 * time.Minute, Method: "simulated"}}.build(t)
	if len(in.Decisions) != 2 {
		t.Fatalf("%d decisions", len(in.Decisions))
	}
	// Random blocks: every block holds each arm once.
	for b := 0; b < 10; b++ {
		seen := map[int]int{}
		for _, tr := range in.Trials {
			if tr.Block == b {
				seen[tr.Arm]++
			}
		}
		if len(seen) != 3 {
			t.Errorf("block %d: arms %v", b, seen)
		}
	}
	html, doc, md := render(t, in)
	checkCharts(t, in, doc)
	checkNumbers(t, doc)
	legend := chart(doc, "timeline").all(func(n *node) bool { return n.hasClass("legend") })
	if len(legend) != 3 {
		t.Errorf("timeline legend: %d entries", len(legend))
	}
	for _, want := range []string{"Calibration", "±3.1%", "4.2% (with 80.0% power)", "A/A calibration trials</th><td>4,"} {
		if !strings.Contains(html, want) {
			t.Errorf("HTML lacks %q", want)
		}
	}
	// The A/A trials are listed, marked, and are not "excluded" trials.
	rows := trialRows(doc)
	if len(rows) != len(in.Trials) {
		t.Fatalf("%d trial rows for %d trials", len(rows), len(in.Trials))
	}
	for i, r := range rows[:4] {
		if !r.hasClass("aa") || r.all(named("td"))[1].textContent() != "A/A" {
			t.Errorf("A/A trial row %d: %q", i, r.textContent())
		}
	}
	if strings.Contains(html, "excluded —") || strings.Contains(md, "excluded —") || !strings.Contains(md, "(+4 A/A calibration)") {
		t.Errorf("A/A trials reported as excluded:\n%s", md)
	}
	for _, a := range arms[1:] {
		if !strings.Contains(md, "- **"+a.Name+"** vs **4k**: **") {
			t.Errorf("Markdown lacks the verdict of %s:\n%s", a.Name, md)
		}
	}
	if !strings.Contains(md, "noise ±3.1%, smallest detectable effect 4.2%") {
		t.Errorf("Markdown lacks the calibration:\n%s", md)
	}
	// Arms table in Markdown: header, rule, one row per arm.
	if n := strings.Count(md, "\n| "); n != 1+3 {
		t.Errorf("Markdown table has %d rows:\n%s", n, md)
	}
}

func TestSweep(t *testing.T) {
	in := scenario{Name: "clients", Arms: twoArms(), Effects: []float64{1, 1.04}, PerArm: 4, Clients: []int{1, 4, 16, 32}, Seconds: 20, Seed: 5}.build(t)
	html, doc, md := render(t, in)
	checkCharts(t, in, doc)
	checkNumbers(t, doc)
	ticks := chart(doc, "sweep").all(func(n *node) bool { return n.hasClass("tick") })
	var labels []string
	for _, tk := range ticks {
		labels = append(labels, tk.textContent())
	}
	if got := strings.Join(labels, " "); !strings.Contains(got, "1 4 16 32") {
		t.Errorf("sweep x axis %q", got)
	}
	if !strings.Contains(html, "Distribution per arm and client count") {
		t.Error("sweep distribution not grouped by client count")
	}
	if !strings.Contains(md, "| Clients | 4k | 2M |") || !strings.Contains(md, "\n| 32 | ") {
		t.Errorf("Markdown lacks the sweep table:\n%s", md)
	}
	// Every client count's decision, and the headline names its count.
	for _, c := range []string{"1 client:", "4 clients:", "16 clients:", "32 clients:"} {
		if !strings.Contains(md, "- **2M** vs **4k** at "+c) {
			t.Errorf("Markdown lacks the decision at %s\n%s", c, md)
		}
	}
	if !strings.Contains(html, "<strong>2M</strong> vs 4k at 32 clients:") {
		t.Error("headline does not name its client count")
	}
}

func TestExcludedTrial(t *testing.T) {
	reason := "fingerprint drift: thp.enabled: was never, now always"
	in := scenario{Name: "thp", Arms: twoArms(), Effects: []float64{1, 1}, PerArm: 8, Seconds: 60, Seed: 9,
		Exclude: map[int]string{5: reason}}.build(t)
	html, doc, md := render(t, in)
	checkCharts(t, in, doc)
	tl := chart(doc, "timeline")
	if !strings.Contains(tl.parent.textContent(), "trial 5 (") || !strings.Contains(tl.parent.textContent(), reason) {
		t.Error("timeline caption does not name the excluded trial and reason")
	}
	rows := trialRows(doc)
	if !rows[5].hasClass("excluded") || !strings.Contains(rows[5].textContent(), reason) {
		t.Errorf("trial row 5: %q", rows[5].textContent())
	}
	// The drift table holds thp.enabled, and only it; load and free
	// pages are summarised as ranges.
	fp := doc.all(func(n *node) bool { return n.attr["id"] == "fingerprint" })[0]
	tables := fp.all(named("table"))
	if len(tables) != 3 {
		t.Fatalf("fingerprint section has %d tables", len(tables))
	}
	drift := tables[1].all(func(n *node) bool { return n.name == "tr" && n.parent.name == "tbody" })
	if len(drift) != 1 || drift[0].textContent() != "54kthp.enabledneveralways" {
		var got []string
		for _, r := range drift {
			got = append(got, r.textContent())
		}
		t.Errorf("drift rows %q", got)
	}
	if v := tables[2].textContent(); !strings.Contains(v, "load1") || !strings.Contains(v, "hugepages.2M.free") || strings.Contains(v, "thp") {
		t.Errorf("volatile figures: %q", v)
	}
	for _, want := range []string{"1 trial(s) excluded", "fingerprint value(s) changed"} {
		if !strings.Contains(html, want) || !strings.Contains(md, want) {
			t.Errorf("warning %q missing", want)
		}
	}
	if !strings.Contains(md, "| 2M | hugepages.2M=600, pg.huge\\_pages=on | 7 (+1 excluded) |") && !strings.Contains(md, "| 4k (base) | vm.nr\\_hugepages=0, pg.huge\\_pages=off | 7 (+1 excluded) |") {
		t.Errorf("Markdown does not count the excluded trial:\n%s", md)
	}
}

func TestInconclusive(t *testing.T) {
	// Few trials, much noise, no effect: the plan cannot decide.
	in := scenario{Name: "swappiness", Arms: twoArms(), Effects: []float64{1, 1.01}, PerArm: 4, Seconds: 10, Noise: 0.15, Seed: 11,
		Plan: &stats.Plan{MaxPerArm: 4, Metric: "throughput"}}.build(t)
	if in.Decisions[0].Verdict != stats.Inconclusive {
		t.Fatalf("verdict %s", in.Decisions[0].Verdict)
	}
	html, doc, md := render(t, in)
	checkCharts(t, in, doc)
	if !strings.Contains(html, "? inconclusive") || !strings.Contains(md, "**inconclusive**") {
		t.Error("inconclusive verdict not shown")
	}
	if !strings.Contains(md, "**Warnings**") || !strings.Contains(md, "only 4 trials per arm") {
		t.Errorf("Markdown lacks the decision's warning:\n%s", md)
	}

	// An interval open on both sides (a look that spent no level) is
	// drawn with arrows, and shown as 0–∞, never as Inf.
	// A latency decision: lower is better, and the chart says so.
	d := in.Decisions[0]
	d.Interval = stats.Interval{0, math.Inf(1)}
	d.Metric, d.Direction = "p99", stats.LowerIsBetter
	in.Decisions = []stats.Decision{d}
	html, doc, md = render(t, in)
	if !strings.Contains(html, "← better") || !strings.Contains(html, "worse →") || !strings.Contains(html, "ratio of p99, treatment / 4k") {
		t.Error("effect chart does not follow the decision's metric and direction")
	}
	row := chart(doc, "effect").all(func(n *node) bool { return n.hasClass("effect") })[0]
	if n := len(row.all(named("polygon"))); n != 2 {
		t.Errorf("open interval drawn with %d arrows", n)
	}
	if !strings.Contains(md, "(95% CI 0–∞)") {
		t.Errorf("open interval in Markdown:\n%s", md)
	}
}

func TestEmpty(t *testing.T) {
	if err := HTML(&bytes.Buffer{}, Input{}); err == nil {
		t.Error("no error without an experiment")
	}
	if err := Markdown(&bytes.Buffer{}, Input{}); err == nil {
		t.Error("no error without an experiment")
	}
	// Killed before the first trial.
	e := &results.Experiment{ID: "20261121-093000-000000", Status: results.Interrupted, Created: time.Date(2026, 11, 21, 9, 30, 0, 0, time.UTC),
		Note: "killed", Arms: twoArms()}
	in := Input{Experiment: e}
	html, doc, md := render(t, in)
	checkCharts(t, in, doc)
	for _, want := range []string{"No per-second samples", "No trials were recorded", "ended interrupted", "no decision recorded", "Not recorded."} {
		if !strings.Contains(html, want) {
			t.Errorf("HTML lacks %q", want)
		}
	}
	if !strings.Contains(md, "no decision recorded (0 vs 0 trials counted)") || !strings.Contains(md, "no trials were recorded") {
		t.Errorf("Markdown:\n%s", md)
	}
	// Nothing at all: no arms, no trials.
	in = Input{Experiment: &results.Experiment{ID: "x"}}
	_, doc, _ = render(t, in)
	checkCharts(t, in, doc)

	// Trials without per-second samples and with zero throughput (a
	// failed trial kept for the record).
	in = scenario{Name: "no samples", Arms: twoArms(), Effects: []float64{1, 1.1}, PerArm: 4, Seed: 2}.build(t)
	in.Trials[2].OpsPerSec, in.Trials[2].Excluded = 0, "pgbench exited with status 1"
	in.Trials[3].OpsPerSec = math.NaN()
	_, doc, _ = render(t, in)
	if chart(doc, "timeline") != nil || chart(doc, "distribution") == nil {
		t.Error("charts for trials without samples")
	}
}

func TestHostileStrings(t *testing.T) {
	evil := `<script>alert(1)</script>`
	in := scenario{Name: evil + "</title>", Arms: []results.Arm{
		{Index: 0, Name: evil, Knobs: []string{`"><img src=x onerror=alert(1)>`}},
		{Index: 1, Name: "a|b *c* [x](javascript:alert(1)) `d`", Knobs: []string{"pg.work_mem='64MB'"}},
	}, Effects: []float64{1, 1.05}, PerArm: 5, Seconds: 5, Seed: 4, Exclude: map[int]string{1: `<iframe src="https://x.example/">`}}.build(t)
	in.Experiment.Note = `</p><script src="https://x.example/a.js"></script>`
	in.Experiment.Status = results.Failed
	in.Experiment.Plan = json.RawMessage(`{"script":"</pre><script>alert(2)</script>","url":"javascript:alert(3)"}`)
	in.Experiment.Host = json.RawMessage(`{"<b>k</b>":"<style>body{display:none}</style>"}`)
	in.Trials[0].Fingerprint = json.RawMessage(`{"x<y":"\"'><svg onload=alert(4)>"}`)
	in.Decisions[0].Reason = `<a href="https://evil.example/">click</a>`

	var h bytes.Buffer
	if err := HTML(&h, in); err != nil {
		t.Fatal(err)
	}
	html := h.String()
	doc := parseDoc(t, html)
	// Only our own elements: no script, no second style, no anchors
	// other than the page's contents.
	for _, n := range doc.all(func(*node) bool { return true }) {
		if n.name == "script" || n.name == "iframe" || n.name == "img" || n.name == "b" || (n.name == "svg" && n.attr["data-chart"] == "") {
			t.Errorf("injected <%s>", n.name)
		}
		for k := range n.attr {
			if strings.HasPrefix(k, "on") {
				t.Errorf("injected attribute %s on <%s>", k, n.name)
			}
		}
	}
	if n := len(doc.all(named("style"))); n != 1 {
		t.Errorf("%d style elements", n)
	}
	for _, a := range doc.all(named("a")) {
		if !strings.HasPrefix(a.attr["href"], "#") {
			t.Errorf("injected link %q", a.attr["href"])
		}
	}
	// The text is shown, escaped.
	if !strings.Contains(html, "&lt;script&gt;alert(1)&lt;/script&gt;") {
		t.Error("hostile arm name not shown escaped")
	}
	if !strings.Contains(doc.textContent(), `<iframe src="https://x.example/">`) {
		t.Error("hostile reason not shown as text")
	}

	var m bytes.Buffer
	if err := Markdown(&m, in); err != nil {
		t.Fatal(err)
	}
	md := m.String()
	for _, bad := range []string{"<script", "<img", "<iframe", "](javascript", "*c*", "`d`", "a|b"} {
		// Unescaped: not preceded by a backslash.
		if regexp.MustCompile(`(^|[^\\])` + regexp.QuoteMeta(bad)).MatchString(md) {
			t.Errorf("Markdown carries %q unescaped:\n%s", bad, md)
		}
	}
	if !strings.Contains(md, `\<script\>alert(1)\</script\>`) {
		t.Errorf("Markdown does not show the name escaped:\n%s", md)
	}
	// Every table row still has 7 cells (8 pipes) despite the names.
	for _, line := range strings.Split(md, "\n") {
		if strings.HasPrefix(line, "| ") && !strings.HasPrefix(line, "| Arm") {
			if n := strings.Count(line, "|") - strings.Count(line, `\|`); n != 8 {
				t.Errorf("table row with %d cell borders: %s", n, line)
			}
		}
	}
}

func TestLongTrialsAreBounded(t *testing.T) {
	// 3 arms x 16 trials of 30 minutes: lines are averaged into buckets
	// so the file stays small enough to mail.
	arms := []results.Arm{{Index: 0, Name: "a"}, {Index: 1, Name: "b"}, {Index: 2, Name: "c"}}
	in := scenario{Name: "long", Arms: arms, Effects: []float64{1, 1.02, 0.97}, PerArm: 16, Seconds: 1800, Seed: 8}.build(t)
	html, doc, _ := render(t, in)
	checkCharts(t, in, doc)
	if len(html) > 3<<20 {
		t.Errorf("report of %d KB", len(html)>>10)
	}
	t.Logf("3 arms x 16 trials x 1800 s: %.0f KB", float64(len(html))/1024)
}

func TestDecisionsFromStoredJSON(t *testing.T) {
	in := scenario{Name: "stored", Arms: twoArms(), Effects: []float64{1, 1.08}, PerArm: 6, Seconds: 5, Seed: 1}.build(t)
	for _, raw := range []func() []byte{
		func() []byte { b, _ := json.Marshal(in.Decisions); return b },
		func() []byte { b, _ := json.Marshal(map[string]any{"decisions": in.Decisions}); return b },
		func() []byte { b, _ := json.Marshal(in.Decisions[0]); return b },
	} {
		got := decisionsFromJSON(raw())
		if len(got) != 1 || got[0].Verdict != in.Decisions[0].Verdict || got[0].Ratio != in.Decisions[0].Ratio {
			t.Errorf("decisions from %s: %+v", raw(), got)
		}
	}
	if decisionsFromJSON([]byte(`{"verdict":""}`)) != nil || decisionsFromJSON([]byte(`nonsense`)) != nil {
		t.Error("decisions from nothing")
	}
}

// The run's account of excluded trials and their replacements is shown
// in the timing of the HTML report and in the Markdown summary.
func TestReplacementShown(t *testing.T) {
	const note = "2 trials excluded for steal time, 4 run in their place (2 per arm, of up to 8)"
	in := scenario{Name: "thp", Arms: twoArms(), Effects: []float64{1, 1}, PerArm: 8, Seconds: 10, Seed: 9,
		Exclude: map[int]string{3: "steal time 12% during the trial", 6: "steal time 15% during the trial"}}.build(t)
	in.Replacement = note
	html, _, md := render(t, in)
	if !strings.Contains(html, "Excluded trials") || !strings.Contains(html, note) {
		t.Error("HTML report lacks the replacement account")
	}
	if !strings.Contains(md, " · "+note) {
		t.Errorf("Markdown lacks the replacement account:\n%s", md)
	}
}
