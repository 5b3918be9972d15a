package plan

import (
	"fmt"
	"sort"
	"strings"

	"github.com/dbhost/dbhost/internal/check"
	"github.com/dbhost/dbhost/internal/facts"
	"github.com/dbhost/dbhost/internal/fix"
)

// MaxRounds bounds how often derived values are recomputed: each round
// judges the planned host and takes in what is still off (the pool for the
// planned shared_buffers, the overcommit ratio for the planned caches).
// The recorded hosts settle in two to four.
const MaxRounds = 6

// HostPlan is every fix of one run, decided together.
type HostPlan struct {
	// Observed is the host as it is, judged.
	Observed []check.Finding `json:"-"`
	// Items are the fixes the plan applies, one value per setting, in
	// severity order: what `fix --out` renders and `fix --apply` applies.
	Items []fix.Item `json:"items"`
	// Findings are the failing findings the plan fixes, each with its
	// planned fix (the observed finding, its fix replaced): apply's input.
	Findings []check.Finding `json:"-"`
	// Planned is the host after the plan, judged.
	Planned []check.Finding `json:"-"`
	// Conflicts are settings findings want different values for.
	Conflicts []Conflict `json:"conflicts,omitempty"`
	// Refusals name the checks that make the plan unsafe; a plan with any
	// is never applied.
	Refusals []Refusal `json:"refusals,omitempty"`
	// Unsettled lists what still fails on the planned host for a reason
	// the plan does not change (a reboot, a step left to a person).
	Unsettled []string `json:"unsettled,omitempty"`
	// Dropped are fixes left out because their own check cannot judge the
	// planned host (a non-root run cannot see a server's mappings): a
	// change nothing can prove safe is not made.
	Dropped []string `json:"dropped,omitempty"`
	// Notes are what the model could not represent.
	Notes  []string `json:"notes,omitempty"`
	Rounds int      `json:"rounds"`
}

// Refusal is one reason the plan is not safe: a check it fixes still fails
// on the planned host, or one that passed fails.
type Refusal struct {
	ID      string `json:"id"`
	Subject string `json:"subject"`
	// Was is the status on the host today.
	Was check.Status `json:"was"`
	// Why is the check's reason on the planned host.
	Why string `json:"why"`
}

func (r Refusal) String() string {
	what := "still fails"
	if r.Was == check.Pass {
		what = "passes today and would fail"
	}
	return fmt.Sprintf("%s %s: %s under the plan: %s", r.ID, subjectText(r.Subject), what, r.Why)
}

func subjectText(s string) string {
	if s == "" || s == check.SubjectHost {
		return "(host)"
	}
	return "(" + s + ")"
}

// Refused reports whether the plan must not be applied.
func (p *HostPlan) Refused() bool { return len(p.Refusals) > 0 }

// Changes reports whether the plan changes anything.
func (p *HostPlan) Changes() bool { return len(p.Items) > 0 }

// key identifies a finding across the observed and the planned host.
type key struct{ id, subject string }

func keyOf(fd check.Finding) key { return key{fd.ID, fd.Subject} }

// fixable reports whether a finding brings a fix dbhost may plan: a
// waived finding is left alone.
func fixable(fd check.Finding) bool {
	return fd.Status == check.Fail && fd.Fix != nil && !fd.Fix.Empty() && !fd.Untrusted && fd.Waiver == nil
}

// Make decides every fix of the selected checks together. It judges the
// observed host, plans the fixes of what fails, then judges the host as it
// would be with every planned value in place and takes in the fixes of what
// still fails there (derived values follow the planned ones), until nothing
// changes. The settled plan is refused if, on the planned host, a check it
// fixes still fails or a check that passed fails.
func Make(f *facts.Facts, sel check.Selector) *HostPlan { return MakeWaived(f, sel, nil) }

