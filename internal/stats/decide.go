package stats

import (
	"fmt"
	"math"
	"sort"
	"strings"
)

// Verdict is the outcome of a look for one treatment arm.
type Verdict string

const (
	// Better: the treatment improves the metric (in the plan's Direction).
	Better Verdict = "better"
	// Worse: the treatment harms the metric.
	Worse Verdict = "worse"
	// Equivalent: any change is within ±Equivalence.
	Equivalent Verdict = "equivalent"
	// Inconclusive: none of the above is shown (yet).
	Inconclusive Verdict = "inconclusive"
)

// Decision is what one look concludes about one treatment arm against the
// base arm. It is meant to be stored and shown as is (JSON).
type Decision struct {
	Verdict Verdict `json:"verdict"`
	// Stop is true when this arm needs no more trials: it has a verdict,
	// or this was the last look.
	Stop bool `json:"stop"`

	Metric    string    `json:"metric"`
	Direction Direction `json:"direction"`

	// Ratio is the Hodges–Lehmann estimate of treatment/base.
	Ratio float64 `json:"ratio"`
	// RatioOfMedians is median(treatment)/median(base).
	RatioOfMedians  float64 `json:"ratio_of_medians"`
	MedianBase      float64 `json:"median_base"`
	MedianTreatment float64 `json:"median_treatment"`

	// Interval is the sequential confidence interval for the ratio. Its
	// per-look Confidence is 1−AlphaLook; over all looks together the
	// intervals cover the true ratio with probability at least 1−Alpha,
	// so it is a valid (1−Alpha) interval whenever the experiment stops.
	// "better" and "worse" are read off it: it lies wholly on one side
	// of 1. At a look with a small level it can be wider than at an
	// earlier look; it is open (0 or +Inf) where the level is 0.
	Interval   Interval `json:"interval"`
	Confidence float64  `json:"confidence"`
	// P is the exact two-sided Mann-Whitney p-value of this look.
	P float64 `json:"p"`

	// Equivalence is the margin (0.02 = ±2%); 0 when turned off.
	Equivalence float64 `json:"equivalence"`
	// EquivalenceInterval is the interval at confidence 1−2·AlphaLook
	// used by the two one-sided tests (TOST): "equivalent" when it lies
	// within [1−Equivalence, 1+Equivalence].
	EquivalenceInterval Interval `json:"equivalence_interval"`
	// PEquivalence is the larger of the two one-sided p-values.
	PEquivalence float64 `json:"p_equivalence"`

	// Alpha is the plan's overall false-positive budget.
	Alpha float64 `json:"alpha"`
	// AlphaLook is the level this look tests at (Holm's step level for
	// one of several treatments); AlphaSpent the plan's level used up to
	// and including this look.
	AlphaLook  float64 `json:"alpha_look"`
	AlphaSpent float64 `json:"alpha_spent"`

	Look       int `json:"look"`
	Looks      int `json:"looks"`
	NBase      int `json:"n_base"`
	NTreatment int `json:"n_treatment"`

	Warnings []string `json:"warnings,omitempty"`
	// Reason says it all in one sentence, e.g. "throughput 1.07x (95% CI
	// 1.03–1.11), p=0.004 at look 3 of 5, 6 trials per arm: better".
	Reason string `json:"reason"`
}

// Decide judges one treatment arm against the base arm at look number
// look (1-based) of the plan. base and treatment hold one sample per
// trial (any order); both should hold the plan's trials per arm for this
// look. Samples must be positive and finite.
//
// Decide keeps no state: call it after each block with all samples so
// far. Stop when Decision.Stop is true. For several treatment arms use
// Sequence, which also applies Holm's correction.
func (p Plan) Decide(base, treatment []float64, look int) (Decision, error) {
	s, err := p.NewSequence(1)
	if err != nil {
		return Decision{}, err
	}
	if look < 1 || look > len(s.ns) {
		return Decision{}, fmt.Errorf("%w: look %d, the plan has looks 1 to %d", errLook, look, len(s.ns))
	}
	s.look = look - 1
	ds, err := s.Next(base, treatment)
	if err != nil {
		return Decision{}, err
	}
	return ds[0], nil
}

// Sequence runs the looks of a plan over one or more treatment arms, each
// compared with the base arm. With more than one treatment arm Holm's
// step-down procedure keeps the chance of any false "better" or "worse"
// (over all arms and looks) at most Alpha, and likewise for false
// "equivalent": at each look the arms without a verdict are ordered by
// p-value and the i-th smallest is tested at the level the plan would
// spend with a budget of Alpha/(m−i+1), m counting the arms not yet
// declared different (for the equivalence family: not yet declared
// equivalent). This is the closed testing principle with Bonferroni
// tests of each intersection; arms decided at earlier looks count as
// decided, which keeps it valid (Maurer & Bretz 2013).
type Sequence struct {
	plan       Plan
	m          int
	ns         []int
	levels     [][]float64 // levels[j][k]: budget Alpha/(j+1), look k
	look       int         // looks done
	decided    []*Decision
	different  []bool
	equivalent []bool
}

