package fleet

import (
	"context"
	"reflect"
	"strings"
	"sync"
	"testing"

	"github.com/dbhost/dbhost/internal/engine"
	"github.com/dbhost/dbhost/internal/facts"
	"github.com/dbhost/dbhost/internal/fixture"
	"github.com/dbhost/dbhost/internal/host"
)

var (
	snapMu    sync.Mutex
	snapCache = map[string]Snapshot{}
)

// recorded judges a recorded host once per test binary.
func recorded(t *testing.T, name string) Snapshot {
	t.Helper()
	snapMu.Lock()
	defer snapMu.Unlock()
	if s, ok := snapCache[name]; ok {
		return s
	}
	s, err := Load(context.Background(), fixture.Path(name))
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	snapCache[name] = s
	return s
}

func TestSettingsBaseline(t *testing.T) {
	s := recorded(t, "baseline").Settings
	want := map[string]string{
		"sysctl/vm.swappiness":                "60",
		"sysctl/kernel.sem":                   "32000 1024000000 500 32000", // tabs in the file, one space here
		"sysctl/net.ipv4.ip_local_port_range": "32768 60999",
		"thp/enabled":                         "madvise", // the active choice, not "always [madvise] never"
		"thp/defrag":                          "madvise",
		"thp/shmem_enabled":                   "never",
		"thp/khugepaged/defrag":               "1",
		"thp/khugepaged/max_ptes_none":        "511",
		"hugepages/2048kB/total":              "0",
		"hugepages/1048576kB/total":           "0",
		// vda holds every database path: its queue once, under its first
		// role.
		"storage/mysql:3306/data/scheduler":     "mq-deadline",
		"storage/mysql:3306/data/read_ahead_kb": "8192",
		"storage/mysql:3306/data/nr_requests":   "256",
		"storage/mysql:3306/data/rotational":    "1",
		"limits/postgres:5432/nofile/soft":      "20000",
		"limits/mysql:3306/nproc/hard":          "96365",
		"limits/redis:6379/memlock/soft":        "8388608",
		"db/postgres:5432/shared_buffers":       "16384 (8kB)",
		"db/mysql:3306/innodb_buffer_pool_size": "134217728",
		"db/redis:6379/maxmemory_policy":        "noeviction",
		"db/redis:6379/requirepass":             "", // no password: kept, it is what checks judge
		// Kernel defaults derived from the RAM and CPUs of the host.
		"sysctl/fs.file-max":                  DerivedFromRAM,
		"sysctl/kernel.threads-max":           DerivedFromRAM,
		"sysctl/vm.min_free_kbytes":           DerivedFromRAM,
		"sysctl/net.ipv4.tcp_max_syn_backlog": DerivedFromRAM,
		"sysctl/kernel.pid_max":               DerivedFromCPUs,
		// Read live with a trailing slash; compared without.
		"db/mysql:3306/datadir": "/var/lib/mysql",
	}
	for k, v := range want {
		if got, ok := s[k]; !ok || got != v {
			t.Errorf("%s = %q (present %v), want %q", k, got, ok, v)
		}
	}
	for _, k := range []string{"sysctl/fs.file-nr", "storage/mysql:3306/data/write_cache", "storage/postgres:5432/data/scheduler", "device/vda/scheduler"} {
		if v, ok := s[k]; ok {
			t.Errorf("%s = %q: a counter, or not recorded in this snapshot, must be absent", k, v)
		}
	}
	kinds := map[string]int{}
	for k := range s {
		kinds[Kind(k)]++
	}
	for _, k := range Kinds {
		if kinds[k] == 0 && k != KindDevice { // vda holds database paths
			t.Errorf("no %s/ key in baseline", k)
		}
	}
	if len(kinds) != len(Kinds)-1 || kinds[KindStorage] != 4 {
		t.Errorf("kinds %v, want only %v and vda's 4 queue settings once", kinds, Kinds)
	}
	snap := recorded(t, "baseline")
	wantStacks := []Stack{{Key: "storage/mysql:3306/data", Devices: []string{"vda"}, Roles: []string{
		"mysql:3306/data", "mysql:3306/redo", "mysql:3306/tmp", "postgres:5432/data", "postgres:5432/wal", "redis:6379/data", "redis:6379/log"}}}
	if !reflect.DeepEqual(snap.Stacks, wantStacks) {
		t.Errorf("stacks %+v, want %+v", snap.Stacks, wantStacks)
	}
	if snap.Raw["sysctl/fs.file-max"] != "2466177" || snap.Raw["db/mysql:3306/datadir"] != "/var/lib/mysql/" {
		t.Errorf("raw values %v", snap.Raw)
	}
}

