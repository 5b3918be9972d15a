package expreport

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	mstats "github.com/aclements/go-moremath/stats"

	"github.com/dbhost/dbhost/internal/results"
	"github.com/dbhost/dbhost/internal/stats"
)

// palette is the number of arm colours (Okabe–Ito based, see the CSS);
// further arms reuse them, and every chart also labels arms in text.
const palette = 8

// model is the input sorted out once for both renderers.
type model struct {
	e       *results.Experiment
	arms    []*arm          // by Index
	trials  []results.Trial // the comparison's trials
	aa      []results.Trial // A/A calibration trials (Block < 0)
	all     []results.Trial // both, in order
	effects []effect        // what the effect chart and verdict table show
	cal     *stats.Calibration
	// replacement: Input.Replacement
	replacement string
	sweep       bool
	clients     []int // distinct client counts > 0, ascending
	metric      string
	direction   stats.Direction
	alpha       float64
	budget      int // trials per arm planned; 0 when unknown
}

// arm is one arm with what was measured for it.
type arm struct {
	Index    int
	Name     string
	Knobs    []string
	Color    int
	Base     bool
	Decision *stats.Decision // nil for the base arm and arms without one
	counted  []float64       // ops/s of the trials that count
	trials   []*results.Trial
	excluded int
}

func (a *arm) class() string { return "k" + strconv.Itoa(a.Color) }

// label is the arm's name as charts show it: long names are cut so the
// layout holds; tables show them in full.
func (a *arm) label() string { return shorten(a.Name, 28) }

func shorten(s string, n int) string {
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	return string(r[:n-1]) + "…"
}

func newModel(in Input) (*model, error) {
	if in.Experiment == nil {
		return nil, fmt.Errorf("expreport: no experiment")
	}
	m := &model{e: in.Experiment, cal: in.Calibration, replacement: in.Replacement, metric: "throughput", alpha: stats.DefaultAlpha}
	byIndex := map[int]*arm{}
	for _, a := range in.Experiment.Arms {
		if _, dup := byIndex[a.Index]; dup {
			continue
		}
		x := &arm{Index: a.Index, Name: a.Name, Knobs: a.Knobs}
		byIndex[a.Index] = x
		m.arms = append(m.arms, x)
	}
	m.all = slices.Clone(in.Trials)
	sort.SliceStable(m.all, func(i, j int) bool { return m.all[i].Seq < m.all[j].Seq })
	// A/A calibration trials (negative block) measure the host's noise;
	// they are listed but take no part in the comparison.
	for _, t := range m.all {
		if t.Block < 0 {
			m.aa = append(m.aa, t)
		} else {
			m.trials = append(m.trials, t)
		}
	}
	// Trials of an arm the experiment does not list still show, under a
	// made-up name, rather than vanish.
	for _, t := range m.trials {
		if _, ok := byIndex[t.Arm]; !ok {
			x := &arm{Index: t.Arm, Name: "arm " + strconv.Itoa(t.Arm)}
			byIndex[t.Arm] = x
			m.arms = append(m.arms, x)
		}
	}
	sort.SliceStable(m.arms, func(i, j int) bool { return m.arms[i].Index < m.arms[j].Index })
	for i, a := range m.arms {
		a.Color = i % palette
		a.Base = i == 0
	}
	seen := map[int]bool{}
	for i := range m.trials {
		t := &m.trials[i]
		a := byIndex[t.Arm]
		a.trials = append(a.trials, t)
		if t.Excluded != "" {
			a.excluded++
		} else if finite(t.OpsPerSec) {
			a.counted = append(a.counted, t.OpsPerSec)
		}
		if t.Clients > 0 && !seen[t.Clients] {
			seen[t.Clients] = true
			m.clients = append(m.clients, t.Clients)
		}
	}
	sort.Ints(m.clients)
	m.sweep = len(m.clients) > 1

	decisions := in.Decisions
	if decisions == nil {
		decisions = decisionsFromJSON(in.Experiment.Decision)
	}
	for i := range decisions {
		d := decisions[i]
		if d.Verdict == "" {
			continue
		}
		if a, ok := byIndex[i+1]; ok && !a.Base {
			a.Decision = &d
		}
		if d.Metric != "" {
			m.metric = d.Metric
		}
		m.direction = d.Direction
		if d.Alpha > 0 {
			m.alpha = d.Alpha
		}
	}
	m.effects = m.effectRows(decisions, comparisonsFromJSON(in.Experiment.Decision))
	m.budget = planBudget(in.Experiment.Plan)
	if m.budget == 0 && in.Calibration != nil {
		m.budget = in.Calibration.MaxPerArm
	}
	return m, nil
}

