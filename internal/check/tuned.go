package check

import (
	"fmt"
	"sort"
	"strconv"
	"strings"

	"github.com/dbhost/dbhost/internal/engine"
	"github.com/dbhost/dbhost/internal/facts"
	"github.com/dbhost/dbhost/internal/fix"
)

func init() {
	Register(Check{
		ID:        "tuned.overrides",
		Title:     "An active TuneD profile does not re-apply values that hurt the databases",
		Problem:   "An active TuneD profile re-applies values that hurt the databases",
		Severity:  Warning,
		AppliesTo: []string{"tuned"},
		Doc: `Reads /etc/tuned/active_profile, follows the profile's include= chain through
/etc/tuned and /usr/lib/tuned, and collects what it sets: [sysctl] parameters,
[vm] transparent_hugepages, [disk] elevator and readahead. TuneD applies these at
every start of the daemon, after sysctl.d and udev rules. With reapply_sysctl=1
(tuned-main.conf, the default) it re-applies sysctl.d afterwards, so sysctl.d wins
for parameters both set; THP and disk settings have no such second pass, and a
kernel command line transparent_hugepage= is overridden too. The check fails for
each value that differs from dbhost's recommendation (swappiness 1-10, dirty ratios,
network backlogs and keepalive, THP never - or always for MongoDB 8+ alone - disk
elevator none/mq-deadline and read-ahead at most 128 KB) or from what sysctl.d sets.
The fix goes into a child profile (/etc/tuned/dbhost/tuned.conf, include= the active
one) so that TuneD itself applies the right values. Values TuneD computes at run time
(${f:...} functions, variables) are reported, not judged.`,
		Refs: []string{"https://docs.redhat.com/en/documentation/red_hat_enterprise_linux/9/html/monitoring_and_managing_system_status_and_performance/customizing-tuned-profiles_monitoring-and-managing-system-status-and-performance", "https://www.mongodb.com/docs/manual/administration/tcmalloc-performance/"},
		Run:  checkTunedOverrides,
	})
}

// sysctlAdvice is dbhost's judgement of one parameter's value: ok, and the
// value to propose otherwise. Only parameters whose target does not depend
// on the engines beyond what is known here are listed.
type sysctlAdvice func(v int64) (bool, string)

func tunedAtMost(limit, want int64) sysctlAdvice {
	return func(v int64) (bool, string) { return v <= limit, strconv.FormatInt(want, 10) }
}

func tunedAtLeast(limit int64) sysctlAdvice {
	return func(v int64) (bool, string) { return v >= limit, strconv.FormatInt(limit, 10) }
}

var tunedSysctlAdvice = map[string]sysctlAdvice{
	"vm.swappiness":                func(v int64) (bool, string) { return v >= 1 && v <= 10, "1" },
	"vm.dirty_ratio":               tunedAtMost(20, 15),
	"vm.dirty_background_ratio":    tunedAtMost(10, 5),
	"vm.zone_reclaim_mode":         tunedAtMost(0, 0),
	"net.core.somaxconn":           tunedAtLeast(somaxconnTarget),
	"net.ipv4.tcp_max_syn_backlog": tunedAtLeast(synBacklogTarget),
	"net.ipv4.tcp_keepalive_time":  tunedAtMost(keepaliveTime, keepaliveTime),
	"net.ipv4.tcp_keepalive_intvl": tunedAtMost(keepaliveIntvl, keepaliveIntvl),
	"net.ipv4.tcp_fin_timeout":     tunedAtMost(finTimeout, finTimeout),
}

// tunedWantedTHP is the transparent_hugepages mode the running engines want:
// "always" only when MongoDB 8+ is alone, else "never".
func tunedWantedTHP(f *facts.Facts) (string, string) {
	mongo8, others := 0, 0
	for _, in := range f.Instances {
		if in.Engine == engine.MongoDB && in.Major() >= 8 {
			mongo8++
		} else {
			others++
		}
	}
	switch {
	case mongo8 > 0 && others == 0:
		return "always", "MongoDB 8+ wants THP always (its TCMalloc uses huge pages)"
	case len(f.Instances) == 0:
		return "never", "databases want THP off"
	}
	return "never", "PostgreSQL, MySQL, Redis and MongoDB before 8.0 want THP never (latency spikes from compaction, memory bloat)"
}

