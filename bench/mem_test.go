package bench

import (
	"context"
	"testing"

	_ "github.com/dbhost/dbhost/internal/engine/all"
	"github.com/dbhost/dbhost/internal/host"
	"github.com/dbhost/dbhost/internal/mem"
)

// BenchmarkMemScan is a whole-host `dbhost mem` scan of this machine: the
// process table, maps + smaps_rollup + status of every process, smaps of
// those mapping shared regions, the regions' stat, /proc/meminfo and the
// instances (discovered without connecting).
func BenchmarkMemScan(b *testing.B) {
	h, err := host.Open("/")
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		r, err := mem.Scan(ctx, h, mem.Options{})
		if err != nil {
			b.Fatal(err)
		}
		if len(r.Processes) == 0 {
			b.Fatal("no process read")
		}
	}
}