// decisionsFromJSON reads the stored decision when the caller passed
// none: a list of stats.Decision, an object holding one under
// "decisions", or a single stats.Decision.
func decisionsFromJSON(raw json.RawMessage) []stats.Decision {
	if len(raw) == 0 {
		return nil
	}
	var list []stats.Decision
	if json.Unmarshal(raw, &list) == nil {
		return list
	}
	var wrapped struct {
		Decisions []stats.Decision `json:"decisions"`
	}
	if json.Unmarshal(raw, &wrapped) == nil && len(wrapped.Decisions) > 0 {
		return wrapped.Decisions
	}
	var one stats.Decision
	if json.Unmarshal(raw, &one) == nil && one.Verdict != "" {
		return []stats.Decision{one}
	}
	return nil
}

// effect is one comparison with the base arm: a treatment arm, at one
// client count in a sweep (0 otherwise).
type effect struct {
	arm      *arm
	clients  int
	decision *stats.Decision // nil: none recorded
}

func (e effect) label() string {
	if e.clients > 0 {
		return e.arm.label() + " @ " + strconv.Itoa(e.clients)
	}
	return e.arm.label()
}

// comparison is one decision at one client count, as the experiment
// package stores them beside the headline decisions.
type comparison struct {
	Arm      int            `json:"arm"`
	Clients  int            `json:"clients"`
	Decision stats.Decision `json:"decision"`
}

// comparisonsFromJSON reads the per-client-count decisions of a sweep
// from the stored decision ({"comparisons": [{arm, clients, decision}]}),
// when it holds them.
func comparisonsFromJSON(raw json.RawMessage) []comparison {
	var v struct {
		Comparisons []comparison `json:"comparisons"`
	}
	if len(raw) == 0 || json.Unmarshal(raw, &v) != nil {
		return nil
	}
	return v.Comparisons
}

// effectRows lists the comparisons to show: in a sweep every client
// count's decision when they were stored, else one headline decision per
// treatment arm.
func (m *model) effectRows(decisions []stats.Decision, comps []comparison) []effect {
	var out []effect
	if m.sweep {
		for _, a := range m.arms[min(1, len(m.arms)):] {
			for _, cl := range m.clients {
				for i := range comps {
					if c := &comps[i]; c.Arm == a.Index && c.Clients == cl && c.Decision.Verdict != "" {
						out = append(out, effect{arm: a, clients: cl, decision: &c.Decision})
					}
				}
			}
		}
		if len(out) > 0 {
			return out
		}
	}
	for _, a := range m.arms[min(1, len(m.arms)):] {
		out = append(out, effect{arm: a, decision: a.Decision})
	}
	return out
}

// planBudget finds the trials-per-arm budget in the stored plan: the
// first "max_per_arm" (the stats.Plan field) at any depth.
func planBudget(raw json.RawMessage) int {
	var v any
	if len(raw) == 0 || json.Unmarshal(raw, &v) != nil {
		return 0
	}
	var find func(any) int
	find = func(v any) int {
		switch x := v.(type) {
		case map[string]any:
			if n, ok := x["max_per_arm"].(float64); ok && n > 0 {
				return int(n)
			}
			keys := make([]string, 0, len(x))
			for k := range x {
				keys = append(keys, k)
			}
			sort.Strings(keys)
			for _, k := range keys {
				if n := find(x[k]); n > 0 {
					return n
				}
			}
		case []any:
			for _, e := range x {
				if n := find(e); n > 0 {
					return n
				}
			}
		}
		return 0
	}
	return find(v)
}

// head is the client count that per-arm figures describe: in a sweep the
// largest (where the headline decisions are made), else 0 (all trials).
func (m *model) head() int {
	if m.sweep {
		return m.clients[len(m.clients)-1]
	}
	return 0
}

// atHead returns an arm's counted samples and its trials at the head
// client count.
func (m *model) atHead(a *arm) ([]float64, []*results.Trial) {
	if !m.sweep {
		return a.counted, a.trials
	}
	var xs []float64
	var ts []*results.Trial
	for _, t := range a.trials {
		if t.Clients != m.head() {
			continue
		}
		ts = append(ts, t)
		if t.Excluded == "" && finite(t.OpsPerSec) {
			xs = append(xs, t.OpsPerSec)
		}
	}
	return xs, ts
}

// mostPerArm is the largest number of counted trials of one arm (at one
// client count in a sweep): the share of the budget used.
func (m *model) mostPerArm() int {
	most := 0
	for _, a := range m.arms {
		n := map[int]int{}
		for _, t := range a.trials {
			if t.Excluded == "" {
				n[t.Clients]++
				most = max(most, n[t.Clients])
			}
		}
	}
	return most
}

// base is the arm the others are compared with.
func (m *model) base() *arm {
	if len(m.arms) == 0 {
		return nil
	}
	return m.arms[0]
}

// countedTrials is the number of trials that count.
func (m *model) countedTrials() int {
	n := 0
	for _, t := range m.trials {
		if t.Excluded == "" {
			n++
		}
	}
	return n
}

