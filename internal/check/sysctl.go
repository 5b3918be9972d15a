package check

import (
	"fmt"
	"maps"
	"path"
	"slices"
	"strconv"
	"strings"

	"github.com/dbhost/dbhost/internal/facts"
	"github.com/dbhost/dbhost/internal/fix"
	"github.com/dbhost/dbhost/internal/host"
)

func init() {
	Register(Check{
		ID:        "sysctl.drift",
		Title:     "Kernel parameters keep their values across a reboot",
		Problem:   "Kernel parameters lose their values at the next reboot",
		Severity:  Warning,
		AppliesTo: []string{"host", "tuned"},
		Doc: `For every kernel parameter dbhost judges, compares the running value
(/proc/sys) with what the next boot sets: the sysctl.d files in systemd-sysctl's
order (/etc, /run, /usr/local/lib, /usr/lib, /lib; a file name in an earlier
directory hides the same name later; files sorted by name; /etc/sysctl.conf last;
an explicit key beats a glob), and an active TuneD profile, which TuneD applies after
them (with reapply_sysctl=1, its default, TuneD re-applies sysctl.d afterwards, so
sysctl.d wins where both set a key). A difference means someone changed the value at
run time without persisting it, or a file changed since boot: the next reboot
silently changes the host's behaviour, often back to a value a tuning effort had
removed.
Where nothing persists a parameter, the next boot gives the kernel's default
(Documentation/admin-guide/sysctl/*.rst; version-dependent ones such as
net.core.somaxconn, 4096 since Linux 5.4 and 128 before, by the running release;
vm.nr_hugepages from hugepages= on the kernel command line): a running value that
differs from it (sysctl -w vm.swappiness=1, which reboots to 60) holds only until
reboot. dbhost never makes a running value permanent unasked: the finding shows both
values and the fix changes nothing until the user chooses, per parameter, with
--keep-running NAME (persist the running value in /etc/sysctl.d) or --keep-file NAME
(set the running value back to the next boot's now, persisting nothing). Where another
failing check of the same run sets the parameter (mem.swap, mem.shm_limits), that
check's value wins, whatever was kept. Values the kernel computes at boot (min_free_kbytes,
file-max, threads-max, pid_max, tcp_max_syn_backlog) are not comparable and are
listed as skipped; so is everything when dbhost runs in a container (the host's
boot sets the kernel) or a sysctl.d file is unreadable.`,
		Refs: []string{"https://www.freedesktop.org/software/systemd/man/latest/sysctl.d.html", "https://man7.org/linux/man-pages/man8/sysctl.8.html"},
		// It compares every parameter the other checks read, plus these,
		// which no other check judges but whose persisted value matters to
		// databases (semaphores and queues, huge pages, open files).
		AllSysctls: true,
		Sysctls: []string{"vm.nr_hugepages", "vm.vfs_cache_pressure", "kernel.sem", "kernel.shmmni",
			"kernel.msgmni", "net.ipv4.tcp_syncookies", "fs.nr_open"},
		Run: checkSysctlDrift,
	})
}

// bootValue is what the next boot sets for a kernel parameter.
type bootValue struct {
	Value  string
	Source string // file:line
	Tuned  bool   // set by the TuneD profile
	// Raw: TuneD computes the value at run time (${...}); it cannot be
	// compared.
	Raw bool
}

// nextBootSysctl resolves the value the next boot leaves a parameter at:
// sysctl.d, then an active TuneD profile over it, then (reapply_sysctl)
// sysctl.d again.
func nextBootSysctl(f *facts.Facts, name string) (bootValue, bool) {
	if name == "vm.nr_hugepages" {
		// A boot unit that reserves the pages runs after sysctl.d.
		if u, ok := bootUnitPages(f, facts.HugePagePool{SizeKB: f.Memory.DefaultHugePageKB(), Default: true}); ok {
			return bootValue{Value: u.Value, Source: persistedWhere(u), Raw: u.Value == ""}, true
		}
	}
	p, inFiles := f.Persist.PersistedSysctl(name)
	var tv facts.Persisted
	inTuned := false
	if f.Tuned.Active != "" {
		tv, inTuned = f.Tuned.Sysctl[name]
	}
	switch {
	case inTuned && !(f.Tuned.ReapplySysctl && inFiles):
		return bootValue{Value: normSysctl(tv.Value), Source: persistedWhere(tv), Tuned: true, Raw: strings.Contains(tv.Value, "${")}, true
	case inFiles:
		return bootValue{Value: normSysctl(p.Value), Source: persistedWhere(p)}, true
	}
	if name == "vm.nr_hugepages" {
		if v, src, ok := cmdlineHugePages(f, f.Memory.DefaultHugePageKB(), true); ok {
			return bootValue{Value: v, Source: src}, true
		}
	}
	return bootValue{}, false
}

