package expreport

import (
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"

	"github.com/dbhost/dbhost/internal/results"
	"github.com/dbhost/dbhost/internal/stats"
)

// Chart geometry, in SVG user units (the SVG scales to the page width).
const (
	chartW      = 760
	plotLeft    = 72
	plotRight   = chartW - 24
	legendRow   = 18
	maxPoints   = 600 // per trial line; longer trials are averaged into buckets
	charWidth   = 6.8 // average width of a 12px sans-serif character
	effectRowH  = 46
	effectLeft  = 150
	sweepRight  = chartW - 110
	tickTargets = 6
)

// tick is one labelled axis position.
type tick struct{ At, Label string }

// frame is a chart's canvas, plot area and axes.
type frame struct {
	W, H                     int
	L, R, T, B               string // plot area edges
	XTicks, YTicks           []tick
	XTitle, YTitle           string
	XTitleY, YTitleX, YMidY  string
	PH, TickY, TickEnd, XMid string // plot height; X tick label baseline and mark end; X centre
	Title, Desc              string
	Legend                   []legendItem
	l, r, t, b               float64
}

func newFrame(w, h int, l, r, t, b float64) frame {
	return frame{W: w, H: h, l: l, r: r, t: t, b: b,
		L: coord(l), R: coord(r), T: coord(t), B: coord(b),
		XTitleY: coord(b + 36), YTitleX: coord(16), YMidY: coord((t + b) / 2),
		PH: coord(b - t), XMid: coord((l + r) / 2), TickY: coord(b + 16), TickEnd: coord(b + 4)}
}

// yAxis fills Y ticks for a data range and returns the scale.
func (f *frame) yAxis(lo, hi float64) linear {
	vals, step := ticks(lo, hi, tickTargets)
	s := linear{vals[0], vals[len(vals)-1], f.b, f.t}
	for _, v := range vals {
		f.YTicks = append(f.YTicks, tick{coord(s.at(v)), tickLabel(v, step)})
	}
	return s
}

// xAxis fills X ticks for a data range and returns the scale.
func (f *frame) xAxis(lo, hi float64) linear {
	vals, step := ticks(lo, hi, tickTargets+2)
	s := linear{vals[0], vals[len(vals)-1], f.l, f.r}
	for _, v := range vals {
		f.XTicks = append(f.XTicks, tick{coord(s.at(v)), tickLabel(v, step)})
	}
	return s
}

// legendItem is one swatch and label; Dashed marks excluded trials.
type legendItem struct {
	X, Y, TX, X2 string
	Label        string
	Class        string
	Dashed       bool
}

type legendEntry struct {
	label, class string
	dashed       bool
}

// layoutLegend places entries left to right from x0 at the top, wrapping
// within width; it returns the items and the rows used.
func layoutLegend(entries []legendEntry, x0, x1, y0 float64) ([]legendItem, int) {
	if len(entries) == 0 {
		return nil, 0
	}
	var out []legendItem
	x, row := x0, 0
	for _, e := range entries {
		w := 22 + charWidth*float64(len([]rune(e.label))) + 16
		if x+w > x1 && x > x0 {
			x, row = x0, row+1
		}
		y := y0 + float64(row)*legendRow
		out = append(out, legendItem{X: coord(x), X2: coord(x + 16), Y: coord(y), TX: coord(x + 21), Label: e.label, Class: e.class, Dashed: e.dashed})
		x += w
	}
	return out, row + 1
}

func (m *model) armLegend(arms []*arm, withExcluded bool) []legendEntry {
	var es []legendEntry
	for i, a := range arms {
		l := a.label()
		if i == 0 && len(m.arms) > 1 {
			l += " (base)"
		}
		es = append(es, legendEntry{label: l, class: a.class()})
	}
	if withExcluded {
		es = append(es, legendEntry{label: "excluded trial", class: "excl", dashed: true})
	}
	return es
}

// timelineChart: throughput per second of every trial, warm-up excluded.
type timelineChart struct {
	frame
	Series   []timelineSeries
	Excluded []string
}

type timelineSeries struct {
	Seq      int
	Arm      int
	Class    string
	Excluded bool
	Points   string
	N        int
	Title    string
}

