package fleet

import (
	"math"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/dbhost/dbhost/internal/check"
)

// ReportSchema names the JSON shape of a Report. Version 2 ranks hosts by
// their distance from the majority and settings by rarity, and marks the
// checks that fail fleet-wide.
const ReportSchema = "dbhost.fleet/2"

// Report is a fleet of snapshots judged together: which hosts are odd, which
// settings hold rare values, which checks fail where.
type Report struct {
	Schema  string  `json:"schema"`
	Summary Summary `json:"summary"`
	// Hosts are ordered by Distance, the farthest from the majority first.
	Hosts []HostReport `json:"hosts"`
	// Checks are every check that gave a verdict on some host: those that
	// tell hosts apart first (by Separation), then those failing
	// fleet-wide, then those that pass everywhere.
	Checks []CheckSummary `json:"checks"`
	// Settings are those whose value is not the same on every host that
	// observed it, the rarest value first (by Rarity); ties last.
	Settings []SettingSpread `json:"settings"`
	// Errors are the snapshots that could not be read, in the order given.
	Errors []LoadError `json:"errors"`
}

// Summary counts the fleet.
type Summary struct {
	Hosts int `json:"hosts"`
	// Unreadable snapshots are listed in Errors and counted nowhere else.
	Unreadable      int `json:"unreadable"`
	HostsFailing    int `json:"hosts_failing"`
	FailingFindings int `json:"failing_findings"`
	// Critical counts the failing findings of critical severity.
	Critical      int `json:"critical"`
	ChecksFailing int `json:"checks_failing"`
	// FleetWide counts the checks that fail on (nearly) every host.
	FleetWide int `json:"fleet_wide"`
	// SettingsOff counts the settings some host holds off the majority.
	SettingsOff int `json:"settings_off_majority"`
}

// HostReport is one snapshot in the fleet.
type HostReport struct {
	// ID is the snapshot file as given: unique in a report, also for two
	// snapshots of one host.
	ID          string   `json:"id"`
	Hostname    string   `json:"hostname"`
	Label       string   `json:"label"`
	Kernel      string   `json:"kernel"`
	CollectedAt string   `json:"collected_at"` // "" when the snapshot does not say
	AsRoot      bool     `json:"as_root"`
	Instances   []string `json:"instances"`
	Failing     int      `json:"failing"`
	Critical    int      `json:"critical"`
	Unknown     int      `json:"unknown"`
	// Distance is how far the host is from the fleet's majority: the
	// rarities of the setting values it holds off the majority and of the
	// failures it has where most hosts pass, added up rarest first, each
	// counting half the one before (distance).
	Distance float64 `json:"distance"`
	// Checks is each check's worst verdict on the host (fail over unknown
	// over pass) over its subjects; a check with no verdict is absent.
	Checks map[string]check.Status `json:"checks"`
	// Failures are the failing findings, most severe first.
	Failures []HostFinding `json:"failures"`
	// OffMajority are the host's settings whose value is not the
	// majority's (settings where no value has a majority are left out),
	// the rarest first.
	OffMajority []OffSetting `json:"off_majority"`
	// RareFailures are the checks the host fails while most hosts that
	// judge them pass, the rarest first.
	RareFailures []RareFailure `json:"rare_failures"`

	// worst is each check's worst finding on the host, sorted by check
	// ID, for the matrix: a slice, not a map, as it is kept for every host
	// until the page is written.
	worst []Finding
}

// worstOf returns the host's worst finding of check id.
func (h *HostReport) worstOf(id string) (Finding, bool) {
	i, ok := sort.Find(len(h.worst), func(i int) int { return strings.Compare(id, h.worst[i].ID) })
	if !ok {
		return Finding{}, false
	}
	return h.worst[i], true
}

// HostFinding is one failing finding of a host.
type HostFinding struct {
	ID string `json:"id"`
	// Problem is the check's failing state (check.Check.Problem): the
	// finding fails, so its title (the state wanted) would read backwards.
	Problem  string         `json:"problem"`
	Subject  string         `json:"subject"`
	Severity check.Severity `json:"severity"`
}

// OffSetting is a host's setting that is not the majority's value.
type OffSetting struct {
	Key      string `json:"key"`
	Value    string `json:"value"`
	Majority string `json:"majority"`
	// Holders is how many hosts hold Value, out of Observed that have the
	// setting.
	Holders  int     `json:"holders"`
	Observed int     `json:"observed"`
	Rarity   float64 `json:"rarity"`
}

// RareFailure is a check a host fails while most hosts pass it.
type RareFailure struct {
	ID string `json:"id"`
	// Failing is how many hosts fail the check, out of Judged that pass or
	// fail it.
	Failing int     `json:"failing"`
	Judged  int     `json:"judged"`
	Rarity  float64 `json:"rarity"`
}