func normSysctl(v string) string { return strings.Join(strings.Fields(v), " ") }

func persistedWhere(p facts.Persisted) string {
	if p.Line > 0 {
		return fmt.Sprintf("%s:%d", p.File, p.Line)
	}
	return p.File
}

func checkSysctlDrift(f *facts.Facts) []Result {
	if f.Persist.SysctlErr != "" && len(f.Persist.SysctlFiles) == 0 {
		return []Result{UnknownR(SubjectHost, "cannot read the sysctl.d files: "+f.Persist.SysctlErr)}
	}
	var drift []driftKey
	var garbled []string
	var ev []Evidence
	compared := 0
	rt := runtimeOnlyScan{noDefaults: noKernelDefaults(f)}
	for _, name := range f.SysctlNames() {
		r := f.SysctlReading(name)
		if !r.OK() {
			continue
		}
		bv, ok := nextBootSysctl(f, name)
		if !ok {
			rt.judge(f, name, r)
			continue
		}
		if bv.Raw {
			continue
		}
		// The kernel prints a numeric parameter as numbers: a running value
		// that is not (an empty or corrupt reading) says nothing.
		if numeric(bv.Value) && !numeric(normSysctl(r.Value)) {
			garbled = append(garbled, fmt.Sprintf("%s holds %q", r.Source, r.Value))
			ev = append(ev, Ev(name, fmt.Sprintf("running %q, next boot %s", r.Value, bv.Value), bv.Source))
			continue
		}
		compared++
		if normSysctl(r.Value) == bv.Value {
			continue
		}
		who := "sysctl.d"
		if bv.Tuned {
			who = "TuneD profile " + f.Tuned.Active
		}
		drift = append(drift, driftKey{name: name, running: normSysctl(r.Value), boot: bv.Value, source: bv.Source, tuned: bv.Tuned,
			text: fmt.Sprintf("%s is %s now but %s sets %s (%s)", name, r.Value, who, bv.Value, bv.Source)})
		ev = append(ev, Ev(name, fmt.Sprintf("running %s, next boot %s", r.Value, bv.Value), bv.Source))
	}
	ev = append(ev, Ev("files", strings.Join(f.Persist.SysctlFiles, ", "), "sysctl.d"))
	ev = append(ev, rt.evidence()...)
	garbled = append(garbled, rt.garbled...)
	if skipped := f.Persist.SysctlSkipped; len(skipped) > 0 {
		ev = append(ev, Ev("lines that are not assignments", strings.Join(skipped, ", "), "sysctl.d"))
		if compared == 0 && len(drift) == 0 && len(rt.lost) == 0 {
			return []Result{UnknownR(SubjectHost, fmt.Sprintf("No sysctl.d assignment of a judged parameter could be compared, and %d line(s) are not assignments (%s): what the next boot sets is unknown.", len(skipped), strings.Join(skipped, ", ")), ev...)}
		}
	}
	if len(drift) == 0 && len(rt.lost) == 0 && len(garbled) > 0 {
		return []Result{UnknownR(SubjectHost, "cannot compare the running values with the next boot's: "+strings.Join(garbled, "; ")+", which is not the number the kernel prints.", ev...)}
	}
	if len(drift) == 0 && len(rt.lost) == 0 {
		return []Result{PassR(SubjectHost, fmt.Sprintf("Judged kernel parameters set by sysctl.d or TuneD: %d; each holds its persisted value now, so a reboot keeps them. Parameters nothing persists: %d hold the kernel's default, %s.", compared, rt.atDefault, rt.skippedText()), ev...)}
	}
	keys := append(drift[:len(drift):len(drift)], rt.lost...)
	asks := decideDrift(f, keys)
	ev = append(ev, keepEvidence(f, keys)...)
	var whys []string
	if len(drift) > 0 {
		whys = append(whys, "A reboot will silently change kernel parameters: "+driftTexts(keys[:len(drift)])+".")
		if !f.System.Systemd {
			whys = append(whys, "(PID 1 is not systemd here: the files are applied at boot only if the init system runs sysctl --system.)")
		}
	}
	if len(rt.lost) > 0 {
		whys = append(whys, "Set at runtime only, lost at the next reboot: "+driftTexts(keys[len(drift):])+".")
	}
	return []Result{FailR(SubjectHost, strings.Join(whys, " "), memHostOnly(f, driftFix(keys, asks)), ev...)}
}

// driftKey is a kernel parameter whose running value the next boot
// changes, and what the fix does about it.
type driftKey struct {
	name, running string
	// boot is what the next boot sets, source where (file:line, or the
	// kernel's default and its documentation); tuned: a TuneD profile.
	boot, source string
	tuned        bool
	// text says it in the reason; decideDrift adds what the fix does.
	text string
	// value is what the fix persists (persist) or sets in the running
	// kernel only (now); neither: the user has not chosen.
	value        string
	persist, now bool
}

