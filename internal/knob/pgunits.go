package knob

import (
	"fmt"
	"math"
	"strconv"
	"strings"

	"github.com/dbhost/dbhost/internal/engine"
	"github.com/dbhost/dbhost/internal/engine/postgres"
	"github.com/dbhost/dbhost/internal/textio"
)

// pgParam is one PostgreSQL parameter as pg_settings describes it.
type pgParam struct {
	name, vartype, unit, context, source string
	min, max                             string
	enum                                 []string
	setting                              string // the live value, in the unit
	pending                              bool   // pending_restart
	want                                 string // the value asked for, normalised
}

// needsRestart says the parameter takes effect only at server start.
func (p *pgParam) needsRestart() bool { return p.context == "postmaster" }

// changes says setting it to want changes the running server.
func (p *pgParam) changes() bool { return p.pending || !p.same(p.want, p.setting) }

// listQuote are the list parameters whose elements PostgreSQL quotes as
// identifiers (GUC_LIST_QUOTE): one string literal would be one element,
// so their values are passed element by element.
var listQuote = map[string]bool{
	"search_path": true, "temp_tablespaces": true, "shared_preload_libraries": true,
	"local_preload_libraries": true, "session_preload_libraries": true,
}

var pgNumber = textio.LazyRegexp(`^([-+]?(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][-+]?[0-9]+)?)\s*([A-Za-z]*)$`)

// Memory units in bytes and time units in microseconds, as PostgreSQL
// spells them (case matters to the server, so it does here).
var (
	pgMemUnits  = map[string]float64{"B": 1, "kB": 1 << 10, "MB": 1 << 20, "GB": 1 << 30, "TB": 1 << 40, "8kB": 8 << 10, "16MB": 16 << 20}
	pgTimeUnits = map[string]float64{"us": 1, "ms": 1e3, "s": 1e6, "min": 60e6, "h": 3600e6, "d": 86400e6}
)

// normalize checks a value the way the server will and returns it in the
// form pg_settings.setting shows: integers and reals in the parameter's
// unit, "on"/"off", the enum value as listed.
func (p *pgParam) normalize(v string) (string, error) {
	v = strings.TrimSpace(v)
	switch p.vartype {
	case "bool":
		b, ok := pgBool(v)
		if !ok {
			return "", fmt.Errorf("%q is not a boolean (on, off)", v)
		}
		if b {
			return "on", nil
		}
		return "off", nil
	case "enum":
		for _, e := range p.enum {
			if strings.EqualFold(e, v) {
				return e, nil
			}
		}
		return "", fmt.Errorf("%q is not one of %s", v, strings.Join(p.enum, ", "))
	case "integer", "real":
		n, err := p.number(v)
		if err != nil {
			return "", err
		}
		if p.vartype == "integer" {
			n = math.RoundToEven(n)
		}
		if lo, err := strconv.ParseFloat(p.min, 64); err == nil && n < lo {
			return "", fmt.Errorf("%q is below the minimum %s%s", v, p.min, p.unit)
		}
		if hi, err := strconv.ParseFloat(p.max, 64); err == nil && n > hi {
			return "", fmt.Errorf("%q is above the maximum %s%s", v, p.max, p.unit)
		}
		return strconv.FormatFloat(n, 'f', -1, 64), nil
	}
	return v, nil
}

// number reads a numeric value, converting a unit suffix to the
// parameter's unit ("1GB" for shared_buffers is 131072 pages of 8 kB).
func (p *pgParam) number(v string) (float64, error) {
	m := pgNumber.FindStringSubmatch(v)
	if m == nil {
		return 0, fmt.Errorf("%q is not a number", v)
	}
	n, err := strconv.ParseFloat(m[1], 64)
	if err != nil {
		return 0, fmt.Errorf("%q is not a number", v)
	}
	suffix := m[2]
	if suffix == "" {
		return n, nil
	}
	if _, ok := pgMemUnits[suffix]; ok && suffix != "8kB" && suffix != "16MB" {
		base, ok := pgMemUnits[p.unit]
		if !ok {
			return 0, fmt.Errorf("%q: %s takes no memory unit (its unit is %q)", v, p.name, p.unit)
		}
		if n < 0 {
			return 0, fmt.Errorf("%q: a negative size", v)
		}
		b, ok := postgres.SettingBytes(p.name, engine.Setting{Value: v, Unit: p.unit})
		if !ok {
			return 0, fmt.Errorf("%q is not a size", v)
		}
		return float64(b) / base, nil
	}
	if f, ok := pgTimeUnits[suffix]; ok {
		base, ok := pgTimeUnits[p.unit]
		if !ok {
			return 0, fmt.Errorf("%q: %s takes no time unit (its unit is %q)", v, p.name, p.unit)
		}
		return n * f / base, nil
	}
	return 0, fmt.Errorf("%q: unknown unit %q (memory: B, kB, MB, GB, TB; time: us, ms, s, min, h, d)", v, suffix)
}

// pgBool reads a boolean the way the server does: on, off, true, false,
// yes, no, 1, 0 and unique prefixes of them.
func pgBool(v string) (bool, bool) {
	s := strings.ToLower(v)
	switch {
	case s == "1":
		return true, true
	case s == "0":
		return false, true
	case s == "":
		return false, false
	case strings.HasPrefix("true", s), strings.HasPrefix("yes", s):
		return true, true
	case strings.HasPrefix("false", s), strings.HasPrefix("no", s):
		return false, true
	case s == "on":
		return true, true
	case len(s) >= 2 && strings.HasPrefix("off", s):
		return false, true
	}
	return false, false
}

// same compares a normalised wanted value with pg_settings.setting.
func (p *pgParam) same(want, setting string) bool {
	switch p.vartype {
	case "bool":
		b, ok := pgBool(setting)
		return ok && (want == "on") == b
	case "enum":
		return strings.EqualFold(want, setting)
	case "integer", "real":
		w, err1 := strconv.ParseFloat(want, 64)
		g, err2 := strconv.ParseFloat(setting, 64)
		if err1 != nil || err2 != nil {
			return want == setting
		}
		return w == g || math.Abs(w-g) <= 1e-9*math.Max(math.Abs(w), math.Abs(g))
	}
	return listKey(want) == listKey(setting)
}

// listKey is a string setting as the server may respell it: elements of a
// list without the spaces and quotes around them, case folded.
func listKey(s string) string {
	parts := strings.Split(s, ",")
	for i, e := range parts {
		parts[i] = strings.ToLower(strings.Trim(strings.TrimSpace(e), `"`))
	}
	return strings.Join(parts, ",")
}

// pgLiteral is an escape string literal: right whatever
// standard_conforming_strings says.
func pgLiteral(s string) string {
	return "E'" + strings.NewReplacer(`\`, `\\`, `'`, `''`).Replace(s) + "'"
}

// pgValueList writes a value for ALTER SYSTEM SET: element by element for
// the list parameters that quote their elements, else one literal.
func pgValueList(name, v string) string {
	if !listQuote[strings.ToLower(name)] || !strings.Contains(v, ",") {
		return pgLiteral(v)
	}
	parts := strings.Split(v, ",")
	for i, e := range parts {
		parts[i] = pgLiteral(strings.Trim(strings.TrimSpace(e), `"`))
	}
	return strings.Join(parts, ", ")
}
