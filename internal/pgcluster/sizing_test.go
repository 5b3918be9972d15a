package pgcluster

import (
	"strings"
	"testing"

	"github.com/dbhost/dbhost/internal/host"
)

func TestSizeRules(t *testing.T) {
	cases := []struct {
		name               string
		total, avail, disk uint64
		o                  Options
		sb, ecs, mwm, wal  uint64
		conns              int
	}{
		// 25 % of 24 GB is 6 GB: capped at 4 GiB.
		{"large host", 24 * giB, 22 * giB, 200 * giB, Options{}, 4 * giB, 12 * giB, 768 * miB, 8 * giB, 110},
		// 25 % of 2 GiB, on a multiple of 128 MiB.
		{"small VM", 2 * giB, 1500 * miB, 0, Options{MaxClients: 16}, 512 * miB, giB, 64 * miB, giB, 26},
		// 25 % of 3000 MiB is 750 MiB, rounded down to 640 MiB.
		{"rounding", 3000 * miB, 0, 0, Options{}, 640 * miB, 1500 * miB, 96000 * kiB, 1280 * miB, 110},
		// Never below 128 MiB, even on a tiny host.
		{"tiny host", 256 * miB, 100 * miB, 0, Options{}, 128 * miB, 128 * miB, 64 * miB, giB, 110},
		// Half of MemAvailable bounds it on a busy host.
		{"busy host", 16 * giB, 3 * giB, 0, Options{}, 1536 * miB, 8 * giB, 512 * miB, 3 * giB, 110},
		// An explicit size wins; WAL bounded by a quarter of the free disk.
		{"explicit", 8 * giB, 7 * giB, 4 * giB, Options{SharedBuffers: 3 * giB, MaxClients: 64}, 3 * giB, 4 * giB, 256 * miB, giB, 74},
		// A nearly full disk still gets the 256 MiB floor.
		{"full disk", 8 * giB, 7 * giB, 100 * miB, Options{}, 2 * giB, 4 * giB, 256 * miB, 256 * miB, 110},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s := Size(c.total, c.avail, c.disk, c.o)
			if s.SharedBuffers != c.sb || s.EffectiveCacheSize != c.ecs || s.MaintenanceWorkMem != c.mwm || s.MaxWALSize != c.wal || s.MaxConnections != c.conns {
				t.Errorf("Size = sb %d MiB, ecs %d MiB, mwm %d KiB, wal %d MiB, conns %d; want %d, %d, %d, %d, %d",
					s.SharedBuffers/miB, s.EffectiveCacheSize/miB, s.MaintenanceWorkMem/kiB, s.MaxWALSize/miB, s.MaxConnections,
					c.sb/miB, c.ecs/miB, c.mwm/kiB, c.wal/miB, c.conns)
			}
		})
	}
}

// The recorded /proc/meminfo of the development VM (24 GB).
func TestHostSizingFixture(t *testing.T) {
	h, err := host.Open("testdata/host")
	if err != nil {
		t.Fatal(err)
	}
	s, err := hostSizing(h, "/tmp", Options{})
	if err != nil {
		t.Fatal(err)
	}
	if s.MemTotal != 24684084*kiB {
		t.Errorf("MemTotal %d, want the fixture's 24684084 kB", s.MemTotal)
	}
	if s.SharedBuffers != 4*giB {
		t.Errorf("shared_buffers %d MiB on a 24 GB host, want the 4 GiB cap", s.SharedBuffers/miB)
	}
	// A host without meminfo is an error, not a guess.
	empty, err := host.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := hostSizing(empty, "/tmp", Options{}); err == nil {
		t.Error("sizing without /proc/meminfo succeeded")
	}
}

func TestCheckSettings(t *testing.T) {
	good := map[string]string{"fsync": "off", "huge_pages": "on", "auto_explain.log_min_duration": "10ms", "search_path": `"$user", public`}
	if err := checkSettings(good); err != nil {
		t.Errorf("checkSettings(%v): %v", good, err)
	}
	for _, bad := range []map[string]string{
		{"port": "5432"},
		{"unix_socket_directories": "/tmp"},
		{"Data_Directory": "/var/lib/postgresql"},
		{"include": "/etc/passwd"},
		{"shared buffers": "1GB"},
		{"fsync = off\nport": "1"},
		{"work_mem": "4MB\nport = 5432"},
	} {
		if err := checkSettings(bad); err == nil {
			t.Errorf("checkSettings(%q) accepted", bad)
		}
	}
}

func TestConfFile(t *testing.T) {
	if got, want := confLine("log_line_prefix", `it's \ %m`), `log_line_prefix = 'it''s \\ %m'`+"\n"; got != want {
		t.Errorf("confLine = %q, want %q", got, want)
	}
	s := Size(8*giB, 0, 0, Options{})
	conf := confFile(s, s.settings(5555, "/tmp/dbhost-pgcluster-x"), map[string]string{"fsync": "off", "shared_buffers": "256MB"})
	for _, want := range []string{
		"listen_addresses = ''\n",
		"port = '5555'\n",
		"unix_socket_directories = '/tmp/dbhost-pgcluster-x'\n",
		"shared_buffers = '2097152kB'\n",
		"max_connections = '110'\n",
	} {
		if !strings.Contains(conf, want) {
			t.Errorf("configuration lacks %q:\n%s", want, conf)
		}
	}
	// Requested settings come after the sized ones, so they win.
	if i, k := strings.Index(conf, "shared_buffers = '2097152kB'"), strings.Index(conf, "shared_buffers = '256MB'"); k < i {
		t.Errorf("requested shared_buffers not after the sized one:\n%s", conf)
	}
	if strings.Contains(conf, "fsync = 'on'") || !strings.Contains(conf, "fsync = 'off'") {
		t.Errorf("fsync: only the requested value belongs in the file:\n%s", conf)
	}
}
