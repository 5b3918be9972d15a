package fix_test

import (
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/dbhost/dbhost/internal/fix"
	"github.com/dbhost/dbhost/internal/fixture"
)

// shownSteps are the README's apply-now steps, as the runbook gives them.
func shownSteps(ctx fix.Context, items []fix.Item) []shownStep {
	var out []shownStep
	for _, s := range fix.Runbook(ctx, items) {
		out = append(out, shownStep{cmd: s.Command, restart: s.Phase == fix.PhaseRestart})
	}
	return out
}

// recordedHosts names every recorded host.
func recordedHosts(t *testing.T) []string {
	paths, err := filepath.Glob(filepath.Join(fixture.Dir(), "*.tar.gz"))
	if err != nil || len(paths) == 0 {
		t.Fatalf("no recorded hosts in %s: %v", fixture.Dir(), err)
	}
	var out []string
	for _, p := range paths {
		out = append(out, strings.TrimSuffix(filepath.Base(p), ".tar.gz"))
	}
	sort.Strings(out)
	return out
}
