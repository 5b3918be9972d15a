package stats

import (
	"fmt"
	"math"
	"sort"

	mstats "github.com/aclements/go-moremath/stats"
)

// checkSamples rejects what no trial can produce: the tests work on
// log(sample), so every sample must be a positive finite number.
func checkSamples(name string, xs []float64) error {
	if len(xs) == 0 {
		return fmt.Errorf("%s: no samples", name)
	}
	for i, x := range xs {
		switch {
		case math.IsNaN(x):
			return fmt.Errorf("%s: sample %d is NaN: every trial must yield a number", name, i+1)
		case math.IsInf(x, 0):
			return fmt.Errorf("%s: sample %d is infinite: every trial must yield a finite number", name, i+1)
		case x <= 0:
			return fmt.Errorf("%s: sample %d is %g: samples must be positive (a throughput or a latency); a zero usually means the trial failed", name, i+1, x)
		}
	}
	return nil
}

// Median is the sample median (the mean of the two middle values for
// an even count). It returns NaN for an empty slice.
func Median(xs []float64) float64 {
	return mstats.Sample{Xs: xs}.Quantile(0.5)
}

// sortedLogs returns log(x) in ascending order.
func sortedLogs(xs []float64) []float64 {
	out := make([]float64, len(xs))
	for i, x := range xs {
		out[i] = math.Log(x)
	}
	sort.Float64s(out)
	return out
}

// madScale turns a median absolute deviation into an estimate of the
// standard deviation for normal data (1/Φ⁻¹(3/4)).
const madScale = 1.482602218505602

// RobustCV estimates the trial-to-trial noise as a coefficient of
// variation that one bad trial cannot inflate: the scaled median absolute
// deviation of log(samples). For small noise it equals the ordinary
// CV (a value of 0.03 means trials scatter by about ±3%). It needs at
// least 3 samples.
func RobustCV(samples []float64) (float64, error) {
	if err := checkSamples("samples", samples); err != nil {
		return 0, err
	}
	if len(samples) < 3 {
		return 0, fmt.Errorf("samples: %d given, need at least 3 to estimate noise", len(samples))
	}
	logs := sortedLogs(samples)
	m := Median(logs)
	dev := make([]float64, len(logs))
	for i, l := range logs {
		dev[i] = math.Abs(l - m)
	}
	return madScale * Median(dev), nil
}

// allEqual reports whether every value in xs is the same.
func allEqual(xs []float64) bool {
	for _, x := range xs[1:] {
		if x != xs[0] {
			return false
		}
	}
	return true
}
