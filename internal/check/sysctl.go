package check

import (
	"fmt"
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
reboot, and the fix persists the running value in /etc/sysctl.d even when the check
that judges the value passes now. Values the kernel computes at boot (min_free_kbytes,
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
	var drift, garbled []string
	var ev []Evidence
	compared := 0
	rt := runtimeOnlyScan{noDefaults: noKernelDefaults(f)}
	for _, name := range facts.SysctlNames() {
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
		drift = append(drift, fmt.Sprintf("%s is %s now but %s sets %s (%s)", name, r.Value, who, bv.Value, bv.Source))
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
	var whys []string
	fx := &fix.Fix{Summary: "Make the running and persisted kernel parameters agree"}
	if len(drift) > 0 {
		whys = append(whys, "A reboot will silently change kernel parameters: "+strings.Join(drift, "; ")+".")
		if !f.System.Systemd {
			whys = append(whys, "(PID 1 is not systemd here: the files are applied at boot only if the init system runs sysctl --system.)")
		}
		// No "now" step: applying the files (sysctl --system) is right only
		// for the parameters whose file is right, which only the reader
		// can decide.
		fx.Manual = "For each parameter a file sets, decide which value is right: if the running value is, change the file and line named to it; if the file is, apply the files now with sysctl --system (it applies every sysctl.d file, dbhost's included)."
	}
	if len(rt.lost) > 0 {
		rt.deferToOthers(f)
		whys = append(whys, "Set at runtime only, lost at the next reboot: "+strings.Join(rt.lost, "; ")+".")
		fx.Sysctl = rt.keep
		if len(drift) == 0 {
			fx.Summary = "Persist the kernel parameters set at runtime"
			fx.Manual = "The file keeps the running values; if a value was a temporary experiment, drop its line and set the default back instead."
		}
	}
	return []Result{FailR(SubjectHost, strings.Join(whys, " "), memHostOnly(f, fx), ev...)}
}

// runtimeOnlyScan compares the parameters nothing persists with the kernel's
// defaults.
type runtimeOnlyScan struct {
	noDefaults string // why no comparison is possible on this host at all
	lost       []string
	keep       []fix.KV
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
	s.lost = append(s.lost, fmt.Sprintf("%s is %s now, but nothing persists it: the next boot gives %s (kernel default, %s)", name, run, orEmpty(d.Value), d.Doc))
	s.keep = append(s.keep, fix.KV{Key: name, Value: run})
	s.ev = append(s.ev, Ev(name, fmt.Sprintf("running %s, next boot %s (kernel default)", run, orEmpty(d.Value)), r.Source+"; "+d.Doc))
}

// deferToOthers persists, for a parameter another failing finding's fix
// sets (mem.shm_limits restoring kernel.shmmax, mem.swappiness lowering
// vm.swappiness), that fix's value instead of the running one: persisting a
// value another check judges wrong would make it permanent, and both fixes
// then agree when `dbhost fix` merges them.
func (s *runtimeOnlyScan) deferToOthers(f *facts.Facts) {
	want := map[string]string{}
	who := map[string]string{}
	for _, fd := range Run(f, Selector{Skip: []string{"sysctl.drift"}}) {
		if fd.Status != Fail || fd.Fix == nil {
			continue
		}
		for _, kv := range fd.Fix.Sysctl {
			if _, seen := want[kv.Key]; !seen {
				want[kv.Key], who[kv.Key] = kv.Value, fd.ID
			}
		}
	}
	for i, kv := range s.keep {
		if v, ok := want[kv.Key]; ok && v != kv.Value {
			s.keep[i].Value = v
			s.lost[i] += fmt.Sprintf(" (%s judges %s wrong: the fix persists its %s instead)", who[kv.Key], kv.Value, v)
		}
	}
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
