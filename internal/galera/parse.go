package galera

import (
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"
	"unicode"
)

// MaxWeight is pc.weight's upper bound (Galera accepts 0..255).
const MaxWeight = 255

// ParseMembers reads a layout a user describes, comma-separated:
//
//	db1,db2,db3,garbd:arbitrator,db4:weight=2:segment=1
//
// Each member is NAME[:weight=N][:segment=N][:arbitrator]; a member named
// garbd is an arbitrator without saying so. Shorthand for the lab's
// layouts: N (data nodes node1..nodeN), N+garbd (and an arbitrator named
// garbd), and either with :segments=S (data nodes round-robin over
// segments 0..S-1, the arbitrator in the last one): "4+garbd:segments=3".
func ParseMembers(spec string) (Layout, error) {
	spec = strings.TrimSpace(spec)
	if spec == "" {
		return Layout{}, errors.New("no members: give names (db1,db2,db3) or a count (3, 3+garbd)")
	}
	if spec[0] >= '0' && spec[0] <= '9' {
		return parseShorthand(spec)
	}
	var l Layout
	seen := map[string]bool{}
	for _, item := range strings.Split(spec, ",") {
		parts := strings.Split(item, ":")
		name := strings.TrimSpace(parts[0])
		if err := checkName(name); err != nil {
			return Layout{}, fmt.Errorf("member %q: %w", item, err)
		}
		if seen[name] {
			return Layout{}, fmt.Errorf("member %q named twice", name)
		}
		seen[name] = true
		m := Member{Name: name, Weight: 1, Arbitrator: name == "garbd"}
		for _, p := range parts[1:] {
			p = strings.TrimSpace(p)
			key, val, hasVal := strings.Cut(p, "=")
			key, val = strings.ToLower(strings.TrimSpace(key)), strings.TrimSpace(val)
			switch {
			case key == "arbitrator" && !hasVal:
				m.Arbitrator = true
			case key == "weight" && hasVal:
				n, err := strconv.Atoi(val)
				if err != nil || n < 0 || n > MaxWeight {
					return Layout{}, fmt.Errorf("member %q: weight %q: want 0..%d", name, val, MaxWeight)
				}
				m.Weight = n
			case key == "segment" && hasVal:
				n, err := strconv.Atoi(val)
				if err != nil || n < 0 || n > 255 {
					return Layout{}, fmt.Errorf("member %q: segment %q: want 0..255", name, val)
				}
				m.Segment = n
			default:
				return Layout{}, fmt.Errorf("member %q: unknown attribute %q (want weight=N, segment=N or arbitrator)", name, p)
			}
		}
		l.Members = append(l.Members, m)
	}
	if len(l.Members) > MaxMembers {
		return Layout{}, fmt.Errorf("%d members: at most %d", len(l.Members), MaxMembers)
	}
	return l, nil
}

func checkName(name string) error {
	switch {
	case name == "":
		return errors.New("empty name")
	case len(name) > 64:
		return errors.New("name longer than 64 characters")
	}
	for _, r := range name {
		if !(unicode.IsLetter(r) || unicode.IsDigit(r) || strings.ContainsRune("-_.", r)) {
			return fmt.Errorf("name has %q: use letters, digits, dash, underscore and dot", r)
		}
	}
	return nil
}

func parseShorthand(spec string) (Layout, error) {
	head, opt, hasOpt := strings.Cut(spec, ":")
	count, garbd := strings.TrimSpace(head), false
	if c, ok := strings.CutSuffix(count, "+garbd"); ok {
		count, garbd = strings.TrimSpace(c), true
	}
	n, err := strconv.Atoi(count)
	if err != nil || n < 1 || n > MaxMembers-1 {
		return Layout{}, fmt.Errorf("%q: want a count of data nodes 1..%d, optionally +garbd and :segments=S", spec, MaxMembers-1)
	}
	segs := 1
	if hasOpt {
		k, v, _ := strings.Cut(opt, "=")
		s, err := strconv.Atoi(strings.TrimSpace(v))
		if strings.TrimSpace(strings.ToLower(k)) != "segments" || err != nil || s < 1 || s > 3 {
			return Layout{}, fmt.Errorf("%q: after the count want :segments=S with S 1..3", spec)
		}
		segs = s
	}
	var l Layout
	for i := 0; i < n; i++ {
		l.Members = append(l.Members, Member{Name: "node" + strconv.Itoa(i+1), Weight: 1, Segment: i % segs})
	}
	if garbd {
		l.Members = append(l.Members, Member{Name: "garbd", Weight: 1, Segment: segs - 1, Arbitrator: true})
	}
	return l, nil
}

