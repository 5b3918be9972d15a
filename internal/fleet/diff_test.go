package fleet

import (
	"reflect"
	"sort"
	"strings"
	"testing"

	"github.com/dbhost/dbhost/internal/check"
	"github.com/dbhost/dbhost/internal/host"
)

func strp(s string) *string { return &s }

func TestDiffRecorded(t *testing.T) {
	type fd = FindingDiff
	cases := []struct {
		a, b      string
		databases []Presence
		devices   []Presence
		settings  []SettingDiff // exactly these, unless settingsAtLeast
		atLeast   bool
		nSettings int // with atLeast: the exact count
		findings  []FindingDiff
	}{
		{a: "baseline", b: "baseline"},
		{a: "mem-thp-always", b: "mem-thp-always"},
		{
			a: "baseline", b: "mem-thp-always",
			settings: []SettingDiff{
				{Key: "thp/defrag", Kind: "thp", A: strp("madvise"), B: strp("always")},
				{Key: "thp/enabled", Kind: "thp", A: strp("madvise"), B: strp("always")},
			},
			findings: []FindingDiff{
				{ID: "mem.thp.defrag", Subject: "host", Severity: check.Warning, A: check.Pass, B: check.Fail},
				{ID: "mem.thp.khugepaged", Subject: "host", Severity: check.Warning, A: check.Pass, B: check.Fail},
				{ID: "mem.thp.persisted", Subject: "host", Severity: check.Warning, A: check.Unknown, B: check.Fail},
			},
		},
		{
			// Swap areas are not settings: the swap file of one shows only
			// in the verdicts.
			a: "mem-swapfile", b: "mem-swappiness-1",
			settings: []SettingDiff{{Key: "sysctl/vm.swappiness", Kind: "sysctl", A: strp("60"), B: strp("1")}},
			findings: []fd{
				{ID: "mem.swap", Subject: "host", Severity: check.Warning, A: check.Pass, B: check.Fail},
				{ID: "mem.swappiness", Subject: "host", Severity: check.Warning, A: check.Fail, B: check.Pass},
			},
		},
		{
			// Without swap vm.swappiness is moot: no verdict changes.
			a: "baseline", b: "mem-swappiness-1",
			settings: []SettingDiff{{Key: "sysctl/vm.swappiness", Kind: "sysctl", A: strp("60"), B: strp("1")}},
		},
		{
			// Different device names: the PostgreSQL data is on an XFS loop
			// device in one, on device-mapper over vdb in the other. By
			// role only the read-ahead differs.
			a: "storage-xfs", b: "storage-dm",
			devices: []Presence{{Name: "loop0", In: "a"}, {Name: "dm-0", In: "b"}, {Name: "vdb", In: "b"}},
			settings: []SettingDiff{
				{Key: "storage/postgres:46473/data/read_ahead_kb", Kind: "storage", A: strp("2560"), B: strp("4096")},
			},
			findings: []fd{{ID: "storage.separate_wal", Subject: "postgres:46473", Severity: check.Info, A: check.Fail, B: check.Pass}},
		},
		{
			// The throwaway server of each recording is on one side only;
			// the queue settings of vda differ by name and by role.
			a: "storage-vda-default", b: "storage-vda-tuned",
			databases: []Presence{{Name: "postgres:33921", In: "a"}, {Name: "postgres:35309", In: "b"}},
			atLeast:   true, nSettings: 24,
			settings: []SettingDiff{
				{Key: "storage/postgres:5432/data/scheduler", Kind: "storage", A: strp("mq-deadline"), B: strp("none")},
				{Key: "storage/mysql:3306/redo/read_ahead_kb", Kind: "storage", A: strp("8192"), B: strp("128")},
				{Key: "device/vda/nr_requests", Kind: "device", A: strp("256"), B: strp("128")},
				{Key: "device/vda/read_ahead_kb", Kind: "device", A: strp("8192"), B: strp("128")},
				{Key: "device/vda/scheduler", Kind: "device", A: strp("mq-deadline"), B: strp("none")},
			},
			findings: []fd{{ID: "storage.read_ahead", Subject: "device:vda", Severity: check.Warning, A: check.Fail, B: check.Pass}},
		},
	}
	for _, c := range cases {
		t.Run(c.a+"/"+c.b, func(t *testing.T) {
			r := Diff(recorded(t, c.a), recorded(t, c.b))
			if r.Schema != DiffSchema || r.A.Hostname != "vm" {
				t.Errorf("schema %q, a %+v", r.Schema, r.A)
			}
			sortPresence(c.databases)
			sortPresence(c.devices)
			if !samePresence(r.Databases, c.databases) {
				t.Errorf("databases %v, want %v", r.Databases, c.databases)
			}
			if !samePresence(r.Devices, c.devices) {
				t.Errorf("devices %v, want %v", r.Devices, c.devices)
			}
			if c.atLeast {
				if len(r.Settings) != c.nSettings {
					t.Errorf("%d settings differ, want %d: %s", len(r.Settings), c.nSettings, showSettings(r.Settings))
				}
				for _, w := range c.settings {
					if !containsSetting(r.Settings, w) {
						t.Errorf("missing %s in %s", showSettings([]SettingDiff{w}), showSettings(r.Settings))
					}
				}
				for _, d := range r.Settings {
					if k := Kind(d.Key); k != KindStorage && k != KindDevice {
						t.Errorf("unexpected %s", showSettings([]SettingDiff{d}))
					}
					for _, p := range r.Databases {
						if strings.Contains(d.Key, p.Name) {
							t.Errorf("%s is about %s, listed as present on one side only", d.Key, p.Name)
						}
					}
				}
			} else if !reflect.DeepEqual(nonNil(r.Settings), nonNil(c.settings)) {
				t.Errorf("settings:\n%s\nwant:\n%s", showSettings(r.Settings), showSettings(c.settings))
			}
			if !reflect.DeepEqual(nonNilF(r.Findings), nonNilF(c.findings)) {
				t.Errorf("findings %+v, want %+v", r.Findings, c.findings)
			}
			if r.Empty() != (len(c.databases)+len(c.devices)+len(c.settings)+len(c.findings) == 0) {
				t.Errorf("Empty() = %v", r.Empty())
			}
			// B against A is the mirror image.
			back := Diff(recorded(t, c.b), recorded(t, c.a))
			if len(back.Settings) != len(r.Settings) || len(back.Findings) != len(r.Findings) || len(back.Databases) != len(r.Databases) {
				t.Errorf("B/A: %v, A/B: %v", back.Summary, r.Summary)
			}
			for i, d := range back.Settings {
				if x := r.Settings[i]; d.Key != x.Key || !reflect.DeepEqual(d.A, x.B) || !reflect.DeepEqual(d.B, x.A) {
					t.Errorf("B/A %s is not the mirror of %s", showSettings([]SettingDiff{d}), showSettings([]SettingDiff{x}))
				}
			}
		})
	}
}

