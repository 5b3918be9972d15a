// Package budget parses the user's memory shares of co-located databases
// ("redis:6379=4GiB,postgres:5432=40%", the --budget flag and DBHOST_BUDGET)
// and checks them against the instances of a host. The checks size every
// database from its share of one host budget (docs/fix.md, "The memory
// budget"); these shares replace the rule's share for the databases named.
package budget

import (
	"errors"
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"
)

// Share is the memory one database may use: Bytes, or Percent of the
// host's budget for databases.
type Share struct {
	// Instance is the name dbhost gives the server ("postgres:5432",
	// "postgres:5432@/srv/pg2").
	Instance string  `json:"instance"`
	Bytes    uint64  `json:"bytes,omitempty"`
	Percent  float64 `json:"percent,omitempty"`
}

// Shares are the user's shares and where they were read.
type Shares struct {
	Shares []Share `json:"shares,omitempty"`
	// Source: "--budget", "DBHOST_BUDGET" (the environment) or the file.
	Source string `json:"source,omitempty"`
}

// Of returns the bytes of share s of a budget of total bytes.
func (s Share) Of(total uint64) uint64 {
	if s.Percent > 0 {
		return uint64(s.Percent / 100 * float64(total))
	}
	return s.Bytes
}

// String renders the share as the flag takes it.
func (s Share) String() string {
	if s.Percent > 0 {
		return s.Instance + "=" + strconv.FormatFloat(s.Percent, 'f', -1, 64) + "%"
	}
	return s.Instance + "=" + FormatBytes(s.Bytes)
}

// String renders the shares as the flag takes them.
func (s Shares) String() string {
	var out []string
	for _, sh := range s.Shares {
		out = append(out, sh.String())
	}
	return strings.Join(out, ",")
}

// Empty reports whether no share is set.
func (s Shares) Empty() bool { return len(s.Shares) == 0 }

// units are the size suffixes Parse accepts, lower case: binary as
// systemd's MemoryMax= reads K, M, G, T; kB, MB, GB, TB are decimal.
var units = map[string]uint64{
	"": 1, "b": 1,
	"k": 1 << 10, "kib": 1 << 10, "m": 1 << 20, "mib": 1 << 20,
	"g": 1 << 30, "gib": 1 << 30, "t": 1 << 40, "tib": 1 << 40,
	"kb": 1e3, "mb": 1e6, "gb": 1e9, "tb": 1e12,
}

// Parse reads "NAME=SIZE[,NAME=SIZE...]": SIZE is bytes with a unit (4GiB,
// 512M, 1.5G, 2GB) or a percentage of the host's budget for databases
// (40%). An empty string is no shares. It refuses an unknown unit, a
// share of 0, a name given twice and percentages that add up to more
// than 100 %.
func Parse(s string) ([]Share, error) {
	var out []Share
	seen := map[string]bool{}
	var pct float64
	for _, item := range strings.Split(s, ",") {
		item = strings.TrimSpace(item)
		if item == "" {
			continue
		}
		eq := strings.LastIndex(item, "=")
		if eq <= 0 {
			return nil, fmt.Errorf("budget %q: want NAME=SIZE, e.g. redis:6379=4GiB or postgres:5432=40%%", item)
		}
		name, val := strings.TrimSpace(item[:eq]), strings.TrimSpace(item[eq+1:])
		if !strings.Contains(name, ":") {
			return nil, fmt.Errorf("budget %q: %q is not an instance name as dbhost gives it (ENGINE:PORT, e.g. postgres:5432)", item, name)
		}
		if seen[name] {
			return nil, fmt.Errorf("budget: %s is given twice", name)
		}
		seen[name] = true
		sh, err := parseValue(name, val)
		if err != nil {
			return nil, fmt.Errorf("budget %q: %w", item, err)
		}
		pct += sh.Percent
		out = append(out, sh)
	}
	if pct > 100 {
		return nil, fmt.Errorf("budget: the percentages add up to %s%%, more than 100%%", strconv.FormatFloat(pct, 'f', -1, 64))
	}
	return out, nil
}