// CheckSummary counts one check's verdicts over the hosts (a host counts
// once, by its worst verdict over the check's subjects).
type CheckSummary struct {
	ID    string `json:"id"`
	Title string `json:"title"`
	// Problem is how a failure of the check reads.
	Problem  string         `json:"problem"`
	Severity check.Severity `json:"severity"`
	Fail     int            `json:"fail"`
	Unknown  int            `json:"unknown"`
	Pass     int            `json:"pass"`
	// FleetWide is set when the check fails on (nearly) every host that
	// judges it (FleetWideShare): it says something about the fleet, not
	// about a host, and the page shows it as one line.
	FleetWide bool `json:"fleet_wide"`
	// Separation is the rarity of the less common of pass and fail: high
	// when a few hosts stand apart from the rest on this check, 0 when
	// every host that judges it agrees.
	Separation float64 `json:"separation"`
}

// SettingSpread is one setting that is not the same on every host that
// observed it.
type SettingSpread struct {
	Key  string `json:"key"`
	Kind string `json:"kind"`
	// Majority is the value most hosts hold; "" with Tie when two values
	// are held by as many hosts.
	Majority string `json:"majority"`
	Tie      bool   `json:"tie"`
	// Observed is how many hosts have the setting; hosts without it (no
	// such database, not readable there) are not counted anywhere.
	Observed int `json:"observed"`
	// Values are the values held, the majority first, then by how many
	// hosts hold them. Hosts are listed for all but the majority.
	Values []ValueHosts `json:"values"`
	// Off is how many hosts hold another value than the majority (all of
	// them in a tie).
	Off int `json:"off"`
	// Rarity is the rarity of the least held value (0 in a tie).
	Rarity float64 `json:"rarity"`
}

// ValueHosts is one value of a setting and the hosts (IDs) holding it.
type ValueHosts struct {
	Value string   `json:"value"`
	Count int      `json:"count"`
	Hosts []string `json:"hosts,omitempty"`
}

// LoadError is a snapshot that could not be read, and why.
type LoadError struct {
	File  string `json:"file"`
	Error string `json:"error"`
}

// FleetWideShare is the share of the hosts judging a check that must fail
// it for the check to count as failing fleet-wide.
const FleetWideShare = 0.95

// Rarity is how unusual it is to hold a value that holders of observed
// hosts hold while majority hosts hold the most common one: the surprise
// of the value, log2(observed/holders) bits, weighted by the majority's
// share of the hosts. A value held by 1 host of 500 against 499 scores 8.9,
// by 100 against 400 scores 1.9, by 1 of 3 against 2 scores 1.1; a value
// with no clear majority against it (every host holding its own, derived
// from its RAM) scores near 0. It is rounded to two decimals, which the
// JSON shows.
func Rarity(holders, majority, observed int) float64 {
	if holders <= 0 || majority <= holders || observed < majority+holders {
		return 0
	}
	n := float64(observed)
	r := float64(majority) / n * math.Log2(n/float64(holders))
	return math.Round(r*100) / 100
}

// fleetWide reports whether a check failing on fail hosts of judged fails
// on (nearly) all of them. One host is not a fleet.
func fleetWide(fail, judged int) bool {
	return fail >= 2 && float64(fail) >= FleetWideShare*float64(judged)
}

