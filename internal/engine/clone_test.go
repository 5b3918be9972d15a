package engine

import "testing"

// TestInstanceClone catches a Clone that shares the settings, paths or
// engine facts with the original.
func TestInstanceClone(t *testing.T) {
	in := &Instance{Engine: Postgres, Port: 5432, Settings: map[string]Setting{"shared_buffers": {Value: "128MB", Source: "live"}},
		Configured: map[string]Setting{"work_mem": {Value: "4MB"}}, Paths: map[string]string{"wal": "/wal"}, Cmdline: []string{"postgres"},
		Postgres: &PostgresInfo{Databases: []PGDatabase{{Name: "app"}}}}
	c := in.Clone()
	c.Settings["shared_buffers"] = Setting{Value: "4GB"}
	delete(c.Configured, "work_mem")
	c.Paths["wal"] = "/elsewhere"
	c.Cmdline[0] = "x"
	c.Postgres.Databases[0].Name = "other"
	if in.SettingValue("shared_buffers") != "128MB" || len(in.Configured) != 1 || in.Paths["wal"] != "/wal" || in.Cmdline[0] != "postgres" || in.Postgres.Databases[0].Name != "app" {
		t.Errorf("changing the clone changed the original: %+v", in)
	}
	if (*Instance)(nil).Clone() != nil {
		t.Error("a nil instance clones to non-nil")
	}
}