// baseline was recorded when password_encryption was redacted as a
// secret; later recordings show it. A redacted value is never compared
// with a clear one, but two different clear values are.
func TestDiffRedactedOneSide(t *testing.T) {
	a, b := recorded(t, "baseline"), recorded(t, "net-syncookies-off")
	if a.Settings["db/postgres:5432/password_encryption"] != host.Redacted || b.Settings["db/postgres:5432/password_encryption"] != "scram-sha-256" {
		t.Fatalf("fixtures changed: %q, %q", a.Settings["db/postgres:5432/password_encryption"], b.Settings["db/postgres:5432/password_encryption"])
	}
	r := Diff(a, b)
	for _, d := range r.Settings {
		if (d.A != nil && strings.Contains(*d.A, host.Redacted)) || (d.B != nil && strings.Contains(*d.B, host.Redacted)) {
			t.Errorf("redacted value compared: %s", showSettings([]SettingDiff{d}))
		}
	}
	if !containsSetting(r.Settings, SettingDiff{Key: "sysctl/net.ipv4.tcp_syncookies", Kind: "sysctl", A: strp("1"), B: strp("0")}) {
		t.Errorf("syncookies not reported: %s", showSettings(r.Settings))
	}
}

// A snapshot taken without root observes fewer settings: those are listed
// with the side that did not observe them as nil, never as a value.
func TestDiffNotObserved(t *testing.T) {
	r := Diff(recorded(t, "baseline"), recorded(t, "baseline-nonroot"))
	oneSide := 0
	for _, d := range r.Settings {
		switch {
		case d.A == nil && d.B == nil:
			t.Errorf("%s: neither side", d.Key)
		case d.A == nil || d.B == nil:
			oneSide++
		}
	}
	if oneSide < 100 {
		t.Errorf("only %d settings on one side; the non-root snapshot reads MariaDB's settings from files", oneSide)
	}
	if !containsSetting(r.Settings, SettingDiff{Key: "db/mysql:3306/datadir", Kind: "db", A: strp("/var/lib/mysql/"), B: strp("/var/lib/mysql")}) {
		t.Errorf("datadir: %s", showSettings(r.Settings[:5]))
	}
}

func sortPresence(p []Presence) {
	sort.Slice(p, func(i, j int) bool {
		if p[i].In != p[j].In {
			return p[i].In < p[j].In
		}
		return p[i].Name < p[j].Name
	})
}

func samePresence(a, b []Presence) bool {
	return len(a) == len(b) && (len(a) == 0 || reflect.DeepEqual(a, b))
}

func nonNil(s []SettingDiff) []SettingDiff {
	if s == nil {
		return []SettingDiff{}
	}
	return s
}

func nonNilF(s []FindingDiff) []FindingDiff {
	if s == nil {
		return []FindingDiff{}
	}
	return s
}

func containsSetting(list []SettingDiff, want SettingDiff) bool {
	for _, d := range list {
		if reflect.DeepEqual(d, want) {
			return true
		}
	}
	return false
}

func showSettings(list []SettingDiff) string {
	var b strings.Builder
	for _, d := range list {
		b.WriteString(d.Key + ": " + optValue(d.A) + " -> " + optValue(d.B) + "\n")
	}
	return b.String()
}
