package check_test

import (
	"bytes"
	"compress/gzip"
	"io"
	"os"
	"strings"
	"testing"

	"github.com/dbhost/dbhost/internal/check"
	"github.com/dbhost/dbhost/internal/engine"
	"github.com/dbhost/dbhost/internal/fixture"
)

// The redis-* fixtures run the machine's shared Redis on 6379 (root, no
// config file, bound to loopback) and one private Redis on a random port.
const sharedRedis = "redis:6379"

// privateInstance returns the subject of a fixture's one instance of an
// engine that is not the shared one.
func privateInstance(t *testing.T, name string, e engine.Engine, shared string) string {
	t.Helper()
	var found []string
	for _, in := range fixture.Facts(t, name).ByEngine(e) {
		if in.Name() != shared {
			found = append(found, in.Name())
		}
	}
	if len(found) != 1 {
		t.Fatalf("%s: want one private %s, found %v", name, e, found)
	}
	return found[0]
}

func mustFind(t *testing.T, fixtureName, id, subject string) check.Finding {
	t.Helper()
	fd, ok := fixture.Find(t, fixtureName, id, subject)
	if !ok {
		t.Fatalf("%s: no %s finding for %s", fixtureName, id, subject)
	}
	return fd
}

func evidence(fd check.Finding, key string) (check.Evidence, bool) {
	for _, e := range fd.Evidence {
		if e.Key == key {
			return e, true
		}
	}
	return check.Evidence{}, false
}

func TestRedisAuth(t *testing.T) {
	const id = "redis.auth"
	t.Run("pass: loopback and Unix socket only", func(t *testing.T) {
		sub := privateInstance(t, "redis-private", engine.Redis, sharedRedis)
		fd := mustFind(t, "redis-private", id, sub)
		if fd.Status != check.Pass || !strings.Contains(fd.Reason, "loopback") || !strings.Contains(fd.Reason, "unix:") {
			t.Fatalf("%s: %s", fd.Status, fd.Reason)
		}
		// The machine's Redis: arguments only, no config file, loopback.
		fd = mustFind(t, "redis-private", id, sharedRedis)
		if fd.Status != check.Pass {
			t.Fatalf("shared: %s: %s", fd.Status, fd.Reason)
		}
	})
	t.Run("fail: 0.0.0.0 without password or protected mode", func(t *testing.T) {
		sub := privateInstance(t, "redis-open", engine.Redis, sharedRedis)
		fd := mustFind(t, "redis-open", id, sub)
		if fd.Status != check.Fail || fd.Severity != check.Critical || !strings.Contains(fd.Reason, "0.0.0.0:") ||
			!strings.Contains(fd.Reason, "protected-mode is no") {
			t.Fatalf("%s %s: %s", fd.Status, fd.Severity, fd.Reason)
		}
		if ev, _ := evidence(fd, "authentication"); ev.Source != "live" {
			t.Errorf("authentication evidence %+v, want it from the live server", ev)
		}
		if fd.Fix == nil || len(fd.Fix.Config) != 1 || fd.Fix.Config[0].Key != "protected-mode" || fd.Fix.Config[0].Value != "yes" ||
			!strings.Contains(strings.Join(fd.Fix.Runtime, "\n"), "CONFIG SET protected-mode yes") {
			t.Errorf("fix %+v", fd.Fix)
		}
	})
	t.Run("pass: 0.0.0.0 with passwords", func(t *testing.T) {
		for _, sub := range []string{redisACL(t), redisRequirepass(t)} {
			fd := mustFind(t, "redis-auth", id, sub)
			if fd.Status != check.Pass || !strings.Contains(fd.Reason, "must authenticate (live)") {
				t.Fatalf("%s: %s: %s", sub, fd.Status, fd.Reason)
			}
		}
	})
	t.Run("pass: 0.0.0.0 under protected mode", func(t *testing.T) {
		if _, err := os.Stat(fixture.Path("net-listen-all")); err != nil {
			t.Fatalf("net-listen-all not recorded: %v", err)
		}
		sub := privateInstance(t, "net-listen-all", engine.Redis, sharedRedis)
		fd := mustFind(t, "net-listen-all", id, sub)
		if fd.Status != check.Pass || !strings.Contains(fd.Reason, "protected mode is in force") {
			t.Fatalf("%s: %s", fd.Status, fd.Reason)
		}
	})
	t.Run("unknown: sockets unreadable as nobody", func(t *testing.T) {
		sub := privateInstance(t, "redis-nonroot", engine.Redis, sharedRedis)
		fd := mustFind(t, "redis-nonroot", id, sub)
		if fd.Status != check.Unknown || !strings.Contains(fd.Reason, "permission denied") {
			t.Fatalf("%s: %s", fd.Status, fd.Reason)
		}
	})
}

