package check_test

import (
	"strings"
	"testing"

	"github.com/dbhost/dbhost/internal/check"
	"github.com/dbhost/dbhost/internal/engine"
	"github.com/dbhost/dbhost/internal/fixture"
)

// The mongo-* fixtures run one stand-in mongod (see tools/record) on a
// random port.
func mongoSubject(t *testing.T, name string) string {
	t.Helper()
	return privateInstance(t, name, engine.MongoDB, "")
}

func TestMongoDiscoveredFromFixtures(t *testing.T) {
	for name, version := range map[string]string{"mongo-8": "8.0.4", "mongo-6": "6.0.10", "mongo-4-mmapv1": "4.0.28"} {
		ins := fixture.Facts(t, name).ByEngine(engine.MongoDB)
		if len(ins) != 1 {
			t.Fatalf("%s: %d mongod", name, len(ins))
		}
		in := ins[0]
		if in.Version != version || in.User != "nobody" || len(in.ConfigFiles) != 1 || len(in.ConfigErrors) != 0 || in.Port == 0 {
			t.Errorf("%s: version %q user %q config %v errors %v port %d", name, in.Version, in.User, in.ConfigFiles, in.ConfigErrors, in.Port)
		}
		if in.Paths["data"] == "" || in.Paths["log"] == "" || !strings.HasPrefix(in.Mongo.StorageEngineSource, "file:") {
			t.Errorf("%s: paths %v engine from %q", name, in.Paths, in.Mongo.StorageEngineSource)
		}
	}
}

func TestMongoAuth(t *testing.T) {
	const id = "mongodb.auth"
	t.Run("pass: bound to loopback", func(t *testing.T) {
		fd := mustFind(t, "mongo-8", id, mongoSubject(t, "mongo-8"))
		if fd.Status != check.Pass || !strings.Contains(fd.Reason, "loopback") {
			t.Fatalf("%s: %s", fd.Status, fd.Reason)
		}
	})
	t.Run("pass: authorization enabled", func(t *testing.T) {
		fd := mustFind(t, "mongo-4-mmapv1", id, mongoSubject(t, "mongo-4-mmapv1"))
		if fd.Status != check.Pass {
			t.Fatalf("%s: %s", fd.Status, fd.Reason)
		}
	})
	t.Run("fail: bindIpAll without authorization", func(t *testing.T) {
		fd := mustFind(t, "mongo-6", id, mongoSubject(t, "mongo-6"))
		if fd.Status != check.Fail || fd.Severity != check.Critical || !strings.Contains(fd.Reason, "0.0.0.0:") {
			t.Fatalf("%s %s: %s", fd.Status, fd.Severity, fd.Reason)
		}
		ev, ok := evidence(fd, "net.bindIpAll")
		if !ok || ev.Value != "true" || !strings.HasPrefix(ev.Source, "file:") {
			t.Errorf("bindIpAll evidence %+v", ev)
		}
		if fd.Fix == nil || !strings.Contains(fd.Fix.Manual, "authorization: enabled") {
			t.Errorf("fix %+v", fd.Fix)
		}
	})
	t.Run("unknown: nothing readable as nobody", func(t *testing.T) {
		fd := mustFind(t, "mongo-nonroot", id, mongoSubject(t, "mongo-nonroot"))
		if fd.Status != check.Unknown || !strings.Contains(fd.Reason, "permission denied") {
			t.Fatalf("%s: %s", fd.Status, fd.Reason)
		}
	})
}

func TestMongoStorageEngine(t *testing.T) {
	const id = "mongodb.storage_engine"
	t.Run("pass: WiredTiger from storage.bson", func(t *testing.T) {
		for _, name := range []string{"mongo-8", "mongo-6"} {
			fd := mustFind(t, name, id, mongoSubject(t, name))
			ev, _ := evidence(fd, "storage engine")
			if fd.Status != check.Pass || ev.Value != "wiredTiger" || !strings.HasSuffix(ev.Source, "/storage.bson") {
				t.Fatalf("%s: %s: %s (%+v)", name, fd.Status, fd.Reason, ev)
			}
		}
	})
	t.Run("fail: MMAPv1 on 4.0", func(t *testing.T) {
		fd := mustFind(t, "mongo-4-mmapv1", id, mongoSubject(t, "mongo-4-mmapv1"))
		if fd.Status != check.Fail || fd.Severity != check.Warning || !strings.Contains(fd.Reason, "removed in 4.2") || fd.Fix == nil {
			t.Fatalf("%s: %s", fd.Status, fd.Reason)
		}
	})
	t.Run("unknown: config and data directory unreadable", func(t *testing.T) {
		fd := mustFind(t, "mongo-nonroot", id, mongoSubject(t, "mongo-nonroot"))
		if fd.Status != check.Unknown || !strings.Contains(fd.Reason, "permission denied") {
			t.Fatalf("%s: %s", fd.Status, fd.Reason)
		}
	})
}
