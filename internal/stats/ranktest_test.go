package stats

import (
	"math"
	"math/rand/v2"
	"testing"

	mstats "github.com/aclements/go-moremath/stats"
)

func near(a, b, eps float64) bool { return math.Abs(a-b) <= eps }

// Complete separation with 4 trials per arm: only 2 of the C(8,4) = 70
// equally likely arrangements are as extreme, so p = 2/70.
func TestMannWhitneyCompleteSeparation(t *testing.T) {
	base := []float64{100, 101, 102, 103}
	treat := []float64{110, 111, 112, 113}
	for _, c := range []struct {
		b, t []float64
		u    float64
	}{{base, treat, 16}, {treat, base, 0}} {
		rt, err := MannWhitney(c.b, c.t)
		if err != nil {
			t.Fatal(err)
		}
		if rt.U != c.u || !near(rt.P, 2.0/70, 1e-12) || !rt.Exact || rt.Ties {
			t.Errorf("MannWhitney(%v, %v) = %+v, want U=%v p=2/70", c.b, c.t, rt, c.u)
		}
	}
	if got := exactNull(4, 4).minTwoSided(); !near(got, 2.0/70, 1e-15) {
		t.Errorf("minTwoSided(4,4) = %v", got)
	}
}

// The example of Shier (2004) used in SciPy's documentation: diagnosis
// ages of 5 men and 4 women, U = 17 for the men, exact two-sided p =
// 0.1111 (= 14/126).
func TestMannWhitneyPublishedExample(t *testing.T) {
	males := []float64{19, 22, 16, 29, 24}
	females := []float64{20, 11, 17, 12}
	rt, err := MannWhitney(females, males)
	if err != nil {
		t.Fatal(err)
	}
	if rt.U != 17 || !near(rt.P, 14.0/126, 1e-12) {
		t.Errorf("got U=%v p=%v, want U=17 p=0.1111", rt.U, rt.P)
	}
}

// Published critical values of U for a two-sided test at 5% with equal
// group sizes (standard Mann-Whitney tables: reject when min(U, n²−U) is
// at most this).
func TestCriticalValuesMatchTables(t *testing.T) {
	table := map[int]int{5: 2, 6: 5, 7: 8, 8: 13, 9: 17, 10: 23, 11: 30, 12: 37, 13: 45, 14: 55, 15: 64, 16: 75, 17: 87, 18: 99, 19: 113, 20: 127}
	for n, want := range table {
		if got := exactNull(n, n).critical(0.025); got != want {
			t.Errorf("n=%d: critical U %d, table says %d", n, got, want)
		}
	}
	if got := exactNull(4, 4).critical(0.025); got != 0 {
		t.Errorf("n=4: critical U %d, want 0 (only complete separation)", got)
	}
	if got := exactNull(3, 3).critical(0.025); got != -1 {
		t.Errorf("n=3: critical U %d, want none (min p = 0.1)", got)
	}
}

// Ties, worked by hand: base {1, 2}, treatment {2, 3}. The six ways to
// label the pooled values 1, 2, 2, 3 give U (ties count ½) of 0.5, 0.5,
// 2, 2, 3.5, 3.5; the observed U is 3.5, the mirror 0.5, and
// P(U ≤ 0.5) = 2/6, so the two-sided p is 2/3.
func TestMannWhitneyTiesByHand(t *testing.T) {
	rt, err := MannWhitney([]float64{1, 2}, []float64{2, 3})
	if err != nil {
		t.Fatal(err)
	}
	if rt.U != 3.5 || !near(rt.P, 2.0/3, 1e-12) || !rt.Ties {
		t.Errorf("got %+v, want U=3.5 p=2/3 with ties", rt)
	}
}

// bruteForceP enumerates every relabelling of the pooled samples (the
// permutation null, which is exact with or without ties) and returns the
// two-sided p-value the way the exact test defines it: twice the
// probability of a U at most as far out as the observed one, capped at 1.
func bruteForceP(base, treat []float64) (u, p float64) {
	pooled := append(append([]float64(nil), base...), treat...)
	n, nt := len(pooled), len(treat)
	uOf := func(mask int) float64 {
		s := 0.0
		for i := range n {
			if mask&(1<<i) == 0 {
				continue
			}
			for j := range n {
				if mask&(1<<j) != 0 {
					continue
				}
				switch {
				case pooled[i] > pooled[j]:
					s++
				case pooled[i] == pooled[j]:
					s += 0.5
				}
			}
		}
		return s
	}
	obsMask := 0
	for i := len(base); i < n; i++ {
		obsMask |= 1 << i
	}
	u = uOf(obsMask)
	small := math.Min(u, float64(len(base)*nt)-u)
	total, tail := 0, 0
	for mask := range 1 << n {
		if popcount(mask) != nt {
			continue
		}
		total++
		if uOf(mask) <= small {
			tail++
		}
	}
	if u == float64(len(base)*nt)-u {
		return u, 1
	}
	return u, math.Min(1, 2*float64(tail)/float64(total))
}

