package fix

import (
	"sort"
	"strconv"
	"strings"

	"github.com/dbhost/dbhost/internal/conftext"
)

// Phase orders the commands that apply all fixes now: each phase needs
// what the ones before it did, and nothing is ordered by check ID.
type Phase int

const (
	// PhaseReload makes daemons re-read the installed files.
	PhaseReload Phase = iota
	// PhaseKernel sets kernel parameters: the huge page pool first, then
	// other memory values, before anything that needs them.
	PhaseKernel
	// PhaseSysfs writes /sys knobs and block queue attributes.
	PhaseSysfs
	// PhaseOther runs remounts and the checks' own commands.
	PhaseOther
	// PhaseLimits changes the resource limits of running processes.
	PhaseLimits
	// PhaseDatabase changes database settings the server takes at once.
	PhaseDatabase
	// PhaseRestart restarts servers: last, and marked.
	PhaseRestart
)

// Step is one command of the runbook, for one setting (or one reload or
// restart), with the findings that want it.
type Step struct {
	Phase Phase
	// Command is the shell command, its words quoted; "" for a restart
	// no command can do here (PID 1 is not systemd, or no unit is known).
	Command string
	// Setting names what the step sets ("sysctl vm.swappiness"), Value
	// the value it ends on; both "" for reloads, restarts and commands of
	// which dbhost knows no setting.
	Setting, Value string
	// Note says why a restart is needed; How, for a restart without a
	// command, how to do it.
	Note, How string
	Findings  []string
}

// restartMark starts every restart line: it interrupts service.
const restartMark = "RESTART (interrupts every connection): "

// String is the step as one README line: the command, then the findings
// (and for a restart its reason) as a trailing comment.
func (s Step) String() string {
	text, why := s.Command, strings.Join(s.Findings, ", ")
	if s.Phase == PhaseRestart {
		if text == "" {
			text = comment(s.How)
		}
		text, why = restartMark+text, s.Note+"; "+why
	}
	return text + "  # " + comment(why)
}

// Lines are the steps as README lines, in order.
func Lines(steps []Step) []string {
	out := make([]string, len(steps))
	for i, s := range steps {
		out[i] = s.String()
	}
	return out
}

// Runbook lists the commands that apply all fixes now, after their files
// are installed: one command per setting, each with the value the files
// persist (both come from the same merge as Render), in dependency order
// (reloads, kernel values with the pool first, /sys values, other
// commands, process limits, database settings, then restarts), values
// shell-quoted. What cannot be shown safely is left out (StepNotes says
// so), and systemctl only where PID 1 is systemd.
func Runbook(ctx Context, items []Item) []Step {
	b := &runbook{ctx: ctx, at: map[string]int{}}
	b.reloads(items)
	b.kernel(items)
	b.sysfs(items)
	b.mounts(items)
	b.commands(items)
	b.restarts(items)
	sort.SliceStable(b.steps, func(i, j int) bool { return b.steps[i].Phase < b.steps[j].Phase })
	return b.steps
}

// runbook collects steps, one per key (a setting, or a command).
type runbook struct {
	ctx   Context
	steps []Step
	at    map[string]int // key → index in steps
}

// add records a step under key; a later finding wanting the same key is
// named on the first one's step.
func (b *runbook) add(key string, s Step) {
	if i, ok := b.at[key]; ok {
		for _, t := range s.Findings {
			b.steps[i].Findings = appendUnique(b.steps[i].Findings, t)
		}
		return
	}
	b.at[key] = len(b.steps)
	b.steps = append(b.steps, s)
}

// reloads: systemd reads the drop-ins and udev the rules before anything
// that depends on them; the checks' own reload commands come here too.
func (b *runbook) reloads(items []Item) {
	for _, it := range items {
		if len(it.Fix.Dropins) > 0 && b.ctx.Systemd {
			b.add("systemctl daemon-reload", Step{Phase: PhaseReload, Command: "systemctl daemon-reload", Findings: []string{it.tag()}})
		}
		if len(it.Fix.Udev) > 0 {
			b.add("udevadm control --reload", Step{Phase: PhaseReload, Command: "udevadm control --reload", Findings: []string{it.tag()}})
		}
	}
}

// kernel sets each parameter once, to the value sysctl.d gets: the pool
// (vm.nr_hugepages) first, then the other memory parameters, then the
// rest. A runtime-only value (SysctlNow) applies where no file sets it.
func (b *runbook) kernel(items []Item) {
	es := mergedSysctl(items)
	persisted := map[string]bool{}
	for _, e := range es {
		persisted[e.key] = true
	}
	for _, e := range collect(items, func(it Item) []KV { return it.Fix.SysctlNow }) {
		if !persisted[e.key] {
			es = append(es, e)
		}
	}
	sort.SliceStable(es, func(i, j int) bool {
		if a, c := memoryRank(es[i].key), memoryRank(es[j].key); a != c {
			return a < c
		}
		return es[i].key < es[j].key
	})
	for _, e := range es {
		kv := KV{e.key, e.value}
		if sysctlKnob(kv) != nil {
			continue
		}
		b.add("sysctl "+e.key, Step{Phase: PhaseKernel, Command: shellCommand("sysctl", "-w", e.key+"="+e.value),
			Setting: "sysctl " + e.key, Value: e.value, Findings: e.tags})
	}
}