// measured returns a trial's per-second samples of the measured window
// (warm-up seconds, if stored, have negative At), averaged into at most
// maxPoints buckets.
func measured(t *results.Trial) []results.Second {
	var xs []results.Second
	for _, s := range t.Seconds {
		if s.At >= 0 && finite(s.At) && finite(s.Ops) {
			xs = append(xs, s)
		}
	}
	if len(xs) <= maxPoints {
		return xs
	}
	out := make([]results.Second, 0, maxPoints)
	for b := range maxPoints {
		lo, hi := b*len(xs)/maxPoints, (b+1)*len(xs)/maxPoints
		var at, ops float64
		for _, s := range xs[lo:hi] {
			at += s.At
			ops += s.Ops
		}
		n := float64(hi - lo)
		out = append(out, results.Second{At: at / n, Ops: ops / n})
	}
	return out
}

func (m *model) timeline() *timelineChart {
	maxAt, maxOps := 0.0, 0.0
	have := false
	excluded := false
	for i := range m.trials {
		for _, s := range measured(&m.trials[i]) {
			have = true
			maxAt, maxOps = max(maxAt, s.At), max(maxOps, s.Ops)
		}
		if m.trials[i].Excluded != "" && len(m.trials[i].Seconds) > 0 {
			excluded = true
		}
	}
	if !have {
		return nil
	}
	entries := m.armLegend(m.armsWithSeconds(), excluded)
	legend, rows := layoutLegend(entries, plotLeft, plotRight, 16)
	top := 16 + float64(rows)*legendRow
	c := &timelineChart{frame: newFrame(chartW, int(top)+260, plotLeft, plotRight, top, top+210)}
	c.Legend = legend
	c.Title = "Throughput over time, every trial"
	c.Desc = fmt.Sprintf("Per-second throughput of %d trials after warm-up, one line per trial, coloured by arm; excluded trials dashed grey.", len(m.trials))
	c.XTitle, c.YTitle = "seconds into the measured window", "ops/s"
	x := c.xAxis(0, max(maxAt, 1))
	y := c.yAxis(0, max(maxOps, 1))
	for i := range m.trials {
		t := &m.trials[i]
		pts := measured(t)
		if len(pts) == 0 {
			continue
		}
		a := m.armOf(t.Arm)
		var b strings.Builder
		for j, s := range pts {
			if j > 0 {
				b.WriteByte(' ')
			}
			b.WriteString(coord(x.at(s.At)) + "," + coord(y.at(s.Ops)))
		}
		title := fmt.Sprintf("trial %d · %s · block %d · %s ops/s", t.Seq, a.Name, t.Block, fmtOps(t.OpsPerSec))
		if t.Clients > 0 {
			title += fmt.Sprintf(" · %d clients", t.Clients)
		}
		s := timelineSeries{Seq: t.Seq, Arm: t.Arm, Class: a.class(), Points: b.String(), N: len(pts)}
		if t.Excluded != "" {
			s.Excluded, s.Class = true, "excl"
			title += " · excluded: " + t.Excluded
			c.Excluded = append(c.Excluded, fmt.Sprintf("trial %d (%s): %s", t.Seq, a.Name, t.Excluded))
		}
		s.Title = title
		c.Series = append(c.Series, s)
	}
	return c
}

func (m *model) armsWithSeconds() []*arm {
	var out []*arm
	for _, a := range m.arms {
		for _, t := range a.trials {
			if t.Excluded == "" && len(measured(t)) > 0 {
				out = append(out, a)
				break
			}
		}
	}
	return out
}

// distChart: every trial's sample as a dot, and a box per arm (per arm
// and client count in a sweep).
type distChart struct {
	frame
	Groups []distGroup
}

type distGroup struct {
	Label, Sub   string
	LX, LY, SubY string
	Class        string
	N            int
	Box          *box
	Dots         []dot
	Empty        bool
	EmptyY       string
}

type box struct {
	X, XR, W, CX, X1, X2 string
	Q1, Q3, Med, H       string
	Lo, Hi               string
	Title                string
}

type dot struct {
	CX, CY   string
	Excluded bool
	Title    string
}

