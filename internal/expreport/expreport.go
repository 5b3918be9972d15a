// Package expreport presents a stored experiment (internal/results) and
// its decisions (internal/stats) to people: one self-contained HTML file
// with charts, and a Markdown summary to paste into a ticket.
//
// The HTML file needs nothing but itself: no scripts, fonts, style sheets
// or images are fetched; the charts are inline SVG drawn here, and hover
// details are SVG <title> elements. Every text from the database or the
// user goes through html/template, so a name like "<script>" is shown, not
// run. Colours come from the Okabe–Ito palette, readable with the common
// colour-vision deficiencies, and every chart also labels its series in
// text. Light and dark mode follow the reader's system setting.
//
// The charts show each trial's throughput (Trial.OpsPerSec and its
// per-second samples); the effect chart shows the decisions as stored,
// whatever metric they judged.
package expreport

import (
	"bytes"
	_ "embed"
	"encoding/json"
	"fmt"
	"html/template"
	"io"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/dbhost/dbhost/internal/results"
	"github.com/dbhost/dbhost/internal/stats"
)

// Input is what a report is made from: an experiment as results.Store.Get
// returns it, and the decisions of its last look.
type Input struct {
	Experiment *results.Experiment
	Trials     []results.Trial
	// Decisions holds one decision per treatment arm: Decisions[i] judges
	// the arm with Index i+1 against arm 0. When nil, the experiment's
	// stored Decision JSON is read instead (a list of stats.Decision, an
	// object with "decisions", or one stats.Decision).
	Decisions   []stats.Decision
	Calibration *stats.Calibration // optional: the A/A calibration
	// Replacement says, in one sentence, why trials were excluded and how
	// many ran in their place (optional; internal/experiment writes it).
	Replacement string
}

//go:embed report.html.tmpl
var pageText string

// page is parsed on first use: every dbhost command would pay for it at
// start-up otherwise.
var page = sync.OnceValue(func() *template.Template {
	return template.Must(template.New("report").Parse(pageText))
})

// HTML writes the report as one self-contained HTML file.
func HTML(w io.Writer, in Input) error {
	m, err := newModel(in)
	if err != nil {
		return err
	}
	v := m.view()
	// Render into memory first: a template error must not leave half a
	// file behind the caller's writer.
	var buf bytes.Buffer
	if err := page().Execute(&buf, v); err != nil {
		return fmt.Errorf("expreport: %w", err)
	}
	_, err = w.Write(buf.Bytes())
	return err
}

// view is what the HTML template shows.
type view struct {
	Title, ID, Name, Status, Note string
	Created, Finished             string
	Headlines, Verdicts           []verdictRow
	ArmsAt                        string // in a sweep: the client count of the arms table
	Volatile                      []volatileRow
	Arms                          []armRow
	Timeline                      *timelineChart
	Dist                          *distChart
	Effect                        *effectChart
	Sweep                         *sweepChart
	SweepTable                    *sweepTable
	Trials                        []trialRow
	FPTrial                       string
	Fingerprint                   []kv
	FPError                       string
	Drift                         []driftRow
	DriftHidden                   int
	Plan, PlanError               string
	Host                          []kv
	HostRaw                       string
	Timing                        []kv
	Calibration                   []kv
	CalWarnings                   []string
	Warnings                      []string
	CI                            string
}

type verdictRow struct {
	Arm, Class, Base        string
	At                      string // "at 16 clients" in a sweep
	Verdict, Symbol         string
	Ratio, Change, Interval string
	RatioMedians            string
	P, N                    string
	Reason                  string
}

type armRow struct {
	Name, Class, Role string
	Knobs             []string
	Counted, Excluded int
	Median, Min, Max  string
	P50, P95, P99     string
}

type trialRow struct {
	Seq                int
	Block              string
	AA                 bool // an A/A calibration trial
	Arm, Class         string
	Clients            string
	Ops, P50, P95, P99 string
	Errors             string
	Started, Dur       string
	Excluded           string
}

// sweepTable: median ops/s per client count (rows) and arm (columns).
type sweepTable struct {
	Arms []string
	Rows []sweepRow
}

type sweepRow struct {
	Clients int
	Cells   []string
}

// maxDriftRows bounds the drift table; the rest is counted.
const maxDriftRows = 200

func symbol(v stats.Verdict) string {
	switch v {
	case stats.Better:
		return "▲"
	case stats.Worse:
		return "▼"
	case stats.Equivalent:
		return "="
	}
	return "?"
}