// MakeWaived is Make leaving accepted findings alone: waive (when not nil)
// marks the findings an operator accepts (check.Finding.Waiver) on the
// observed and on each planned host, and no waived finding's fix is
// planned. A plan that would make a passing check fail is still refused.
func MakeWaived(f *facts.Facts, sel check.Selector, waive func([]check.Finding)) *HostPlan {
	run := func(g *facts.Facts) []check.Finding {
		fds := check.Run(g, sel)
		if waive != nil {
			waive(fds)
		}
		return fds
	}
	p := &HostPlan{Observed: run(f)}
	var items []fix.Item
	index := map[key]int{}
	for _, fd := range p.Observed {
		if fixable(fd) {
			index[keyOf(fd)] = len(items)
			items = append(items, fix.Item{ID: fd.ID, Subject: fd.Subject, Fix: fd.Fix})
		}
	}
	disputed := map[key]bool{}
	var res resolution
	var g *facts.Facts
	settled := false
	for p.Rounds = 1; p.Rounds <= MaxRounds; p.Rounds++ {
		res = resolve(items)
		for i := range res.dropped {
			disputed[key{items[i].ID, items[i].Subject}] = true
		}
		g, p.Notes = Model(f, res.kept)
		p.Planned = run(g)
		dropped := dropUnjudged(&items, index, disputed, p.Planned)
		p.Dropped = append(p.Dropped, dropped...)
		if !takeIn(&items, index, disputed, p.Planned) && len(dropped) == 0 {
			settled = true
			break
		}
	}
	if p.Rounds > MaxRounds {
		p.Rounds = MaxRounds
	}
	p.Items, p.Conflicts = res.kept, res.conflicts
	p.Findings = findingsFor(p.Observed, p.Planned, res.kept)
	p.judge(res.kept)
	p.Notes = shownNotes(p.Notes)
	for _, n := range p.Notes {
		// The model says so when a server it restarts could not start
		// (huge_pages=on beside too small a pool): no check can see a
		// server that is not running.
		if strings.Contains(n, " would not start") {
			p.Refusals = append(p.Refusals, Refusal{ID: "plan", Subject: check.SubjectHost, Was: check.Pass, Why: n})
		}
	}
	if !settled {
		p.Refusals = append(p.Refusals, Refusal{ID: "plan", Subject: check.SubjectHost, Was: check.Fail,
			Why: fmt.Sprintf("the planned values did not settle in %d rounds (a derived value keeps changing)", MaxRounds)})
	}
	return p
}

// dropUnjudged removes from items the fixes whose own finding is unknown
// on the planned host, marks them so that no later round brings them back,
// and says why for each.
func dropUnjudged(items *[]fix.Item, index map[key]int, disputed map[key]bool, planned []check.Finding) []string {
	unknown := map[key]string{}
	for _, fd := range planned {
		if fd.Status == check.Unknown {
			unknown[keyOf(fd)] = fd.Reason
		}
	}
	var out []string
	kept := (*items)[:0]
	for _, it := range *items {
		k := key{it.ID, it.Subject}
		if why, ok := unknown[k]; ok {
			disputed[k] = true
			out = append(out, fmt.Sprintf("%s %s: left out, its check cannot judge the planned host: %s", it.ID, subjectText(it.Subject), why))
			continue
		}
		kept = append(kept, it)
	}
	*items = kept
	for k := range index {
		delete(index, k)
	}
	for i, it := range kept {
		index[key{it.ID, it.Subject}] = i
	}
	return out
}

// takeIn adds to items the fixes of findings still failing on the planned
// host: a finding already planned has its fix's new values merged over its
// planned ones; a new failure brings its fix. Disputed findings stay out.
// It reports whether any setting changed.
func takeIn(items *[]fix.Item, index map[key]int, disputed map[key]bool, planned []check.Finding) bool {
	changed := false
	for _, fd := range planned {
		k := keyOf(fd)
		if !fixable(fd) || disputed[k] {
			continue
		}
		i, ok := index[k]
		if !ok {
			index[k] = len(*items)
			*items = append(*items, fix.Item{ID: fd.ID, Subject: fd.Subject, Fix: fd.Fix})
			changed = true
			continue
		}
		old := (*items)[i].Fix
		merged := mergeFix(old, fd.Fix)
		if !sameSettings(settingsOf(old), settingsOf(merged)) {
			(*items)[i].Fix = merged
			changed = true
		}
	}
	return changed
}

