package bench

import (
	"context"
	"testing"

	"github.com/dbhost/dbhost/internal/contention"
	"github.com/dbhost/dbhost/internal/host"
)

// BenchmarkContentionSample is one sampling pass of `dbhost contention`
// on this machine, without the interval's sleep: per-CPU perf counters,
// /proc/stat and /proc/loadavg, the process table, every database
// thread's status and one query-counter round trip per instance. A
// measurement is two passes; --watch is one pass per interval.
func BenchmarkContentionSample(b *testing.B) {
	h, err := host.Open("/")
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	s, err := contention.NewSampler(ctx, h, contention.Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	b.ReportAllocs()
	for b.Loop() {
		s.Sample(ctx)
	}
	b.ReportMetric(float64(len(s.Instances())), "instances")
}

// BenchmarkContentionCompare turns two passes into rates and verdicts.
func BenchmarkContentionCompare(b *testing.B) {
	h, err := host.Open("/")
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	s, err := contention.NewSampler(ctx, h, contention.Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	x, y := s.Sample(ctx), s.Sample(ctx)
	c := contention.Assumed("benchmark")
	b.ReportAllocs()
	for b.Loop() {
		contention.Compare(x, y, c)
	}
}