// decideDrift decides per parameter, and returns those left to the user.
// A value another failing check sets wins: its fix persists that value,
// whatever the user kept. Otherwise the user's --keep-running or
// --keep-file (facts.Facts.SysctlKeep) decides; without one, nothing is
// persisted or set: a running value becomes permanent only when asked.
func decideDrift(f *facts.Facts, keys []driftKey) (asks []string) {
	others := othersWant(f)
	for i := range keys {
		k := &keys[i]
		keep := f.SysctlKeep[k.name]
		if o, ok := others[k.name]; ok {
			k.value, k.persist = o.value, true
			k.text += fmt.Sprintf(" (%s in this run sets %s: the fix persists %s, not the running value", strings.Join(o.ids, ", "), o.value, o.value)
			if keep != "" {
				k.text += fmt.Sprintf("; --keep-%s %s is not followed, %s wins", keep, k.name, o.ids[0])
			}
			k.text += ")"
			continue
		}
		switch keep {
		case "running":
			k.value, k.persist = k.running, true
			k.text += fmt.Sprintf(" (--keep-running: the fix persists %s)", k.running)
		case "file":
			k.value, k.now = k.boot, true
			k.text += fmt.Sprintf(" (--keep-file: the fix sets %s back to %s now, persisting nothing)", k.name, orEmpty(k.boot))
		default:
			asks = append(asks, fmt.Sprintf("%s (running %s, next boot %s from %s)", k.name, orEmpty(k.running), orEmpty(k.boot), k.source))
		}
	}
	return asks
}

// driftFix persists or sets what decideDrift decided, and asks the user
// for the rest.
func driftFix(keys []driftKey, asks []string) *fix.Fix {
	fx := &fix.Fix{Summary: "Make the running and persisted kernel parameters agree"}
	var edit []string
	for _, k := range keys {
		switch {
		case k.persist:
			fx.Sysctl = append(fx.Sysctl, fix.KV{Key: k.name, Value: k.value})
			if !k.tuned && readAfterDbhost(k.source) {
				edit = append(edit, fmt.Sprintf("%s (change its %s line to %s: it is read after dbhost's file)", k.source, k.name, orEmpty(k.value)))
			}
		case k.now:
			fx.SysctlNow = append(fx.SysctlNow, fix.KV{Key: k.name, Value: k.value})
		}
	}
	var manual []string
	if len(asks) > 0 {
		manual = append(manual, "dbhost does not choose between a running value and the next boot's: for each of "+strings.Join(asks, "; ")+
			", run dbhost again with --keep-running NAME to persist the running value, or --keep-file NAME to set the running value back to the next boot's now (several names comma-separated).")
	}
	if len(edit) > 0 {
		manual = append(manual, "Also edit "+strings.Join(edit, "; ")+".")
	}
	fx.Manual = strings.Join(manual, " ")
	return fx
}

// readAfterDbhost reports whether the sysctl.d file at source (file:line)
// is applied after dbhost's /etc/sysctl.d/60-dbhost.conf (files sort by
// name across directories; /etc/sysctl.conf comes last), so that its
// value wins over the one dbhost persists.
func readAfterDbhost(source string) bool {
	file, _, _ := strings.Cut(source, ":")
	if file == "/etc/sysctl.conf" {
		return true
	}
	return strings.HasPrefix(file, "/") && path.Base(file) > fix.Name+".conf"
}

func driftTexts(keys []driftKey) string {
	t := make([]string, len(keys))
	for i, k := range keys {
		t[i] = k.text
	}
	return strings.Join(t, "; ")
}

// otherWish is the value other failing checks set for a parameter, and
// which checks: the first one's value (the one `dbhost fix` persists).
type otherWish struct {
	value string
	ids   []string
}

// othersWant lists, per kernel parameter, what the other failing checks
// of this run set it to (mem.shm_limits restoring kernel.shmmax, mem.swap
// lowering vm.swappiness): persisting the running value instead would make
// a value another check judges wrong permanent.
func othersWant(f *facts.Facts) map[string]*otherWish {
	want := map[string]*otherWish{}
	for _, fd := range Run(f, Selector{Skip: []string{"sysctl.drift"}}) {
		if fd.Status != Fail || fd.Fix == nil {
			continue
		}
		for _, kv := range fd.Fix.Sysctl {
			w, seen := want[kv.Key]
			if !seen {
				w = &otherWish{value: kv.Value}
				want[kv.Key] = w
			}
			if !slices.Contains(w.ids, fd.ID) {
				w.ids = append(w.ids, fd.ID)
			}
		}
	}
	return want
}

