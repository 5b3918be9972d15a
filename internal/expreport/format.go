package expreport

import (
	"math"
	"strconv"
	"strings"
	"time"
)

// finite reports whether x is a usable number (not NaN, not ±Inf).
func finite(x float64) bool { return !math.IsNaN(x) && !math.IsInf(x, 0) }

// group inserts thousands separators into the integer part of a decimal
// string: "12345.6" → "12,345.6".
func group(s string) string {
	neg := strings.HasPrefix(s, "-")
	if neg {
		s = s[1:]
	}
	intPart, frac, _ := strings.Cut(s, ".")
	var b strings.Builder
	for i, c := range intPart {
		if i > 0 && (len(intPart)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(c)
	}
	out := b.String()
	if frac != "" {
		out += "." + frac
	}
	if neg {
		out = "-" + out
	}
	return out
}

// fmtOps formats a throughput for people: whole numbers with separators
// from 100 up, more digits below, "–" for what is not a number.
func fmtOps(x float64) string {
	switch {
	case !finite(x):
		return "–"
	case math.Abs(x) >= 100:
		return group(strconv.FormatFloat(x, 'f', 0, 64))
	case math.Abs(x) >= 10:
		return strconv.FormatFloat(x, 'f', 1, 64)
	}
	return strconv.FormatFloat(x, 'f', 2, 64)
}

// fmtDur formats a latency with three significant digits in a fitting
// unit; 0 (not measured) is "–".
func fmtDur(d time.Duration) string {
	if d <= 0 {
		return "–"
	}
	x := float64(d)
	unit, div := "s", float64(time.Second)
	switch {
	case d < time.Microsecond:
		return strconv.FormatInt(int64(d), 10) + " ns"
	case d < time.Millisecond:
		unit, div = "µs", float64(time.Microsecond)
	case d < time.Second:
		unit, div = "ms", float64(time.Millisecond)
	}
	return sig3(x/div) + " " + unit
}

// sig3 formats x (≥ 1) with three significant digits.
func sig3(x float64) string {
	switch {
	case x >= 100:
		return strconv.FormatFloat(x, 'f', 0, 64)
	case x >= 10:
		return strconv.FormatFloat(x, 'f', 1, 64)
	}
	return strconv.FormatFloat(x, 'f', 2, 64)
}

// fmtWall formats a wall-clock span: "1h02m", "4m05s", "12.3s".
func fmtWall(d time.Duration) string {
	switch {
	case d <= 0:
		return "–"
	case d < time.Minute:
		return strconv.FormatFloat(d.Seconds(), 'f', 1, 64) + "s"
	case d < time.Hour:
		s := int(d.Round(time.Second).Seconds())
		return strconv.Itoa(s/60) + "m" + pad2(s%60) + "s"
	}
	m := int(d.Round(time.Minute).Minutes())
	return strconv.Itoa(m/60) + "h" + pad2(m%60) + "m"
}

func pad2(n int) string {
	if n < 10 {
		return "0" + strconv.Itoa(n)
	}
	return strconv.Itoa(n)
}

// fmtRatio formats a ratio such as 1.072; open or missing ratios are "–".
func fmtRatio(r float64) string {
	if !finite(r) || r <= 0 {
		return "–"
	}
	return strconv.FormatFloat(r, 'f', 3, 64)
}

// fmtChange formats a ratio as a signed percentage: 1.072 → "+7.2%".
func fmtChange(r float64) string {
	if !finite(r) || r <= 0 {
		return "–"
	}
	p := 100 * (r - 1)
	s := strconv.FormatFloat(p, 'f', 1, 64)
	if s == "-0.0" {
		s = "0.0"
	}
	if p >= 0 && !strings.HasPrefix(s, "-") {
		s = "+" + s
	}
	return s + "%"
}

// fmtBound formats one end of an interval; open ends are 0 and ∞.
func fmtBound(x float64, upper bool) string {
	switch {
	case upper && (math.IsInf(x, 1) || math.IsNaN(x)):
		return "∞"
	case !upper && (!finite(x) || x <= 0):
		return "0"
	}
	return strconv.FormatFloat(x, 'f', 3, 64)
}

// fmtPct formats a fraction as a percentage with one decimal: 0.031 → "3.1%".
func fmtPct(f float64) string {
	if !finite(f) {
		return "–"
	}
	return strconv.FormatFloat(100*f, 'f', 1, 64) + "%"
}

// fmtP formats a p-value.
func fmtP(p float64) string {
	switch {
	case !finite(p) || p < 0:
		return "–"
	case p < 0.001:
		return strconv.FormatFloat(p, 'e', 1, 64)
	}
	return strconv.FormatFloat(p, 'f', 3, 64)
}

// coord formats an SVG coordinate; never NaN.
func coord(x float64) string {
	if !finite(x) {
		x = 0
	}
	s := strconv.FormatFloat(x, 'f', 1, 64)
	s = strings.TrimSuffix(s, ".0")
	if s == "-0" {
		s = "0"
	}
	return s
}

// fmtTime formats a timestamp in UTC, to the second.
func fmtTime(t time.Time) string {
	if t.IsZero() {
		return "–"
	}
	return t.UTC().Format("2006-01-02 15:04:05 UTC")
}

// humanNumber makes a whole number from stored JSON readable: separators,
// and a binary size when the key says it counts bytes. Anything else is
// returned as is.
func humanNumber(key, val string) string {
	n, err := strconv.ParseInt(val, 10, 64)
	if err != nil {
		return val
	}
	out := group(val)
	if k := strings.ToLower(key); n >= 1024 && (strings.HasSuffix(k, "bytes") || strings.HasSuffix(k, "_b")) {
		x, unit := float64(n), ""
		for _, u := range []string{"KiB", "MiB", "GiB", "TiB", "PiB"} {
			if x < 1024 {
				break
			}
			x, unit = x/1024, u
		}
		out += " (" + strconv.FormatFloat(x, 'f', 1, 64) + " " + unit + ")"
	}
	return out
}
