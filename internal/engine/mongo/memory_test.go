package mongo

import (
	"strings"
	"testing"

	"github.com/dbhost/dbhost/internal/engine"
)

// TestWTDefault: WiredTiger's own rule, on the memory the version reads.
func TestWTDefault(t *testing.T) {
	const gib = uint64(1) << 30
	for _, c := range []struct {
		version string
		ram     uint64
		limit   uint64
		cgv     int
		want    uint64
		from    string
	}{
		{"6.0.10", 24 * gib, 0, 0, 23 * gib / 2, "host's RAM"},
		{"6.0.10", 24 * gib, 4 * gib, 1, 3 * gib / 2, "cgroup's memory limit"},
		{"3.6.23", 24 * gib, 4 * gib, 1, 23 * gib / 2, "does not read a cgroup v1"},
		{"6.0.10", 24 * gib, 4 * gib, 2, 23 * gib / 2, "does not read a cgroup v2"},
		{"7.0.2", 24 * gib, 4 * gib, 2, 3 * gib / 2, "cgroup's memory limit"},
		{"", 24 * gib, 4 * gib, 1, 23 * gib / 2, "version is unknown"},
		{"6.0.10", gib, 0, 0, 256 << 20, "at least 256 MB"},
		{"6.0.10", gib + 300<<20, 0, 0, 256 << 20, "host's RAM"},
	} {
		got, from := wtDefault(c.version, c.ram, c.limit, c.cgv)
		if got != c.want || !strings.Contains(from, c.from) {
			t.Errorf("wtDefault(%q, %d, %d, v%d) = %d %q, want %d %q", c.version, c.ram, c.limit, c.cgv, got, from, c.want, c.from)
		}
	}
}

// TestMemoryPlan: a set cache is known; an unset one is sized by the
// server; an unreadable file leaves it unknown.
func TestMemoryPlan(t *testing.T) {
	in := &engine.Instance{Engine: engine.MongoDB, Version: "6.0.10", Mongo: &engine.MongoInfo{}}
	in.Set(cacheKey, "1.5", "file:/etc/mongod.conf:12")
	p, _ := detector{}.Memory(in).MainCache()
	if !p.Known || p.Auto || p.Bytes != 3<<29 || p.Propose(1) != "0.25" || p.Propose(3<<29) != "1.5" {
		t.Errorf("set: %+v", p)
	}
	in = &engine.Instance{Engine: engine.MongoDB, Version: "6.0.10", Mongo: &engine.MongoInfo{}}
	if p, _ := (detector{}).Memory(in).MainCache(); p.Known || !p.Auto || p.AutoSize == nil {
		t.Errorf("unset: %+v", p)
	}
	in.Mongo.ConfigErr = "cannot read /etc/mongod.conf: permission denied"
	if p, _ := (detector{}).Memory(in).MainCache(); p.Known || p.Auto || !strings.Contains(p.Unread, "permission denied") {
		t.Errorf("unreadable: %+v", p)
	}
}
