package fleet

import (
	"reflect"
	"sort"
	"strconv"
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
			// device over a file on vda in one, on device-mapper over vdb in
			// the other. The two stacks hold the same data directory: paired
			// by role, only the read-ahead differs. The WAL moved to the
			// loop device of the other private server. The scheduler
			// verdict in b is about vdb, the disk under dm-0; loop0 has
			// none.
			a: "storage-xfs", b: "storage-dm",
			settings: []SettingDiff{
				{Key: "storage/postgres:46473/wal/devices", Kind: "storage", A: strp("loop0+vda"), B: strp("loop1+vda")},
				{Key: "device/loop0+vda=dm-0+vdb/read_ahead_kb", Kind: "device", A: strp("2560"), B: strp("4096")},
			},
			findings: []fd{
				{ID: "storage.scheduler", Subject: "device:loop0+vda=dm-0+vdb", Severity: check.Warning, A: "", B: check.Pass},
				{ID: "storage.separate_wal", Subject: "postgres:46473", Severity: check.Info, A: check.Fail, B: check.Pass},
			},
		},
		{
			// vda holds seven database paths: its three queue settings
			// that changed are listed once. The throwaway clusters of the
			// two recordings (other ports, other temporary directories)
			// are paired as the only other PostgreSQL on each side; their
			// ports and directories are their identity, not differences.
			a: "storage-vda-default", b: "storage-vda-tuned",
			settings: []SettingDiff{
				{Key: "device/vda/nr_requests", Kind: "device", A: strp("256"), B: strp("128")},
				{Key: "device/vda/read_ahead_kb", Kind: "device", A: strp("8192"), B: strp("128")},
				{Key: "device/vda/scheduler", Kind: "device", A: strp("mq-deadline"), B: strp("none")},
			},
			findings: []fd{{ID: "storage.read_ahead", Subject: "device:vda", Severity: check.Warning, A: check.Fail, B: check.Pass}},
		},
		{
			// The private clusters of an open and a hardened pg_hba.conf:
			// paired, every hardening verdict that changed is shown.
			a: "pg-hba-open", b: "pg-hba-hardened",
			settings: []SettingDiff{
				{Key: "db/postgres:36605=postgres:46757/password_encryption", Kind: "db", A: strp("md5"), B: strp("scram-sha-256")},
				{Key: "db/postgres:36605=postgres:46757/ssl", Kind: "db", A: strp("off"), B: strp("on")},
			},
			findings: []fd{
				{ID: "pg.hardening.hba_trust", Subject: "postgres:36605=postgres:46757", Severity: check.Critical, A: check.Fail, B: check.Pass},
				{ID: "pg.hardening.hba_cleartext", Subject: "postgres:36605=postgres:46757", Severity: check.Warning, A: check.Fail, B: check.Pass},
				{ID: "pg.hardening.md5", Subject: "postgres:36605=postgres:46757", Severity: check.Warning, A: check.Fail, B: check.Pass},
				{ID: "pg.hardening.public_create", Subject: "postgres:36605=postgres:46757", Severity: check.Warning, A: check.Fail, B: check.Pass},
				{ID: "pg.hardening.ssl", Subject: "postgres:36605=postgres:46757", Severity: check.Warning, A: check.Fail, B: check.Pass},
				{ID: "pg.hardening.superuser_remote", Subject: "postgres:36605=postgres:46757", Severity: check.Warning, A: check.Fail, B: check.Pass},
			},
		},
		{
			a: "size-pg-tuned", b: "size-pg-workmem",
			settings: []SettingDiff{
				{Key: "db/postgres:37531=postgres:33343/effective_cache_size", Kind: "db", A: strp("2097152 (8kB)"), B: strp("524288 (8kB)")},
				{Key: "db/postgres:37531=postgres:33343/max_connections", Kind: "db", A: strp("20"), B: strp("500")},
				{Key: "db/postgres:37531=postgres:33343/shared_buffers", Kind: "db", A: strp("655360 (8kB)"), B: strp("4096 (8kB)")},
				{Key: "db/postgres:37531=postgres:33343/shared_memory_size", Kind: "db", A: strp("5254 (MB)"), B: strp("61 (MB)")},
				{Key: "db/postgres:37531=postgres:33343/shared_memory_size_in_huge_pages", Kind: "db", A: strp("2627"), B: strp("31")},
				{Key: "db/postgres:37531=postgres:33343/wal_buffers", Kind: "db", A: strp("2048 (8kB)"), B: strp("128 (8kB)")},
				{Key: "db/postgres:37531=postgres:33343/work_mem", Kind: "db", A: strp("16384 (kB)"), B: strp("1048576 (kB)")},
			},
			findings: []fd{
				{ID: "pg.work_mem", Subject: "postgres:37531=postgres:33343", Severity: check.Warning, A: check.Pass, B: check.Fail},
				{ID: "pg.effective_cache_size", Subject: "postgres:37531=postgres:33343", Severity: check.Info, A: check.Fail, B: check.Pass},
			},
		},
		{
			// fs.file-max 2466177 and 2466170 (8 kB less RAM at that boot)
			// are both the kernel's default: not a difference.
			a: "baseline", b: "net-syncookies-off",
			settings: []SettingDiff{{Key: "sysctl/net.ipv4.tcp_syncookies", Kind: "sysctl", A: strp("1"), B: strp("0")}},
			findings: []fd{{ID: "net.syn_backlog", Subject: "host", Severity: check.Warning, A: check.Pass, B: check.Fail}},
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
				if x := r.Settings[i]; mirrorKey(d.Key) != x.Key || !reflect.DeepEqual(d.A, x.B) || !reflect.DeepEqual(d.B, x.A) {
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
	// The live server reports its datadir with a trailing slash, the file
	// without: the same directory.
	a, b := recorded(t, "baseline"), recorded(t, "baseline-nonroot")
	if a.Raw["db/mysql:3306/datadir"] != "/var/lib/mysql/" || b.Settings["db/mysql:3306/datadir"] != "/var/lib/mysql" {
		t.Fatalf("fixtures changed: %q, %q", a.Raw["db/mysql:3306/datadir"], b.Settings["db/mysql:3306/datadir"])
	}
	for _, d := range r.Settings {
		if d.Key == "db/mysql:3306/datadir" {
			t.Errorf("datadir differs: %s", showSettings([]SettingDiff{d}))
		}
	}
}

// mirrorKey names a pair B=A as A=B: "db/y=x/port" is "db/x=y/port".
func mirrorKey(k string) string {
	kind, rest, _ := strings.Cut(k, "/")
	subj, tail, _ := strings.Cut(rest, "/")
	x, y, ok := strings.Cut(subj, "=")
	if !ok {
		return k
	}
	return kind + "/" + y + "=" + x + "/" + tail
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

// Databases are paired like for like, and the result says how.
func TestDiffPairsRecorded(t *testing.T) {
	// A loop device holding only the paths of a server on one side only
	// is not listed apart from that server.
	if r := Diff(recorded(t, "storage-ext4-part"), recorded(t, "storage-xfs")); len(r.Devices) != 0 ||
		!reflect.DeepEqual(r.Databases, []Presence{{Name: "mysql:34583", In: "b"}}) {
		t.Errorf("storage-ext4-part/storage-xfs: devices %v, databases %v", r.Devices, r.Databases)
	}
	r := Diff(recorded(t, "pg-hba-open"), recorded(t, "pg-hba-hardened"))
	want := []DatabasePair{
		{Name: "mysql:3306", A: "mysql:3306", B: "mysql:3306", By: "data_directory", Why: "same data directory /var/lib/mysql"},
		{Name: "postgres:36605=postgres:46757", A: "postgres:36605", B: "postgres:46757", By: "engine", Why: "the only postgres on each side"},
		{Name: "postgres:5432", A: "postgres:5432", B: "postgres:5432", By: "data_directory", Why: "same data directory /var/lib/postgresql/15/main"},
		{Name: "redis:6379", A: "redis:6379", B: "redis:6379", By: "data_directory", Why: "same data directory /var/lib/redis"},
	}
	if !reflect.DeepEqual(r.DatabasePairs, want) || len(r.Databases) != 0 {
		t.Errorf("pairs %+v, only on one side %v", r.DatabasePairs, r.Databases)
	}
	r = Diff(recorded(t, "storage-vda-default"), recorded(t, "storage-vda-tuned"))
	wantDev := []DevicePair{{Name: "vda", A: "vda", B: "vda", By: "role", Roles: []string{
		"mysql:3306/data", "mysql:3306/redo", "mysql:3306/tmp",
		"postgres:33921=postgres:35309/data", "postgres:33921=postgres:35309/wal",
		"postgres:5432/data", "postgres:5432/wal", "redis:6379/data", "redis:6379/log"}}}
	if !reflect.DeepEqual(r.DevicePairs, wantDev) || len(r.Devices) != 0 {
		t.Errorf("device pairs %+v, only on one side %v", r.DevicePairs, r.Devices)
	}
}

func TestPairDatabases(t *testing.T) {
	type db = Database
	cases := []struct {
		name         string
		a, b         []Database
		pairs        []string // "A=B by"
		onlyA, onlyB []string
	}{
		{
			// The data directory (as configured, a trailing slash or not)
			// wins over the port: a server moved to another port is the
			// same server.
			name:  "data directory",
			a:     []db{{Name: "mysql:3306", Engine: "mysql", Port: 3306, DataDir: "/var/lib/mysql/"}},
			b:     []db{{Name: "mysql:3307", Engine: "mysql", Port: 3307, DataDir: "/var/lib/mysql"}},
			pairs: []string{"mysql:3306=mysql:3307 data_directory"},
		},
		{
			// Then the port: after an upgrade the data directory moved.
			name: "port",
			a: []db{{Name: "postgres:5432", Engine: "postgres", Port: 5432, DataDir: "/var/lib/postgresql/15/main"},
				{Name: "postgres:5433", Engine: "postgres", Port: 5433, DataDir: "/srv/b"}},
			b: []db{{Name: "postgres:5432", Engine: "postgres", Port: 5432, DataDir: "/var/lib/postgresql/16/main"},
				{Name: "postgres:5433", Engine: "postgres", Port: 5433, DataDir: "/srv/b"}},
			pairs: []string{"postgres:5432=postgres:5432 port", "postgres:5433=postgres:5433 data_directory"},
		},
		{
			// Two unpaired of an engine on a side: which is which is not
			// known, none is paired by engine. Engines never pair across.
			name: "ambiguous",
			a: []db{{Name: "postgres:1", Engine: "postgres", Port: 1, DataDir: "/a1"}, {Name: "postgres:2", Engine: "postgres", Port: 2, DataDir: "/a2"},
				{Name: "redis:6379", Engine: "redis", Port: 6379}},
			b:     []db{{Name: "postgres:3", Engine: "postgres", Port: 3, DataDir: "/b3"}, {Name: "mysql:3306", Engine: "mysql", Port: 3306}},
			onlyA: []string{"postgres:1", "postgres:2", "redis:6379"},
			onlyB: []string{"postgres:3", "mysql:3306"},
		},
	}
	for _, c := range cases {
		pairs, onlyA, onlyB := pairDatabases(c.a, c.b)
		var got []string
		for _, p := range pairs {
			got = append(got, p.A+"="+p.B+" "+p.By)
		}
		if !reflect.DeepEqual(got, c.pairs) || !reflect.DeepEqual(onlyA, c.onlyA) || !reflect.DeepEqual(onlyB, c.onlyB) {
			t.Errorf("%s: pairs %v, only a %v, only b %v; want %v, %v, %v", c.name, got, onlyA, onlyB, c.pairs, c.onlyA, c.onlyB)
		}
	}
}

// A pair's own identity (its data directory root, its port) is not a
// difference; what else it holds is.
func TestDiffPairIdentity(t *testing.T) {
	snap := func(port int, dir string, settings SettingMap) Snapshot {
		name := "postgres:" + strconv.Itoa(port)
		return Snapshot{Hostname: "vm", Instances: []string{name},
			Databases: []Database{{Name: name, Engine: "postgres", Port: port, DataDir: dir + "/data"}},
			Settings:  settings}
	}
	a := snap(5432, "/tmp/pg-1", SettingMap{"db/postgres:5432/port": "5432", "db/postgres:5432/hba_file": "/tmp/pg-1/data/pg_hba.conf",
		"db/postgres:5432/log_directory": "/tmp/pg-10/log", "db/postgres:5432/work_mem": "4096 (kB)"})
	b := snap(5433, "/tmp/pg-2", SettingMap{"db/postgres:5433/port": "5433", "db/postgres:5433/hba_file": "/tmp/pg-2/data/pg_hba.conf",
		"db/postgres:5433/log_directory": "/tmp/pg-10/log", "db/postgres:5433/work_mem": "8192 (kB)"})
	r := Diff(a, b)
	want := []SettingDiff{{Key: "db/postgres:5432=postgres:5433/work_mem", Kind: "db", A: strp("4096 (kB)"), B: strp("8192 (kB)")}}
	if !reflect.DeepEqual(r.Settings, want) {
		t.Errorf("settings:\n%s", showSettings(r.Settings))
	}
	// Paired by port, a data directory that moved is a change.
	moved := snap(5432, "/tmp/pg-2", SettingMap{"db/postgres:5432/port": "5432", "db/postgres:5432/hba_file": "/tmp/pg-2/data/pg_hba.conf",
		"db/postgres:5432/log_directory": "/tmp/pg-10/log", "db/postgres:5432/work_mem": "4096 (kB)"})
	if r := Diff(a, moved); len(r.Settings) != 1 || r.Settings[0].Key != "db/postgres:5432/hba_file" || r.DatabasePairs[0].By != "port" {
		t.Errorf("moved: %+v\n%s", r.DatabasePairs, showSettings(r.Settings))
	}
	// Another root is a difference, shown as read.
	b.Settings["db/postgres:5433/hba_file"] = "/etc/postgresql/pg_hba.conf"
	r = Diff(a, b)
	if len(r.Settings) != 2 || r.Settings[0].Key != "db/postgres:5432=postgres:5433/hba_file" || r.Settings[0].RawA != "/tmp/pg-1/data/pg_hba.conf" {
		t.Errorf("settings %+v", r.Settings)
	}
}

// An instance told apart by its data directory has a slash in its name:
// its settings are still compared under it.
func TestDiffInstanceNameWithSlash(t *testing.T) {
	snap := func(v string) Snapshot {
		n := "postgres:5432@/srv/pg"
		return Snapshot{Instances: []string{n}, Databases: []Database{{Name: n, Engine: "postgres", Port: 5432, DataDir: "/srv/pg"}},
			Settings: SettingMap{"db/" + n + "/work_mem": v}}
	}
	r := Diff(snap("4096 (kB)"), snap("8192 (kB)"))
	if len(r.Settings) != 1 || r.Settings[0].Key != "db/postgres:5432@/srv/pg/work_mem" {
		t.Errorf("settings %s", showSettings(r.Settings))
	}
}