// memoryRank orders kernel parameters: the huge page pool, which a server
// restarting with huge pages needs and which takes memory from everything
// else, then the other memory parameters, then the rest.
func memoryRank(key string) int {
	switch {
	case key == "vm.nr_hugepages":
		return 0
	case strings.HasPrefix(key, "vm."), strings.HasPrefix(key, "kernel.shm"):
		return 1
	}
	return 2
}

// sysfs writes each /sys knob and block queue attribute once, to the
// value tmpfiles.d and the udev rules get.
func (b *runbook) sysfs(items []Item) {
	for _, e := range mergedSysfs(items) {
		if sysfsKnob(KV{e.key, e.value}) != nil {
			continue
		}
		b.add("file "+e.key, Step{Phase: PhaseSysfs, Command: writeCommand(e.value, e.key), Setting: "file " + e.key, Value: e.value, Findings: e.tags})
	}
	devs := mergedUdev(items)
	for _, name := range sortedKeys(devs) {
		d := devs[name]
		for _, a := range sortedKeys(d.attrs) {
			u := UdevAttr{name, a, d.attrs[a]}
			if udevKnob(u) != nil {
				continue
			}
			p := udevPath(u)
			b.add("file "+p, Step{Phase: PhaseSysfs, Command: writeCommand(u.Value, p), Setting: "file " + p, Value: u.Value, Findings: d.attrTags[a]})
		}
	}
}

// remount is the options one remount adds to a mounted file system.
type remount struct {
	opts, tags []string
}

// mounts remounts each file system once, with every option a fix adds
// (Mount, or a check's own "mount -o remount,OPT MP"); a removal takes a
// remount from fstab, which the finding explains.
func (b *runbook) mounts(items []Item) {
	rm := map[string]*remount{}
	want := func(mp string, opts []string, tag string) {
		r, ok := rm[mp]
		if !ok {
			r = &remount{}
			rm[mp] = r
		}
		for _, o := range opts {
			r.opts = appendUnique(r.opts, o)
		}
		r.tags = appendUnique(r.tags, tag)
	}
	for _, it := range items {
		for _, m := range it.Fix.Mount {
			if len(m.Remove) == 0 && len(m.Add) > 0 {
				want(m.MountPoint, m.Add, it.tag())
			}
		}
		for _, r := range it.Fix.Runtime {
			if mp, opts, ok := remountCommand(r); ok {
				want(mp, opts, it.tag())
			}
		}
	}
	for _, mp := range sortedKeys(rm) {
		opts := "remount," + strings.Join(rm[mp].opts, ",")
		if conftext.HasControl(opts + mp) {
			continue
		}
		b.add("mount "+mp, Step{Phase: PhaseOther, Command: shellCommand("mount", "-o", opts, mp),
			Setting: "mount " + mp, Value: opts, Findings: rm[mp].tags})
	}
}

// remountCommand reads a check's "mount -o remount,OPTS MOUNTPOINT".
func remountCommand(cmd string) (mp string, opts []string, ok bool) {
	rest, ok := strings.CutPrefix(cmd, "mount -o remount,")
	if !ok {
		return "", nil, false
	}
	o, mp, ok := strings.Cut(rest, " ")
	if !ok || !strings.HasPrefix(mp, "/") {
		return "", nil, false
	}
	return mp, strings.Split(o, ","), true
}

// commands places the checks' own commands: the resource limits of a
// process once per process and resource (the largest need), a database
// setting once per server and key (only the command of the value the
// snippet keeps), reloads first, restarts never (see restarts).
func (b *runbook) commands(items []Item) {
	cfg := mergedConfig(items)
	for _, it := range items {
		for _, r := range it.Fix.Runtime {
			ph, ok := phaseOf(r)
			_, _, remount := remountCommand(r)
			if !ok || remount || conftext.HasControl(r) || (!b.ctx.Systemd && strings.HasPrefix(r, "systemctl")) || isRlimitCommand(it.Fix, r) {
				continue
			}
			tag := []string{it.tag()}
			if ph == phaseReload {
				b.add(r, Step{Phase: PhaseReload, Command: r, Findings: tag})
				continue
			}
			if c, ok := configOf(it.Fix, r); ok {
				if cfg.value(c.Instance, c.Key) == c.Value {
					key := "setting " + c.Instance + " " + c.Key
					b.add(key, Step{Phase: PhaseDatabase, Command: r, Setting: key, Value: c.Value, Findings: tag})
				}
				continue
			}
			b.add("command "+r, Step{Phase: PhaseOther, Command: r, Findings: tag})
		}
	}
	b.rlimits(items)
}