func checkTunedOverrides(f *facts.Facts) []Result {
	t := f.Tuned
	if t.Active == "" {
		return nil
	}
	ev := []Evidence{Ev("active profile", t.Active, "/etc/tuned/active_profile")}
	if len(t.Chain) > 0 {
		ev = append(ev, Ev("profile chain", strings.Join(t.Chain, " → "), strings.Join(t.Files, ", ")))
	}
	ev = append(ev, Ev("reapply_sysctl", strconv.FormatBool(t.ReapplySysctl), "/etc/tuned/tuned-main.conf"))
	if len(t.Chain) == 0 {
		return []Result{UnknownR(SubjectHost, fmt.Sprintf("TuneD profile %q is active but not found in %s: cannot tell what it applies.", t.Active, "/etc/tuned or /usr/lib/tuned"), ev...)}
	}
	j := &tunedJudgement{ev: ev, fx: &fix.Fix{Summary: "Override TuneD profile " + t.Active + " in a child profile", HostOnly: f.System.Container != ""}}
	// Four independent parts of the profile, judged in this order (the
	// order of the reasons and of the fix).
	j.sysctls(f)
	j.thp(f)
	j.elevator(t)
	j.readahead(t)

	notes := j.notes(f)
	if len(j.conflicts) == 0 {
		return []Result{PassR(SubjectHost, fmt.Sprintf("TuneD profile %s sets nothing that conflicts with dbhost's recommendations or sysctl.d.%s", t.Active, notes), j.ev...)}
	}
	why := fmt.Sprintf("TuneD profile %s re-applies at every start: %s. Changing sysctl.d, udev rules or the kernel command line does not stick against it; put the values in a child profile that includes %s and activate it (tuned-adm profile dbhost).%s", t.Active, strings.Join(j.conflicts, "; "), t.Active, notes)
	fx := j.fx
	if len(fx.Sysctl) == 0 && len(fx.Sysfs) == 0 && len(fx.TunedDisk) == 0 {
		fx.Manual = "Create /etc/tuned/dbhost/tuned.conf with include=" + t.Active + " and the values above, then run tuned-adm profile dbhost."
	}
	return []Result{FailR(SubjectHost, why, fx, j.ev...)}
}

// tunedJudgement collects what tuned.overrides finds in a profile: values
// that conflict (with evidence and a fix), values TuneD computes at run time
// (raw, not judged) and sysctls sysctl.d replaces (masked).
type tunedJudgement struct {
	conflicts, raw, masked []string
	ev                     []Evidence
	fx                     *fix.Fix
}

// conflict records a value the profile sets that dbhost would not.
func (j *tunedJudgement) conflict(why, key, value, where string) {
	j.conflicts = append(j.conflicts, why)
	j.ev = append(j.ev, Ev(key, value, where))
}

