package fleet

import (
	"sort"
	"strconv"

	"github.com/dbhost/dbhost/internal/check"
)

// ReportSchema names the JSON shape of a Report.
const ReportSchema = "dbhost.fleet/1"

// Report is a fleet of snapshots judged together: which checks fail where,
// and which settings differ from what most hosts have.
type Report struct {
	Schema  string  `json:"schema"`
	Summary Summary `json:"summary"`
	// Hosts are ordered outliers first: most failing findings, then most
	// settings off the majority.
	Hosts []HostReport `json:"hosts"`
	// Checks are every check that gave a verdict on some host, ordered by
	// how many hosts fail it, then how many could not judge it.
	Checks []CheckSummary `json:"checks"`
	// Settings are those whose value is not the same on every host that
	// observed it, ordered by how many hosts hold another value than the
	// majority.
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
	// Checks is each check's worst verdict on the host (fail over unknown
	// over pass) over its subjects; a check with no verdict is absent.
	Checks map[string]check.Status `json:"checks"`
	// Failures are the failing findings, most severe first.
	Failures []HostFinding `json:"failures"`
	// OffMajority are the host's settings whose value is not the
	// majority's (settings where no value has a majority are left out).
	OffMajority []OffSetting `json:"off_majority"`

	worst map[string]Finding // check ID → worst finding, for the matrix
}

// HostFinding is one failing finding of a host.
type HostFinding struct {
	ID       string         `json:"id"`
	Title    string         `json:"title"`
	Subject  string         `json:"subject"`
	Severity check.Severity `json:"severity"`
}

// OffSetting is a host's setting that is not the majority's value.
type OffSetting struct {
	Key      string `json:"key"`
	Value    string `json:"value"`
	Majority string `json:"majority"`
}

// CheckSummary counts one check's verdicts over the hosts (a host counts
// once, by its worst verdict over the check's subjects).
type CheckSummary struct {
	ID       string         `json:"id"`
	Title    string         `json:"title"`
	Severity check.Severity `json:"severity"`
	Fail     int            `json:"fail"`
	Unknown  int            `json:"unknown"`
	Pass     int            `json:"pass"`
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
		for _, v := range sp.Values[1:] {
			for _, h := range v.Hosts {
				off[h] = append(off[h], OffSetting{Key: sp.Key, Value: v.Value, Majority: sp.Majority})
			}
		}
		r.Summary.SettingsOff++
	}
	checks := map[string]*CheckSummary{}
	for i := range r.Hosts {
		h := &r.Hosts[i]
		h.OffMajority = off[h.ID]
		if h.OffMajority == nil {
			h.OffMajority = []OffSetting{}
		}
		sort.Slice(h.OffMajority, func(a, b int) bool { return lessKey(h.OffMajority[a].Key, h.OffMajority[b].Key) })
		r.Summary.FailingFindings += h.Failing
		r.Summary.Critical += h.Critical
		if h.Failing > 0 {
			r.Summary.HostsFailing++
		}
		for id, f := range h.worst {
			c := checks[id]
			if c == nil {
				c = &CheckSummary{ID: id}
				if cat, ok := check.Lookup(id); ok {
					c.Title, c.Severity = cat.Title, cat.Severity
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
		r.Checks = append(r.Checks, *c)
		if c.Fail > 0 {
			r.Summary.ChecksFailing++
		}
	}
	sort.Slice(r.Checks, func(a, b int) bool {
		x, y := r.Checks[a], r.Checks[b]
		if x.Fail != y.Fail {
			return x.Fail > y.Fail
		}
		if x.Unknown != y.Unknown {
			return x.Unknown > y.Unknown
		}
		return x.ID < y.ID
	})
	sort.SliceStable(r.Hosts, func(a, b int) bool {
		x, y := r.Hosts[a], r.Hosts[b]
		if x.Failing != y.Failing {
			return x.Failing > y.Failing
		}
		if len(x.OffMajority) != len(y.OffMajority) {
			return len(x.OffMajority) > len(y.OffMajority)
		}
		if x.Label != y.Label {
			return x.Label < y.Label
		}
		return x.ID < y.ID
	})
	return r
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
		Instances: s.Instances, Checks: map[string]check.Status{}, Failures: []HostFinding{}, worst: map[string]Finding{}}
	if h.Instances == nil {
		h.Instances = []string{}
	}
	if !s.CollectedAt.IsZero() {
		h.CollectedAt = s.CollectedAt.UTC().Format("2006-01-02T15:04:05Z")
	}
	for _, f := range s.Findings {
		if w, ok := h.worst[f.ID]; !ok || worse(f, w) {
			h.worst[f.ID] = f
		}
		switch f.Status {
		case check.Fail:
			h.Failing++
			if f.Severity == check.Critical {
				h.Critical++
			}
			hf := HostFinding{ID: f.ID, Subject: f.Subject, Severity: f.Severity}
			if c, ok := check.Lookup(f.ID); ok {
				hf.Title = c.Title
			}
			h.Failures = append(h.Failures, hf)
		case check.Unknown:
			h.Unknown++
		}
	}
	for id, f := range h.worst {
		h.Checks[id] = f.Status
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
		for k, v := range s.Settings {
			if redacted(v) {
				continue
			}
			t := all[k]
			if t == nil {
				t = &tally{counts: map[string]int{}}
				all[k] = t
			}
			t.counts[v]++
		}
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
		for k, v := range s.Settings {
			if t := varied[k]; t != nil && !redacted(v) {
				t.hosts[v] = append(t.hosts[v], ids[i])
			}
		}
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
		}
		for _, v := range sp.Values {
			sort.Strings(v.Hosts)
		}
		out = append(out, sp)
	}
	sort.Slice(out, func(a, b int) bool {
		if out[a].Off != out[b].Off {
			return out[a].Off > out[b].Off
		}
		return lessKey(out[a].Key, out[b].Key)
	})
	return out
}
