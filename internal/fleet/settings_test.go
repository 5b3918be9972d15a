package fleet

import (
	"context"
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
		"sysctl/vm.swappiness":                    "60",
		"sysctl/kernel.sem":                       "32000 1024000000 500 32000", // tabs in the file, one space here
		"sysctl/net.ipv4.ip_local_port_range":     "32768 60999",
		"thp/enabled":                             "madvise", // the active choice, not "always [madvise] never"
		"thp/defrag":                              "madvise",
		"thp/shmem_enabled":                       "never",
		"thp/khugepaged/defrag":                   "1",
		"thp/khugepaged/max_ptes_none":            "511",
		"hugepages/2048kB/total":                  "0",
		"hugepages/1048576kB/total":               "0",
		"device/vda/scheduler":                    "mq-deadline",
		"device/vda/read_ahead_kb":                "8192",
		"device/vda/nr_requests":                  "256",
		"device/vda/rotational":                   "1",
		"storage/postgres:5432/data/scheduler":    "mq-deadline",
		"storage/postgres:5432/wal/read_ahead_kb": "8192",
		"storage/mysql:3306/redo/nr_requests":     "256",
		"limits/postgres:5432/nofile/soft":        "20000",
		"limits/mysql:3306/nproc/hard":            "96365",
		"limits/redis:6379/memlock/soft":          "8388608",
		"db/postgres:5432/shared_buffers":         "16384 (8kB)",
		"db/mysql:3306/innodb_buffer_pool_size":   "134217728",
		"db/redis:6379/maxmemory_policy":          "noeviction",
		"db/redis:6379/requirepass":               "", // no password: kept, it is what checks judge
	}
	for k, v := range want {
		if got, ok := s[k]; !ok || got != v {
			t.Errorf("%s = %q (present %v), want %q", k, got, ok, v)
		}
	}
	for _, k := range []string{"sysctl/fs.file-nr", "device/vda/write_cache"} {
		if v, ok := s[k]; ok {
			t.Errorf("%s = %q: a counter, or not recorded in this snapshot, must be absent", k, v)
		}
	}
	kinds := map[string]int{}
	for k := range s {
		kinds[Kind(k)]++
	}
	for _, k := range Kinds {
		if kinds[k] == 0 {
			t.Errorf("no %s/ key in baseline", k)
		}
	}
	if len(kinds) != len(Kinds) {
		t.Errorf("kinds %v, want only %v", kinds, Kinds)
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