// Build judges a fleet. snaps are the snapshots that were read, errs the
// ones that were not. It is a pure function of its arguments.
func Build(snaps []Snapshot, errs []LoadError) *Report {
	r := &Report{Schema: ReportSchema, Hosts: []HostReport{}, Checks: []CheckSummary{}, Settings: []SettingSpread{}, Errors: []LoadError{}}
	r.Errors = append(r.Errors, errs...)
	r.Summary.Hosts, r.Summary.Unreadable = len(snaps), len(errs)

	ids := hostIDs(snaps)
	for i := range snaps {
		r.Hosts = append(r.Hosts, hostReport(&snaps[i], ids[i]))
	}
	r.Settings = spreads(snaps, ids)
	off := map[string][]OffSetting{} // host ID → settings off the majority
	for _, sp := range r.Settings {
		if sp.Tie {
			continue
		}
		maj := sp.Values[0].Count
		for _, v := range sp.Values[1:] {
			rar := Rarity(v.Count, maj, sp.Observed)
			for _, h := range v.Hosts {
				off[h] = append(off[h], OffSetting{Key: sp.Key, Value: v.Value, Majority: sp.Majority, Holders: v.Count, Observed: sp.Observed, Rarity: rar})
			}
		}
		r.Summary.SettingsOff++
	}
	checks := map[string]*CheckSummary{}
	for i := range r.Hosts {
		h := &r.Hosts[i]
		r.Summary.FailingFindings += h.Failing
		r.Summary.Critical += h.Critical
		if h.Failing > 0 {
			r.Summary.HostsFailing++
		}
		for _, f := range h.worst {
			id := f.ID
			c := checks[id]
			if c == nil {
				c = &CheckSummary{ID: id}
				if cat, ok := check.Lookup(id); ok {
					c.Title, c.Problem, c.Severity = cat.Title, cat.Problem, cat.Severity
				}
				checks[id] = c
			}
			switch f.Status {
			case check.Fail:
				c.Fail++
			case check.Unknown:
				c.Unknown++
			case check.Pass:
				c.Pass++
			}
		}
	}
	for _, c := range checks {
		c.FleetWide = fleetWide(c.Fail, c.Fail+c.Unknown+c.Pass)
		c.Separation = Rarity(min(c.Fail, c.Pass), max(c.Fail, c.Pass), c.Fail+c.Pass)
		r.Checks = append(r.Checks, *c)
		if c.Fail > 0 {
			r.Summary.ChecksFailing++
		}
		if c.FleetWide {
			r.Summary.FleetWide++
		}
	}
	sort.Slice(r.Checks, func(a, b int) bool {
		x, y := r.Checks[a], r.Checks[b]
		if gx, gy := checkGroup(x), checkGroup(y); gx != gy {
			return gx < gy
		}
		if x.Separation != y.Separation {
			return x.Separation > y.Separation
		}
		if x.Fail != y.Fail {
			return x.Fail > y.Fail
		}
		if x.Unknown != y.Unknown {
			return x.Unknown > y.Unknown
		}
		return x.ID < y.ID
	})
	for i := range r.Hosts {
		h := &r.Hosts[i]
		h.OffMajority = off[h.ID]
		if h.OffMajority == nil {
			h.OffMajority = []OffSetting{}
		}
		sort.Slice(h.OffMajority, func(a, b int) bool {
			x, y := h.OffMajority[a], h.OffMajority[b]
			if x.Rarity != y.Rarity {
				return x.Rarity > y.Rarity
			}
			return lessKey(x.Key, y.Key)
		})
		h.RareFailures = []RareFailure{}
		rs := make([]float64, 0, len(h.OffMajority)+4)
		for _, o := range h.OffMajority {
			rs = append(rs, o.Rarity)
		}
		for _, f := range h.worst {
			id := f.ID
			if c := checks[id]; f.Status == check.Fail && c.Pass > c.Fail {
				rf := RareFailure{ID: id, Failing: c.Fail, Judged: c.Fail + c.Pass, Rarity: Rarity(c.Fail, c.Pass, c.Fail+c.Pass)}
				h.RareFailures = append(h.RareFailures, rf)
				rs = append(rs, rf.Rarity)
			}
		}
		sort.Slice(h.RareFailures, func(a, b int) bool {
			x, y := h.RareFailures[a], h.RareFailures[b]
			if x.Rarity != y.Rarity {
				return x.Rarity > y.Rarity
			}
			return x.ID < y.ID
		})
		h.Distance = distance(rs)
	}
	sort.SliceStable(r.Hosts, func(a, b int) bool {
		x, y := r.Hosts[a], r.Hosts[b]
		if x.Distance != y.Distance {
			return x.Distance > y.Distance
		}
		if x.Failing != y.Failing {
			return x.Failing > y.Failing
		}
		if x.Label != y.Label {
			return x.Label < y.Label
		}
		return x.ID < y.ID
	})
	return r
}

// distance adds up a host's rarities, the rarest in full, the next half,
// the next a quarter, and so on: a host is as far from the majority as the
// rarest thing it holds, and each further rare thing takes it a little
// further. One change is often seen through several keys (a device's
// scheduler under each database path it holds, a THP mode and the check
// that fails on it); with a plain sum a group of hosts changed in one place
// through twenty keys would outrank a host holding a value no other host
// holds.
func distance(rs []float64) float64 {
	sort.Sort(sort.Reverse(sort.Float64Slice(rs)))
	var d, w float64 = 0, 1
	for _, r := range rs {
		d += r * w
		w /= 2
	}
	return math.Round(d*100) / 100
}

// checkGroup orders checks for the matrix: those that fail or cannot judge
// somewhere (0), those failing fleet-wide (1), those passing everywhere (2).
func checkGroup(c CheckSummary) int {
	switch {
	case c.FleetWide:
		return 1
	case c.Fail+c.Unknown == 0:
		return 2
	}
	return 0
}

// hostIDs names each snapshot by its file; a file given twice gets " #2",
// " #3" so that every host of a report has its own row.
func hostIDs(snaps []Snapshot) []string {
	ids := make([]string, len(snaps))
	seen := map[string]int{}
	for i, s := range snaps {
		seen[s.File]++
		ids[i] = s.File
		if n := seen[s.File]; n > 1 {
			ids[i] = s.File + " #" + strconv.Itoa(n)
		}
	}
	return ids
}

