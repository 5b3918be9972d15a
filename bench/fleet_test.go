package bench

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/dbhost/dbhost/internal/fixture"
	"github.com/dbhost/dbhost/internal/fleet"
)

// fleetDir makes n snapshot files in a temporary directory: symbolic links
// to the recorded hosts, taken in turn (500 is each of the 128 about four
// times). Nothing is written to the repository.
func fleetDir(tb testing.TB, n int) []string {
	tb.Helper()
	names := fixture.Names(tb)
	recorded := make([]string, len(names))
	for i, n := range names {
		recorded[i] = fixture.Path(n)
	}
	dir := tb.TempDir()
	files := make([]string, n)
	for i := range files {
		files[i] = filepath.Join(dir, fmt.Sprintf("host%04d.tar.gz", i))
		if err := os.Symlink(recorded[i%len(recorded)], files[i]); err != nil {
			tb.Fatal(err)
		}
	}
	return files
}

// fleetSize is the number of snapshots of BenchmarkFleetReport:
// DBHOST_FLEET_SNAPSHOTS, default 500.
func fleetSize(tb testing.TB) int {
	n := 500
	if v := os.Getenv("DBHOST_FLEET_SNAPSHOTS"); v != "" {
		var err error
		if n, err = strconv.Atoi(v); err != nil || n < 1 {
			tb.Fatalf("DBHOST_FLEET_SNAPSHOTS=%q: want a positive number", v)
		}
	}
	return n
}

// BenchmarkFleetReport is 'dbhost fleet report' over 500 snapshots (or
// DBHOST_FLEET_SNAPSHOTS): judging every snapshot with one worker per CPU,
// building the report and writing its HTML. bench/fleet.sh measures the
// command itself, with its peak RSS.
func BenchmarkFleetReport(b *testing.B) {
	files := fleetDir(b, fleetSize(b))
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		snaps, errs := fleet.LoadAll(ctx, files, 0, nil)
		if len(errs) > 0 {
			b.Fatalf("%d snapshots unreadable: %v", len(errs), errs[0])
		}
		if err := fleet.WriteHTML(io.Discard, fleet.Build(snaps, errs)); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Milliseconds())/float64(b.N)/float64(len(files)), "ms/snapshot")
}

// BenchmarkFleetBuild is the report alone, from snapshots already judged:
// majorities, the matrix, the HTML.
func BenchmarkFleetBuild(b *testing.B) {
	snaps, errs := fleet.LoadAll(context.Background(), fleetDir(b, fleetSize(b)), 0, nil)
	b.ReportAllocs()
	for b.Loop() {
		if err := fleet.WriteHTML(io.Discard, fleet.Build(snaps, errs)); err != nil {
			b.Fatal(err)
		}
	}
}
