package expreport

import (
	"math"
	"strconv"
	"testing"
	"time"
)

func TestTicksAreRound(t *testing.T) {
	for _, c := range []struct {
		lo, hi float64
		n      int
		want   string // first, step, last
	}{
		{0, 2873, 6, "0 1000 3000"},
		{2236, 2676, 6, "2200 100 2700"},
		{0.953, 1.141, 8, "0.95 0.05 1.15"}, {0.953, 1.141, 10, "0.95 0.025 1.15"},
		{0, 60, 8, "0 10 60"},
		{0, 1, 6, "0 0.2 1"},
		{5, 5, 6, "4.4 0.2 5.6"}, // a single value gets a range around it
		{0, 0, 6, "-1 0.5 1"},
		{math.NaN(), math.Inf(1), 6, "0 0.2 1"},
	} {
		vals, step := ticks(c.lo, c.hi, c.n)
		got := strconv.FormatFloat(vals[0], 'g', 6, 64) + " " + strconv.FormatFloat(step, 'g', 6, 64) + " " + strconv.FormatFloat(vals[len(vals)-1], 'g', 6, 64)
		if got != c.want {
			t.Errorf("ticks(%v, %v, %d) = %s (%v), want %s", c.lo, c.hi, c.n, got, vals, c.want)
		}
		if len(vals) > 2*c.n {
			t.Errorf("ticks(%v, %v): %d ticks", c.lo, c.hi, len(vals))
		}
		if finite(c.lo) && finite(c.hi) && (vals[0] > c.lo || vals[len(vals)-1] < c.hi) {
			t.Errorf("ticks(%v, %v) = %v do not cover the range", c.lo, c.hi, vals)
		}
		// Every tick is a multiple of the step, and the step is 1, 2,
		// 2.5 or 5 times a power of ten.
		m := step / math.Pow(10, math.Floor(math.Log10(step)))
		if r := math.Round(m*10) / 10; r != 1 && r != 2 && r != 2.5 && r != 5 {
			t.Errorf("step %v is not round", step)
		}
		for _, v := range vals {
			if q := v / step; math.Abs(q-math.Round(q)) > 1e-6 {
				t.Errorf("tick %v is not a multiple of %v", v, step)
			}
		}
	}
}

func TestTickLabels(t *testing.T) {
	for _, c := range []struct {
		v, step float64
		want    string
	}{
		{3000, 500, "3,000"}, {1.05, 0.025, "1.050"}, {0.4, 0.2, "0.4"}, {12500, 2500, "12,500"}, {0, 0.5, "0.0"}, {-1, 0.5, "-1.0"},
	} {
		if got := tickLabel(c.v, c.step); got != c.want {
			t.Errorf("tickLabel(%v, %v) = %q, want %q", c.v, c.step, got, c.want)
		}
	}
}

func TestFormats(t *testing.T) {
	for _, c := range []struct{ got, want string }{
		{fmtOps(2412.77), "2,413"}, {fmtOps(1234567.8), "1,234,568"}, {fmtOps(45.67), "45.7"}, {fmtOps(3.14159), "3.14"},
		{fmtOps(math.NaN()), "–"}, {fmtOps(-12345), "-12,345"},
		{fmtDur(3456 * time.Microsecond), "3.46 ms"}, {fmtDur(850 * time.Microsecond), "850 µs"}, {fmtDur(1500 * time.Millisecond), "1.50 s"},
		{fmtDur(0), "–"}, {fmtDur(999), "999 ns"},
		{fmtWall(62*time.Minute + 20*time.Second), "1h02m"}, {fmtWall(245 * time.Second), "4m05s"}, {fmtWall(12300 * time.Millisecond), "12.3s"}, {fmtWall(0), "–"},
		{fmtRatio(1.07234), "1.072"}, {fmtRatio(math.Inf(1)), "–"}, {fmtRatio(0), "–"},
		{fmtChange(1.072), "+7.2%"}, {fmtChange(0.95), "-5.0%"}, {fmtChange(1.0000001), "+0.0%"}, {fmtChange(0.9999999), "0.0%"},
		{fmtBound(0, false), "0"}, {fmtBound(math.Inf(1), true), "∞"}, {fmtBound(1.0314, false), "1.031"},
		{fmtP(0.0042), "0.004"}, {fmtP(0.00001234), "1.2e-05"}, {fmtP(math.NaN()), "–"},
		{fmtPct(0.031), "3.1%"},
		{coord(math.NaN()), "0"}, {coord(12.0), "12"}, {coord(-0.01), "0"}, {coord(3.25), "3.2"},
		{humanNumber("memory_bytes", "4113563648"), "4,113,563,648 (3.8 GiB)"}, {humanNumber("cpus", "2"), "2"}, {humanNumber("kernel", "6.18.44"), "6.18.44"},
		{group("1234567.891"), "1,234,567.891"}, {group("999"), "999"},
	} {
		if c.got != c.want {
			t.Errorf("got %q, want %q", c.got, c.want)
		}
	}
}