// rlimits sets each resource limit of a process once, to the largest
// soft and hard limit any finding needs (servers sharing a process share
// its limit, as limits.d lines do).
func (b *runbook) rlimits(items []Item) {
	type lim struct {
		r    Rlimit
		tags []string
	}
	idx := map[string]*lim{}
	var order []string
	for _, it := range items {
		for _, r := range it.Fix.Rlimits {
			k := strconv.Itoa(r.PID) + " " + r.Item
			l, ok := idx[k]
			if !ok {
				l = &lim{r: r}
				idx[k] = l
				order = append(order, k)
			}
			l.r.Soft, l.r.Hard = max(l.r.Soft, r.Soft), max(l.r.Hard, r.Hard)
			l.tags = appendUnique(l.tags, it.tag())
		}
	}
	sort.Strings(order)
	for _, k := range order {
		l := idx[k]
		if !onlyChars(l.r.Item, "") {
			continue
		}
		b.add("rlimit "+k, Step{Phase: PhaseLimits, Command: l.r.Command(), Setting: "rlimit " + k,
			Value: FormatRlimit(l.r.Soft) + ":" + FormatRlimit(l.r.Hard), Findings: l.tags})
	}
}

// isRlimitCommand reports a check's command that is the prlimit of one
// of its Rlimits (the runbook derives that from the structured limit).
func isRlimitCommand(f *Fix, cmd string) bool {
	for _, r := range f.Rlimits {
		if r.Command() == cmd {
			return true
		}
	}
	return false
}

// configOf finds the database setting a check's command applies now: the
// command names the setting's key and value (CONFIG SET maxmemory 1mb).
func configOf(f *Fix, cmd string) (ConfigChange, bool) {
	words := strings.Fields(cmd)
	for _, c := range f.Config {
		if containsWord(words, c.Key) && containsWord(words, c.Value) {
			return c, true
		}
	}
	return ConfigChange{}, false
}

func containsWord(words []string, w string) bool {
	for _, x := range words {
		if strings.EqualFold(x, w) {
			return true
		}
	}
	return false
}

// value is the merged value of an instance's setting ("" none).
func (m configMerge) value(inst, key string) string {
	for _, e := range m.byInst[inst] {
		if e.key == key {
			return e.value
		}
	}
	return ""
}

// restarts come last: one per unit (or server), for a fix that says a
// restart is needed and for database settings a server takes only when
// it restarts.
func (b *runbook) restarts(items []Item) {
	why := map[string][]string{}
	for _, it := range items {
		if r := it.Fix.Restart; r != nil {
			b.restart(r.Unit, it.Subject, it.tag(), r.Why, why)
		}
	}
	cfg := mergedConfig(items)
	for _, inst := range sortedKeys(cfg.byInst) {
		info := b.ctx.Instances[inst]
		if info.NoConfig {
			continue // no snippet: a restart would not take the value
		}
		var keys, tags []string
		for _, e := range cfg.byInst[inst] {
			if e.restart {
				keys = append(keys, e.key)
				for _, t := range e.tags {
					tags = appendUnique(tags, t)
				}
			}
		}
		if len(keys) > 0 {
			sort.Strings(keys)
			b.restart(info.Unit, inst, strings.Join(tags, ", "), "the server reads "+strings.Join(keys, ", ")+" only when it starts", why)
		}
	}
	for key, ws := range why {
		b.steps[b.at[key]].Note = strings.Join(ws, "; ")
	}
}

// restart adds the restart of unit (or, without one, of the server named
// subject), collecting its reasons in why by key.
func (b *runbook) restart(unit, subject, tags, reason string, why map[string][]string) {
	key := "restart unit " + unit
	if unit == "" {
		key = "restart server " + subject
	}
	s := Step{Phase: PhaseRestart, Findings: []string{tags}}
	switch {
	case unit != "" && b.ctx.Systemd && !conftext.HasControl(unit):
		s.Command = shellCommand("systemctl", "restart", unit)
	case unit != "" && b.ctx.Systemd:
		s.How = "restart " + subject + " the way it is started (its unit name cannot be shown safely)"
	case unit != "":
		s.How = "restart " + unit + " the way it is started (PID 1 is not systemd here, so not with systemctl)"
	default:
		s.How = "restart " + subject + " the way it is started"
	}
	b.add(key, s)
	if !containsWord(why[key], reason) {
		why[key] = append(why[key], reason)
	}
}

// StepNotes are what applying the fixes takes beyond the runbook's
// commands and their files, per finding: where PID 1 is not systemd,
// servers that read no file, settings left out as unsafe to show. The
// restarts are in the runbook.
func StepNotes(ctx Context, items []Item) []string {
	var out []string
	for _, it := range items {
		if s := stepsText(it.Fix, ctx, false); s != "" {
			out = appendUnique(out, it.tag()+": "+s)
		}
	}
	sort.Strings(out)
	return out
}
