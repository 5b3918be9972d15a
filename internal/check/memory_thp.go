package check

import (
	"fmt"
	"slices"
	"strings"

	"github.com/dbhost/dbhost/internal/facts"
	"github.com/dbhost/dbhost/internal/fix"
	"github.com/dbhost/dbhost/internal/host"
)

func init() {
	Register(Check{
		ID:        "mem.thp.enabled",
		Title:     "Transparent huge pages mode suits the databases' engines and versions",
		Problem:   "Transparent huge pages mode does not suit the databases' engines and versions",
		Severity:  Warning,
		AppliesTo: []string{"postgres", "mysql", "mongodb", "redis"},
		Doc: `Reads /sys/kernel/mm/transparent_hugepage/enabled and judges it by every
database instance on the host:
- PostgreSQL, MySQL/MariaDB and MongoDB before 8.0 want "never": THP hands their
  processes 2 MiB pages they did not ask for; the kernel stalls page faults to compact
  memory, khugepaged collapses sparse regions into huge pages that inflate memory use,
  and latency spikes follow.
- MongoDB 8.0 and later on x86_64 and ARM64 want "always": its upgraded TCMalloc
  with per-CPU caches is built for huge pages (MongoDB's "TCMalloc Performance
  Optimization" page), and its documented setup adds defrag defer+madvise
  (mem.thp.defrag), khugepaged max_ptes_none 0 (mem.thp.khugepaged) and
  vm.overcommit_memory 1 (mem.overcommit). On ppc64le and s390x MongoDB keeps the
  legacy TCMalloc and wants "never"; for other architectures it documents nothing and
  the verdict is unknown. The architecture is the one the host (or snapshot) was
  read on.
- Redis wants anything but "always" (madvise or never): it warns at start-up that THP
  causes latency and memory problems with fork/copy-on-write. Redis 7 with
  disable-thp yes (the default) switches THP off for itself and tolerates "always".
When the engines on one host disagree (MongoDB 8 with PostgreSQL), one finding explains
the conflict instead of flagging both ways. The fix writes the mode now, persists it
with a tmpfiles.d line and adds transparent_hugepage= to the kernel command line.`,
		Refs: []string{"https://www.mongodb.com/docs/manual/administration/tcmalloc-performance/",
			"https://www.mongodb.com/docs/v7.0/tutorial/transparent-huge-pages/",
			"https://docs.kernel.org/admin-guide/mm/transhuge.html",
			"https://redis.io/docs/latest/operate/oss_and_stack/management/admin/"},
		Run: checkTHPEnabled,
	})
	Register(Check{
		ID:        "mem.thp.defrag",
		Title:     "THP defrag mode suits the databases",
		Problem:   "THP defrag mode does not suit the databases",
		Severity:  Warning,
		AppliesTo: []string{"postgres", "mysql", "mongodb"},
		Doc: `Reads /sys/kernel/mm/transparent_hugepage/defrag: whether a page fault that
wants a huge page may stall to compact memory. While enabled is "always",
PostgreSQL, MySQL and MongoDB before 8.0 want "never"; MongoDB 8.0+ wants
"defer+madvise" (compaction in the background, direct only where madvised). With
enabled "never" no fault allocates a huge page, and with "madvise" only memory that
asks for huge pages is compacted for, which those servers never ask: defrag is then
moot and passes whatever it is (mem.thp.enabled judges enabled itself). Redis sets
no requirement here.`,
		Refs: []string{"https://docs.kernel.org/admin-guide/mm/transhuge.html",
			"https://www.mongodb.com/docs/manual/administration/tcmalloc-performance/"},
		Run: checkTHPDefrag,
	})
	Register(Check{
		ID:        "mem.thp.khugepaged",
		Title:     "khugepaged does not bloat database memory",
		Problem:   "khugepaged may bloat database memory",
		Severity:  Warning,
		AppliesTo: []string{"postgres", "mysql", "mongodb", "redis"},
		Doc: `Reads /sys/kernel/mm/transparent_hugepage/khugepaged/max_ptes_none: how many
missing 4 kB pages khugepaged may fill with zeroes when it collapses a region into a
huge page (default 511 of 512). MongoDB 8.0+ asks for 0, so that background collapsing
never grows its memory. For the other engines it matters only when enabled is
"always" (khugepaged then scans all their memory): 0 stops the bloat; "never" is the
better fix (see mem.thp.enabled).`,
		Refs: []string{"https://docs.kernel.org/admin-guide/mm/transhuge.html#khugepaged-controls",
			"https://www.mongodb.com/docs/manual/administration/tcmalloc-performance/"},
		Run: checkTHPKhugepaged,
	})
	Register(Check{
		ID:        "mem.thp.persisted",
		Title:     "The THP settings survive a reboot",
		Problem:   "The THP settings do not survive a reboot",
		Severity:  Warning,
		AppliesTo: []string{"postgres", "mysql", "mongodb", "redis"},
		Doc: `Compares the running THP values (enabled, defrag, khugepaged defrag and
max_ptes_none) with what the next boot will set: transparent_hugepage= on the kernel
command line (running, and the GRUB configuration for the next boot), tmpfiles.d
lines, enabled systemd units that write the files (disable-thp.service), an executable
rc.local, and an active TuneD profile's [vm] transparent_hugepages (applied last).
A value set only at runtime reverts to the kernel's default at the next boot (enabled:
the kernel's build default, CONFIG_TRANSPARENT_HUGEPAGE_ALWAYS or _MADVISE as read from
/proc/config.gz or /boot/config-RELEASE, "always" on RHEL, "madvise" on Debian and
Ubuntu, unknown when neither file can be read; defrag "madvise"; max_ptes_none 511),
and a boot setting that disagrees with the running value will change it. Either way the database restarts with a THP mode nobody checked.`,
		Refs: []string{"https://docs.kernel.org/admin-guide/mm/transhuge.html#boot-parameters",
			"https://www.freedesktop.org/software/systemd/man/latest/tmpfiles.d.html"},
		Run: checkTHPPersisted,
	})
}