// wall is the experiment's wall-clock time; ongoing says it has not
// finished (the span then ends at the last trial).
func (m *model) wall() (d time.Duration, ongoing bool) {
	end := m.e.Finished
	if end.IsZero() {
		ongoing = true
		for _, t := range m.all {
			if t.Finished.After(end) {
				end = t.Finished
			}
		}
	}
	if end.IsZero() || m.e.Created.IsZero() || end.Before(m.e.Created) {
		return 0, ongoing
	}
	return end.Sub(m.e.Created), ongoing
}

// inTrials is the time spent inside trials, A/A ones included.
func (m *model) inTrials() time.Duration {
	var d time.Duration
	for _, t := range m.all {
		if t.Finished.After(t.Started) {
			d += t.Finished.Sub(t.Started)
		}
	}
	return d
}

// summary describes a set of samples.
type summary struct {
	N                     int
	Min, Q1, Med, Q3, Max float64
}

func summarize(xs []float64) summary {
	s := summary{N: len(xs), Min: math.NaN(), Q1: math.NaN(), Med: math.NaN(), Q3: math.NaN(), Max: math.NaN()}
	if len(xs) == 0 {
		return s
	}
	smp := mstats.Sample{Xs: slices.Sorted(slices.Values(xs)), Sorted: true}
	s.Min, s.Max = smp.Bounds()
	s.Q1, s.Med, s.Q3 = smp.Quantile(0.25), smp.Quantile(0.5), smp.Quantile(0.75)
	return s
}

// medianDur is the median of the non-zero durations.
func medianDur(ts []*results.Trial, f func(*results.Trial) time.Duration) time.Duration {
	var xs []float64
	for _, t := range ts {
		if t.Excluded == "" && f(t) > 0 {
			xs = append(xs, float64(f(t)))
		}
	}
	if len(xs) == 0 {
		return 0
	}
	return time.Duration(summarize(xs).Med)
}

// kv is one line of a key/value table.
type kv struct{ Key, Value string }

// flatten turns a JSON object into dotted keys and text values, in the
// order they were written; nested arrays stay compact JSON.
func flatten(raw json.RawMessage) ([]kv, error) {
	if len(bytes.TrimSpace(raw)) == 0 {
		return nil, nil
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var out []kv
	var walk func(prefix string) error
	walk = func(prefix string) error {
		tok, err := dec.Token()
		if err != nil {
			return err
		}
		switch t := tok.(type) {
		case json.Delim:
			switch t {
			case '{':
				for dec.More() {
					k, err := dec.Token()
					if err != nil {
						return err
					}
					key := fmt.Sprint(k)
					if prefix != "" {
						key = prefix + "." + key
					}
					if err := walk(key); err != nil {
						return err
					}
				}
				_, err = dec.Token() // '}'
				return err
			case '[':
				var items []any
				for dec.More() {
					var x any
					if err := dec.Decode(&x); err != nil {
						return err
					}
					items = append(items, x)
				}
				if _, err := dec.Token(); err != nil { // ']'
					return err
				}
				b, _ := json.Marshal(items)
				out = append(out, kv{prefix, string(b)})
			}
		case nil:
			out = append(out, kv{prefix, "null"})
		default:
			out = append(out, kv{prefix, fmt.Sprint(t)})
		}
		return nil
	}
	if err := walk(""); err != nil {
		return out, err
	}
	return out, nil
}

// volatile reports whether a fingerprint key names a figure that changes
// between trials by nature, as opposed to a setting that must hold. It
// follows the rule knob.Drift applies to knob.Fingerprint keys (load.*,
// interval.*, huge pages free/reserved/surplus), and also catches such
// figures under other names.
func volatile(key string) bool {
	k := strings.ToLower(key)
	if strings.HasPrefix(k, "load.") || strings.HasPrefix(k, "interval.") {
		return true
	}
	for _, s := range []string{"free", "rsvd", "surp", "load", "steal", "iowait"} {
		if strings.HasSuffix(k, "."+s) || strings.Contains(k, s) {
			return true
		}
	}
	return false
}

// driftRow is one fingerprint value that changed within an arm where it
// must not (volatile figures are summarised apart).
type driftRow struct {
	Seq      int
	Arm      string
	Class    string
	Key      string
	Was, Now string
}

// volatileRow summarises one volatile fingerprint figure over the trials.
type volatileRow struct {
	Key, Range string
	Trials     int
}

// volatileFigures gives the range of each volatile figure over the
// comparison's trials: a steal time of 0–40% says more than 40 rows.
func (m *model) volatileFigures() []volatileRow {
	vals := map[string][]string{}
	for i := range m.trials {
		kvs, _ := flatten(m.trials[i].Fingerprint)
		for _, x := range kvs {
			if volatile(x.Key) {
				vals[x.Key] = append(vals[x.Key], x.Value)
			}
		}
	}
	var out []volatileRow
	for k, vs := range vals {
		r := volatileRow{Key: k, Trials: len(vs)}
		lo, hi := math.Inf(1), math.Inf(-1)
		var los, his string
		numeric := true
		distinct := map[string]bool{}
		for _, v := range vs {
			distinct[v] = true
			f, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
			if err != nil || !finite(f) {
				numeric = false
				continue
			}
			if f < lo {
				lo, los = f, v
			}
			if f > hi {
				hi, his = f, v
			}
		}
		switch {
		case numeric && los == his:
			r.Range = los
		case numeric:
			r.Range = los + " – " + his
		case len(distinct) == 1:
			r.Range = vs[0]
		default:
			r.Range = strconv.Itoa(len(distinct)) + " different values"
		}
		out = append(out, r)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Key < out[j].Key })
	return out
}