func sameSettings(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}

// judge refuses the plan for every check that, on the planned host, still
// fails although the plan fixes it, or fails although it passes today.
// What still fails for a reason the plan does not change (a reboot, a
// manual step, a conflict) is listed, not refused.
func (p *HostPlan) judge(kept []fix.Item) {
	before := map[key]check.Finding{}
	for _, fd := range p.Observed {
		before[keyOf(fd)] = fd
	}
	planned := map[key]*fix.Fix{}
	for _, it := range kept {
		planned[key{it.ID, it.Subject}] = it.Fix
	}
	disputed := map[string]bool{}
	for _, c := range p.Conflicts {
		if c.Kept == "" {
			for w := range c.Wishes {
				disputed[w] = true
			}
		}
	}
	for _, fd := range p.Planned {
		if fd.Status != check.Fail || fd.Untrusted {
			continue
		}
		k := keyOf(fd)
		was, seen := before[k]
		switch fx, ok := planned[k]; {
		case guards[fd.ID] && (ok || disputed[tag(fix.Item{ID: fd.ID, Subject: fd.Subject})]):
			// The plan's own safety: whatever the reason, a plan that
			// leaves memory over budget, strict overcommit short or a
			// pool short of a server it changes is not applied.
			p.Refusals = append(p.Refusals, Refusal{ID: fd.ID, Subject: fd.Subject, Was: was.Status, Why: fd.Reason})
		case ok && !modelled(fx, p.notesOn(fix.Item{ID: fd.ID, Subject: fd.Subject})):
			if len(settingsOf(fx)) == 0 {
				continue // a step left to a person: the fix says so itself
			}
			p.Unsettled = append(p.Unsettled, fmt.Sprintf("%s %s: passes only after %s", fd.ID, subjectText(fd.Subject), unmodelledPart(fx)))
		case ok:
			p.Refusals = append(p.Refusals, Refusal{ID: fd.ID, Subject: fd.Subject, Was: was.Status, Why: fd.Reason})
		case seen && was.Status == check.Pass:
			p.Refusals = append(p.Refusals, Refusal{ID: fd.ID, Subject: fd.Subject, Was: check.Pass, Why: fd.Reason})
		case !seen:
			p.Refusals = append(p.Refusals, Refusal{ID: fd.ID, Subject: fd.Subject, Was: "absent", Why: fd.Reason})
		}
	}
	sort.Strings(p.Unsettled)
}

// guards are the checks that judge the plan's memory as a whole: the
// budget, the commit limit under strict overcommit, the huge page pool.
var guards = map[string]bool{"mem.db_budget": true, "mem.commit_limit": true, "mem.hugepages.postgres": true, "mem.hugepages.mysql": true}

// modelled reports whether the planned host shows everything a fix does:
// a change that takes effect only at the next boot (the kernel command
// line, fstab), a command the model does not run (zfs set, tuned-adm), a
// step left to a person, or a part the model says it could not represent
// cannot show as passing before it is done.
func modelled(f *fix.Fix, notes []string) bool {
	return len(f.Cmdline) == 0 && len(f.Mount) == 0 && len(f.Runtime) == 0 && len(f.TunedDisk) == 0 &&
		f.Manual == "" && !f.HostOnly && len(notes) == 0
}

// notesOn are the model's notes about one item (they start with its tag).
func (p *HostPlan) notesOn(it fix.Item) []string {
	var out []string
	t := tag(it)
	for _, n := range p.Notes {
		if strings.HasPrefix(n, t+":") || strings.HasPrefix(n, t+" ") {
			out = append(out, n)
		}
	}
	return out
}

func unmodelledPart(f *fix.Fix) string {
	var parts []string
	if len(f.Cmdline) > 0 {
		parts = append(parts, "a reboot with the new kernel command line")
	}
	if len(f.Mount) > 0 {
		parts = append(parts, "the mount change")
	}
	if len(f.Runtime) > 0 || len(f.TunedDisk) > 0 {
		parts = append(parts, "its commands ("+strings.Join(f.Runtime, "; ")+")")
	}
	if f.HostOnly {
		parts = append(parts, "the change on the container's host")
	}
	if f.Manual != "" {
		parts = append(parts, "the step left to a person")
	}
	if len(parts) == 0 {
		parts = append(parts, "what the model could not show (see the notes)")
	}
	return strings.Join(parts, " and ")
}

