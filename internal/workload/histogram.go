package workload

import (
	"math"
	"math/bits"
	"time"
)

// Histogram counts latencies in log-linear buckets, the HDR-histogram way:
// values below 256 ns are exact, larger ones fall into one of 128 equal
// buckets per power of two, so a reported quantile is within 1/256 (0.4 %)
// of a recorded value. Min, max, count and sum are exact. The zero value is
// ready to use; a Histogram is not safe for concurrent use (each worker keeps
// its own and they are merged).
type Histogram struct {
	counts   []int64
	n        int64
	sum      float64 // nanoseconds; float so long runs cannot overflow
	min, max int64
}

const (
	subBits    = 7
	subBuckets = 1 << subBits // per power of two
	exactBelow = 2 * subBuckets
	numBuckets = exactBelow + (64-subBits-1)*subBuckets
)

func bucketOf(v int64) int {
	if v < exactBelow {
		return int(v)
	}
	shift := bits.Len64(uint64(v)) - subBits - 1 // >= 1
	m := int(v >> shift)                         // in [128, 256)
	return exactBelow + (shift-1)*subBuckets + m - subBuckets
}

// bucketMid is the middle of bucket i's range, the value reported for it.
func bucketMid(i int) int64 {
	if i < exactBelow {
		return int64(i)
	}
	shift := (i-exactBelow)/subBuckets + 1
	m := int64((i-exactBelow)%subBuckets + subBuckets)
	lo := m << shift
	return lo + (int64(1)<<shift)/2
}

// Record adds one latency.
func (h *Histogram) Record(d time.Duration) { h.RecordN(d, 1) }

// RecordN adds n observations of the same latency (a bucket of another
// tool's histogram). Negative latencies count as zero.
func (h *Histogram) RecordN(d time.Duration, n int64) {
	if n <= 0 {
		return
	}
	v := int64(d)
	if v < 0 {
		v = 0
	}
	if h.counts == nil {
		h.counts = make([]int64, numBuckets)
	}
	h.counts[bucketOf(v)] += n
	if h.n == 0 || v < h.min {
		h.min = v
	}
	if v > h.max {
		h.max = v
	}
	h.n += n
	h.sum += float64(v) * float64(n)
}

// Merge adds o's observations to h.
func (h *Histogram) Merge(o *Histogram) {
	if o == nil || o.n == 0 {
		return
	}
	if h.counts == nil {
		h.counts = make([]int64, numBuckets)
	}
	for i, c := range o.counts {
		h.counts[i] += c
	}
	if h.n == 0 || o.min < h.min {
		h.min = o.min
	}
	if o.max > h.max {
		h.max = o.max
	}
	h.n += o.n
	h.sum += o.sum
}

// Count is the number of recorded latencies.
func (h *Histogram) Count() int64 { return h.n }

// Quantile returns the latency below or at which a fraction q (0..1) of the
// recorded latencies lie: the smallest recorded value v such that at least
// ceil(q*n) values are <= v, to the bucket's precision. It is 0 when empty.
func (h *Histogram) Quantile(q float64) time.Duration {
	if h.n == 0 {
		return 0
	}
	if q <= 0 {
		return time.Duration(h.min)
	}
	rank := int64(math.Ceil(q * float64(h.n)))
	if rank >= h.n {
		return time.Duration(h.max)
	}
	var seen int64
	for i, c := range h.counts {
		seen += c
		if seen >= rank {
			v := bucketMid(i)
			// The bucket's middle may lie outside what was recorded.
			return time.Duration(min(max(v, h.min), h.max))
		}
	}
	return time.Duration(h.max)
}

// Latency summarises the histogram.
func (h *Histogram) Latency() Latency {
	if h.n == 0 {
		return Latency{}
	}
	return Latency{
		Count: h.n,
		Min:   time.Duration(h.min),
		Mean:  time.Duration(h.sum / float64(h.n)),
		P50:   h.Quantile(0.50),
		P95:   h.Quantile(0.95),
		P99:   h.Quantile(0.99),
		Max:   time.Duration(h.max),
	}
}
