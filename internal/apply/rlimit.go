package apply

import (
	"fmt"

	"golang.org/x/sys/unix"

	"github.com/dbhost/dbhost/internal/change"
	"github.com/dbhost/dbhost/internal/check"
	"github.com/dbhost/dbhost/internal/fix"
)

// The resource limits of running servers that limits fixes raise
// (fix.Rlimit, the structured "prlimit --pid" of their runtime commands)
// are planned as values whose path is /proc/PID/limits:ITEM, old and new
// "SOFT:HARD", and set through change.Changer.Rlimit, which journals the
// previous limits. A limit that cannot be set, or no longer applies (the
// process ended), is said in the plan or in the change set's notes.
//
// Without CAP_SYS_RESOURCE (root in some containers and VMs) the limit is
// set from a thread that took the server's user and group IDs. That thread
// may lower the hard limit but never raise it: a raise above the current
// hard limit is left out of the plan, and so is a lowering of the hard
// limit, which a rollback could not raise back.

// rlimitAllowed checks a planned limit value ("SOFT:HARD").
func rlimitAllowed(p, v string) error {
	if _, ok := change.ParseLimitPair(v); !ok {
		return fmt.Errorf("refusing to set %s to %q: not SOFT:HARD", p, v)
	}
	return nil
}

func isRlimitPath(p string) bool {
	_, _, ok := change.ParseRlimitPath(p)
	return ok
}

// planRlimits plans the running processes' limits of the selected
// findings, one value per process and item; what cannot be set is said in
// the notes.
func planRlimits(cfg change.Config, selected []check.Finding) (values []ValuePlan, notes []string) {
	capable := cfg.HasSysResource()
	seen := map[string]int{}
	for _, f := range selected {
		t := Target{ID: f.ID, Subject: f.Subject}.String()
		for _, rl := range f.Fix.Rlimits {
			if !change.RlimitItem(rl.Item) || rl.PID <= 0 || rl.Soft > rl.Hard {
				notes = append(notes, fmt.Sprintf("%s: command not run: %s (dbhost does not set this limit)", t, rl.Command()))
				continue
			}
			p := change.RlimitPath(rl.PID, rl.Item)
			if i, ok := seen[p]; ok {
				values[i].Findings = append(values[i].Findings, t)
				continue
			}
			v, why := planRlimit(cfg, rl, capable)
			if why != "" {
				notes = append(notes, fmt.Sprintf("%s: %s not set now: %s; the persistent limits apply from the server's next start", t, rl.Command(), why))
				continue
			}
			v.Findings = []string{t}
			seen[p] = len(values)
			values = append(values, v)
		}
	}
	return values, notes
}

// planRlimit decides the limits set for one process, or why none.
func planRlimit(cfg change.Config, rl fix.Rlimit, capable bool) (ValuePlan, string) {
	id, err := cfg.ReadIdentity(rl.PID)
	if err != nil {
		return ValuePlan{}, fmt.Sprintf("process %d cannot be read (%v)", rl.PID, err)
	}
	old, err := cfg.ReadRlimit(rl.PID, rl.Item)
	if err != nil {
		return ValuePlan{}, err.Error()
	}
	want := unix.Rlimit{Cur: rl.Soft, Max: rl.Hard}
	if !capable {
		switch {
		case !id.Settable:
			return ValuePlan{}, fmt.Sprintf("process %d has differing real, effective and saved IDs, and dbhost lacks CAP_SYS_RESOURCE", rl.PID)
		case want.Max > old.Max:
			return ValuePlan{}, fmt.Sprintf("raising the hard limit of process %d from %s to %s needs CAP_SYS_RESOURCE, which this dbhost process lacks",
				rl.PID, fix.FormatRlimit(old.Max), fix.FormatRlimit(want.Max))
		case want.Max < old.Max:
			// Lowering the hard limit could not be undone without
			// the capability: keep it, set the soft limit.
			want.Max = old.Max
		}
	}
	return ValuePlan{Path: change.RlimitPath(rl.PID, rl.Item), Old: change.FormatLimitPair(old), New: change.FormatLimitPair(want), Unchanged: old == want}, ""
}

// rlimitCommand reports whether a runtime command of f is the prlimit of
// one of its structured limits (which Build plans, or says why not).
func rlimitCommand(f *fix.Fix, cmd string) bool {
	for _, rl := range f.Rlimits {
		if rl.Command() == cmd {
			return true
		}
	}
	return false
}
