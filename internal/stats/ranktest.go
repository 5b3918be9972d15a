package stats

import (
	"errors"
	"fmt"
	"math"
	"sort"
	"sync"

	mstats "github.com/aclements/go-moremath/stats"
)

// MaxExactPerArm is the largest number of trials per arm a Plan accepts:
// up to here the null distribution of the rank test is computed exactly
// (with ties up to 25 per arm, beyond that go-moremath uses a normal
// approximation and the Decision says so).
const MaxExactPerArm = 50

// RankTest is the result of a two-sided Mann-Whitney U test (Wilcoxon
// rank-sum test) of the treatment samples against the base samples.
type RankTest struct {
	// U counts the (base, treatment) pairs in which the treatment sample
	// is larger; a tied pair counts one half. It runs from 0 (every
	// treatment sample below every base sample) to NBase*NTreatment.
	U float64 `json:"u"`
	// P is the two-sided p-value: how often samples from one and the
	// same distribution would look at least this different.
	P float64 `json:"p"`
	// NBase and NTreatment are the sample counts.
	NBase      int `json:"n_base"`
	NTreatment int `json:"n_treatment"`
	// Ties is true when some samples are equal. The p-value then comes
	// from the exact distribution given those ties.
	Ties bool `json:"ties"`
	// Exact is false when the samples are too many for the exact
	// distribution and a normal approximation was used.
	Exact bool `json:"exact"`
}

// MannWhitney runs the exact two-sided Mann-Whitney U test of treatment
// against base with go-moremath, which computes the exact null
// distribution also in the presence of ties (Mann & Whitney 1947; Klotz
// 1966). With no ties the p-value is 2·P(U ≤ min(U, n1·n2−U)), capped
// at 1. When every sample of both arms is the same number, P is 1.
func MannWhitney(base, treatment []float64) (RankTest, error) {
	if err := checkSamples("base", base); err != nil {
		return RankTest{}, err
	}
	if err := checkSamples("treatment", treatment); err != nil {
		return RankTest{}, err
	}
	return mannWhitney(base, treatment), nil
}

// mannWhitney is MannWhitney on checked input.
func mannWhitney(base, treatment []float64) RankTest {
	rt := RankTest{NBase: len(base), NTreatment: len(treatment)}
	rt.Ties = hasTies(base, treatment)
	limit := mstats.MannWhitneyExactLimit
	if rt.Ties {
		limit = mstats.MannWhitneyTiesExactLimit
	}
	rt.Exact = rt.NBase <= limit && rt.NTreatment <= limit
	res, err := mstats.MannWhitneyUTest(treatment, base, mstats.LocationDiffers)
	if err != nil {
		// ErrSamplesEqual: all values identical, no evidence of a shift.
		rt.U = float64(rt.NBase*rt.NTreatment) / 2
		rt.P = 1
		return rt
	}
	rt.U = res.U
	rt.P = math.Min(res.P, 1)
	return rt
}

// oneSidedP is the exact one-sided p-value for "x tends to be larger
// than y" (greater) or "smaller than y" (!greater).
func oneSidedP(x, y []float64, greater bool) float64 {
	alt := mstats.LocationLess
	if greater {
		alt = mstats.LocationGreater
	}
	res, err := mstats.MannWhitneyUTest(x, y, alt)
	if err != nil {
		return 1
	}
	return math.Min(math.Max(res.P, 0), 1)
}

func hasTies(a, b []float64) bool {
	all := make([]float64, 0, len(a)+len(b))
	all = append(all, a...)
	all = append(all, b...)
	sort.Float64s(all)
	for i := 1; i < len(all); i++ {
		if all[i] == all[i-1] {
			return true
		}
	}
	return false
}

// nullDist is the exact distribution of U for n1 and n2 samples drawn
// from one continuous distribution (so without ties): cdf[u] = P(U ≤ u).
// It is used to place critical values (interval bounds, attainable
// levels) before any data exist; p-values come from go-moremath, and the
// tests check that both agree.
type nullDist struct {
	n1, n2 int
	cdf    []float64
}

