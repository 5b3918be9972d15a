package postgres_test

import (
	"testing"

	"github.com/dbhost/dbhost/internal/engine"
	"github.com/dbhost/dbhost/internal/engine/postgres"
	"github.com/dbhost/dbhost/internal/host"
	"github.com/dbhost/dbhost/internal/testdb"
)

// TestFormatBytes: proposals are whole kB, MB or GB, rounded down to the
// setting's block.
func TestFormatBytes(t *testing.T) {
	for _, c := range []struct {
		b, block uint64
		want     string
	}{
		{128 << 10, 8 << 10, "128kB"},
		{130 << 10, 8 << 10, "128kB"},
		{64 << 10, 1 << 10, "64kB"},
		{(1 << 20) + 1, 1 << 10, "1MB"},
		{5920 << 20, 8 << 10, "5920MB"},
		{2 << 30, 1 << 10, "2GB"},
		{(2 << 30) + (1 << 20), 1 << 10, "2049MB"},
	} {
		if got := postgres.FormatBytes(c.b, c.block); got != c.want {
			t.Errorf("FormatBytes(%d, %d) = %q, want %q", c.b, c.block, got, c.want)
		}
	}
}

// TestIntegrationMemory: a live server and its files give the same plan;
// read from files, what nothing sets is the default, marked as such.
func TestIntegrationMemory(t *testing.T) {
	needPG(t)
	s := testdb.Postgres(t, testdb.Options{Settings: map[string]string{"shared_buffers": "48MB", "work_mem": "3MB", "max_connections": "30"}})
	h, err := host.Open("/")
	if err != nil {
		t.Fatal(err)
	}
	for _, opts := range []engine.Options{{}, {NoConnect: true}} {
		in := inspectPID(t, h, s.PID, opts)
		plan := in.Profile().Memory(in)
		sb, _ := plan.MainCache()
		wm, _ := plan.Part("work_mem")
		mw, _ := plan.Part("maintenance_work_mem")
		if sb.Key != "shared_buffers" || sb.Bytes != 48<<20 || !sb.Known || sb.Default() || sb.Min != 128<<10 {
			t.Errorf("%s: shared_buffers %+v", in.SettingsSource, sb)
		}
		if wm.Bytes != 3<<20 || !wm.PerConn || plan.N != 30 || plan.Factor != 3 || wm.Propose(1) != "64kB" {
			t.Errorf("%s: work_mem %+v, %d connections x %d", in.SettingsSource, wm, plan.N, plan.Factor)
		}
		if mw.Bytes != 64<<20 || mw.Times != 3 {
			t.Errorf("%s: maintenance_work_mem %+v", in.SettingsSource, mw)
		}
		if in.SettingsSource == "files" && !mw.Default() {
			t.Errorf("files: maintenance_work_mem is set nowhere, yet %+v", mw)
		}
	}
}
