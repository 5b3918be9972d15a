package mongo_test

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/dbhost/dbhost/internal/engine"
	"github.com/dbhost/dbhost/internal/engine/mongo"
	"github.com/dbhost/dbhost/internal/engine/mongo/mongotest"
	"github.com/dbhost/dbhost/internal/host"
	"github.com/dbhost/dbhost/internal/testdb"
)

// inspect discovers the instance of one PID on the live host, with its
// listeners, the way engine.Discover does.
func inspect(t *testing.T, pid int) *engine.Instance {
	t.Helper()
	h, err := host.Open("/")
	if err != nil {
		t.Fatal(err)
	}
	tbl, err := engine.ReadTable(h)
	if err != nil {
		t.Fatal(err)
	}
	p, ok := tbl.Get(pid)
	if !ok {
		t.Fatalf("pid %d not in the process table", pid)
	}
	for _, d := range engine.Profiles() {
		if d.Engine() != engine.MongoDB {
			continue
		}
		if !d.Match(p, tbl) {
			t.Fatalf("detector does not match %+v", p)
		}
		in, err := d.Inspect(context.Background(), h, p, tbl, engine.Options{})
		if err != nil || in == nil {
			t.Fatalf("inspect: %v", err)
		}
		engine.AttachListeners(h, []*engine.Instance{in})
		return in
	}
	t.Fatal("no MongoDB detector registered")
	return nil
}

func TestStandInDiscovered(t *testing.T) {
	if testing.Short() {
		t.Skip("integration test")
	}
	s := mongotest.Start(t, mongotest.Options{Version: "8.0.4"})
	in := inspect(t, s.PID)
	if in.Comm != "mongod" || in.Version != "8.0.4" || in.VersionSource != s.Bin+" --version" {
		t.Errorf("comm %q version %q from %q", in.Comm, in.Version, in.VersionSource)
	}
	if in.User != "nobody" || in.Port != s.Port || in.DataDir != s.DBPath {
		t.Errorf("user %q port %d datadir %q", in.User, in.Port, in.DataDir)
	}
	if len(in.ConfigFiles) != 1 || in.ConfigFiles[0] != s.Conf || len(in.ConfigErrors) != 0 {
		t.Errorf("config files %v errors %v", in.ConfigFiles, in.ConfigErrors)
	}
	if got := in.Settings["net.bindip"]; got.Value != "127.0.0.1" || !strings.HasPrefix(got.Source, "file:"+s.Conf+":") {
		t.Errorf("net.bindip = %+v", got)
	}
	if in.Mongo.StorageEngine != "wiredTiger" || in.Mongo.StorageEngineSource != "file:"+s.DBPath+"/storage.bson" {
		t.Errorf("storage engine %q from %q", in.Mongo.StorageEngine, in.Mongo.StorageEngineSource)
	}
	if in.Paths["log"] != s.Dir+"/log" {
		t.Errorf("paths %v", in.Paths)
	}
	want := map[string]bool{fmt.Sprintf("127.0.0.1:%d", s.Port): false, fmt.Sprintf("unix:%s/run/mongodb-%d.sock", s.Dir, s.Port): false}
	for _, l := range in.Listen {
		if _, ok := want[l.String()]; ok {
			want[l.String()] = true
		}
	}
	for k, seen := range want {
		if !seen {
			t.Errorf("listener %s not found in %v", k, in.Listen)
		}
	}
	if on, _ := mongo.AuthEnforced(in); on {
		t.Error("authorization reported on")
	}
}

func TestStandInBindAllWithAuth(t *testing.T) {
	if testing.Short() {
		t.Skip("integration test")
	}
	s := mongotest.Start(t, mongotest.Options{Version: "6.0.10", Conf: func(dir string, port int) string {
		return fmt.Sprintf("storage:\n  dbPath: %s/db\nnet:\n  port: %d\n  bindIpAll: true\n  unixDomainSocket:\n    enabled: false\nsecurity:\n  authorization: enabled\n", dir, port)
	}})
	in := inspect(t, s.PID)
	if in.Version != "6.0.10" {
		t.Errorf("version %q", in.Version)
	}
	if len(in.Listen) != 1 || !in.Listen[0].Wildcard() || in.Listen[0].Port != s.Port {
		t.Errorf("listen %v", in.Listen)
	}
	if on, by := mongo.AuthEnforced(in); !on || by != "security.authorization" {
		t.Errorf("auth %v by %s", on, by)
	}
}

func TestStandInPrivate(t *testing.T) {
	if testing.Short() {
		t.Skip("integration test")
	}
	testdb.Need(t, "root (files readable by root only)", os.Geteuid() == 0)
	s := mongotest.Start(t, mongotest.Options{Version: "8.0.4", User: "root", Private: true})
	in := inspect(t, s.PID)
	if in.User != "root" || in.Version != "8.0.4" {
		t.Errorf("user %q version %q", in.User, in.Version)
	}
}