func (m *model) distribution() *distChart {
	type key struct{ arm, clients int }
	type grp struct {
		a       *arm
		clients int
		trials  []*results.Trial
	}
	var groups []*grp
	idx := map[key]*grp{}
	add := func(a *arm, clients int) *grp {
		k := key{a.Index, clients}
		if g, ok := idx[k]; ok {
			return g
		}
		g := &grp{a: a, clients: clients}
		idx[k] = g
		groups = append(groups, g)
		return g
	}
	if m.sweep {
		for _, c := range m.clients {
			for _, a := range m.arms {
				for _, t := range a.trials {
					if t.Clients == c {
						g := add(a, c)
						g.trials = append(g.trials, t)
					}
				}
			}
		}
	} else {
		for _, a := range m.arms {
			g := add(a, 0)
			g.trials = a.trials
		}
	}
	lo, hi := math.Inf(1), math.Inf(-1)
	for _, g := range groups {
		for _, t := range g.trials {
			if finite(t.OpsPerSec) {
				lo, hi = min(lo, t.OpsPerSec), max(hi, t.OpsPerSec)
			}
		}
	}
	if len(groups) == 0 || lo > hi {
		return nil
	}
	c := &distChart{frame: newFrame(chartW, 300, plotLeft, plotRight, 20, 236)}
	c.Title = "Distribution per arm"
	if m.sweep {
		c.Title = "Distribution per arm and client count"
	}
	c.Desc = "Each dot is one trial's throughput; the box spans the quartiles of the trials that count, the thick line is their median, the whiskers their range; hollow grey dots are excluded trials."
	c.YTitle = "ops/s per trial"
	pad := (hi - lo) * 0.08
	y := c.yAxis(max(0, lo-pad), hi+pad)
	gw := (c.r - c.l) / float64(len(groups))
	bw := min(56, gw*0.5)
	for gi, g := range groups {
		cx := c.l + gw*(float64(gi)+0.5)
		dg := distGroup{Label: shorten(g.a.Name, max(6, int(gw/charWidth))), Class: g.a.class(), LX: coord(cx), LY: coord(c.b + 16), SubY: coord(c.b + 30)}
		if g.clients > 0 {
			dg.Sub = clientsLabel(g.clients)
		}
		var xs []float64
		for j, t := range g.trials {
			if !finite(t.OpsPerSec) {
				continue
			}
			// A fixed spread (golden-ratio steps) keeps dots apart and
			// the file identical from run to run.
			jit := (math.Mod(float64(j)*0.618034, 1) - 0.5) * bw * 0.8
			d := dot{CX: coord(cx + jit), CY: coord(y.at(t.OpsPerSec)), Excluded: t.Excluded != "",
				Title: fmt.Sprintf("trial %d · %s · %s ops/s", t.Seq, g.a.Name, fmtOps(t.OpsPerSec))}
			if d.Excluded {
				d.Title += " · excluded: " + t.Excluded
			} else {
				xs = append(xs, t.OpsPerSec)
			}
			dg.Dots = append(dg.Dots, d)
		}
		dg.N = len(xs)
		if s := summarize(xs); s.N > 0 {
			q3, q1 := y.at(s.Q3), y.at(s.Q1)
			dg.Box = &box{X: coord(cx - bw/2), XR: coord(cx + bw/2), W: coord(bw), CX: coord(cx), X1: coord(cx - bw/4), X2: coord(cx + bw/4),
				Q1: coord(q1), Q3: coord(q3), H: coord(max(q1-q3, 1)), Med: coord(y.at(s.Med)),
				Lo: coord(y.at(s.Min)), Hi: coord(y.at(s.Max)),
				Title: fmt.Sprintf("%s: median %s ops/s, quartiles %s–%s, range %s–%s, %d trials", g.a.Name,
					fmtOps(s.Med), fmtOps(s.Q1), fmtOps(s.Q3), fmtOps(s.Min), fmtOps(s.Max), s.N)}
		} else {
			dg.Empty, dg.EmptyY = true, coord((c.t+c.b)/2)
		}
		c.Groups = append(c.Groups, dg)
	}
	return c
}

// effectChart: each treatment's ratio to the base with its interval.
type effectChart struct {
	frame
	HasBand       bool
	BandX, BandW  string
	OneX          string
	BandLabel     string
	Rows          []effectRow
	LeftHint      string
	RightHint     string
	HintY         string
	LabelX, BandY string
	BandCX        string
}

type effectRow struct {
	Arm, Clients   int
	Label, Class   string
	Y, YA, YB      string
	LabelY, TY     string
	X1, X2, PX     string
	Cap1, Cap2     bool
	Arrow1, Arrow2 string // polygon points for open ends
	Text           string
	Verdict        string
	HasPoint       bool
	Title          string
}

