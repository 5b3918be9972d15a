package redis

import (
	"os"
	"reflect"
	"testing"
	"testing/fstest"

	"github.com/dbhost/dbhost/internal/host"
)

// unitHost opens a Host over a temporary root holding files.
func unitHost(t *testing.T, files fstest.MapFS) *host.Host {
	t.Helper()
	root := t.TempDir()
	if err := os.CopyFS(root, files); err != nil {
		t.Fatal(err)
	}
	h, err := host.Open(root)
	if err != nil {
		t.Fatal(err)
	}
	return h
}

// TestUnitExecStart recovers a set-proc-title server's command line from
// the unit its cgroup names: the template's file, a drop-in (an /etc copy
// hides the packaged one of the same name) that resets ExecStart and sets
// it again over continuation lines, and the instance specifier.
func TestUnitExecStart(t *testing.T) {
	h := unitHost(t, fstest.MapFS{
		"proc/42/cgroup": {Data: []byte("0::/system.slice/system-redis.slice/redis-server@cache.service\n")},
		"usr/lib/systemd/system/redis-server@.service": {Data: []byte("[Unit]\nDescription=Redis %i\n\n[Service]\n" +
			"ExecStart=/usr/bin/redis-server /etc/redis/redis-%i.conf --supervised systemd\n")},
		"usr/lib/systemd/system/redis-server@.service.d/10-port.conf": {Data: []byte("[Service]\nExecStart=\nExecStart=/usr/bin/redis-server --port 1\n")},
		"etc/systemd/system/redis-server@.service.d/10-port.conf": {Data: []byte("[Service]\nExecStart=\n" +
			"ExecStart=-/usr/bin/redis-server /etc/redis/%i.conf \\\n  --maxmemory 1gb \"--save 60 1\"\n")},
		"etc/systemd/system/redis-server@cache.service.d/05-other.conf": {Data: []byte("[Unit]\nExecStart=/not/a/service/key\n")},
	})
	argv, src := unitExecStart(h, 42)
	want := []string{"/usr/bin/redis-server", "/etc/redis/cache.conf", "--maxmemory", "1gb", "--save 60 1"}
	if !reflect.DeepEqual(argv, want) || src != "/etc/systemd/system/redis-server@.service.d/10-port.conf" {
		t.Errorf("unitExecStart = %q from %s, want %q from the /etc drop-in", argv, src, want)
	}

	// Outside a service (no systemd, a shell), there is nothing to recover.
	h = unitHost(t, fstest.MapFS{"proc/43/cgroup": {Data: []byte("0::/user.slice/session-1.scope\n")}})
	if argv, src := unitExecStart(h, 43); argv != nil || src != "" {
		t.Errorf("no service: %q from %q", argv, src)
	}
}
