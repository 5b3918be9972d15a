package expreport

import (
	"math"
	"strconv"
)

// niceStep rounds a rough tick spacing to 1, 2, 2.5 or 5 times a power of
// ten, so that axes read 0, 500, 1,000 rather than 0, 437, 874.
func niceStep(rough float64) float64 {
	if !(rough > 0) || !finite(rough) {
		return 1
	}
	exp := math.Floor(math.Log10(rough))
	pow := math.Pow(10, exp)
	f := rough / pow
	var nf float64
	switch {
	case f <= 1:
		nf = 1
	case f <= 2:
		nf = 2
	case f <= 2.5:
		nf = 2.5
	case f <= 5:
		nf = 5
	default:
		nf = 10
	}
	return nf * pow
}

// ticks covers [lo, hi] with at most about n round ticks; the first and
// last tick enclose the range, and become the axis ends.
func ticks(lo, hi float64, n int) (vals []float64, step float64) {
	if !finite(lo) || !finite(hi) {
		lo, hi = 0, 1
	}
	if lo > hi {
		lo, hi = hi, lo
	}
	if hi == lo {
		pad := math.Abs(lo) * 0.1
		if pad == 0 {
			pad = 1
		}
		lo, hi = lo-pad, hi+pad
	}
	if n < 2 {
		n = 2
	}
	step = niceStep((hi - lo) / float64(n-1))
	first := math.Floor(lo/step + 1e-9)
	last := math.Ceil(hi/step - 1e-9)
	for i := first; i <= last; i++ {
		v := i * step
		if math.Abs(v) < step*1e-9 {
			v = 0
		}
		vals = append(vals, v)
	}
	return vals, step
}

// tickLabel formats a tick value with as many decimals as its step
// needs, and thousands separators.
func tickLabel(v, step float64) string {
	dec := 0
	for s := step; dec < 6 && math.Abs(s-math.Round(s)) > 1e-6*max(1, s); dec++ {
		s *= 10
	}
	return group(strconv.FormatFloat(v, 'f', dec, 64))
}

// linear maps a data range onto a pixel range.
type linear struct{ d0, d1, r0, r1 float64 }

func (s linear) at(x float64) float64 {
	if s.d1 == s.d0 {
		return (s.r0 + s.r1) / 2
	}
	return s.r0 + (x-s.d0)*(s.r1-s.r0)/(s.d1-s.d0)
}

// clamp keeps x within the pixel range (for open interval ends).
func (s linear) clamp(x float64) float64 {
	lo, hi := min(s.r0, s.r1), max(s.r0, s.r1)
	return max(lo, min(hi, x))
}
