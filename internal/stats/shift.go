package stats

import (
	"encoding/json"
	"fmt"
	"math"
	"sort"
)

// Interval is a closed range [lo, hi] of treatment/base ratios. A bound
// the data cannot place (too few trials for the confidence asked) is
// 0 or +Inf; in JSON such a bound is null.
type Interval [2]float64

// Lo and Hi return the bounds.
func (iv Interval) Lo() float64 { return iv[0] }

// Hi returns the upper bound.
func (iv Interval) Hi() float64 { return iv[1] }

// Contains reports whether r lies within the interval.
func (iv Interval) Contains(r float64) bool { return iv[0] <= r && r <= iv[1] }

// Bounded reports whether both bounds are finite and positive.
func (iv Interval) Bounded() bool { return iv[0] > 0 && !math.IsInf(iv[1], 0) }

// MarshalJSON writes [lo, hi] with null for an open bound.
func (iv Interval) MarshalJSON() ([]byte, error) {
	var out [2]*float64
	for i, v := range iv {
		if v > 0 && !math.IsInf(v, 0) && !math.IsNaN(v) {
			out[i] = &v
		}
	}
	return json.Marshal(out)
}

// UnmarshalJSON reads what MarshalJSON writes.
func (iv *Interval) UnmarshalJSON(b []byte) error {
	var in [2]*float64
	if err := json.Unmarshal(b, &in); err != nil {
		return err
	}
	*iv = Interval{0, math.Inf(1)}
	for i, v := range in {
		if v != nil {
			iv[i] = *v
		}
	}
	return nil
}

// RatioEstimate is the Hodges–Lehmann estimate of how many times larger
// the treatment's samples are than the base's, with its exact interval.
type RatioEstimate struct {
	// Ratio is exp(median over all pairs of log(treatment) − log(base)).
	Ratio float64 `json:"ratio"`
	// Interval covers the true ratio with probability Confidence.
	Interval Interval `json:"interval"`
	// Confidence is the actual coverage, at least the one asked for:
	// rank-based intervals move in discrete steps.
	Confidence float64 `json:"confidence"`
}

// RatioInterval estimates treatment/base as a ratio with a
// distribution-free confidence interval at (at least) the given two-sided
// confidence, e.g. 0.95.
//
// The method is the Hodges–Lehmann shift estimator on log(samples) with
// the interval obtained by inverting the exact Mann-Whitney test
// (Hollander & Wolfe, Nonparametric Statistical Methods, ch. 4): with
// D(1) ≤ … ≤ D(n1·n2) the sorted pairwise differences log(t_j) − log(b_i)
// and c the largest count with P(U ≤ c) ≤ (1−confidence)/2, the interval
// is [exp D(c+1), exp D(n1·n2−c)]. It assumes the change is a
// multiplicative shift: the treatment's samples are the base's samples
// times one factor, whatever their spread. It excludes 1 exactly when the
// two-sided rank test rejects at level 1−confidence (without ties).
func RatioInterval(base, treatment []float64, confidence float64) (RatioEstimate, error) {
	if err := checkSamples("base", base); err != nil {
		return RatioEstimate{}, err
	}
	if err := checkSamples("treatment", treatment); err != nil {
		return RatioEstimate{}, err
	}
	if !(confidence > 0 && confidence < 1) {
		return RatioEstimate{}, fmt.Errorf("confidence %v must lie strictly between 0 and 1", confidence)
	}
	if err := checkSize(max(len(base), len(treatment))); err != nil {
		return RatioEstimate{}, err
	}
	d := logDiffs(sortedLogs(base), sortedLogs(treatment))
	null := exactNull(len(base), len(treatment))
	c := null.critical((1 - confidence) / 2)
	return RatioEstimate{
		Ratio:      math.Exp(d.center()),
		Interval:   d.interval(c),
		Confidence: 1 - 2*null.lower(c),
	}, nil
}

// pairDiffs are the sorted differences y_j − x_i over all pairs.
type pairDiffs []float64

func logDiffs(x, y []float64) pairDiffs {
	d := make(pairDiffs, 0, len(x)*len(y))
	for _, b := range x {
		for _, t := range y {
			d = append(d, t-b)
		}
	}
	sort.Float64s(d)
	return d
}

// center is the Hodges–Lehmann shift: the median pairwise difference.
func (d pairDiffs) center() float64 { return Median(d) }

// interval returns [exp D(c+1), exp D(N−c)] (1-based), unbounded for c < 0.
func (d pairDiffs) interval(c int) Interval {
	if c < 0 || 2*c >= len(d) {
		return Interval{0, math.Inf(1)}
	}
	return Interval{math.Exp(d[c]), math.Exp(d[len(d)-1-c])}
}

// above counts the differences greater than v.
func (d pairDiffs) above(v float64) int {
	return len(d) - sort.Search(len(d), func(i int) bool { return d[i] > v })
}

// has reports whether some difference equals v.
func (d pairDiffs) has(v float64) bool {
	i := sort.SearchFloat64s(d, v)
	return i < len(d) && d[i] == v
}

// rankTest computes the exact two-sided test from the differences for
// samples without ties, from the cached null distribution: the same
// numbers go-moremath computes (the tests check it), without
// recomputing the distribution on every look.
func (d pairDiffs) rankTest(nb, nt int) RankTest {
	u := d.above(0)
	small := min(u, len(d)-u)
	return RankTest{
		U:          float64(u),
		P:          math.Min(1, 2*exactNull(nb, nt).lower(small)),
		NBase:      nb,
		NTreatment: nt,
		Exact:      true,
	}
}