// thpOrder lists values from most to least conservative: a fix picks the
// first acceptable one.
var thpOrder = map[string][]string{
	"enabled": {"never", "madvise", "always"},
	"defrag":  {"never", "madvise", "defer+madvise", "defer", "always"},
}

// thpNeed is what one instance wants from THP.
type thpNeed struct {
	in      *facts.Instance
	enabled []string // acceptable values, nil: no requirement
	defrag  []string
	// ptesZero: max_ptes_none must be 0 (always, or only when enabled is
	// "always": onlyIfAlways).
	ptesZero     bool
	onlyIfAlways bool
	why          string
	unknown      string
}

func thpNeeds(f *facts.Facts) []thpNeed {
	var out []thpNeed
	for _, in := range f.Instances {
		a := in.Profile().THP(in.Instance, f.Manifest.Arch)
		desc := memInstDesc(in)
		n := thpNeed{in: in, enabled: a.Enabled, defrag: a.Defrag, ptesZero: a.PtesZero, onlyIfAlways: a.OnlyIfAlways}
		switch {
		case a.UnknownWhy != "":
			n.unknown = "the version of " + desc + " is unknown, and " + a.UnknownWhy
		case a.Why != "":
			n.why = desc + " " + a.Why
		default:
			continue
		}
		out = append(out, n)
	}
	return out
}

// thpVerdict intersects the acceptable values of one key.
type thpVerdict struct {
	ok       []string // acceptable to every instance; empty with conflict
	conflict bool
	reasons  []string
	unknown  []string
}

func combineTHP(needs []thpNeed, get func(thpNeed) []string, order []string) (thpVerdict, bool) {
	var v thpVerdict
	any := false
	ok := slices.Clone(order)
	for _, n := range needs {
		if n.unknown != "" {
			v.unknown = append(v.unknown, n.unknown)
			continue
		}
		acc := get(n)
		if acc == nil {
			continue
		}
		any = true
		v.reasons = append(v.reasons, n.why)
		ok = slices.DeleteFunc(ok, func(s string) bool { return !slices.Contains(acc, s) })
	}
	v.ok = ok
	v.conflict = any && len(ok) == 0
	return v, any || len(v.unknown) > 0
}

