package stats

import (
	"errors"
	"fmt"
	"math"
)

// Direction says which way of the metric is an improvement.
type Direction int

const (
	// HigherIsBetter is for throughput (transactions or queries per second).
	HigherIsBetter Direction = iota
	// LowerIsBetter is for latency and for run time.
	LowerIsBetter
)

func (d Direction) String() string {
	if d == LowerIsBetter {
		return "lower-is-better"
	}
	return "higher-is-better"
}

// MarshalText writes "higher-is-better" or "lower-is-better".
func (d Direction) MarshalText() ([]byte, error) { return []byte(d.String()), nil }

// UnmarshalText reads what MarshalText writes.
func (d *Direction) UnmarshalText(b []byte) error {
	switch string(b) {
	case "higher-is-better", "higher":
		*d = HigherIsBetter
	case "lower-is-better", "lower":
		*d = LowerIsBetter
	default:
		return fmt.Errorf("direction %q: want higher-is-better or lower-is-better", b)
	}
	return nil
}

// Spending is the shape by which a Plan spends its false-positive budget
// over the looks.
type Spending int

const (
	// OBrienFleming saves most of the budget for the last look
	// (Lan & DeMets: 2−2Φ(z_{α/2}/√t)): nearly the power of a single test
	// at the full budget, while a large change still stops at the first
	// look (see Plan). The default.
	OBrienFleming Spending = iota
	// Pocock spends the budget about evenly over the looks
	// (α·ln(1+(e−1)·t)): more early stops on moderate changes, less power
	// at the last look.
	Pocock
)

func (s Spending) String() string {
	if s == Pocock {
		return "pocock"
	}
	return "obrien-fleming"
}

// MarshalText writes "pocock" or "obrien-fleming".
func (s Spending) MarshalText() ([]byte, error) { return []byte(s.String()), nil }

// UnmarshalText reads what MarshalText writes.
func (s *Spending) UnmarshalText(b []byte) error {
	switch string(b) {
	case "pocock":
		*s = Pocock
	case "obrien-fleming", "obf":
		*s = OBrienFleming
	default:
		return fmt.Errorf("spending %q: want pocock or obrien-fleming", b)
	}
	return nil
}

// fraction is the share of the budget spent by information time t ∈ (0,1].
func (s Spending) fraction(t, alpha float64) float64 {
	if t >= 1 {
		return 1
	}
	if s != Pocock {
		z := math.Sqrt2 * math.Erfinv(1-alpha) // Φ⁻¹(1−α/2)
		return math.Erfc(z/math.Sqrt(t)/math.Sqrt2) / alpha
	}
	return math.Log(1 + (math.E-1)*t)
}

// Defaults of a zero Plan.
const (
	DefaultAlpha       = 0.05
	DefaultEquivalence = 0.02
	// MinPerArm is the fewest trials per arm any verdict rests on.
	MinPerArm = 4
	// WarnPerArm: verdicts on fewer trials than this carry a warning.
	WarnPerArm = 6
	// firstShareMax caps how much of the budget the first look may take
	// so that it can decide at all (see Plan).
	firstShareMax = 0.6
)

// Plan is a group-sequential design: the experiment looks at its data
// after each block of trials and may stop as soon as a verdict is
// reached, and the chance of a false "better" or "worse" over all looks
// together stays at most Alpha.
//
// Looks happen at FirstLook trials per arm, then every LookEvery more, and
// at MaxPerArm. At each look k the rank test may reject only if its exact
// p-value is at most a fixed level a_k, set before any data exist, with
// a_1 + … + a_K ≤ Alpha. The chance of a false verdict at look k is at most
// a_k, so over all looks it is at most their sum (the union bound,
// whatever the correlation between looks): the rule is valid by
// construction, for any distribution of the samples, with or without
// ties, and also if a look has fewer or more trials than planned.
//
// The levels follow the Spending shape, with two refinements that keep
// this validity. A rank test can only reach certain p-values (with 4
// trials per arm nothing below 2/70 ≈ 0.029), so each level is rounded
// down to an attainable one and the unused rest carries over to later
// looks. And so that a large change can be declared after 4 trials per
// arm, the first look is given the smallest attainable level when the
// shape would give it less, if that is at most 60% of Alpha (with
// Alpha = 0.05 the first look spends 2/70 and the rest 0.021 is spread
// over the later looks).
//
// The zero values of Alpha, Equivalence, FirstLook and LookEvery mean
// 0.05, 2%, 4 and 2 (the ABBA block adds two trials per arm).
type Plan struct {
	// Alpha is the accepted chance of declaring a change that is not
	// there (over all looks and, with several treatments, all arms).
	Alpha float64 `json:"alpha"`
	// MaxPerArm is the trial budget per arm; the last look is here.
	MaxPerArm int `json:"max_per_arm"`
	// FirstLook is the number of trials per arm at the first look (≥ 4).
	FirstLook int `json:"first_look"`
	// LookEvery is the number of trials per arm between looks.
	LookEvery int `json:"look_every"`
	// Equivalence is the relative change that does not matter: 0.02
	// means a ratio within [0.98, 1.02] counts as "no real change".
	// A negative value turns equivalence verdicts off.
	Equivalence float64 `json:"equivalence"`
	// Direction says whether a higher metric is better.
	Direction Direction `json:"direction"`
	// Spending shapes how the budget is spread over looks.
	Spending Spending `json:"spending"`
	// Metric names the sample in reasons, e.g. "throughput" (default
	// "metric").
	Metric string `json:"metric,omitempty"`
}

