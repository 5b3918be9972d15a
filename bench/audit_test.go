// Package bench measures dbhost itself. Run with `make bench`; the README
// reports medians from bench/compare.sh and these benchmarks.
package bench

import (
	"context"
	"testing"

	"github.com/dbhost/dbhost/internal/check"
	"github.com/dbhost/dbhost/internal/engine"
	"github.com/dbhost/dbhost/internal/facts"
	"github.com/dbhost/dbhost/internal/fix"
	"github.com/dbhost/dbhost/internal/fixture"
	"github.com/dbhost/dbhost/internal/host"
)

// BenchmarkAuditLive is a full live audit of this machine: gathering every
// fact (process table, /proc, /sys, config files, database connections) and
// running the whole catalog.
func BenchmarkAuditLive(b *testing.B) {
	h, err := host.Open("/")
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		f := facts.Gather(ctx, h, check.GatherOptions(engine.Options{}))
		check.RenderFixes(check.Run(f, check.Selector{}), fix.ContextFrom(f))
	}
}

// BenchmarkJudge runs the catalog on already gathered facts: the cost of the
// checks alone, with their fixes rendered as audit does.
func BenchmarkJudge(b *testing.B) {
	f := fixture.Facts(b, "baseline")
	b.ReportAllocs()
	for b.Loop() {
		check.RenderFixes(check.Run(f, check.Selector{}), fix.ContextFrom(f))
	}
}

// BenchmarkAuditSnapshot opens and judges a recorded snapshot (what a fleet
// server does per host): unpacking, gathering from files, judging.
func BenchmarkAuditSnapshot(b *testing.B) {
	path := fixture.Path("baseline")
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		h, err := host.OpenSnapshot(path)
		if err != nil {
			b.Fatal(err)
		}
		f := facts.Gather(ctx, h, check.GatherOptions(engine.Options{}))
		check.RenderFixes(check.Run(f, check.Selector{}), fix.ContextFrom(f))
		h.Close()
	}
}