// thpFix writes a THP file now and at every boot (tmpfiles.d is rendered
// from Sysfs); enabled also goes on the kernel command line.
func thpFix(f *facts.Facts, key, value string) *fix.Fix {
	fx := &fix.Fix{Summary: fmt.Sprintf("Set transparent_hugepage/%s to %s", key, value),
		Sysfs: []fix.KV{{Key: facts.THPDir + "/" + key, Value: value}}}
	if key == "enabled" {
		fx.Cmdline = []string{"transparent_hugepage=" + value}
	}
	return memHostOnly(f, fx)
}

func judgeTHPKey(f *facts.Facts, key string, r host.Reading, get func(thpNeed) []string) []Result {
	needs := thpNeeds(f)
	v, applies := combineTHP(needs, get, thpOrder[key])
	if !applies {
		return nil
	}
	ev := []Evidence{EvReading("transparent_hugepage/"+key, r)}
	if len(v.unknown) > 0 {
		return []Result{UnknownR(SubjectHost, "cannot tell which THP "+key+" mode suits this host: "+strings.Join(v.unknown, "; "), ev...)}
	}
	who := strings.Join(v.reasons, "; ")
	if v.conflict {
		return []Result{FailR(SubjectHost, fmt.Sprintf("The databases on this host want incompatible THP %s modes, and THP is one setting for the whole kernel: %s. No single value suits them all.", key, who),
			&fix.Fix{Summary: "Resolve the THP conflict between engines", Manual: "Run the engines that want THP (MongoDB 8.0+) and those that do not (PostgreSQL, MySQL, older MongoDB) on separate hosts or VMs; or decide which engine's performance matters more here and set " + key + " for it, accepting the other's penalty."}, ev...)}
	}
	if !r.OK() {
		if memNotPresent(r) && slices.Contains(v.ok, "never") {
			return []Result{PassR(SubjectHost, "The kernel has no transparent huge pages (no "+r.Source+"), which is what "+who+".", ev...)}
		}
		if memNotPresent(r) {
			return []Result{FailR(SubjectHost, "The kernel has no transparent huge pages ("+r.Source+" is missing), but "+who+".",
				&fix.Fix{Summary: "Use a kernel with THP", Manual: "Boot a kernel built with CONFIG_TRANSPARENT_HUGEPAGE."}, ev...)}
		}
		return []Result{UnknownR(SubjectHost, "cannot read the THP "+key+" setting: "+memReadingErr(r), ev...)}
	}
	cur, why := facts.THPMode(r, key)
	if why != "" {
		return []Result{UnknownR(SubjectHost, "cannot judge the THP "+key+" setting: "+why, ev...)}
	}
	if slices.Contains(v.ok, cur) {
		return []Result{PassR(SubjectHost, fmt.Sprintf("THP %s is %q, acceptable to every database here: %s.", key, cur, who), ev...)}
	}
	// Name only the instances the current value does not suit.
	var against []string
	for _, n := range needs {
		if acc := get(n); acc != nil && n.unknown == "" && !slices.Contains(acc, cur) {
			against = append(against, n.why)
		}
	}
	want := v.ok[0]
	return []Result{FailR(SubjectHost, fmt.Sprintf("THP %s is %q, but %s. Set it to %q (databases started before the change keep the huge pages they already have until restarted).", key, cur, strings.Join(against, "; "), want),
		thpFix(f, key, want), ev...)}
}

func checkTHPEnabled(f *facts.Facts) []Result {
	return judgeTHPKey(f, "enabled", f.Memory.THP.Enabled, func(n thpNeed) []string { return n.enabled })
}

