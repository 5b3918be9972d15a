package fix_test

import "github.com/dbhost/dbhost/internal/fix"

// shownSteps are the README's apply-now steps, as the runbook gives them.
func shownSteps(ctx fix.Context, items []fix.Item) []shownStep {
	var out []shownStep
	for _, s := range fix.Runbook(ctx, items) {
		out = append(out, shownStep{cmd: s.Command, restart: s.Phase == fix.PhaseRestart})
	}
	return out
}
