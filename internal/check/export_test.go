package check

import "github.com/dbhost/dbhost/internal/facts"

// BudgetOf exposes the host budget for the tests: the memory for the
// databases, and by instance its share and what it plans (fixed,
// connections and fork headroom).
func BudgetOf(f *facts.Facts) (total uint64, share, planned map[string]uint64) {
	all, ram, ramEv, why := sizingAll(f)
	if why != "" {
		return 0, nil, nil
	}
	hp := planHost(f, all, ram, ramEv)
	share, planned = map[string]uint64{}, map[string]uint64{}
	for i, m := range all {
		if m.plan.Parts == nil {
			continue
		}
		share[m.in.Name()] = hp.share[i]
		planned[m.in.Name()] = m.fixed + m.conns + m.fork
	}
	return hp.total, share, planned
}

// CommitmentOf exposes the planned commitment and CommitLimit under mode 2.
func CommitmentOf(f *facts.Facts) (need, limit uint64) {
	c, why := readCommit(f)
	if why != "" {
		return 0, 0
	}
	need, _ = strictNeed(f, c)
	return need, c.limit
}
