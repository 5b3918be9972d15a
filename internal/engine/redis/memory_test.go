package redis

import (
	"testing"

	"github.com/dbhost/dbhost/internal/engine"
)

// TestMemoryPlan: maxmemory 0 is no bound; a size is known; an unread
// configuration leaves a default unknown.
func TestMemoryPlan(t *testing.T) {
	in := &engine.Instance{Engine: engine.Redis, SettingsSource: "live", Redis: &engine.RedisInfo{}}
	in.Set("maxmemory", "0", "live")
	if p, _ := (detector{}).Memory(in).MainCache(); !p.Unbounded || !p.Known {
		t.Errorf("0: %+v", p)
	}
	in.Set("maxmemory", "2gb", "live")
	if p, _ := (detector{}).Memory(in).MainCache(); p.Unbounded || p.Bytes != 2<<30 || p.Propose(3<<20) != "3mb" || p.Propose(1) != "1mb" {
		t.Errorf("2gb: %+v", p)
	}
	in = &engine.Instance{Engine: engine.Redis, SettingsSource: "files", Redis: &engine.RedisInfo{ConfigErr: "cannot read /etc/redis/redis.conf"}}
	if p, _ := (detector{}).Memory(in).MainCache(); p.Known || p.Unbounded || p.Unread == "" {
		t.Errorf("unread: %+v", p)
	}
}
