package galeraprove

import (
	"bytes"
	_ "embed"
	"fmt"
	"html/template"
	"io"
	"strconv"
	"sync"
	"time"
)

//go:embed report.html.tmpl
var pageText string

// page is parsed on first use, not at every dbhost start.
var page = sync.OnceValue(func() *template.Template {
	return template.Must(template.New("proof").Parse(pageText))
})

// WriteHTML writes the proof as one self-contained HTML page in the look
// of the experiment reports: no scripts, no fetched assets, every name
// through html/template; the timeline is inline SVG.
func (r *Report) WriteHTML(w io.Writer) error {
	var buf bytes.Buffer
	if err := page().Execute(&buf, r.view()); err != nil {
		return fmt.Errorf("galeraprove: %w", err)
	}
	_, err := w.Write(buf.Bytes())
	return err
}

type htmlView struct {
	Title, Lab, Members, Headline, Class string
	Error                                string
	Rows                                 []htmlRow
	Timeline                             *timeline
	Tolerance                            []kv
	Findings                             []string
	Nodes                                []htmlNode
	Timing                               []kv
}

type kv struct{ Key, Value string }

type htmlRow struct {
	Name, What, Kind      string
	Predicted, Observed   string
	Match                 bool
	Reacted, Why, Elapsed string
	Notes                 []string
	Nodes                 []NodeResult
}

type htmlNode struct {
	Name, Role, Addr, Netns string
	Weight, Segment         int
}

func (r *Report) view() htmlView {
	v := htmlView{Title: "Galera proof", Lab: r.Lab.Name, Members: members(r), Error: r.Error}
	switch {
	case r.Error != "":
		v.Headline, v.Class = fmt.Sprintf("Stopped after %d scenarios: %d of %d matched", r.Total, r.Matched, r.Total), "worse"
	case r.AllMatched():
		v.Headline, v.Class = fmt.Sprintf("✓ every prediction held: %d of %d scenarios matched", r.Matched, r.Total), "better"
	default:
		v.Headline, v.Class = fmt.Sprintf("✗ %d of %d scenarios matched the prediction", r.Matched, r.Total), "worse"
	}
	for _, res := range r.Results {
		v.Rows = append(v.Rows, htmlRow{Name: res.Scenario.Name, What: describe(res.Scenario), Kind: string(res.Scenario.Kind),
			Predicted: predicted(res), Observed: observed(res), Match: res.Match, Reacted: reacted(res),
			Why: res.Prediction.Why, Elapsed: res.Elapsed.String(), Notes: res.Notes, Nodes: res.Nodes})
	}
	v.Timeline = r.timeline()
	t := r.Tolerance
	worst := t.Worst
	if worst != "" {
		worst += map[bool]string{true: " (survived)", false: " (not survived)"}[t.WorstSurvives]
	}
	v.Tolerance = []kv{
		{"Members (weight)", fmt.Sprintf("%d data nodes, %d arbitrators, weight %d", t.DataNodes, t.Arbitrators, t.Weight)},
		{"Failures at once", strconv.Itoa(t.AtOnce)},
		{"Failures one by one", strconv.Itoa(t.OneByOne)},
		{"Clean shutdowns", strconv.Itoa(t.CleanShutdown)},
		{"Worst single failure", worst},
	}
	v.Findings = t.Findings
	for _, n := range r.Lab.Nodes {
		role := "data node"
		if n.Arbitrator {
			role = "arbitrator"
		}
		v.Nodes = append(v.Nodes, htmlNode{Name: n.Name, Role: role, Addr: n.Addr, Netns: n.Netns, Weight: n.Weight, Segment: n.Segment})
	}
	v.Timing = []kv{
		{"Lab start", r.Lab.Start.String()},
		{"Lab stop", stopped(r.Lab.Stop)},
		{"evs.suspect_timeout", r.Lab.SuspectTimeout.String()},
		{"Deadline for a reaction", r.Lab.Deadline.String()},
		{"Proof started", r.Started.UTC().Format(time.RFC3339)},
		{"Proof took", r.Elapsed.String()},
	}
	return v
}

// timeline is one bar per scenario: recovery to a healthy baseline, then
// the failures and the cluster's reaction, on one time axis.
type timeline struct {
	W, H, L, R int
	Ticks      []tick
	Rows       []timelineRow
	AxisY      int
}

type tick struct {
	X     int
	Label string
}

type timelineRow struct {
	Y, TextY, LabelX                  int
	Name, Class                       string
	RecoverW, ReactX, ReactW, RestX   int
	RestW                             int
	Marks                             []mark
	Title                             string
	RecoverTitle, ReactTitle, EndText string
	EndX                              int
}

type mark struct {
	X, Y1, Y2 int
	Title     string
}

func (r *Report) timeline() *timeline {
	if len(r.Results) == 0 {
		return nil
	}
	const rowH, top, left, width = 28, 10, 180, 960
	right := width - 70
	var longest time.Duration
	for _, res := range r.Results {
		longest = max(longest, time.Duration(res.Elapsed))
	}
	if longest <= 0 {
		longest = time.Second
	}
	step := tickStep(longest)
	scale := func(d Millis) int {
		return left + int(float64(right-left)*float64(d)/float64(longest))
	}
	tl := &timeline{W: width, L: left, R: right}
	for i, res := range r.Results {
		y := top + i*rowH
		row := timelineRow{Y: y + 6, TextY: y + 19, LabelX: left - 8, Name: res.Scenario.Name, Class: "v-" + map[bool]string{true: "better", false: "worse"}[res.Match]}
		row.RecoverW = scale(res.Recover) - left
		row.RecoverTitle = "recovery to a healthy cluster: " + res.Recover.String()
		row.ReactX = scale(res.Failed)
		row.ReactW = max(scale(res.Failed+res.React)-row.ReactX, 2)
		row.ReactTitle = "from the last failure to settled views: " + reacted(res)
		row.RestX = scale(res.Recover)
		row.RestW = max(scale(res.Elapsed)-row.RestX, 0)
		for _, s := range res.Steps {
			row.Marks = append(row.Marks, mark{X: scale(s.At), Y1: y + 2, Y2: y + 26, Title: s.At.String() + ": " + s.What})
		}
		row.EndX = scale(res.Elapsed) + 6
		row.EndText = verdict(res.Match)
		tl.Rows = append(tl.Rows, row)
	}
	tl.AxisY = top + len(r.Results)*rowH + 4
	for d := time.Duration(0); d <= longest; d += step {
		tl.Ticks = append(tl.Ticks, tick{X: scale(Millis(d)), Label: strconv.Itoa(int(d.Seconds())) + " s"})
	}
	tl.H = tl.AxisY + 22
	return tl
}

// tickStep picks 1, 2, 5, 10, 20, 30 or 60 s so that about eight ticks fit.
func tickStep(d time.Duration) time.Duration {
	for _, s := range []int{1, 2, 5, 10, 20, 30, 60} {
		if d/(time.Duration(s)*time.Second) <= 8 {
			return time.Duration(s) * time.Second
		}
	}
	return 120 * time.Second
}