func (m *model) effect() *effectChart {
	treat := m.effects
	if len(treat) == 0 {
		return nil
	}
	vals := []float64{1}
	eq := 0.0
	for _, e := range treat {
		d := e.decision
		if d == nil {
			continue
		}
		if d.Equivalence > 0 && finite(d.Equivalence) {
			eq = max(eq, d.Equivalence)
		}
		for _, v := range []float64{d.Ratio, d.Interval.Lo(), d.Interval.Hi()} {
			if finite(v) && v > 0 {
				vals = append(vals, v)
			}
		}
	}
	if eq > 0 {
		vals = append(vals, 1-eq, 1+eq)
	}
	lo, hi := vals[0], vals[0]
	for _, v := range vals {
		lo, hi = min(lo, v), max(hi, v)
	}
	span := max(hi-lo, 0.04)
	lo, hi = lo-span*0.12, hi+span*0.12
	top := 16.0
	h := top + effectRowH*float64(len(treat))
	c := &effectChart{frame: newFrame(chartW, int(h)+64, effectLeft, plotRight, top, h)}
	c.Title = "Effect against the base arm"
	c.Desc = fmt.Sprintf("Ratio treatment/base of %s per treatment arm, with its %s; the shaded band is the equivalence margin.", m.metric, m.ciLabel())
	if treat[0].clients > 0 {
		c.Desc = fmt.Sprintf("Ratio treatment/base of %s per treatment arm and client count (arm @ clients), with its %s; the shaded band is the equivalence margin.", m.metric, m.ciLabel())
	}
	c.XTitle = fmt.Sprintf("ratio of %s, treatment / %s", m.metric, m.base().label())
	x := c.xAxis(max(lo, 0), hi)
	c.OneX = coord(x.at(1))
	if eq > 0 {
		c.HasBand = true
		c.BandX = coord(x.clamp(x.at(1 - eq)))
		c.BandW = coord(x.clamp(x.at(1+eq)) - x.clamp(x.at(1-eq)))
		c.BandCX = coord(x.clamp(x.at(1)))
		c.BandLabel = "±" + strings.TrimSuffix(strings.TrimSuffix(strconv.FormatFloat(100*eq, 'f', 1, 64), "0"), ".") + "% equivalence"
	}
	c.HintY = coord(h + 52)
	c.LabelX, c.BandY = coord(effectLeft-10), coord(top-4)
	c.LeftHint, c.RightHint = "← worse", "better →"
	if m.direction == stats.LowerIsBetter {
		c.LeftHint, c.RightHint = "← better", "worse →"
	}
	for i, e := range treat {
		yc := top + effectRowH*(float64(i)+0.62)
		r := effectRow{Arm: e.arm.Index, Clients: e.clients, Label: e.label(), Class: e.arm.class(), Y: coord(yc), YA: coord(yc - 6), YB: coord(yc + 6), LabelY: coord(yc + 4), TY: coord(yc - 12)}
		d := e.decision
		if d == nil {
			r.Text = "no decision recorded"
			c.Rows = append(c.Rows, r)
			continue
		}
		r.Verdict = string(d.Verdict)
		ilo, ihi := d.Interval.Lo(), d.Interval.Hi()
		x1, x2 := c.l, c.r
		if finite(ilo) && ilo > 0 {
			x1, r.Cap1 = x.clamp(x.at(ilo)), true
		} else {
			r.Arrow1 = arrow(c.l, yc, -1)
		}
		if finite(ihi) && ihi > 0 {
			x2, r.Cap2 = x.clamp(x.at(ihi)), true
		} else {
			r.Arrow2 = arrow(c.r, yc, 1)
		}
		r.X1, r.X2 = coord(x1), coord(x2)
		if finite(d.Ratio) && d.Ratio > 0 {
			r.HasPoint, r.PX = true, coord(x.clamp(x.at(d.Ratio)))
		}
		r.Text = fmt.Sprintf("%s · %s× (%s %s) · p=%s · %d vs %d trials", d.Verdict, fmtRatio(d.Ratio), m.ciLabel(), interval(d), fmtP(d.P), d.NTreatment, d.NBase)
		r.Title = d.Reason
		c.Rows = append(c.Rows, r)
	}
	return c
}