func popcount(x int) int {
	c := 0
	for ; x != 0; x &= x - 1 {
		c++
	}
	return c
}

// The exact p-values, with and without ties, agree with full enumeration.
func TestMannWhitneyAgreesWithEnumeration(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	cases := [][2][]float64{
		{{1, 2, 2, 3}, {2, 3, 4, 5}},
		{{10, 10, 10, 12}, {10, 11, 12, 12, 13}},
		{{5, 5, 6}, {5, 6, 6, 7, 7}},
		{{1, 1, 1, 1}, {1, 1, 1, 2}},
	}
	for range 40 {
		// Rounded random samples: many ties, various sizes.
		nb, nt := 3+rng.IntN(4), 3+rng.IntN(4)
		b, tr := make([]float64, nb), make([]float64, nt)
		for i := range b {
			b[i] = float64(10 + rng.IntN(5))
		}
		for i := range tr {
			tr[i] = float64(10 + rng.IntN(5) + rng.IntN(2))
		}
		cases = append(cases, [2][]float64{b, tr})
	}
	for _, c := range cases {
		rt, err := MannWhitney(c[0], c[1])
		if err != nil {
			t.Fatal(err)
		}
		u, p := bruteForceP(c[0], c[1])
		if rt.U != u || !near(rt.P, p, 1e-9) {
			t.Errorf("base %v treatment %v: got U=%v p=%v, enumeration U=%v p=%v", c[0], c[1], rt.U, rt.P, u, p)
		}
	}
}

// The cached null distribution equals go-moremath's (a different
// algorithm) for all sizes up to 14.
func TestNullDistributionMatchesMoremath(t *testing.T) {
	for n1 := 1; n1 <= 14; n1++ {
		for n2 := 1; n2 <= 14; n2++ {
			d := exactNull(n1, n2)
			ref := mstats.UDist{N1: n1, N2: n2}
			for u := 0; u <= n1*n2; u++ {
				if got, want := d.lower(u), ref.CDF(float64(u)); !near(got, want, 1e-12) {
					t.Fatalf("P(U ≤ %d | %d, %d) = %v, moremath %v", u, n1, n2, got, want)
				}
			}
		}
	}
}

// The fast path used at every look (no ties) gives the same two-sided and
// equivalence p-values as go-moremath.
func TestFastPathMatchesMoremath(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	p := Plan{MaxPerArm: 20}
	p, _ = p.withDefaults()
	for range 300 {
		nb, nt := 4+rng.IntN(17), 4+rng.IntN(17)
		shift := 1 + 0.04*rng.NormFloat64()
		b, tr := make([]float64, nb), make([]float64, nt)
		for i := range b {
			b[i] = 1000 * (1 + 0.02*rng.NormFloat64())
		}
		for i := range tr {
			tr[i] = 1000 * shift * (1 + 0.02*rng.NormFloat64())
		}
		a := p.measure(b, tr)
		ref := mannWhitney(b, tr)
		if a.rank.U != ref.U || !near(a.rank.P, ref.P, 1e-9) {
			t.Fatalf("rank test: fast %+v, moremath %+v", a.rank, ref)
		}
		lb, lt := sortedLogs(b), sortedLogs(tr)
		lo, hi := math.Log(1-p.Equivalence), math.Log(1+p.Equivalence)
		want := math.Max(oneSidedP(shifted(lt, -lo), lb, true), oneSidedP(shifted(lt, -hi), lb, false))
		if !near(a.pEq, want, 1e-9) {
			t.Fatalf("equivalence p: fast %v, moremath %v", a.pEq, want)
		}
	}
}

func TestMannWhitneyRejectsBadSamples(t *testing.T) {
	good := []float64{1, 2, 3, 4}
	for _, bad := range [][]float64{nil, {1, math.NaN(), 3}, {1, math.Inf(1)}, {1, -2}, {0, 1}} {
		if _, err := MannWhitney(good, bad); err == nil {
			t.Errorf("MannWhitney(%v) accepted", bad)
		}
		if _, err := MannWhitney(bad, good); err == nil {
			t.Errorf("MannWhitney(%v, …) accepted", bad)
		}
	}
}

func TestMannWhitneyAllEqual(t *testing.T) {
	rt, err := MannWhitney([]float64{5, 5, 5, 5}, []float64{5, 5, 5, 5})
	if err != nil {
		t.Fatal(err)
	}
	if rt.P != 1 || rt.U != 8 {
		t.Errorf("all equal: %+v, want p=1 U=8", rt)
	}
}