// checkTHPDefrag judges defrag only where it acts: with enabled "never" no
// fault allocates a huge page, and with "madvise" only memory that asks
// for huge pages is compacted for, which PostgreSQL, MySQL and older
// MongoDB never ask.
func checkTHPDefrag(f *facts.Facts) []Result {
	t := f.Memory.THP
	enabled, why := facts.THPMode(t.Enabled, "enabled")
	moot := why == "" && enabled != "always"
	wish := func(n thpNeed) []string {
		if moot && (n.onlyIfAlways || enabled == "never") {
			return nil
		}
		return n.defrag
	}
	needs := thpNeeds(f)
	wishes := 0
	for _, n := range needs {
		if n.unknown != "" || wish(n) != nil {
			wishes++
		}
	}
	if moot && wishes == 0 && len(needs) > 0 {
		ev := []Evidence{EvReading("transparent_hugepage/defrag", t.Defrag), EvReading("transparent_hugepage/enabled", t.Enabled)}
		if enabled == "never" {
			return []Result{PassR(SubjectHost, "THP enabled is \"never\": no page fault allocates a huge page, so the defrag mode has no effect.", ev...)}
		}
		return []Result{PassR(SubjectHost, fmt.Sprintf("THP enabled is %q: only memory that asks for huge pages (madvise) is compacted for, which the databases here do not ask, so the defrag mode does not matter to them.", enabled), ev...)}
	}
	return judgeTHPKey(f, "defrag", t.Defrag, wish)
}

func checkTHPKhugepaged(f *facts.Facts) []Result {
	needs := thpNeeds(f)
	if len(needs) == 0 {
		return nil
	}
	t := f.Memory.THP
	ev := []Evidence{EvReading("khugepaged/max_ptes_none", t.MaxPtesNone), EvReading("transparent_hugepage/enabled", t.Enabled)}
	var unknown []string
	for _, n := range needs {
		if n.unknown != "" {
			unknown = append(unknown, n.unknown)
		}
	}
	if len(unknown) > 0 {
		return []Result{UnknownR(SubjectHost, "cannot tell what khugepaged should do here: "+strings.Join(unknown, "; "), ev...)}
	}
	if !t.MaxPtesNone.OK() && memNotPresent(t.MaxPtesNone) {
		return []Result{PassR(SubjectHost, "The kernel has no transparent huge pages, so there is no khugepaged.", ev...)}
	}
	enabled, why := facts.THPMode(t.Enabled, "enabled")
	if why != "" {
		return []Result{UnknownR(SubjectHost, "cannot judge the THP enabled setting: "+why, ev...)}
	}
	var who []string
	for _, n := range needs {
		if n.ptesZero && (!n.onlyIfAlways || enabled == "always") {
			who = append(who, n.in.Name())
		}
	}
	if len(who) == 0 {
		if enabled == "never" {
			return []Result{PassR(SubjectHost, "THP enabled is \"never\": khugepaged collapses nothing, so its max_ptes_none does not matter.", ev...)}
		}
		return []Result{PassR(SubjectHost, fmt.Sprintf("THP enabled is %q: khugepaged only collapses memory of processes that ask for huge pages (madvise), which the databases here do not, so its max_ptes_none does not matter to them.", enabled), ev...)}
	}
	v, why := t.MaxPtesNone.IntIn(0, 511) // a count of 4 kB pages in a 2 MiB one
	if why != "" {
		return []Result{UnknownR(SubjectHost, "cannot judge khugepaged max_ptes_none: "+why, ev...)}
	}
	if v == 0 {
		return []Result{PassR(SubjectHost, fmt.Sprintf("khugepaged max_ptes_none is 0: khugepaged collapses only fully populated regions, so it never grows the memory of %s.", strings.Join(who, ", ")), ev...)}
	}
	reason := fmt.Sprintf("khugepaged max_ptes_none is %d: khugepaged may fill up to %d missing 4 kB pages with zeroes to build one 2 MiB page, so sparse memory of %s grows (RSS bloat) in the background.", v, v, strings.Join(who, ", "))
	if enabled == "always" {
		reason += " With enabled \"always\" it scans all of their memory."
	}
	return []Result{FailR(SubjectHost, reason, thpFix(f, "khugepaged/max_ptes_none", "0"), ev...)}
}

