package experiment

import (
	"fmt"
	"slices"
	"strings"

	"github.com/dbhost/dbhost/internal/results"
)

// Replacement is what a run did about the trials it excluded: how many,
// why, how many ran in their place, and where the budget ran out.
type Replacement struct {
	// Budget is the most trials per arm and client count that could run
	// in place of excluded ones (Protocol.MaxReplace).
	Budget int `json:"budget"`
	// Excluded counts the excluded trials of the comparison by cause
	// ("steal time", "fingerprint drift", ...).
	Excluded map[string]int `json:"excluded,omitempty"`
	// Run is the number of trials, over all arms, run in their place;
	// PerArm the most per arm at one client count (whole blocks).
	Run    int `json:"run"`
	PerArm int `json:"per_arm"`
	// Spent lists the client counts whose last look still lacked trials
	// because the budget was spent.
	Spent []int `json:"spent,omitempty"`
}

// replacement sums up the judge's replacements and the trials' exclusions
// (A/A calibration trials left out).
func replacement(p *Plan, jd *judge, trials []results.Trial) *Replacement {
	r := &Replacement{Budget: p.Protocol.MaxReplace}
	var excl []results.Trial
	for _, t := range trials {
		if t.Block >= 0 && t.Excluded != "" {
			excl = append(excl, t)
		}
	}
	r.Excluded = causes(excl)
	if jd != nil {
		for _, c := range jd.clients {
			r.Run += jd.extra[c]
			r.PerArm = max(r.PerArm, jd.replaced[c])
			if jd.spent[c] != "" {
				r.Spent = append(r.Spent, c)
			}
		}
	}
	return r
}

// String says it in one sentence: "2 trials excluded for steal time, 4
// run in their place (2 per arm, of up to 4)".
func (r *Replacement) String() string {
	if r == nil {
		return ""
	}
	n := 0
	for _, k := range r.Excluded {
		n += k
	}
	if n == 0 {
		return ""
	}
	s := fmt.Sprintf("%s, %d run in their place (%d per arm, of up to %d", causeText(r.Excluded), r.Run, r.PerArm, r.Budget)
	if len(r.Spent) > 0 {
		at := make([]string, len(r.Spent))
		for i, c := range r.Spent {
			at[i] = fmt.Sprint(c)
		}
		s += ": spent with trials still missing at " + strings.Join(at, ", ") + " clients"
	}
	return s + ")"
}

// causes counts excluded trials by the cause their note starts with.
func causes(ts []results.Trial) map[string]int {
	out := map[string]int{}
	for _, t := range ts {
		out[cause(t.Excluded)]++
	}
	return out
}

// cause is the kind of an exclusion note (see trial.go), without the
// A/A calibration's marker.
func cause(note string) string {
	note = strings.TrimPrefix(strings.TrimPrefix(note, calibrationNote), "; ")
	switch {
	case strings.HasPrefix(note, "steal time"):
		return "steal time"
	case strings.HasPrefix(note, "failed"):
		return "a failed run"
	}
	if k, _, ok := strings.Cut(note, ":"); ok && k != "" {
		return k
	}
	return "other"
}

// causeText writes counts by cause: "2 trials excluded for steal time"
// or "3 trials excluded (2 for steal time, 1 for fingerprint drift)".
func causeText(by map[string]int) string {
	keys := make([]string, 0, len(by))
	n := 0
	for k, v := range by {
		keys = append(keys, k)
		n += v
	}
	// The most frequent first, then by name: the same text every time.
	slices.SortFunc(keys, func(a, b string) int {
		if by[a] != by[b] {
			return by[b] - by[a]
		}
		return strings.Compare(a, b)
	})
	head := fmt.Sprintf("%d trial%s excluded", n, plural(n))
	if len(keys) == 1 {
		return head + " for " + keys[0]
	}
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = fmt.Sprintf("%d for %s", by[k], k)
	}
	return head + " (" + strings.Join(parts, ", ") + ")"
}

// excludedCauses writes the causes of the given excluded trials.
func excludedCauses(ts []results.Trial) string { return causeText(causes(ts)) }

func plural(n int) string {
	if n == 1 {
		return ""
	}
	return "s"
}