// NewSequence starts a sequence for the given number of treatment arms.
func (p Plan) NewSequence(treatments int) (*Sequence, error) {
	p, err := p.withDefaults()
	if err != nil {
		return nil, err
	}
	if treatments < 1 {
		return nil, fmt.Errorf("sequence: %d treatment arms, need at least 1", treatments)
	}
	ns := p.looks()
	return &Sequence{
		plan:       p,
		m:          treatments,
		ns:         ns,
		levels:     p.holmLevels(ns, treatments),
		decided:    make([]*Decision, treatments),
		different:  make([]bool, treatments),
		equivalent: make([]bool, treatments),
	}, nil
}

// Looks returns the planned trials per arm at each look.
func (s *Sequence) Looks() []int { return append([]int(nil), s.ns...) }

// Look is the number of looks done so far.
func (s *Sequence) Look() int { return s.look }

// Done reports whether every arm has a verdict or the last look is done.
func (s *Sequence) Done() bool {
	if s.look >= len(s.ns) {
		return true
	}
	for _, d := range s.decided {
		if d == nil {
			return false
		}
	}
	return true
}

// armLook holds one arm's statistics at one look.
type armLook struct {
	nb, nt     int
	rank       RankTest
	pEq        float64
	diffs      pairDiffs
	ratio      float64
	medB, medT float64
	constant   bool
}

func (p Plan) measure(base, treat []float64) armLook {
	a := armLook{nb: len(base), nt: len(treat)}
	lb, lt := sortedLogs(base), sortedLogs(treat)
	a.diffs = logDiffs(lb, lt)
	a.ratio = math.Exp(a.diffs.center())
	a.medB, a.medT = Median(base), Median(treat)
	a.constant = allEqual(base) || allEqual(treat)
	ties := hasTies(base, treat)
	if ties {
		a.rank = mannWhitney(base, treat)
	} else {
		a.rank = a.diffs.rankTest(a.nb, a.nt)
	}
	a.pEq = 1
	if p.Equivalence > 0 {
		// TOST: reject "ratio ≤ 1−E" and "ratio ≥ 1+E", each one-sided,
		// by testing treatment/(1±E) against base.
		lo, hi := math.Log(1-p.Equivalence), math.Log(1+p.Equivalence)
		if ties || a.diffs.has(lo) || a.diffs.has(hi) {
			a.pEq = math.Max(
				oneSidedP(shifted(lt, -lo), lb, true),
				oneSidedP(shifted(lt, -hi), lb, false))
		} else {
			null := exactNull(a.nb, a.nt)
			n := a.nb * a.nt
			a.pEq = math.Max(
				null.lower(n-a.diffs.above(lo)), // P(U ≥ #(d > lo))
				null.lower(a.diffs.above(hi)))   // P(U ≤ #(d > hi))
		}
	}
	return a
}

func shifted(xs []float64, by float64) []float64 {
	out := make([]float64, len(xs))
	for i, x := range xs {
		out[i] = x + by
	}
	return out
}

// Next evaluates the next look. It takes the base arm's samples and one
// slice per treatment arm, each with all samples so far. Arms that
// already have a verdict keep it: their samples are not looked at again
// and may be nil.
func (s *Sequence) Next(base []float64, treatments ...[]float64) ([]Decision, error) {
	if s.look >= len(s.ns) {
		return nil, fmt.Errorf("%w: all %d looks are done", errLook, len(s.ns))
	}
	if len(treatments) != s.m {
		return nil, fmt.Errorf("sequence: %d treatment arms given, planned %d", len(treatments), s.m)
	}
	if err := checkSamples("base", base); err != nil {
		return nil, err
	}
	if err := checkSize(len(base)); err != nil {
		return nil, err
	}
	for i, t := range treatments {
		if s.decided[i] != nil {
			continue // may be nil: its trials have stopped
		}
		name := "treatment"
		if s.m > 1 {
			name = fmt.Sprintf("treatment %d", i+1)
		}
		if err := checkSamples(name, t); err != nil {
			return nil, err
		}
		if err := checkSize(len(t)); err != nil {
			return nil, err
		}
	}
	k := s.look
	s.look++
	p := s.plan
	last := k == len(s.ns)-1

	arms := make([]armLook, s.m)
	for i, t := range treatments {
		if s.decided[i] == nil {
			arms[i] = p.measure(base, t)
		}
	}
	// Level each undecided arm is tested at, per family, by Holm's steps.
	diffLevel := s.stepDown(k, arms, s.different, func(a armLook) float64 { return a.rank.P },
		func(a armLook, level float64) bool { return s.differs(a, level) })
	eqLevel := s.stepDown(k, arms, s.equivalent, func(a armLook) float64 { return a.pEq },
		func(a armLook, level float64) bool { return s.within(a, level) })

	spent := 0.0
	for _, l := range s.levels[0][:k+1] {
		spent += l
	}
	out := make([]Decision, s.m)
	for i := range treatments {
		if s.decided[i] != nil {
			out[i] = *s.decided[i]
			continue
		}
		d := s.decision(arms[i], k, diffLevel[i], eqLevel[i], spent, last)
		if d.Verdict != Inconclusive {
			s.decided[i] = &d
		}
		out[i] = d
	}
	return out, nil
}

