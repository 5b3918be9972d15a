package change_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/dbhost/dbhost/internal/change"
	"github.com/dbhost/dbhost/internal/engine"
	"github.com/dbhost/dbhost/internal/facts"
	"github.com/dbhost/dbhost/internal/host"
	"github.com/dbhost/dbhost/internal/testdb"
)

// TestSettingAndVersion1Undo changes a setting of a private PostgreSQL
// through the change layer, read back with Applied, and puts it back;
// then a version 1 journal's db-setting entry (what today's apply writes)
// finds the same server again in a "new process" (a fresh Config) and
// puts the setting back too.
func TestSettingAndVersion1Undo(t *testing.T) {
	testdb.Need(t, "root", os.Geteuid() == 0)
	s := testdb.Postgres(t, testdb.Options{})
	h, err := host.Open("/")
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	var in *facts.Instance
	for _, x := range facts.Gather(context.Background(), h, facts.Options{}).Instances {
		if x.Engine == engine.Postgres && x.Port == s.Port {
			in = x
		}
	}
	if in == nil {
		t.Fatalf("the private server on port %d was not discovered", s.Port)
	}
	ctx := context.Background()
	conn, err := engine.OpenSettings(ctx, h, in.Instance, engine.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	before := s.SQL(t, "SHOW work_mem")
	ref := change.ServerRef{Engine: string(in.Engine), Name: in.Name(), DataDir: in.DataDir, Port: in.Port, PID: in.PID, Start: change.StartTime(h, in.PID)}
	c, err := change.Open(filepath.Join(t.TempDir(), "j"), change.Config{Host: h})
	if err != nil {
		t.Fatal(err)
	}
	if pending, err := c.Setting(ctx, conn, ref, "work_mem", "7MB", false); err != nil || pending {
		t.Fatalf("Setting: pending %v, %v", pending, err)
	}
	if v := s.SQL(t, "SHOW work_mem"); v != "7MB" {
		t.Fatalf("work_mem is %s after the change", v)
	}
	if err := c.Restore(); err != nil {
		t.Fatal(err)
	}
	if v := s.SQL(t, "SHOW work_mem"); v != before {
		t.Fatalf("work_mem is %s after restore, was %s", v, before)
	}

	if err := conn.Change(ctx, "work_mem", "9MB", false); err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(t.TempDir(), "journal.json")
	v1 := fmt.Sprintf(`[{"kind":"db-setting","what":"%s work_mem","data":{"server":{"engine":%q,"name":%q,"data_dir":%q,"port":%d,"pid":%d},"key":"work_mem","saved":null,"old":%q}}]`,
		ref.Name, ref.Engine, ref.Name, ref.DataDir, ref.Port, ref.PID, before)
	os.WriteFile(file, []byte(v1), 0o600)
	if err := change.Recover(file, change.Config{}); err != nil {
		t.Fatal(err)
	}
	if v := s.SQL(t, "SHOW work_mem"); v != before {
		t.Fatalf("work_mem is %s after recovering the version 1 journal, was %s", v, before)
	}
}
