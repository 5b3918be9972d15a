package check

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/dbhost/dbhost/internal/facts"
	"github.com/dbhost/dbhost/internal/fix"
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
removed.`,
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
	for _, name := range facts.SysctlNames() {
		r := f.SysctlReading(name)
		if !r.OK() {
			continue
		}
		bv, ok := nextBootSysctl(f, name)
		if !ok || bv.Raw {
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
	if skipped := f.Persist.SysctlSkipped; len(skipped) > 0 {
		ev = append(ev, Ev("lines that are not assignments", strings.Join(skipped, ", "), "sysctl.d"))
		if compared == 0 && len(drift) == 0 {
			return []Result{UnknownR(SubjectHost, fmt.Sprintf("No sysctl.d assignment of a judged parameter could be compared, and %d line(s) are not assignments (%s): what the next boot sets is unknown.", len(skipped), strings.Join(skipped, ", ")), ev...)}
		}
	}
	if len(drift) == 0 && len(garbled) > 0 {
		return []Result{UnknownR(SubjectHost, "cannot compare the running values with the next boot's: "+strings.Join(garbled, "; ")+", which is not the number the kernel prints.", ev...)}
	}
	if len(drift) == 0 {
		return []Result{PassR(SubjectHost, fmt.Sprintf("Judged kernel parameters set by sysctl.d or TuneD: %d; each holds its persisted value now, so a reboot keeps them.", compared), ev...)}
	}
	why := "A reboot will silently change kernel parameters: " + strings.Join(drift, "; ") + "."
	if !f.System.Systemd {
		why += " (PID 1 is not systemd here: the files are applied at boot only if the init system runs sysctl --system.)"
	}
	return []Result{FailR(SubjectHost, why, &fix.Fix{
		Summary: "Make the running and persisted kernel parameters agree",
		Manual:  "For each parameter decide which value is right: if the running value is, change the file and line named to it; if the file is, apply the files now.",
		Runtime: []string{"sysctl --system"},
	}, ev...)}
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