// sysctls judges the profile's [sysctl] section: against dbhost's advice,
// and against sysctl.d, which wins only with reapply_sysctl=1.
func (j *tunedJudgement) sysctls(f *facts.Facts) {
	t := f.Tuned
	names := make([]string, 0, len(t.Sysctl))
	for n := range t.Sysctl {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, name := range names {
		tv := t.Sysctl[name]
		where := persistedWhere(tv)
		if strings.Contains(tv.Value, "${") {
			j.raw = append(j.raw, fmt.Sprintf("%s = %s (%s)", name, tv.Value, where))
			continue
		}
		p, inFiles := f.Persist.PersistedSysctl(name)
		if inFiles && t.ReapplySysctl {
			if normSysctl(p.Value) != normSysctl(tv.Value) {
				j.masked = append(j.masked, fmt.Sprintf("%s = %s (%s) is replaced by %s from %s", name, tv.Value, where, p.Value, persistedWhere(p)))
			}
			continue
		}
		bad, want := false, ""
		why := ""
		if adv, ok := tunedSysctlAdvice[name]; ok {
			if v, err := strconv.ParseInt(strings.Fields(tv.Value + " x")[0], 10, 64); err == nil {
				if ok, w := adv(v); !ok {
					bad, want, why = true, w, "dbhost recommends "+w
				}
			}
		}
		if inFiles && normSysctl(p.Value) != normSysctl(tv.Value) {
			bad = true
			if want == "" {
				want = normSysctl(p.Value)
			}
			why = strings.TrimPrefix(why+"; ", "; ") + fmt.Sprintf("sysctl.d sets %s (%s), but reapply_sysctl=0 lets TuneD win", p.Value, persistedWhere(p))
		}
		if !bad {
			continue
		}
		j.conflict(fmt.Sprintf("%s = %s (%s): %s", name, tv.Value, where, why), name, tv.Value, where)
		j.fx.Sysctl = append(j.fx.Sysctl, fix.KV{Key: name, Value: want})
	}
}

// thp judges [vm] transparent_hugepages against what the engines want.
func (j *tunedJudgement) thp(f *facts.Facts) {
	thp, ok := f.Tuned.VM["transparent_hugepages"]
	if !ok {
		return
	}
	want, why := tunedWantedTHP(f)
	switch {
	case strings.Contains(thp.Value, "${"):
		j.raw = append(j.raw, fmt.Sprintf("transparent_hugepages = %s (%s)", thp.Value, persistedWhere(thp)))
	case thp.Value != want && !(want == "never" && thp.Value == "madvise" && onlyRedisOrNone(f)):
		j.conflict(fmt.Sprintf("[vm] transparent_hugepages = %s (%s): %s; TuneD sets it at every start, over the kernel command line", thp.Value, persistedWhere(thp), why),
			"transparent_hugepages", thp.Value, persistedWhere(thp))
		j.fx.Sysfs = append(j.fx.Sysfs, fix.KV{Key: "/sys/kernel/mm/transparent_hugepage/enabled", Value: want})
	}
}

// elevator judges [disk] elevator: fair-queueing schedulers are refused.
func (j *tunedJudgement) elevator(t facts.Tuned) {
	el, ok := t.Disk["elevator"]
	if !ok || (el.Value != "bfq" && el.Value != "cfq") {
		return
	}
	j.conflict(fmt.Sprintf("[disk] elevator = %s (%s): fair-queueing schedulers add latency for databases; use none (NVMe, virtual disks) or mq-deadline", el.Value, persistedWhere(el)),
		"elevator", el.Value, persistedWhere(el))
	j.fx.TunedDisk = append(j.fx.TunedDisk, fix.KV{Key: "elevator", Value: "mq-deadline"})
}

// readahead judges [disk] readahead: more than the kernel's 128 KB is refused.
func (j *tunedJudgement) readahead(t facts.Tuned) {
	ra, ok := t.Disk["readahead"]
	if !ok {
		return
	}
	kb, ok := tunedReadaheadKB(ra.Value)
	switch {
	case !ok:
		j.raw = append(j.raw, fmt.Sprintf("readahead = %s (%s)", ra.Value, persistedWhere(ra)))
	case kb > 128:
		j.conflict(fmt.Sprintf("[disk] readahead = %s (%s): %d KB of read-ahead per request fills the page cache with neighbouring data random-access databases never read; the kernel default is 128 KB", ra.Value, persistedWhere(ra), kb),
			"readahead", ra.Value, persistedWhere(ra))
		j.fx.TunedDisk = append(j.fx.TunedDisk, fix.KV{Key: "readahead", Value: "128"})
	}
}

// notes is what the verdict adds, whatever it is: values not judged, and
// why the profile may not be in force.
func (j *tunedJudgement) notes(f *facts.Facts) string {
	notes := ""
	if len(j.masked) > 0 {
		notes += " sysctl.d wins over the profile for: " + strings.Join(j.masked, "; ") + " (reapply_sysctl=1)."
	}
	if len(j.raw) > 0 {
		notes += " Computed by TuneD at run time, not judged: " + strings.Join(j.raw, "; ") + "."
	}
	if len(f.Tuned.Missing) > 0 {
		notes += " Profiles not found: " + strings.Join(f.Tuned.Missing, ", ") + "."
	}
	if !f.TunedRunning() {
		notes += " tuned is not running now; the profile applies when it starts (at boot)."
	}
	return notes
}

// onlyRedisOrNone: Redis only asks that THP is not "always"; madvise is
// acceptable when nothing else runs.
func onlyRedisOrNone(f *facts.Facts) bool {
	for _, in := range f.Instances {
		if in.Engine != engine.Redis {
			return false
		}
	}
	return len(f.Instances) > 0
}

// tunedReadaheadKB reads TuneD's readahead value: KB, or 512-byte sectors
// with an "s" suffix; a leading ">" means "at least".
func tunedReadaheadKB(v string) (int64, bool) {
	v = strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(v), ">"))
	div := int64(1)
	if s, ok := strings.CutSuffix(v, "s"); ok {
		v, div = strings.TrimSpace(s), 2
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil {
		return 0, false
	}
	return n / div, true
}