// drift compares every trial's fingerprint with the first one of its arm
// (arms differ on purpose, so trials are compared within their arm).
func (m *model) drift() []driftRow {
	first := map[int]map[string]string{}
	var out []driftRow
	for i := range m.trials {
		t := &m.trials[i]
		kvs, _ := flatten(t.Fingerprint)
		if len(kvs) == 0 {
			continue
		}
		cur := map[string]string{}
		var keys []string
		for _, x := range kvs {
			if _, ok := cur[x.Key]; !ok {
				keys = append(keys, x.Key)
			}
			cur[x.Key] = x.Value
		}
		ref, ok := first[t.Arm]
		if !ok {
			first[t.Arm] = cur
			continue
		}
		for k := range ref {
			if _, ok := cur[k]; !ok {
				keys = append(keys, k)
			}
		}
		sort.Strings(keys)
		a := m.armOf(t.Arm)
		for _, k := range keys {
			if volatile(k) {
				continue
			}
			was, okw := ref[k]
			now, okn := cur[k]
			if okw && okn && was == now {
				continue
			}
			if !okw {
				was = "(absent)"
			}
			if !okn {
				now = "(absent)"
			}
			out = append(out, driftRow{Seq: t.Seq, Arm: a.Name, Class: a.class(), Key: k, Was: was, Now: now})
		}
	}
	return out
}

func (m *model) armOf(index int) *arm {
	for _, a := range m.arms {
		if a.Index == index {
			return a
		}
	}
	return &arm{Index: index, Name: "arm " + strconv.Itoa(index)}
}

// ciLabel names the interval by its overall confidence ("95% CI").
func (m *model) ciLabel() string {
	return strconv.FormatFloat(100*(1-m.alpha), 'f', -1, 64) + "% CI"
}

// interval formats a decision's interval: "1.031–1.112".
func interval(d *stats.Decision) string {
	return fmtBound(d.Interval.Lo(), false) + "–" + fmtBound(d.Interval.Hi(), true)
}

// warnings gathers what a reader must not miss.
func (m *model) warnings() []string {
	var w []string
	switch m.e.Status {
	case results.Done, "":
	case results.Running:
		w = append(w, "the experiment is still running (or was killed and not yet recovered): results are partial")
	default:
		w = append(w, "the experiment ended "+m.e.Status+": results are partial")
	}
	if m.e.Status != results.Done && m.e.Note != "" {
		w = append(w, "note: "+m.e.Note)
	}
	if len(m.all) == 0 {
		w = append(w, "no trials were recorded")
	}
	for _, a := range m.arms[min(1, len(m.arms)):] {
		if a.Decision == nil && len(m.trials) > 0 {
			w = append(w, "arm "+a.Name+": no decision recorded")
		}
	}
	for _, a := range m.arms {
		if a.Decision == nil {
			continue
		}
		for _, s := range a.Decision.Warnings {
			w = append(w, "arm "+a.Name+": "+s)
		}
	}
	var excl []string
	errs := 0
	for _, t := range m.trials {
		if t.Excluded != "" {
			excl = append(excl, fmt.Sprintf("trial %d (%s): %s", t.Seq, m.armOf(t.Arm).Name, t.Excluded))
		}
		if t.Errors > 0 {
			errs++
		}
	}
	if len(excl) > 0 {
		w = append(w, fmt.Sprintf("%d trial(s) excluded — %s", len(excl), strings.Join(excl, "; ")))
	}
	if errs > 0 {
		w = append(w, fmt.Sprintf("%d trial(s) counted failed transactions (see the trials table)", errs))
	}
	if n := len(m.drift()); n > 0 {
		w = append(w, fmt.Sprintf("%d fingerprint value(s) changed within an arm (see Fingerprint)", n))
	}
	if m.cal != nil {
		for _, s := range m.cal.Warnings {
			w = append(w, "calibration: "+s)
		}
	}
	return w
}