func TestRedisPersistence(t *testing.T) {
	const id = "redis.persistence"
	t.Run("pass: AOF everysec, with its loss window and restart cost", func(t *testing.T) {
		sub := privateInstance(t, "redis-private", engine.Redis, sharedRedis)
		fd := mustFind(t, "redis-private", id, sub)
		if fd.Status != check.Pass || fd.Severity != check.Info || !strings.Contains(fd.Reason, "about 2 s") ||
			!strings.Contains(fd.Reason, "At restart Redis loads the AOF") {
			t.Fatalf("%s: %s", fd.Status, fd.Reason)
		}
		if ev, ok := evidence(fd, "AOF size"); !ok || strings.HasPrefix(ev.Value, "0 ") {
			t.Errorf("AOF size evidence %+v", ev)
		}
	})
	t.Run("pass: no persistence on the shared Redis", func(t *testing.T) {
		fd := mustFind(t, "redis-private", id, sharedRedis)
		if fd.Status != check.Pass || !strings.Contains(fd.Reason, "No persistence") {
			t.Fatalf("%s: %s", fd.Status, fd.Reason)
		}
	})
	t.Run("pass: RDB read from files", func(t *testing.T) {
		fd := mustFind(t, "redis-auth", id, redisACL(t))
		if fd.Status != check.Pass || !strings.Contains(fd.Reason, "RDB snapshots only (save 900 1)") || !strings.Contains(fd.Reason, "900 s") {
			t.Fatalf("%s: %s", fd.Status, fd.Reason)
		}
		if ev, _ := evidence(fd, "save"); !strings.HasPrefix(ev.Source, "file:") {
			t.Errorf("save evidence %+v, want it from the config file", ev)
		}
	})
	t.Run("fail: appendonly yes with appendfsync no", func(t *testing.T) {
		sub := privateInstance(t, "redis-open", engine.Redis, sharedRedis)
		fd := mustFind(t, "redis-open", id, sub)
		if fd.Status != check.Fail || fd.Fix == nil || fd.Fix.Config[0].Key != "appendfsync" || fd.Fix.Config[0].Value != "everysec" {
			t.Fatalf("%s: %s (%+v)", fd.Status, fd.Reason, fd.Fix)
		}
	})
	t.Run("unknown: configuration unknown", func(t *testing.T) {
		// A password-protected server with a rewritten command line refuses
		// to be asked, and nothing names its config file.
		fd := mustFind(t, "redis-auth", id, redisRequirepass(t))
		if fd.Status != check.Unknown || !strings.Contains(fd.Reason, "set-proc-title") || !strings.Contains(fd.Reason, "requires authentication") {
			t.Fatalf("%s: %s", fd.Status, fd.Reason)
		}
		// The compiled-in defaults are not what the server runs: evidence
		// must not show them as observed values.
		for _, name := range []string{"appendonly", "appendfsync", "save"} {
			ev, ok := evidence(fd, name)
			if !ok || !strings.HasPrefix(ev.Value, "unknown (the compiled-in default is") || ev.Source == "default" {
				t.Errorf("%s evidence %+v, want it unknown with the default named as such", name, ev)
			}
		}
	})
}

// The snapshot of a server whose ACL user has a password keeps the rule's
// shape (so auth reads the same) but never the password.
func TestRedisSnapshotHasNoSecret(t *testing.T) {
	f := fixture.Facts(t, "redis-auth")
	sub := redisACL(t)
	for _, in := range f.ByEngine(engine.Redis) {
		if in.Name() != sub {
			continue
		}
		if len(in.ConfigFiles) == 0 || in.SettingsSource != "files" || !in.Redis.AuthConfigured {
			t.Fatalf("config %v source %q auth %v (%s)", in.ConfigFiles, in.SettingsSource, in.Redis.AuthConfigured, in.Redis.AuthSource)
		}
	}
	b, err := os.ReadFile(fixture.Path("redis-auth"))
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(gunzip(t, b)), "fixture-secret-do-not-record") {
		t.Fatal("the ACL password is in the snapshot")
	}
}

// redis-auth runs two private servers bound to 0.0.0.0: one whose default
// ACL user has a password and whose command line shows its config file
// (set-proc-title no), one with requirepass and a rewritten command line.
func redisACL(t *testing.T) string {
	t.Helper()
	return redisAuthServer(t, true)
}

func redisRequirepass(t *testing.T) string {
	t.Helper()
	return redisAuthServer(t, false)
}

func redisAuthServer(t *testing.T, cmdlineVisible bool) string {
	t.Helper()
	var found []string
	for _, in := range fixture.Facts(t, "redis-auth").ByEngine(engine.Redis) {
		if in.Name() != sharedRedis && (len(in.Cmdline) > 1) == cmdlineVisible {
			found = append(found, in.Name())
		}
	}
	if len(found) != 1 {
		t.Fatalf("redis-auth: want one such server, found %v", found)
	}
	return found[0]
}

func gunzip(t *testing.T, b []byte) []byte {
	t.Helper()
	zr, err := gzip.NewReader(bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	out, err := io.ReadAll(zr)
	if err != nil {
		t.Fatal(err)
	}
	return out
}