// findingsFor returns, for each planned item, its finding with the planned
// fix: the observed finding where there is one (its evidence is today's),
// else the planned host's (a failure the plan's own values cause and fix).
func findingsFor(observed, planned []check.Finding, kept []fix.Item) []check.Finding {
	by := map[key]check.Finding{}
	for _, fd := range planned {
		by[keyOf(fd)] = fd
	}
	for _, fd := range observed {
		by[keyOf(fd)] = fd
	}
	out := make([]check.Finding, 0, len(kept))
	for _, it := range kept {
		fd := by[key{it.ID, it.Subject}]
		fd.ID, fd.Subject, fd.Status, fd.Fix = it.ID, it.Subject, check.Fail, it.Fix
		out = append(out, fd)
	}
	return out
}

// mergeFix lays the values of a fix computed on the planned host over the
// planned fix: a setting in both takes the new value, one in either is
// kept (the planned host shows huge_pages=on already set, so the new fix
// may ask only for the pool).
func mergeFix(old, nw *fix.Fix) *fix.Fix {
	m := *old
	m.Sysctl = mergeKV(old.Sysctl, nw.Sysctl)
	m.SysctlNow = mergeKV(old.SysctlNow, nw.SysctlNow)
	m.Sysfs = mergeKV(old.Sysfs, nw.Sysfs)
	m.TunedDisk = mergeKV(old.TunedDisk, nw.TunedDisk)
	m.Udev = mergeBy(old.Udev, nw.Udev, func(u fix.UdevAttr) string { return u.Device + "/" + u.Attr })
	m.Config = mergeBy(old.Config, nw.Config, func(c fix.ConfigChange) string { return c.Instance + "/" + c.Key })
	m.Limits = mergeBy(old.Limits, nw.Limits, func(l fix.LimitLine) string { return l.Domain + "/" + l.Type + "/" + l.Item })
	m.Dropins = mergeBy(old.Dropins, nw.Dropins, func(d fix.Dropin) string { return d.Unit + "/" + d.Section + "/" + d.Key })
	m.Rlimits = mergeBy(old.Rlimits, nw.Rlimits, func(r fix.Rlimit) string { return fmt.Sprint(r.PID, r.Item) })
	m.Cmdline = mergeBy(old.Cmdline, nw.Cmdline, optName)
	m.Mount = mergeBy(old.Mount, nw.Mount, func(c fix.MountChange) string { return c.MountPoint })
	if len(nw.Runtime) > 0 {
		m.Runtime = nw.Runtime
	}
	if nw.Restart != nil {
		m.Restart = nw.Restart
	}
	if nw.Summary != "" {
		m.Summary = nw.Summary
	}
	if nw.Manual != "" {
		m.Manual = nw.Manual
	}
	return &m
}

func mergeKV(old, nw []fix.KV) []fix.KV {
	return mergeBy(old, nw, func(kv fix.KV) string { return kv.Key })
}

// mergeBy keeps old's entries in order, each replaced by nw's entry of the
// same key, then nw's new keys.
func mergeBy[T any](old, nw []T, k func(T) string) []T {
	if len(nw) == 0 {
		return old
	}
	at := map[string]int{}
	out := make([]T, 0, len(old)+len(nw))
	for _, o := range old {
		at[k(o)] = len(out)
		out = append(out, o)
	}
	for _, n := range nw {
		if i, ok := at[k(n)]; ok {
			out[i] = n
			continue
		}
		at[k(n)] = len(out)
		out = append(out, n)
	}
	return out
}

// shownNotes leaves out the model's notes on manual steps: each fix shows
// its own steps, and the notes served only to tell what cannot pass yet.
func shownNotes(notes []string) []string {
	var out []string
	for _, n := range notes {
		if !strings.Contains(n, "manual step not modelled") {
			out = append(out, n)
		}
	}
	return out
}