// Devices under database paths are grouped by stack (the mounted device
// and the disks below it); a stack holds every database path on it.
func TestSettingsStacks(t *testing.T) {
	got := recorded(t, "storage-dm").Stacks
	want := []Stack{
		{Key: "storage/mysql:3306/data", Devices: []string{"vda"}, Roles: []string{
			"mysql:3306/data", "mysql:3306/redo", "mysql:3306/tmp", "postgres:5432/data", "postgres:5432/wal", "redis:6379/data", "redis:6379/log"}},
		// A loop device over a file on vda: read-ahead is loop1's, the
		// queue vda's.
		{Key: "storage/mysql:34583/data", Devices: []string{"loop1", "vda"}, Roles: []string{
			"mysql:34583/data", "mysql:34583/redo", "mysql:34583/tmp", "postgres:46473/wal"}},
		{Key: "storage/postgres:46473/data", Devices: []string{"dm-0", "vdb"}, Roles: []string{"postgres:46473/data"}},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("stacks\n%+v\nwant\n%+v", got, want)
	}
}

// Each derivation on recorded values: the default the kernel derived for
// the recording VM (24684092 kB or 24684084 kB of RAM over two boots, two
// CPUs) compares as derived, a value set by hand stays a value.
func TestSettingsDerived(t *testing.T) {
	cases := []struct {
		host, name, raw, want string
	}{
		{"baseline", "fs.file-max", "2466177", DerivedFromRAM},
		{"pg-hba-open", "fs.file-max", "2466170", DerivedFromRAM}, // 8 kB less RAM at that boot
		{"limits-filemax-low", "fs.file-max", "50000", "50000"},
		{"baseline", "kernel.threads-max", "192730", DerivedFromRAM},
		{"baseline", "vm.min_free_kbytes", "67584", DerivedFromRAM}, // khugepaged's, three zones
		{"mem-minfree-low", "vm.min_free_kbytes", "8192", "8192"},
		{"mem-minfree-high", "vm.min_free_kbytes", "2097152", "2097152"},
		{"baseline", "kernel.pid_max", "32768", DerivedFromCPUs},
		{"persist-sysctl-match", "kernel.pid_max", "4194304", "4194304"}, // systemd's 50-pid-max.conf
		{"baseline", "net.ipv4.tcp_max_syn_backlog", "2048", DerivedFromRAM},
		{"net-tuned", "net.ipv4.tcp_max_syn_backlog", "4096", "4096"},
	}
	for _, c := range cases {
		f := fixture.Facts(t, c.host)
		if got := f.Sysctl[c.name].Value; strings.TrimSpace(got) != c.raw {
			t.Fatalf("%s: %s = %q, fixture changed (want %q)", c.host, c.name, got, c.raw)
		}
		if got := Settings(f)["sysctl/"+c.name]; got != c.want {
			t.Errorf("%s: %s %s compares as %q, want %q", c.host, c.name, c.raw, got, c.want)
		}
	}
	// The formulas on hosts of other sizes (MemTotal kB, CPUs): the kernel's
	// defaults on a 4 GiB and a 256 GiB host, and values set by hand.
	other := []struct {
		name   string
		v      string
		memKB  uint64
		cpus   int
		wanted bool
	}{
		{"fs.file-max", "390582", 4030084, 2, true},               // 4 GiB VM: 3.1% reserved at boot
		{"fs.file-max", "26378042", 264055924, 64, true},          // 256 GiB
		{"fs.file-max", "1048576", 264055924, 64, false},          // set by hand
		{"fs.file-max", "9223372036854775807", 4030084, 2, false}, // raised by systemd: a value
		{"kernel.threads-max", "31143", 4030084, 2, true},
		{"kernel.threads-max", "4194304", 4030084, 2, false},
		{"vm.min_free_kbytes", "45056", 4030084, 2, true}, // khugepaged, two zones
		{"vm.min_free_kbytes", "7806", 4030084, 2, true},  // int_sqrt(lowmem * 16), THP off
		{"vm.min_free_kbytes", "262144", 264055924, 64, false},
		{"kernel.pid_max", "65536", 264055924, 64, true},  // 1024 per CPU above 32
		{"kernel.pid_max", "32768", 264055924, 64, false}, // lowered by hand
		{"net.ipv4.tcp_max_syn_backlog", "256", 4030084, 2, true},
		{"net.ipv4.tcp_max_syn_backlog", "16384", 264055924, 64, true}, // 2097152 ehash slots / 128
		{"net.ipv4.tcp_max_syn_backlog", "8192", 264055924, 64, true},  // / 256 in older kernels
		{"net.ipv4.tcp_max_syn_backlog", "65535", 264055924, 64, false},
		{"fs.file-max", "2466177", 0, 2, false}, // RAM unknown: a value
	}
	for _, c := range other {
		if got := derived(c.name, c.v, c.memKB, c.cpus) != ""; got != c.wanted {
			t.Errorf("%s = %s with %d kB, %d CPUs: derived %v, want %v", c.name, c.v, c.memKB, c.cpus, got, c.wanted)
		}
	}
}

