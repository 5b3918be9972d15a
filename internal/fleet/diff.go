package fleet

import (
	"sort"
	"strings"

	"github.com/dbhost/dbhost/internal/check"
	"github.com/dbhost/dbhost/internal/host"
)

// DiffSchema names the JSON shape of a Result.
const DiffSchema = "dbhost.diff/1"

// Result is what differs between two observations, A and B.
type Result struct {
	Schema string `json:"schema"`
	A      Side   `json:"a"`
	B      Side   `json:"b"`
	// Databases present on one side only; their settings, limits, storage
	// and the findings about them are not listed again below.
	Databases []Presence `json:"databases"`
	// Devices present on one side only (by kernel name); their device/...
	// settings are not listed again. Devices that hold a database path are
	// also compared by role (storage/...), whatever their names.
	Devices  []Presence     `json:"devices"`
	Settings []SettingDiff  `json:"settings"`
	Findings []FindingDiff  `json:"findings"`
	Summary  map[string]int `json:"summary"`
}

// Side describes one of the two observations.
type Side struct {
	File        string `json:"file"`
	Label       string `json:"label"`
	Hostname    string `json:"hostname"`
	CollectedAt string `json:"collected_at,omitempty"`
	AsRoot      bool   `json:"as_root"`
}

// Presence is a database or device seen on one side only: In is "a" or "b".
type Presence struct {
	Name string `json:"name"`
	In   string `json:"in"`
}

// SettingDiff is a setting whose values differ. A or B is nil when the side
// did not observe the setting (unreadable there, or absent).
type SettingDiff struct {
	Key  string  `json:"key"`
	Kind string  `json:"kind"`
	A    *string `json:"a"`
	B    *string `json:"b"`
}

// FindingDiff is a check whose verdict on a subject differs. A status is ""
// when the check gave no verdict on that subject on that side (it did not
// apply there).
type FindingDiff struct {
	ID       string         `json:"id"`
	Subject  string         `json:"subject"`
	Severity check.Severity `json:"severity"`
	A        check.Status   `json:"a"`
	B        check.Status   `json:"b"`
}

// Empty reports whether the two observations are the same in everything
// compared.
func (r *Result) Empty() bool {
	return len(r.Databases) == 0 && len(r.Devices) == 0 && len(r.Settings) == 0 && len(r.Findings) == 0
}

func side(s Snapshot) Side {
	out := Side{File: s.File, Label: s.Label(), Hostname: s.Hostname, AsRoot: s.AsRoot}
	if !s.CollectedAt.IsZero() {
		out.CollectedAt = s.CollectedAt.UTC().Format("2006-01-02T15:04:05Z")
	}
	return out
}

// Diff compares two observations: their settings, the databases and
// devices on each, and the verdicts of the checks. It is a pure function;
// Diff(s, s) is empty.
//
// Secrets are redacted before they reach a Snapshot, so none is shown. A
// value redacted on one side only (an older snapshot redacted a setting
// that holds no secret) is not compared: its value is not known.
func Diff(a, b Snapshot) Result {
	r := Result{Schema: DiffSchema, A: side(a), B: side(b),
		Databases: []Presence{}, Devices: []Presence{}, Settings: []SettingDiff{}, Findings: []FindingDiff{}}
	onlyDB := presence(a.Instances, b.Instances)
	onlyDev := presence(a.Devices, b.Devices)
	r.Databases = presenceList(onlyDB)
	r.Devices = presenceList(onlyDev)

	keys := make([]string, 0, len(a.Settings)+len(b.Settings))
	for k := range a.Settings {
		keys = append(keys, k)
	}
	for k := range b.Settings {
		if _, ok := a.Settings[k]; !ok {
			keys = append(keys, k)
		}
	}
	sortKeys(keys)
	for _, k := range keys {
		va, oka := a.Settings[k]
		vb, okb := b.Settings[k]
		if oka && okb && va == vb {
			continue
		}
		if oka && okb && redacted(va) != redacted(vb) {
			continue // a redacted value cannot be compared with a clear one
		}
		if subj := Subject(k); subj != "" {
			if Kind(k) == KindDevice && onlyDev[subj] != "" {
				continue
			}
			if Kind(k) != KindDevice && onlyDB[subj] != "" {
				continue
			}
		}
		d := SettingDiff{Key: k, Kind: Kind(k)}
		if oka {
			d.A = &va
		}
		if okb {
			d.B = &vb
		}
		r.Settings = append(r.Settings, d)
	}

	fa, fb := findingIndex(a.Findings), findingIndex(b.Findings)
	fkeys := make([]string, 0, len(fa)+len(fb))
	for k := range fa {
		fkeys = append(fkeys, k)
	}
	for k := range fb {
		if _, ok := fa[k]; !ok {
			fkeys = append(fkeys, k)
		}
	}
	sort.Strings(fkeys)
	for _, k := range fkeys {
		x, y := fa[k], fb[k]
		if x.Status == y.Status {
			continue
		}
		d := FindingDiff{ID: x.ID, Subject: x.Subject, A: x.Status, B: y.Status, Severity: x.Severity}
		if d.ID == "" {
			d.ID, d.Subject = y.ID, y.Subject
		}
		if onlyDB[d.Subject] != "" || (strings.HasPrefix(d.Subject, "device:") && onlyDev[strings.TrimPrefix(d.Subject, "device:")] != "") {
			continue // listed under Databases or Devices
		}
		if y.Severity > d.Severity {
			d.Severity = y.Severity
		}
		r.Findings = append(r.Findings, d)
	}
	sort.SliceStable(r.Findings, func(i, j int) bool {
		x, y := r.Findings[i], r.Findings[j]
		if x.Severity != y.Severity {
			return x.Severity > y.Severity
		}
		if x.ID != y.ID {
			return x.ID < y.ID
		}
		return x.Subject < y.Subject
	})
	r.Summary = map[string]int{
		"databases": len(r.Databases),
		"devices":   len(r.Devices),
		"settings":  len(r.Settings),
		"findings":  len(r.Findings),
	}
	return r
}

// redacted reports a value that holds a redacted secret.
func redacted(v string) bool { return strings.Contains(v, host.Redacted) }

// presence maps each name found on one side only to that side ("a", "b").
func presence(a, b []string) map[string]string {
	in := map[string]int{}
	for _, n := range a {
		in[n] |= 1
	}
	for _, n := range b {
		in[n] |= 2
	}
	out := map[string]string{}
	for n, m := range in {
		switch m {
		case 1:
			out[n] = "a"
		case 2:
			out[n] = "b"
		}
	}
	return out
}

func presenceList(m map[string]string) []Presence {
	out := make([]Presence, 0, len(m))
	for n, in := range m {
		out = append(out, Presence{Name: n, In: in})
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].In != out[j].In {
			return out[i].In < out[j].In
		}
		return out[i].Name < out[j].Name
	})
	return out
}

func findingIndex(fs []Finding) map[string]Finding {
	m := make(map[string]Finding, len(fs))
	for _, f := range fs {
		m[f.key()] = f
	}
	return m
}