var nullCache sync.Map // [2]int → *nullDist

// exactNull returns the cached null distribution for sizes n1, n2.
func exactNull(n1, n2 int) *nullDist {
	if n1 > n2 {
		n1, n2 = n2, n1 // U's distribution is symmetric in the two sizes
	}
	key := [2]int{n1, n2}
	if d, ok := nullCache.Load(key); ok {
		return d.(*nullDist)
	}
	d := &nullDist{n1: n1, n2: n2, cdf: uDistribution(n1, n2)}
	nullCache.Store(key, d)
	return d
}

// uDistribution computes P(U = u) by the recurrence of Mann and Whitney:
// the largest of a+b pooled samples comes from the first sample with
// probability a/(a+b) and then beats all b of the second, so
// p(a,b,u) = a/(a+b)·p(a−1,b,u−b) + b/(a+b)·p(a,b−1,u). It returns the
// cumulative distribution.
func uDistribution(n1, n2 int) []float64 {
	size := n1*n2 + 1
	prev := make([][]float64, n1+1) // b−1
	cur := make([][]float64, n1+1)  // b
	for a := range prev {
		prev[a] = make([]float64, size)
		cur[a] = make([]float64, size)
	}
	// b = 0: U is 0 whatever a is.
	for a := 0; a <= n1; a++ {
		prev[a][0] = 1
	}
	for b := 1; b <= n2; b++ {
		for a := 0; a <= n1; a++ {
			row := cur[a]
			clear(row)
			if a == 0 {
				row[0] = 1
				continue
			}
			fa, fb := float64(a)/float64(a+b), float64(b)/float64(a+b)
			left, up := cur[a-1], prev[a]
			for u := 0; u <= a*b; u++ {
				v := fb * up[u]
				if u >= b {
					v += fa * left[u-b]
				}
				row[u] = v
			}
		}
		prev, cur = cur, prev
	}
	pmf := prev[n1]
	cdf := make([]float64, size)
	sum := 0.0
	for u, p := range pmf {
		sum += p
		cdf[u] = math.Min(sum, 1)
	}
	return cdf
}

// lower returns P(U ≤ c).
func (d *nullDist) lower(c int) float64 {
	if c < 0 {
		return 0
	}
	if c >= len(d.cdf) {
		return 1
	}
	return d.cdf[c]
}

// tol absorbs floating-point noise when comparing probabilities that are
// equal in exact arithmetic (for example 2/70 computed two ways).
const tol = 1e-9

// critical returns the largest c below the centre with P(U ≤ c) ≤ level,
// or −1 if even P(U ≤ 0) exceeds it.
func (d *nullDist) critical(level float64) int {
	c := -1
	for u := 0; 2*u < d.n1*d.n2; u++ {
		if d.cdf[u] > level*(1+tol) {
			break
		}
		c = u
	}
	return c
}

// minTwoSided is the smallest two-sided p-value these sizes can give
// (complete separation): 2/C(n1+n2, n1).
func (d *nullDist) minTwoSided() float64 {
	return math.Min(2*d.cdf[0], 1)
}

// floorLevel returns the largest two-sided level 2·P(U ≤ c) that does not
// exceed budget, or 0 if none does. Spending exactly an attainable level
// wastes nothing: a rank test cannot reject more often than that anyway.
func (d *nullDist) floorLevel(budget float64) float64 {
	c := d.critical(budget / 2)
	if c < 0 {
		return 0
	}
	return 2 * d.cdf[c]
}

// errTooMany is returned for sizes beyond the exact tables.
var errTooMany = errors.New("too many samples")

func checkSize(n int) error {
	if n > MaxExactPerArm {
		return fmt.Errorf("%w: %d per arm, at most %d supported", errTooMany, n, MaxExactPerArm)
	}
	return nil
}