// thpDefaults are the kernel's values when nothing sets them; enabled's
// depends on the kernel build (always or madvise).
var thpDefaults = map[string]string{"defrag": "madvise", "khugepaged/defrag": "1", "khugepaged/max_ptes_none": "511"}

func checkTHPPersisted(f *facts.Facts) []Result {
	needs := thpNeeds(f)
	if len(needs) == 0 {
		return nil
	}
	t := f.Memory.THP
	keys := []struct {
		key string
		r   host.Reading
	}{{"enabled", t.Enabled}, {"defrag", t.Defrag}, {"khugepaged/defrag", t.KhugepagedDefrag}, {"khugepaged/max_ptes_none", t.MaxPtesNone}}
	if !t.Enabled.OK() {
		if memNotPresent(t.Enabled) {
			return []Result{PassR(SubjectHost, "The kernel has no transparent huge pages: nothing to persist.", EvReading("transparent_hugepage/enabled", t.Enabled))}
		}
		return []Result{UnknownR(SubjectHost, "cannot read the THP enabled setting: "+memReadingErr(t.Enabled), EvReading("transparent_hugepage/enabled", t.Enabled))}
	}
	j := &thpPersistJudgement{f: f, wanted: thpWantedModes(needs), fx: &fix.Fix{Summary: "Persist the THP settings"}}
	for _, k := range keys {
		j.ev = append(j.ev, EvReading("transparent_hugepage/"+k.key, k.r))
		if k.r.OK() {
			j.judge(k.key, k.r)
		}
	}
	return j.verdict()
}

// thpWantedModes are the modes the engines agree on for enabled and (when
// one gives a reason) defrag: what to persist instead of the running value.
func thpWantedModes(needs []thpNeed) map[string]string {
	wanted := map[string]string{}
	if v, _ := combineTHP(needs, func(n thpNeed) []string { return n.enabled }, thpOrder["enabled"]); len(v.ok) > 0 && !v.conflict && len(v.unknown) == 0 {
		wanted["enabled"] = v.ok[0]
	}
	if v, _ := combineTHP(needs, func(n thpNeed) []string { return n.defrag }, thpOrder["defrag"]); len(v.ok) > 0 && !v.conflict && len(v.unknown) == 0 && v.reasons != nil {
		wanted["defrag"] = v.ok[0]
	}
	return wanted
}

// thpPersistJudgement collects, key by key, what mem.thp_persisted finds.
type thpPersistJudgement struct {
	f                                    *facts.Facts
	wanted                               map[string]string
	ev                                   []Evidence
	problems, fine, garbage, unknownBoot []string
	manual                               []string
	fx                                   *fix.Fix
}

// judge compares one readable THP key's running value with what the next
// boot sets (a file, TuneD, or the kernel's default).
func (j *thpPersistJudgement) judge(key string, r host.Reading) {
	f, t := j.f, j.f.Memory.THP
	run, why := facts.THPMode(r, key)
	if why != "" {
		j.garbage = append(j.garbage, why)
		return
	}
	boot, all, found := t.BootValue(key)
	for _, p := range all {
		j.ev = append(j.ev, Ev("boot: "+key, p.Value, thpWhere(p)))
	}
	if key == "enabled" && f.Tuned.Active != "" {
		if p, ok := f.Tuned.VM["transparent_hugepages"]; ok {
			p.Key = "enabled"
			boot, found = p, true
			j.ev = append(j.ev, Ev("boot: enabled (TuneD profile "+f.Tuned.Active+")", p.Value, thpWhere(p)))
		}
	}
	// The value to persist: the one the engines agree on, else the
	// running one.
	keep := run
	if w, ok := j.wanted[key]; ok {
		keep = w
	}
	switch {
	case found && boot.Value == run:
		j.fine = append(j.fine, fmt.Sprintf("%s %q is set at boot by %s", key, run, thpWhere(boot)))
		return
	case found:
		j.problems = append(j.problems, fmt.Sprintf("%s is %q now, but the next boot sets %q (%s)", key, run, boot.Value, thpWhere(boot)))
		if !strings.HasPrefix(boot.File, "/etc/tmpfiles.d/60-dbhost") {
			j.manual = append(j.manual, fmt.Sprintf("remove or change the %s setting in %s", key, thpWhere(boot)))
		}
	default:
		def, defWhere, why := thpBootDefault(f, key)
		if why != "" {
			j.ev = append(j.ev, Ev("boot default: "+key, "unknown: "+why, "kernel build configuration"))
			j.unknownBoot = append(j.unknownBoot, fmt.Sprintf("%s is %q and nothing sets it at boot, but the kernel's build default is unknown (%s)", key, run, why))
			// Persisting it is harmless if it is the default, and
			// needed if it is not: the fix (used only with other
			// problems) includes it.
			j.fx.Sysfs = append(j.fx.Sysfs, fix.KV{Key: facts.THPDir + "/" + key, Value: keep})
			j.fx.Cmdline = []string{"transparent_hugepage=" + keep}
			return
		}
		j.ev = append(j.ev, Ev("boot default: "+key, def, defWhere))
		if def == run {
			return // the kernel's default: nothing to persist
		}
		j.problems = append(j.problems, fmt.Sprintf("%s is %q at runtime only: nothing sets it at boot, so it reverts to the kernel's default %q (%s) after a reboot", key, run, def, defWhere))
	}
	j.fx.Sysfs = append(j.fx.Sysfs, fix.KV{Key: facts.THPDir + "/" + key, Value: keep})
	if key == "enabled" {
		j.fx.Cmdline = []string{"transparent_hugepage=" + keep}
	}
}