// differs reports whether the arm shows a change at this level: the exact
// p-value is small enough and the interval agrees (both always agree
// without ties; with ties both must hold, which keeps the test valid).
func (s *Sequence) differs(a armLook, level float64) bool {
	if min(a.nb, a.nt) < MinPerArm || level <= 0 || a.rank.P > level*(1+tol) {
		return false
	}
	iv := a.diffs.interval(exactNull(a.nb, a.nt).critical(level / 2))
	return iv.Lo() > 1 || iv.Hi() < 1
}

// within reports whether the arm is shown equivalent at this level.
func (s *Sequence) within(a armLook, level float64) bool {
	e := s.plan.Equivalence
	if e <= 0 || min(a.nb, a.nt) < MinPerArm || level <= 0 || a.pEq > level*(1+tol) {
		return false
	}
	iv := a.diffs.interval(exactNull(a.nb, a.nt).critical(level))
	return iv.Lo() >= 1-e && iv.Hi() <= 1+e
}

// stepDown runs Holm's step-down for one family at look k and returns
// the level each undecided arm was tested at; it marks rejected arms in
// done. Arms rejected in this family at earlier looks are out of it. Arms
// decided by the other family stay in it as if their p-value were 1 (a
// valid, if useless, p-value): they are never rejected here, and counting
// them only makes the levels of the others smaller.
func (s *Sequence) stepDown(k int, arms []armLook, done []bool, pval func(armLook) float64, rejects func(armLook, float64) bool) []float64 {
	var open []int
	m := 0
	for i := range arms {
		if done[i] {
			continue
		}
		m++
		if s.decided[i] == nil {
			open = append(open, i)
		}
	}
	sort.SliceStable(open, func(a, b int) bool { return pval(arms[open[a]]) < pval(arms[open[b]]) })
	levels := make([]float64, len(arms))
	failed := false
	for r, i := range open {
		level := s.levels[m-1-r][k]
		levels[i] = level
		if failed {
			continue
		}
		if rejects(arms[i], level) {
			done[i] = true
		} else {
			failed = true
		}
	}
	return levels
}

// decision assembles the Decision for an undecided arm.
func (s *Sequence) decision(a armLook, k int, level, eqLevel, spent float64, last bool) Decision {
	p := s.plan
	d := Decision{
		Verdict:         Inconclusive,
		Metric:          p.Metric,
		Direction:       p.Direction,
		Ratio:           a.ratio,
		RatioOfMedians:  a.medT / a.medB,
		MedianBase:      a.medB,
		MedianTreatment: a.medT,
		P:               a.rank.P,
		PEquivalence:    a.pEq,
		Alpha:           p.Alpha,
		AlphaLook:       level,
		AlphaSpent:      spent,
		Look:            k + 1,
		Looks:           len(s.ns),
		NBase:           a.nb,
		NTreatment:      a.nt,
	}
	if p.Equivalence > 0 {
		d.Equivalence = p.Equivalence
	}
	null := exactNull(a.nb, a.nt)
	c := null.critical(level / 2)
	d.Interval = a.diffs.interval(c)
	d.Confidence = 1 - 2*null.lower(c)
	ce := null.critical(eqLevel)
	d.EquivalenceInterval = a.diffs.interval(ce)

	n := min(a.nb, a.nt)
	different := s.differs(a, level)
	equivalent := s.within(a, eqLevel)
	switch {
	case n < MinPerArm:
	case different:
		up := d.Interval.Lo() > 1
		if up == (p.Direction == HigherIsBetter) {
			d.Verdict = Better
		} else {
			d.Verdict = Worse
		}
	case equivalent:
		d.Verdict = Equivalent
	}
	d.Stop = last || d.Verdict != Inconclusive
	d.Warnings = s.warnings(a, k, different, equivalent, last)
	d.Reason = s.reason(d, different && equivalent)
	return d
}