// keepEvidence names the parameters the user answered for that do not
// drift: nothing to keep.
func keepEvidence(f *facts.Facts, keys []driftKey) []Evidence {
	var ev []Evidence
	for _, name := range slices.Sorted(maps.Keys(f.SysctlKeep)) {
		if !slices.ContainsFunc(keys, func(k driftKey) bool { return k.name == name }) {
			ev = append(ev, Ev("--keep-"+f.SysctlKeep[name]+" "+name, "the running value is what the next boot sets: nothing to keep", "command line"))
		}
	}
	return ev
}

// runtimeOnlyScan compares the parameters nothing persists with the kernel's
// defaults.
type runtimeOnlyScan struct {
	noDefaults string // why no comparison is possible on this host at all
	lost       []driftKey
	ev         []Evidence
	garbled    []string
	atDefault  int
	skipped    []string // NAME (why)
}

// noKernelDefaults says why the kernel's defaults say nothing about the next
// boot here, or "".
func noKernelDefaults(f *facts.Facts) string {
	switch {
	case f.System.Container != "":
		return "dbhost runs in a container (" + f.System.Container + "): the host's boot sets the kernel's parameters"
	case f.Persist.SysctlErr != "":
		return "a sysctl.d file or directory could not be read (" + f.Persist.SysctlErr + "), so dbhost cannot tell that nothing persists a value"
	}
	return ""
}

func (s *runtimeOnlyScan) judge(f *facts.Facts, name string, r host.Reading) {
	if s.noDefaults != "" {
		return
	}
	d, why, known := facts.KernelDefaultFor(name, strings.TrimSpace(f.System.Kernel.Value))
	switch {
	case !known:
		s.skipped = append(s.skipped, name+" (no documented kernel default in dbhost's table)")
		return
	case why != "":
		s.skipped = append(s.skipped, name+" ("+why+")")
		return
	}
	run := normSysctl(r.Value)
	if !plausibleLike(d.Value, run) {
		s.garbled = append(s.garbled, fmt.Sprintf("%s holds %q", r.Source, r.Value))
		return
	}
	if run == d.Value {
		s.atDefault++
		return
	}
	s.lost = append(s.lost, driftKey{name: name, running: run, boot: d.Value, source: "the kernel's default, " + d.Doc,
		text: fmt.Sprintf("%s is %s now, but nothing persists it: the next boot gives %s (kernel default, %s)", name, run, orEmpty(d.Value), d.Doc)})
	s.ev = append(s.ev, Ev(name, fmt.Sprintf("running %s, next boot %s (kernel default)", run, orEmpty(d.Value)), r.Source+"; "+d.Doc))
}

// evidence lists the runtime-only values and what was skipped, and why.
func (s *runtimeOnlyScan) evidence() []Evidence {
	ev := s.ev
	switch {
	case s.noDefaults != "":
		ev = append(ev, Ev("not compared with kernel defaults", s.noDefaults, "sysctl.d"))
	case len(s.skipped) > 0:
		ev = append(ev, Ev("not comparable with a kernel default", strings.Join(s.skipped, "; "), "kernel defaults table"))
	}
	return ev
}

func (s *runtimeOnlyScan) skippedText() string {
	if s.noDefaults != "" {
		return "not compared with the kernel's defaults: " + s.noDefaults
	}
	if len(s.skipped) == 0 {
		return "none skipped"
	}
	return fmt.Sprintf("%d not comparable (computed at boot or version-dependent; see evidence)", len(s.skipped))
}

func orEmpty(v string) string {
	if v == "" {
		return `"" (empty)`
	}
	return v
}

// plausibleLike reports whether a running value has the shape the kernel
// prints for a parameter whose default is def: as many integers that fit
// 64 bits, or (an empty default: ip_local_reserved_ports) a list of ports
// and port ranges.
func plausibleLike(def, run string) bool {
	if def == "" {
		if run == "" {
			return true
		}
		for _, item := range strings.Split(run, ",") {
			for _, port := range strings.SplitN(item, "-", 2) {
				if n, err := strconv.ParseUint(port, 10, 16); err != nil || n == 0 {
					return false
				}
			}
		}
		return true
	}
	df, rf := strings.Fields(def), strings.Fields(run)
	if len(df) != len(rf) {
		return false
	}
	for _, x := range rf {
		if _, err := strconv.ParseInt(x, 10, 64); err != nil {
			if _, err := strconv.ParseUint(x, 10, 64); err != nil {
				return false
			}
		}
	}
	return true
}

// numeric reports a value made of integers only ("60", "4096 87380 6291456").
func numeric(v string) bool {
	f := strings.Fields(v)
	for _, x := range f {
		if _, err := strconv.ParseInt(x, 10, 64); err != nil {
			return false
		}
	}
	return len(f) > 0
}
