package workload

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"
	"time"
)

// exactQuantile is the definition Quantile approximates: the smallest
// value with at least ceil(q*n) values at or below it.
func exactQuantile(sorted []time.Duration, q float64) time.Duration {
	rank := int(math.Ceil(q * float64(len(sorted))))
	return sorted[max(rank, 1)-1]
}

func TestHistogramQuantileError(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for _, dist := range []struct {
		name string
		draw func() time.Duration
	}{
		// Latencies of real runs span microseconds to seconds with a long
		// tail: log-normal; plus small exact values and a uniform spread.
		{"lognormal", func() time.Duration { return time.Duration(math.Exp(rng.NormFloat64()*1.5 + 13)) }},
		{"small", func() time.Duration { return time.Duration(rng.IntN(300)) }},
		{"uniform", func() time.Duration { return time.Duration(rng.Int64N(int64(10 * time.Second))) }},
	} {
		var h Histogram
		var all []time.Duration
		for range 100000 {
			d := dist.draw()
			h.Record(d)
			all = append(all, d)
		}
		slices.Sort(all)
		for _, q := range []float64{0, 0.001, 0.25, 0.5, 0.9, 0.95, 0.99, 0.999, 1} {
			want := exactQuantile(all, q)
			if q == 0 {
				want = all[0]
			}
			got := h.Quantile(q)
			if diff := math.Abs(float64(got - want)); diff > float64(want)/256+1 {
				t.Errorf("%s q%.3f: %v, exact %v (off by %.2f%%)", dist.name, q, got, want, 100*diff/float64(want))
			}
		}
		l := h.Latency()
		var sum float64
		for _, d := range all {
			sum += float64(d)
		}
		if l.Count != int64(len(all)) || l.Min != all[0] || l.Max != all[len(all)-1] || math.Abs(float64(l.Mean)-sum/float64(len(all))) > 1 {
			t.Errorf("%s: %+v", dist.name, l)
		}
	}
}

func TestHistogramMergeAndCounts(t *testing.T) {
	var a, b, both Histogram
	for i := range 1000 {
		d := time.Duration(i*i) * time.Microsecond
		both.Record(d)
		if i%2 == 0 {
			a.Record(d)
		} else {
			b.RecordN(d, 1)
		}
	}
	a.Merge(&b)
	a.Merge(nil)
	a.Merge(&Histogram{})
	if a.Latency() != both.Latency() {
		t.Errorf("merged %+v, recorded together %+v", a.Latency(), both.Latency())
	}
	var e Histogram
	if e.Quantile(0.5) != 0 || e.Latency() != (Latency{}) {
		t.Error("empty histogram reports latencies")
	}
	e.RecordN(time.Millisecond, 0)
	e.Record(-time.Second)
	if e.Count() != 1 || e.Quantile(1) != 0 {
		t.Errorf("count %d, max %v", e.Count(), e.Quantile(1))
	}
	var big Histogram
	big.Record(time.Duration(math.MaxInt64))
	if big.Quantile(0.5) != time.Duration(math.MaxInt64) {
		t.Errorf("largest value: %v", big.Quantile(0.5))
	}
}

func TestHistogramBucketsCoverRange(t *testing.T) {
	prev := -1
	for _, v := range []int64{0, 1, 255, 256, 257, 511, 512, 1 << 20, 1<<40 + 12345, math.MaxInt64} {
		i := bucketOf(v)
		if i < prev || i >= numBuckets {
			t.Fatalf("bucket of %d: %d (previous %d, %d buckets)", v, i, prev, numBuckets)
		}
		prev = i
		if mid := bucketMid(i); math.Abs(float64(mid-v)) > float64(v)/256+1 {
			t.Errorf("bucket %d of %d has middle %d", i, v, mid)
		}
	}
}