func (s *Sequence) warnings(a armLook, k int, different, equivalent, last bool) []string {
	var w []string
	n := min(a.nb, a.nt)
	if n < MinPerArm {
		w = append(w, fmt.Sprintf("only %d trials per arm: no verdict before %d", n, MinPerArm))
	} else if n < WarnPerArm {
		w = append(w, fmt.Sprintf("only %d trials per arm: one disturbed trial can decide the result; check the trials for stalls and errors", n))
	}
	if a.nb != a.nt {
		w = append(w, fmt.Sprintf("arms differ in size (%d base, %d treatment trials): were trials lost?", a.nb, a.nt))
	} else if a.nb != s.ns[k] {
		w = append(w, fmt.Sprintf("look %d was planned at %d trials per arm, got %d", k+1, s.ns[k], a.nb))
	}
	if a.constant {
		w = append(w, "an arm has the same value in every trial: is the metric rounded, or is the load capped (rate limit)?")
	} else if a.rank.Ties {
		w = append(w, "some trials have equal values: the test allows for them but loses power; record the metric with more precision")
	}
	if !a.rank.Exact {
		w = append(w, "many tied samples: the p-value uses a normal approximation")
	}
	if a.rank.P <= s.plan.Alpha && !different && n >= MinPerArm && !last {
		w = append(w, "p is below the overall alpha but not below this look's level: looking repeatedly costs evidence; keep going")
	}
	if different && equivalent {
		w = append(w, fmt.Sprintf("the change is real but smaller than the ±%s that was declared not to matter", pct(s.plan.Equivalence)))
	}
	return w
}

func pct(f float64) string {
	return strings.TrimSuffix(strings.TrimSuffix(fmt.Sprintf("%.1f", 100*f), "0"), ".") + "%"
}

// fmtRatio prints ratios with enough digits for the interval's width.
func fmtRatio(r, width float64) string {
	switch {
	case math.IsInf(r, 1):
		return "∞"
	case r <= 0:
		return "0"
	case width < 0.02:
		return fmt.Sprintf("%.3f", r)
	}
	return fmt.Sprintf("%.2f", r)
}

func fmtP(p float64) string {
	if p < 0.001 {
		return fmt.Sprintf("%.1e", p)
	}
	return fmt.Sprintf("%.3f", p)
}

func (s *Sequence) reason(d Decision, alsoEquivalent bool) string {
	p := s.plan
	width := d.Interval.Hi() - d.Interval.Lo()
	if !d.Interval.Bounded() {
		width = 1
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%s %sx (%s CI %s–%s), p=%s at look %d of %d, ",
		p.Metric, fmtRatio(d.Ratio, width), pct(1-p.Alpha),
		fmtRatio(d.Interval.Lo(), width), fmtRatio(d.Interval.Hi(), width),
		fmtP(d.P), d.Look, d.Looks)
	if d.NBase == d.NTreatment {
		fmt.Fprintf(&b, "%d trials per arm: ", d.NBase)
	} else {
		fmt.Fprintf(&b, "%d base and %d treatment trials: ", d.NBase, d.NTreatment)
	}
	eq := pct(p.Equivalence)
	n := min(d.NBase, d.NTreatment)
	switch {
	case d.Verdict == Better || d.Verdict == Worse:
		b.WriteString(string(d.Verdict))
		if alsoEquivalent {
			fmt.Fprintf(&b, ", but by less than %s", eq)
		}
	case d.Verdict == Equivalent:
		fmt.Fprintf(&b, "equivalent: any change is within ±%s (%s–%s)", eq,
			fmtRatio(d.EquivalenceInterval.Lo(), 0), fmtRatio(d.EquivalenceInterval.Hi(), 0))
	case n < MinPerArm:
		fmt.Fprintf(&b, "too few trials for a verdict (need %d per arm)", MinPerArm)
	case !d.Stop:
		if d.AlphaLook > 0 {
			fmt.Fprintf(&b, "no verdict yet (this look needs p ≤ %s); continue", fmtP(d.AlphaLook))
		} else {
			b.WriteString("no verdict possible at this look; continue")
		}
	case p.Equivalence > 0:
		fmt.Fprintf(&b, "inconclusive: neither a change nor equivalence within ±%s shown within the budget of %d trials per arm", eq, p.MaxPerArm)
	default:
		fmt.Fprintf(&b, "inconclusive: no change shown within the budget of %d trials per arm", p.MaxPerArm)
	}
	return b.String()
}