// withDefaults fills zero fields and validates the plan.
func (p Plan) withDefaults() (Plan, error) {
	if p.Alpha == 0 {
		p.Alpha = DefaultAlpha
	}
	if p.Equivalence == 0 {
		p.Equivalence = DefaultEquivalence
	}
	if p.FirstLook == 0 {
		p.FirstLook = MinPerArm
	}
	if p.LookEvery == 0 {
		p.LookEvery = 2
	}
	if p.Metric == "" {
		p.Metric = "metric"
	}
	switch {
	case !(p.Alpha > 0 && p.Alpha <= 0.5):
		return p, fmt.Errorf("plan: alpha %v must be in (0, 0.5]", p.Alpha)
	case math.IsNaN(p.Equivalence) || p.Equivalence >= 0.5:
		return p, fmt.Errorf("plan: equivalence margin %v must be below 0.5 (50%%)", p.Equivalence)
	case p.FirstLook < MinPerArm:
		return p, fmt.Errorf("plan: first look at %d trials per arm; no verdict rests on fewer than %d", p.FirstLook, MinPerArm)
	case p.LookEvery < 1:
		return p, fmt.Errorf("plan: look every %d trials per arm: must be at least 1", p.LookEvery)
	case p.MaxPerArm < p.FirstLook:
		return p, fmt.Errorf("plan: budget of %d trials per arm is below the first look at %d", p.MaxPerArm, p.FirstLook)
	case p.MaxPerArm > MaxExactPerArm:
		return p, fmt.Errorf("plan: budget of %d trials per arm: at most %d supported", p.MaxPerArm, MaxExactPerArm)
	case p.Direction != HigherIsBetter && p.Direction != LowerIsBetter:
		return p, fmt.Errorf("plan: unknown direction %d", p.Direction)
	case p.Spending != Pocock && p.Spending != OBrienFleming:
		return p, fmt.Errorf("plan: unknown spending %d", p.Spending)
	}
	return p, nil
}

// Validate reports whether the plan can be used.
func (p Plan) Validate() error {
	_, err := p.withDefaults()
	return err
}

// Looks returns the planned trials per arm at each look.
func (p Plan) Looks() ([]int, error) {
	p, err := p.withDefaults()
	if err != nil {
		return nil, err
	}
	return p.looks(), nil
}

func (p Plan) looks() []int {
	var ns []int
	for n := p.FirstLook; n < p.MaxPerArm; n += p.LookEvery {
		ns = append(ns, n)
	}
	return append(ns, p.MaxPerArm)
}

// Look is one planned look of a Plan.
type Look struct {
	// N is the trials per arm at this look.
	N int `json:"n"`
	// Alpha is the level spent here: a change is declared at this look
	// only if the rank test's p-value is at most Alpha.
	Alpha float64 `json:"alpha"`
	// Spent is the level spent up to and including this look.
	Spent float64 `json:"spent"`
}

// Schedule returns the looks with their levels for one treatment arm
// (with several, see Sequence).
func (p Plan) Schedule() ([]Look, error) {
	p, err := p.withDefaults()
	if err != nil {
		return nil, err
	}
	ns := p.looks()
	levels := p.levels(p.shape(ns), ns, p.Alpha)
	out := make([]Look, len(ns))
	spent := 0.0
	for k, n := range ns {
		spent += levels[k]
		out[k] = Look{N: n, Alpha: levels[k], Spent: spent}
	}
	return out, nil
}

// shape returns the cumulative share of the budget planned by each look.
// It depends on the plan's Alpha only, so that the levels for smaller
// budgets (Holm's steps) are the same shape scaled down.
func (p Plan) shape(ns []int) []float64 {
	nmax := float64(ns[len(ns)-1])
	w := make([]float64, len(ns))
	for k, n := range ns {
		w[k] = p.Spending.fraction(float64(n)/nmax, p.Alpha)
	}
	if len(ns) == 1 {
		return w
	}
	// Let the first look decide when the budget allows it.
	minP := exactNull(ns[0], ns[0]).minTwoSided()
	if first := minP / p.Alpha; w[0] < first && first <= firstShareMax {
		w0 := w[0]
		for k := 1; k < len(w); k++ {
			w[k] = first + (1-first)*(w[k]-w0)/(1-w0)
		}
		w[0] = first
	}
	return w
}

// levels turns a shape into per-look levels for budget alpha: each look
// gets the largest attainable level within what the shape allows so far,
// less what earlier looks really spent. The sum never exceeds alpha.
func (p Plan) levels(shape []float64, ns []int, alpha float64) []float64 {
	out := make([]float64, len(ns))
	spent := 0.0
	for k, n := range ns {
		budget := alpha*shape[k] - spent
		if budget <= 0 {
			continue
		}
		out[k] = exactNull(n, n).floorLevel(budget)
		spent += out[k]
	}
	return out
}

// holmLevels returns t[j][k], the level at look k for a budget of
// alpha/(j+1), for j < m. Each level is capped by the one for the next
// larger budget so that levels never grow when the budget shrinks; the
// step-down (Holm) argument needs that, and capping only lowers levels.
func (p Plan) holmLevels(ns []int, m int) [][]float64 {
	shape := p.shape(ns)
	t := make([][]float64, m)
	for j := range m {
		t[j] = p.levels(shape, ns, p.Alpha/float64(j+1))
		if j > 0 {
			for k := range t[j] {
				t[j][k] = math.Min(t[j][k], t[j-1][k])
			}
		}
	}
	return t
}

// errLook is wrapped by look-index errors.
var errLook = errors.New("look out of range")