// verdict: fail on a problem, else unknown on what could not be judged,
// else pass.
func (j *thpPersistJudgement) verdict() []Result {
	if len(j.problems) == 0 && len(j.garbage)+len(j.unknownBoot) > 0 {
		return []Result{UnknownR(SubjectHost, "cannot judge the THP settings: "+strings.Join(append(j.garbage, j.unknownBoot...), "; "), j.ev...)}
	}
	if len(j.problems) == 0 {
		reason := "The running THP values are what the next boot sets"
		if len(j.fine) > 0 {
			reason += ": " + strings.Join(j.fine, "; ")
		} else {
			reason += " (the kernel's defaults; nothing changes them at runtime)"
		}
		return []Result{PassR(SubjectHost, reason+".", j.ev...)}
	}
	if len(j.manual) > 0 {
		j.fx.Manual = "Also " + strings.Join(j.manual, "; ") + ": it runs after tmpfiles.d and would override the fix."
	}
	reason := strings.Join(j.problems, "; ") + ". The databases would come back after a reboot with a THP mode nobody checked."
	if len(j.unknownBoot) > 0 {
		reason += " Also " + strings.Join(j.unknownBoot, "; ") + ": the fix persists it too."
	}
	return []Result{FailR(SubjectHost, reason, memHostOnly(j.f, j.fx), j.ev...)}
}

// thpBootDefault is the value a THP key has after a boot that sets nothing:
// enabled comes from the kernel build (CONFIG_TRANSPARENT_HUGEPAGE_ALWAYS or
// _MADVISE), the others are fixed. why says when the build is unknown.
func thpBootDefault(f *facts.Facts, key string) (value, where, why string) {
	if key != "enabled" {
		return thpDefaults[key], "kernel default, Documentation/admin-guide/mm/transhuge.rst", ""
	}
	kc := f.Persist.KernelConfig
	switch {
	case kc.Err != "":
		return "", "", kc.Err
	case kc.THP == "always" || kc.THP == "madvise" || kc.THP == "never":
		return kc.THP, "kernel build default, CONFIG_TRANSPARENT_HUGEPAGE_" + strings.ToUpper(kc.THP) + " in " + kc.Source, ""
	case kc.Source == "":
		return "", "", "the snapshot has no kernel build configuration (/proc/config.gz, /boot/config-RELEASE)"
	}
	return "", "", kc.Source + " does not name a THP default"
}

func thpWhere(p facts.Persisted) string {
	if p.Line > 0 {
		return fmt.Sprintf("%s:%d", p.File, p.Line)
	}
	return p.File
}
