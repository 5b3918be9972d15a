package stats

import (
	"fmt"
	"math"
	"math/rand/v2"
)

// Noise is a model of trial-to-trial variation for Simulate.
type Noise int

const (
	// Lognormal noise: sample = m·exp(σZ) with σ chosen for the CV.
	// Skewed, as throughput and latency often are.
	Lognormal Noise = iota
	// Normal noise: sample = m·(1+CV·Z).
	Normal
	// Stalls: normal noise, and one trial in ten is disturbed (a
	// checkpoint, a neighbour's backup) and loses 10–40% (throughput
	// drops, latency rises). Heavy-tailed on one side.
	Stalls
)

func (n Noise) String() string {
	switch n {
	case Normal:
		return "normal"
	case Stalls:
		return "stalls"
	}
	return "lognormal"
}

// Scenario describes simulated experiments.
type Scenario struct {
	// CV is the trial-to-trial noise (0.03 = 3%); below 1 for Normal and
	// Stalls, at most 5 for Lognormal.
	CV float64
	// Change is the true relative change of each treatment arm's metric
	// (0.10: 10% higher; −0.05: 5% lower). 0 simulates A/A experiments.
	Change float64
	// Treatments is the number of treatment arms (default 1).
	Treatments int
	Noise      Noise
	// Runs is the number of simulated experiments (default 1000).
	Runs int
	// Seed makes the simulation repeatable.
	Seed uint64
}

// SimResult counts what simulated experiments concluded.
type SimResult struct {
	Runs int `json:"runs"`
	// Verdict counts over all arms of all runs.
	Better       int `json:"better"`
	Worse        int `json:"worse"`
	Equivalent   int `json:"equivalent"`
	Inconclusive int `json:"inconclusive"`
	// AnyDifferent counts runs in which at least one arm was declared
	// better or worse: under no change, the family-wise error.
	AnyDifferent int `json:"any_different"`
	// MeanPerArm is the average number of trials per arm run before the
	// experiment stopped.
	MeanPerArm float64 `json:"mean_per_arm"`
	// StoppedAt[k] counts runs that ended at look k+1.
	StoppedAt []int `json:"stopped_at"`
}

// Rate returns count/Runs.
func (r SimResult) Rate(count int) float64 { return float64(count) / float64(r.Runs) }

// Simulate runs the plan on simulated experiments, through the same
// Sequence code as real ones: every arm is drawn from the noise model
// around the same median, each treatment arm multiplied by 1+Change, the
// sequence looks at each planned look and stops when every arm has a
// verdict. It is deterministic for a given Seed.
func Simulate(plan Plan, sc Scenario) (SimResult, error) {
	plan, err := plan.withDefaults()
	if err != nil {
		return SimResult{}, err
	}
	if sc.Treatments == 0 {
		sc.Treatments = 1
	}
	if sc.Runs == 0 {
		sc.Runs = 1000
	}
	if !(sc.CV >= 0 && sc.CV <= 5) || (sc.Noise != Lognormal && sc.CV >= 1) ||
		!(sc.Change > -1 && sc.Change < 10) || sc.Treatments < 1 || sc.Runs < 1 {
		return SimResult{}, fmt.Errorf("simulate: unusable scenario %+v", sc)
	}
	rng := rand.New(rand.NewPCG(sc.Seed, 0x6462686f7374)) // "dbhost"
	ns := plan.looks()
	nmax := ns[len(ns)-1]
	res := SimResult{Runs: sc.Runs, StoppedAt: make([]int, len(ns))}
	arms := make([][]float64, sc.Treatments+1)
	for i := range arms {
		arms[i] = make([]float64, nmax)
	}
	const median = 1000.0
	totalN := 0
	for range sc.Runs {
		for i, arm := range arms {
			m := median
			if i > 0 {
				m *= 1 + sc.Change
			}
			for j := range arm {
				arm[j] = draw(rng, m, sc.CV, sc.Noise, plan.Direction)
			}
		}
		seq, err := plan.NewSequence(sc.Treatments)
		if err != nil {
			return SimResult{}, err
		}
		var ds []Decision
		for k, n := range ns {
			treats := make([][]float64, sc.Treatments)
			for i := range treats {
				treats[i] = arms[i+1][:n]
			}
			if ds, err = seq.Next(arms[0][:n], treats...); err != nil {
				return SimResult{}, err
			}
			if seq.Done() {
				res.StoppedAt[k]++
				totalN += n
				break
			}
		}
		anyDiff := false
		for _, d := range ds {
			switch d.Verdict {
			case Better:
				res.Better++
				anyDiff = true
			case Worse:
				res.Worse++
				anyDiff = true
			case Equivalent:
				res.Equivalent++
			default:
				res.Inconclusive++
			}
		}
		if anyDiff {
			res.AnyDifferent++
		}
	}
	res.MeanPerArm = float64(totalN) / float64(sc.Runs)
	return res, nil
}

// draw returns one positive sample around median m.
func draw(rng *rand.Rand, m, cv float64, noise Noise, dir Direction) float64 {
	switch noise {
	case Normal, Stalls:
		for {
			x := m * (1 + cv*rng.NormFloat64())
			if noise == Stalls && rng.IntN(10) == 0 {
				loss := 0.1 + 0.3*rng.Float64()
				if dir == LowerIsBetter {
					x /= 1 - loss
				} else {
					x *= 1 - loss
				}
			}
			if x > 0 {
				return x
			}
		}
	}
	sigma := math.Sqrt(math.Log1p(cv * cv))
	return m * math.Exp(sigma*rng.NormFloat64())
}
