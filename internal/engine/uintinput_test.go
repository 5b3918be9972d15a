package engine

import (
	"strings"
	"testing"
)

// A default is shown as a default only when the configuration was read;
// otherwise it is an assumption and says why (issue 10 item 7).
func TestUintInputNeverShowsAGuessAsObserved(t *testing.T) {
	read := func() *Instance {
		in := &Instance{Engine: Redis, SettingsSource: "files", Redis: &RedisInfo{}}
		in.Set("maxclients", "10000", "default")
		in.Set("tcp-backlog", "511", "/etc/redis/redis.conf:12")
		return in
	}
	unread := func() *Instance {
		in := read()
		in.Redis.ConfigErr = "open /etc/redis/redis.conf: permission denied"
		return in
	}
	live := func() *Instance {
		in := unread()
		in.SettingsSource = "live"
		in.Set("maxclients", "10000", "live")
		return in
	}
	for _, c := range []struct {
		name, setting string
		in            *Instance
		value, source string
	}{
		{"observed in a file", "tcp-backlog", read(), "511", "/etc/redis/redis.conf:12"},
		{"default, configuration read", "maxclients", read(), "10000", "default (not found in the configuration)"},
		{"absent, configuration read", "maxmemory-samples", read(), "5", "default (not found in the configuration)"},
		{"default, configuration unread", "maxclients", unread(), "unknown (default 10000 assumed)", "the configuration was not read: open /etc/redis/redis.conf: permission denied"},
		{"absent, configuration unread", "maxmemory-samples", unread(), "unknown (default 5 assumed)", "the configuration was not read: "},
		{"observed in a file, other lines unread", "tcp-backlog", unread(), "511", "/etc/redis/redis.conf:12"},
		{"live", "maxclients", live(), "10000", "live"},
	} {
		def := uint64(10000)
		if c.setting == "maxmemory-samples" {
			def = 5
		} else if c.setting == "tcp-backlog" {
			def = 511
		}
		v, ok := c.in.Uint(c.setting, def)
		got := c.in.UintInput(c.setting, ok, v)
		if got.Value != c.value || !strings.HasPrefix(got.Source, c.source) {
			t.Errorf("%s: %s = %q from %q, want %q from %q…", c.name, c.setting, got.Value, got.Source, c.value, c.source)
		}
	}
}