// verdictRow shows one decision of arm a (at a client count, or 0).
func (m *model) verdictRow(a *arm, clients int, d *stats.Decision) verdictRow {
	base := m.base()
	vr := verdictRow{Arm: a.Name, Class: a.class(), Base: base.Name}
	if clients > 0 {
		vr.At = "at " + clientsLabel(clients)
	}
	if d == nil {
		vr.Verdict, vr.Symbol = "no decision", "–"
		vr.Ratio, vr.Change, vr.Interval, vr.RatioMedians, vr.P = "–", "–", "–", "–", "–"
		vr.N = fmt.Sprintf("%d / %d", len(a.counted), len(base.counted))
		return vr
	}
	vr.Verdict, vr.Symbol = string(d.Verdict), symbol(d.Verdict)
	vr.Ratio, vr.Change, vr.Interval = fmtRatio(d.Ratio)+"×", fmtChange(d.Ratio), interval(d)
	vr.RatioMedians = fmtRatio(d.RatioOfMedians) + "×"
	vr.P = fmtP(d.P)
	vr.N = fmt.Sprintf("%d / %d", d.NTreatment, d.NBase)
	vr.Reason = d.Reason
	return vr
}

// headlineClients finds the client count of an arm's headline decision
// in a sweep: the stored comparison that is the same decision.
func (m *model) headlineClients(a *arm) int {
	d := a.Decision
	if d == nil {
		return 0
	}
	for _, e := range m.effects {
		if x := e.decision; e.arm == a && e.clients > 0 && x != nil && x.Ratio == d.Ratio && x.P == d.P &&
			x.NBase == d.NBase && x.NTreatment == d.NTreatment && x.Verdict == d.Verdict {
			return e.clients
		}
	}
	return 0
}

func (m *model) view() view {
	e := m.e
	v := view{ID: e.ID, Name: e.Name, Status: e.Status, Note: e.Note, CI: m.ciLabel(),
		Created: fmtTime(e.Created), Finished: fmtTime(e.Finished)}
	v.Title = "dbhost experiment " + e.ID
	if e.Name != "" {
		v.Title += " — " + e.Name
	}
	for _, a := range m.arms {
		row := armRow{Name: a.Name, Class: a.class(), Role: "treatment", Knobs: a.Knobs, Counted: len(a.counted), Excluded: a.excluded}
		if a.Base {
			row.Role = "base"
		}
		xs, ts := m.atHead(a)
		s := summarize(xs)
		row.Median, row.Min, row.Max = fmtOps(s.Med), fmtOps(s.Min), fmtOps(s.Max)
		row.P50 = fmtDur(medianDur(ts, func(t *results.Trial) time.Duration { return t.P50 }))
		row.P95 = fmtDur(medianDur(ts, func(t *results.Trial) time.Duration { return t.P95 }))
		row.P99 = fmtDur(medianDur(ts, func(t *results.Trial) time.Duration { return t.P99 }))
		v.Arms = append(v.Arms, row)
		if !a.Base {
			v.Headlines = append(v.Headlines, m.verdictRow(a, m.headlineClients(a), a.Decision))
		}
	}
	for _, e := range m.effects {
		v.Verdicts = append(v.Verdicts, m.verdictRow(e.arm, e.clients, e.decision))
	}
	if m.sweep {
		v.ArmsAt = "at " + clientsLabel(m.head()) + ", the largest client count; see the charts for the others"
	}
	v.Timeline, v.Dist, v.Effect, v.Sweep = m.timeline(), m.distribution(), m.effect(), m.sweepChart()
	if m.sweep {
		st := &sweepTable{}
		for _, a := range m.arms {
			st.Arms = append(st.Arms, a.Name)
		}
		for _, cl := range m.clients {
			r := sweepRow{Clients: cl}
			for _, a := range m.arms {
				var xs []float64
				for _, t := range a.trials {
					if t.Clients == cl && t.Excluded == "" {
						xs = append(xs, t.OpsPerSec)
					}
				}
				cell := "–"
				if s := summarize(xs); s.N > 0 {
					cell = fmtOps(s.Med) + " (" + strconv.Itoa(s.N) + ")"
				}
				r.Cells = append(r.Cells, cell)
			}
			st.Rows = append(st.Rows, r)
		}
		v.SweepTable = st
	}
	for _, t := range m.all {
		a := m.armOf(t.Arm)
		r := trialRow{Seq: t.Seq, Block: strconv.Itoa(t.Block), Arm: a.Name, Class: a.class(), Clients: "–",
			Ops: fmtOps(t.OpsPerSec), P50: fmtDur(t.P50), P95: fmtDur(t.P95), P99: fmtDur(t.P99),
			Errors: strconv.FormatInt(t.Errors, 10), Started: fmtTime(t.Started), Excluded: t.Excluded}
		if t.Clients > 0 {
			r.Clients = strconv.Itoa(t.Clients)
		}
		if t.Block < 0 {
			r.Block, r.AA = "A/A", true
		}
		if t.Finished.After(t.Started) {
			r.Dur = fmtWall(t.Finished.Sub(t.Started))
		} else {
			r.Dur = "–"
		}
		v.Trials = append(v.Trials, r)
	}
	for _, t := range m.all {
		if len(t.Fingerprint) == 0 {
			continue
		}
		v.FPTrial = fmt.Sprintf("trial %d (%s)", t.Seq, m.armOf(t.Arm).Name)
		fp, err := flatten(t.Fingerprint)
		v.Fingerprint = fp
		if err != nil {
			v.FPError = "the stored fingerprint is not valid JSON: " + err.Error()
		}
		break
	}
	drift := m.drift()
	if len(drift) > maxDriftRows {
		v.DriftHidden = len(drift) - maxDriftRows
		drift = drift[:maxDriftRows]
	}
	v.Drift = drift
	v.Volatile = m.volatileFigures()
	if len(e.Plan) > 0 {
		var b bytes.Buffer
		if err := json.Indent(&b, e.Plan, "", "  "); err != nil {
			v.Plan, v.PlanError = string(e.Plan), "not valid JSON: "+err.Error()
		} else {
			v.Plan = b.String()
		}
	}
	if len(e.Host) > 0 {
		h, err := flatten(e.Host)
		if err != nil || len(h) == 0 || (len(h) == 1 && h[0].Key == "") {
			v.HostRaw = string(e.Host)
		} else {
			for i := range h {
				h[i].Value = humanNumber(h[i].Key, h[i].Value)
			}
			v.Host = h
		}
	}
	v.Timing = m.timing()
	v.Calibration, v.CalWarnings = m.calibration()
	v.Warnings = m.warnings()
	return v
}