// arrow is a small triangle at x pointing left (dir −1) or right (+1).
func arrow(x, y float64, dir float64) string {
	return coord(x) + "," + coord(y) + " " + coord(x-dir*8) + "," + coord(y-5) + " " + coord(x-dir*8) + "," + coord(y+5)
}

// sweepChart: median throughput against client count, per arm.
type sweepChart struct {
	frame
	Lines []sweepLine
}

type sweepLine struct {
	Arm          int
	Label, Class string
	Points       string
	N            int
	Marks        []sweepMark
	EndX, EndY   string
	endY         float64
}

type sweepMark struct {
	CX, CY, Y1, Y2 string
	Title          string
}

func (m *model) sweepChart() *sweepChart {
	if !m.sweep {
		return nil
	}
	type point struct {
		med, lo, hi float64
		n           int
	}
	pts := map[int]map[int]point{}
	maxY := 0.0
	for _, a := range m.arms {
		pts[a.Index] = map[int]point{}
		for _, cl := range m.clients {
			var xs []float64
			for _, t := range a.trials {
				if t.Clients == cl && t.Excluded == "" && finite(t.OpsPerSec) {
					xs = append(xs, t.OpsPerSec)
				}
			}
			if s := summarize(xs); s.N > 0 {
				pts[a.Index][cl] = point{s.Med, s.Min, s.Max, s.N}
				maxY = max(maxY, s.Max)
			}
		}
	}
	if maxY == 0 {
		return nil
	}
	legend, rows := layoutLegend(m.armLegend(m.arms, false), plotLeft, plotRight, 16)
	top := 16 + float64(rows)*legendRow
	c := &sweepChart{frame: newFrame(chartW, int(top)+270, plotLeft, sweepRight, top, top+220)}
	c.Legend = legend
	c.Title = "Throughput against client count"
	c.Desc = "Median throughput of the trials that count at each client count, per arm; whiskers span their minimum and maximum."
	c.XTitle, c.YTitle = "clients", "ops/s (median of trials)"
	y := c.yAxis(0, maxY)
	step := (c.r - c.l) / float64(len(m.clients))
	xAt := func(i int) float64 { return c.l + step*(float64(i)+0.5) }
	for i, cl := range m.clients {
		c.XTicks = append(c.XTicks, tick{coord(xAt(i)), strconv.Itoa(cl)})
	}
	n := len(m.arms)
	for ai, a := range m.arms {
		// Arms sit side by side around each client count so that
		// whiskers do not hide each other.
		dx := (float64(ai) - float64(n-1)/2) * min(8, step/float64(n+1))
		l := sweepLine{Arm: a.Index, Label: a.label(), Class: a.class()}
		var b strings.Builder
		var lastX, lastY float64
		for i, cl := range m.clients {
			p, ok := pts[a.Index][cl]
			if !ok {
				continue
			}
			px, py := xAt(i)+dx, y.at(p.med)
			if b.Len() > 0 {
				b.WriteByte(' ')
			}
			b.WriteString(coord(px) + "," + coord(py))
			l.Marks = append(l.Marks, sweepMark{CX: coord(px), CY: coord(py), Y1: coord(y.at(p.lo)), Y2: coord(y.at(p.hi)),
				Title: fmt.Sprintf("%s · %d clients · median %s ops/s (%s–%s, %d trials)", a.Name, cl, fmtOps(p.med), fmtOps(p.lo), fmtOps(p.hi), p.n)})
			lastX, lastY = px, py
		}
		if len(l.Marks) == 0 {
			continue
		}
		l.Points, l.N = b.String(), len(l.Marks)
		l.EndX, l.endY = coord(lastX+10), lastY+4
		c.Lines = append(c.Lines, l)
	}
	// End labels of lines that finish close together are pushed apart.
	order := make([]*sweepLine, len(c.Lines))
	for i := range c.Lines {
		order[i] = &c.Lines[i]
	}
	sort.SliceStable(order, func(i, j int) bool { return order[i].endY < order[j].endY })
	for i := 1; i < len(order); i++ {
		order[i].endY = max(order[i].endY, order[i-1].endY+13)
	}
	for _, l := range order {
		l.EndY = coord(l.endY)
	}
	return c
}

func clientsLabel(n int) string {
	if n == 1 {
		return "1 client"
	}
	return strconv.Itoa(n) + " clients"
}