// ParseProviderOptions splits wsrep_provider_options ("a=b; c = d") into
// values by lower-case key. Entries without "=" are skipped.
func ParseProviderOptions(s string) map[string]string {
	out := map[string]string{}
	for _, item := range strings.Split(s, ";") {
		k, v, ok := strings.Cut(item, "=")
		k = strings.ToLower(strings.TrimSpace(k))
		if !ok || k == "" {
			continue
		}
		out[k] = strings.TrimSpace(v)
	}
	return out
}

// ParseDuration reads Galera's ISO 8601 periods (PT5S, PT1M30S, PT0.5S,
// P1DT2H; case and spaces ignored) and plain seconds (5, 0.5). Years and
// months are refused (their length varies).
func ParseDuration(s string) (time.Duration, error) {
	in := s
	s = strings.ToUpper(strings.TrimSpace(s))
	if s == "" {
		return 0, errors.New("empty duration")
	}
	if f, err := strconv.ParseFloat(s, 64); err == nil {
		return seconds(f, in)
	}
	rest, ok := strings.CutPrefix(s, "P")
	if !ok || rest == "" {
		return 0, fmt.Errorf("duration %q: want ISO 8601 like PT5S or PT1M30S", in)
	}
	var total float64
	timePart, any := false, false
	for rest != "" {
		if rest[0] == 'T' {
			if timePart {
				return 0, fmt.Errorf("duration %q: T twice", in)
			}
			timePart, rest = true, rest[1:]
			continue
		}
		i := 0
		for i < len(rest) && (rest[i] >= '0' && rest[i] <= '9' || rest[i] == '.') {
			i++
		}
		if i == 0 || i == len(rest) {
			return 0, fmt.Errorf("duration %q: want a number before each of D, H, M, S", in)
		}
		n, err := strconv.ParseFloat(rest[:i], 64)
		if err != nil {
			return 0, fmt.Errorf("duration %q: %q is no number", in, rest[:i])
		}
		var unit float64
		switch u := rest[i]; {
		case u == 'D' && !timePart:
			unit = 86400
		case u == 'H' && timePart:
			unit = 3600
		case u == 'M' && timePart:
			unit = 60
		case u == 'S' && timePart:
			unit = 1
		case u == 'Y' || u == 'M' || u == 'W':
			return 0, fmt.Errorf("duration %q: years, months and weeks are not supported", in)
		default:
			return 0, fmt.Errorf("duration %q: unexpected %q", in, string(u))
		}
		total += n * unit
		any = true
		rest = rest[i+1:]
	}
	if !any {
		return 0, fmt.Errorf("duration %q: no value", in)
	}
	return seconds(total, in)
}

func seconds(f float64, in string) (time.Duration, error) {
	if f < 0 || math.IsNaN(f) || f*float64(time.Second) > math.MaxInt64 {
		return 0, fmt.Errorf("duration %q out of range", in)
	}
	return time.Duration(math.Round(f * float64(time.Second))), nil
}

// ParseSize reads a Galera size (gcache.size): bytes, or a number with K,
// M, G or T (powers of 1024, optionally followed by B; any case).
func ParseSize(s string) (int64, error) {
	in := s
	s = strings.ToUpper(strings.TrimSpace(s))
	s = strings.TrimSuffix(s, "B")
	if s == "" {
		return 0, fmt.Errorf("size %q: empty", in)
	}
	mult := int64(1)
	switch s[len(s)-1] {
	case 'K':
		mult = 1 << 10
	case 'M':
		mult = 1 << 20
	case 'G':
		mult = 1 << 30
	case 'T':
		mult = 1 << 40
	}
	if mult > 1 {
		s = strings.TrimSpace(s[:len(s)-1])
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n < 0 {
		return 0, fmt.Errorf("size %q: want bytes or a number with K, M, G or T", in)
	}
	if n > math.MaxInt64/mult {
		return 0, fmt.Errorf("size %q out of range", in)
	}
	return n * mult, nil
}