// timing lists wall time and the trials used against the budget.
func (m *model) timing() []kv {
	e := m.e
	out := []kv{{"Started", fmtTime(e.Created)}}
	if !e.Finished.IsZero() {
		out = append(out, kv{"Finished", fmtTime(e.Finished)})
	}
	wall, ongoing := m.wall()
	w := fmtWall(wall)
	if ongoing && wall > 0 {
		w += " (up to the last trial; not finished)"
	}
	out = append(out, kv{"Wall time", w})
	if d := m.inTrials(); d > 0 {
		share := ""
		if wall > 0 {
			share = " (" + fmtPct(float64(d)/float64(wall)) + " of the wall time; the rest is set-up, restarts and warm-up)"
		}
		out = append(out, kv{"Time in trials", fmtWall(d) + share})
	}
	counted := m.countedTrials()
	out = append(out, kv{"Trials", fmt.Sprintf("%d run, %d counted, %d excluded", len(m.trials), counted, len(m.trials)-counted)})
	if m.replacement != "" {
		out = append(out, kv{"Excluded trials", m.replacement})
	}
	if len(m.aa) > 0 {
		out = append(out, kv{"A/A calibration trials", fmt.Sprintf("%d, before the comparison (block A/A in the trials table)", len(m.aa))})
	}
	var per []string
	for _, a := range m.arms {
		per = append(per, fmt.Sprintf("%s %d", a.Name, len(a.counted)))
	}
	if len(per) > 0 {
		out = append(out, kv{"Counted per arm", strings.Join(per, ", ")})
	}
	if m.budget > 0 {
		per, all := "per arm", m.budget*len(m.arms)
		if m.sweep {
			per, all = "per arm and client count", all*len(m.clients)
		}
		out = append(out, kv{"Budget", fmt.Sprintf("%d trials %s (%d in all); used %d of %d", m.budget, per, all, m.mostPerArm(), m.budget)})
	}
	for _, a := range m.arms {
		if d := a.Decision; d != nil && d.Looks > 0 {
			out = append(out, kv{"Looks", fmt.Sprintf("stopped at look %d of %d (%s)", d.Look, d.Looks, a.Name)})
			break
		}
	}
	return out
}

// calibration lists the A/A calibration, when there was one.
func (m *model) calibration() ([]kv, []string) {
	c := m.cal
	if c == nil {
		return nil, nil
	}
	out := []kv{
		{"A/A trials", strconv.Itoa(c.Samples)},
		{"Median", fmtOps(c.Median) + " ops/s"},
		{"Noise (robust CV)", "±" + fmtPct(c.NoiseCV)},
		{"Smallest detectable effect", fmt.Sprintf("%s (with %s power)", fmtPct(c.MDE), fmtPct(c.Power))},
	}
	if c.MaxPerArm > 0 {
		out = append(out, kv{"Budget", fmt.Sprintf("%d trials per arm, at most %s", c.MaxPerArm, fmtWall(c.Max))})
	}
	if c.TrialsPerArm > 0 {
		out = append(out, kv{"Expected at that effect", fmt.Sprintf("%.1f trials per arm, %s", c.TrialsPerArm, fmtWall(c.Expected))})
	}
	if c.TrialsPerArmNoChange > 0 {
		out = append(out, kv{"Expected with no change", fmt.Sprintf("%.1f trials per arm, %s", c.TrialsPerArmNoChange, fmtWall(c.ExpectedNoChange))})
	}
	if c.Method != "" {
		out = append(out, kv{"Method", c.Method})
	}
	return out, c.Warnings
}
