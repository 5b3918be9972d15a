package stats

import (
	"fmt"
	"math"
	"sort"
)

// Holm returns Holm's step-down adjusted p-values (Holm 1979) for a family
// of tests, in the order given: rejecting every hypothesis whose adjusted
// p-value is at most α keeps the chance of any false rejection at most α.
// The i-th smallest p-value (1-based) is multiplied by m−i+1, and the
// results are made non-decreasing in that order and capped at 1.
//
// Sequence applies the same step-down with the plan's per-look levels;
// Holm is for a single analysis (for example a report over finished arms).
func Holm(p []float64) ([]float64, error) {
	m := len(p)
	for i, v := range p {
		if math.IsNaN(v) || v < 0 || v > 1 {
			return nil, fmt.Errorf("holm: p-value %d is %v, want a number in [0, 1]", i+1, v)
		}
	}
	order := make([]int, m)
	for i := range order {
		order[i] = i
	}
	sort.SliceStable(order, func(a, b int) bool { return p[order[a]] < p[order[b]] })
	adj := make([]float64, m)
	running := 0.0
	for r, i := range order {
		running = math.Max(running, math.Min(1, float64(m-r)*p[i]))
		adj[i] = running
	}
	return adj, nil
}