func hostReport(s *Snapshot, id string) HostReport {
	h := HostReport{ID: id, Hostname: s.Hostname, Label: s.Label(), Kernel: s.Kernel, AsRoot: s.AsRoot,
		Instances: s.Instances, Checks: map[string]check.Status{}, Failures: []HostFinding{}}
	if h.Instances == nil {
		h.Instances = []string{}
	}
	if !s.CollectedAt.IsZero() {
		h.CollectedAt = s.CollectedAt.UTC().Format("2006-01-02T15:04:05Z")
	}
	// Each check's findings in a run, in their order: the first of its
	// worst is kept.
	byID := slices.Clone(s.Findings)
	sort.SliceStable(byID, func(a, b int) bool { return byID[a].ID < byID[b].ID })
	n := 0
	for _, f := range byID {
		if n > 0 && byID[n-1].ID == f.ID {
			if worse(f, byID[n-1]) {
				byID[n-1] = f
			}
			continue
		}
		byID[n] = f
		n++
	}
	h.worst = slices.Clone(byID[:n])
	for _, f := range s.Findings {
		switch f.Status {
		case check.Fail:
			h.Failing++
			if f.Severity == check.Critical {
				h.Critical++
			}
			hf := HostFinding{ID: f.ID, Subject: f.Subject, Severity: f.Severity}
			if c, ok := check.Lookup(f.ID); ok {
				hf.Problem = c.Problem
			}
			h.Failures = append(h.Failures, hf)
		case check.Unknown:
			h.Unknown++
		}
	}
	for _, f := range h.worst {
		h.Checks[f.ID] = f.Status
	}
	sort.SliceStable(h.Failures, func(a, b int) bool {
		x, y := h.Failures[a], h.Failures[b]
		if x.Severity != y.Severity {
			return x.Severity > y.Severity
		}
		if x.ID != y.ID {
			return x.ID < y.ID
		}
		return x.Subject < y.Subject
	})
	return h
}

// spreads finds the settings whose value is not the same on every host
// that observed them. Redacted values are not counted: they cannot be
// compared.
func spreads(snaps []Snapshot, ids []string) []SettingSpread {
	type tally struct {
		counts map[string]int
		hosts  map[string][]string
	}
	all := map[string]*tally{}
	for i := range snaps {
		s := &snaps[i]
		s.EachSetting(func(k, v string) {
			if redacted(v) {
				return
			}
			t := all[k]
			if t == nil {
				t = &tally{counts: map[string]int{}}
				all[k] = t
			}
			t.counts[v]++
		})
	}
	// A second pass records hosts, only for the settings that vary: most
	// do not, and a list of every host per value would be most of the
	// memory of a large fleet.
	varied := map[string]*tally{}
	for k, t := range all {
		if len(t.counts) > 1 {
			t.hosts = map[string][]string{}
			varied[k] = t
		}
	}
	for i := range snaps {
		s := &snaps[i]
		s.EachSetting(func(k, v string) {
			if t := varied[k]; t != nil && !redacted(v) {
				t.hosts[v] = append(t.hosts[v], ids[i])
			}
		})
	}
	out := make([]SettingSpread, 0, len(varied))
	for k, t := range varied {
		sp := SettingSpread{Key: k, Kind: Kind(k)}
		for v, n := range t.counts {
			sp.Values = append(sp.Values, ValueHosts{Value: v, Count: n, Hosts: t.hosts[v]})
			sp.Observed += n
		}
		sort.Slice(sp.Values, func(a, b int) bool {
			x, y := sp.Values[a], sp.Values[b]
			if x.Count != y.Count {
				return x.Count > y.Count
			}
			return x.Value < y.Value
		})
		if sp.Values[0].Count == sp.Values[1].Count {
			sp.Tie = true
			sp.Off = sp.Observed
		} else {
			sp.Majority = sp.Values[0].Value
			sp.Values[0].Hosts = nil
			sp.Off = sp.Observed - sp.Values[0].Count
			sp.Rarity = Rarity(sp.Values[len(sp.Values)-1].Count, sp.Values[0].Count, sp.Observed)
		}
		for _, v := range sp.Values {
			sort.Strings(v.Hosts)
		}
		out = append(out, sp)
	}
	// The rarest first; among settings as rare, the clearer majority (fewer
	// off) first. Ties, rarity 0, come last, the most divided first.
	sort.Slice(out, func(a, b int) bool {
		x, y := out[a], out[b]
		if x.Rarity != y.Rarity {
			return x.Rarity > y.Rarity
		}
		if x.Tie != y.Tie {
			return !x.Tie
		}
		if x.Off != y.Off {
			return (x.Off < y.Off) != x.Tie
		}
		return lessKey(x.Key, y.Key)
	})
	return out
}