func parseValue(name, v string) (Share, error) {
	if p, ok := strings.CutSuffix(v, "%"); ok {
		f, err := strconv.ParseFloat(strings.TrimSpace(p), 64)
		if err != nil || math.IsNaN(f) || f <= 0 || f > 100 {
			return Share{}, fmt.Errorf("%q is not a percentage above 0 and at most 100", v)
		}
		return Share{Instance: name, Percent: f}, nil
	}
	i := strings.IndexFunc(v, func(r rune) bool { return (r < '0' || r > '9') && r != '.' })
	if i < 0 {
		i = len(v)
	}
	num, unit := v[:i], strings.ToLower(strings.TrimSpace(v[i:]))
	mul, ok := units[unit]
	if !ok {
		return Share{}, fmt.Errorf("unknown unit %q in %q (use B, K, KiB, M, MiB, G, GiB, T, TiB, kB, MB, GB, TB or %%)", v[i:], v)
	}
	f, err := strconv.ParseFloat(num, 64)
	if err != nil || f <= 0 {
		return Share{}, fmt.Errorf("%q is not a size above 0", v)
	}
	b := f * float64(mul)
	if b >= 1<<63 {
		return Share{}, fmt.Errorf("%q is too large", v)
	}
	if b < 1<<20 {
		return Share{}, fmt.Errorf("%q is less than 1 MiB: no database runs in it", v)
	}
	return Share{Instance: name, Bytes: uint64(b)}, nil
}

// ErrUnknown is wrapped by Match's error for a share naming no instance.
var ErrUnknown = errors.New("no such instance on this host")

// Match finds the instance each share names among names (the host's
// instance names): the exact name, or a name without its "@tag" when only
// one instance has it. It returns the instance name per share.
func Match(shares []Share, names []string) ([]string, error) {
	out := make([]string, len(shares))
	used := map[string]string{}
	for i, s := range shares {
		var hits []string
		for _, n := range names {
			base, _, _ := strings.Cut(n, "@")
			if n == s.Instance || (!strings.Contains(s.Instance, "@") && base == s.Instance) {
				hits = append(hits, n)
			}
		}
		sort.Strings(hits)
		switch {
		case len(hits) == 0:
			return nil, fmt.Errorf("budget: %s: %w (it has %s)", s.Instance, ErrUnknown, orNone(names))
		case len(hits) > 1 && !contains(hits, s.Instance):
			return nil, fmt.Errorf("budget: %s names %d instances (%s): add the @tag", s.Instance, len(hits), strings.Join(hits, ", "))
		case len(hits) > 1:
			hits = []string{s.Instance}
		}
		if prev, ok := used[hits[0]]; ok {
			return nil, fmt.Errorf("budget: %s and %s are the same instance", prev, s.Instance)
		}
		used[hits[0]] = s.Instance
		out[i] = hits[0]
	}
	return out, nil
}

// Check matches the shares to the host's instances and refuses shares
// that add up to more than total, the host's budget for databases.
func Check(shares []Share, names []string, total uint64) error {
	if _, err := Match(shares, names); err != nil {
		return err
	}
	var sum uint64
	for _, s := range shares {
		sum += s.Of(total)
	}
	if sum > total {
		return fmt.Errorf("budget: the shares add up to %s, more than the %s the host has for its databases (see mem.db_budget)", FormatBytes(sum), FormatBytes(total))
	}
	return nil
}

func contains(l []string, s string) bool {
	for _, x := range l {
		if x == s {
			return true
		}
	}
	return false
}

func orNone(names []string) string {
	if len(names) == 0 {
		return "no database"
	}
	s := append([]string(nil), names...)
	sort.Strings(s)
	return strings.Join(s, ", ")
}

// FormatBytes renders b in whole binary units where exact ("4GiB"), else
// with one decimal ("1.5GiB").
func FormatBytes(b uint64) string {
	for _, u := range []struct {
		n    uint64
		name string
	}{{1 << 40, "TiB"}, {1 << 30, "GiB"}, {1 << 20, "MiB"}, {1 << 10, "KiB"}} {
		if b >= u.n {
			if b%u.n == 0 {
				return fmt.Sprintf("%d%s", b/u.n, u.name)
			}
			return fmt.Sprintf("%.1f%s", float64(b)/float64(u.n), u.name)
		}
	}
	return fmt.Sprintf("%dB", b)
}

// EnvVar is the variable of /etc/default/dbhost (and the environment) that
// holds the shares.
const EnvVar = "DBHOST_BUDGET"

// FromEnvFile returns the last DBHOST_BUDGET= assignment of an
// environment file as systemd's EnvironmentFile= reads it (KEY=VALUE,
// comments with # or ;, the value optionally in single or double quotes).
func FromEnvFile(data string) (string, bool) {
	var v string
	found := false
	for _, ln := range strings.Split(data, "\n") {
		ln = strings.TrimSpace(ln)
		ln = strings.TrimSpace(strings.TrimPrefix(ln, "export "))
		if ln == "" || ln[0] == '#' || ln[0] == ';' {
			continue
		}
		k, val, ok := strings.Cut(ln, "=")
		if !ok || strings.TrimSpace(k) != EnvVar {
			continue
		}
		val = strings.TrimSpace(val)
		if len(val) >= 2 && (val[0] == '"' || val[0] == '\'') && val[len(val)-1] == val[0] {
			val = val[1 : len(val)-1]
		}
		v, found = val, true
	}
	return v, found
}