// A secret that reaches the facts unredacted (a path that bypassed
// engine.Instance.Set) is still not in the settings.
func TestSettingsRedactSecrets(t *testing.T) {
	in := &engine.Instance{Engine: engine.Redis, Port: 6379, Settings: map[string]engine.Setting{
		"requirepass":         {Value: "hunter2"},
		"masterauth":          {Value: "s3cret-m"},
		"primary_conninfo":    {Value: "host=db2 user=rep password=pw-in-conninfo"},
		"maxmemory_policy":    {Value: "noeviction"},
		"password_encryption": {Value: "scram-sha-256"},
	}}
	f := &facts.Facts{Sysctl: map[string]host.Reading{}, Instances: []*facts.Instance{{Instance: in}}}
	s := Settings(f)
	for k, v := range s {
		for _, secret := range []string{"hunter2", "s3cret-m", "pw-in-conninfo"} {
			if strings.Contains(v, secret) {
				t.Errorf("%s = %q holds a secret", k, v)
			}
		}
	}
	if s["db/redis:6379/requirepass"] != host.Redacted || s["db/redis:6379/maxmemory_policy"] != "noeviction" ||
		s["db/redis:6379/password_encryption"] != "scram-sha-256" {
		t.Errorf("settings %v", s)
	}
}

// The fleet report counts the compared values: hosts that differ only in
// the kernel defaults their RAM gave (fs.file-max 2466177 and 2466170) or
// in a trailing slash (datadir read live or from the file) are not off
// the majority.
func TestFleetDerivedNotOutliers(t *testing.T) {
	hosts := []string{"baseline", "baseline-nonroot", "pg-hba-open", "size-pg-tuned", "net-syncookies-off"}
	var snaps []Snapshot
	rawFileMax, rawDatadir := map[string]bool{}, map[string]bool{}
	for _, h := range hosts {
		s := recorded(t, h)
		snaps = append(snaps, s)
		rawFileMax[s.Raw["sysctl/fs.file-max"]] = true
		if v, ok := s.Raw["db/mysql:3306/datadir"]; ok {
			rawDatadir[v] = true
		} else if v, ok := s.Settings["db/mysql:3306/datadir"]; ok {
			rawDatadir[v] = true
		}
	}
	// The values read do differ.
	if !rawFileMax["2466177"] || !rawFileMax["2466170"] || !rawDatadir["/var/lib/mysql/"] || !rawDatadir["/var/lib/mysql"] {
		t.Fatalf("fixtures changed: fs.file-max %v, datadir %v", rawFileMax, rawDatadir)
	}
	r := Build(snaps, nil)
	for _, sp := range r.Settings {
		switch sp.Key {
		case "sysctl/fs.file-max", "sysctl/kernel.threads-max", "db/mysql:3306/datadir":
			t.Errorf("%s off the majority: %+v", sp.Key, sp.Values)
		}
	}
	if sp := spreadOf(r, "sysctl/net.ipv4.tcp_syncookies"); sp == nil || sp.Off != 1 {
		t.Errorf("tcp_syncookies, set by hand on one host: %+v", sp)
	}
	// A value set by hand is still off the majority of defaults.
	r = Build([]Snapshot{recorded(t, "baseline"), recorded(t, "pg-hba-open"), recorded(t, "limits-filemax-low")}, nil)
	if sp := spreadOf(r, "sysctl/fs.file-max"); sp == nil || sp.Majority != DerivedFromRAM || sp.Off != 1 || sp.Values[1].Value != "50000" {
		t.Errorf("fs.file-max set to 50000 on one host: %+v", sp)
	}
}

func spreadOf(r *Report, key string) *SettingSpread {
	for i := range r.Settings {
		if r.Settings[i].Key == key {
			return &r.Settings[i]
		}
	}
	return nil
}
