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
	var conflicts, raw, masked []string
	fx := &fix.Fix{Summary: "Override TuneD profile " + t.Active + " in a child profile", HostOnly: f.System.Container != ""}

	names := make([]string, 0, len(t.Sysctl))
	for n := range t.Sysctl {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, name := range names {
		tv := t.Sysctl[name]
		where := persistedWhere(tv)
		if strings.Contains(tv.Value, "${") {
			raw = append(raw, fmt.Sprintf("%s = %s (%s)", name, tv.Value, where))
			continue
		}
		p, inFiles := f.Persist.PersistedSysctl(name)
		if inFiles && t.ReapplySysctl {
			if normSysctl(p.Value) != normSysctl(tv.Value) {
				masked = append(masked, fmt.Sprintf("%s = %s (%s) is replaced by %s from %s", name, tv.Value, where, p.Value, persistedWhere(p)))
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
		conflicts = append(conflicts, fmt.Sprintf("%s = %s (%s): %s", name, tv.Value, where, why))
		ev = append(ev, Ev(name, tv.Value, where))
		fx.Sysctl = append(fx.Sysctl, fix.KV{Key: name, Value: want})
	}

	if thp, ok := t.VM["transparent_hugepages"]; ok {
		want, why := tunedWantedTHP(f)
		switch {
		case strings.Contains(thp.Value, "${"):
			raw = append(raw, fmt.Sprintf("transparent_hugepages = %s (%s)", thp.Value, persistedWhere(thp)))
		case thp.Value != want && !(want == "never" && thp.Value == "madvise" && onlyRedisOrNone(f)):
			conflicts = append(conflicts, fmt.Sprintf("[vm] transparent_hugepages = %s (%s): %s; TuneD sets it at every start, over the kernel command line", thp.Value, persistedWhere(thp), why))
			ev = append(ev, Ev("transparent_hugepages", thp.Value, persistedWhere(thp)))
			fx.Sysfs = append(fx.Sysfs, fix.KV{Key: "/sys/kernel/mm/transparent_hugepage/enabled", Value: want})
		}
	}
	if el, ok := t.Disk["elevator"]; ok && (el.Value == "bfq" || el.Value == "cfq") {
		conflicts = append(conflicts, fmt.Sprintf("[disk] elevator = %s (%s): fair-queueing schedulers add latency for databases; use none (NVMe, virtual disks) or mq-deadline", el.Value, persistedWhere(el)))
		ev = append(ev, Ev("elevator", el.Value, persistedWhere(el)))
		fx.TunedDisk = append(fx.TunedDisk, fix.KV{Key: "elevator", Value: "mq-deadline"})
	}
	if ra, ok := t.Disk["readahead"]; ok {
		if kb, ok := tunedReadaheadKB(ra.Value); ok && kb > 128 {
			conflicts = append(conflicts, fmt.Sprintf("[disk] readahead = %s (%s): %d KB of read-ahead per request fills the page cache with neighbouring data random-access databases never read; the kernel default is 128 KB", ra.Value, persistedWhere(ra), kb))
			ev = append(ev, Ev("readahead", ra.Value, persistedWhere(ra)))
			fx.TunedDisk = append(fx.TunedDisk, fix.KV{Key: "readahead", Value: "128"})
		} else if !ok {
			raw = append(raw, fmt.Sprintf("readahead = %s (%s)", ra.Value, persistedWhere(ra)))
		}
	}

	notes := ""
	if len(masked) > 0 {
		notes += " sysctl.d wins over the profile for: " + strings.Join(masked, "; ") + " (reapply_sysctl=1)."
	}
	if len(raw) > 0 {
		notes += " Computed by TuneD at run time, not judged: " + strings.Join(raw, "; ") + "."
	}
	if len(t.Missing) > 0 {
		notes += " Profiles not found: " + strings.Join(t.Missing, ", ") + "."
	}
	if !f.TunedRunning() {
		notes += " tuned is not running now; the profile applies when it starts (at boot)."
	}
	if len(conflicts) == 0 {
		return []Result{PassR(SubjectHost, fmt.Sprintf("TuneD profile %s sets nothing that conflicts with dbhost's recommendations or sysctl.d.%s", t.Active, notes), ev...)}
	}
	why := fmt.Sprintf("TuneD profile %s re-applies at every start: %s. Changing sysctl.d, udev rules or the kernel command line does not stick against it; put the values in a child profile that includes %s and activate it (tuned-adm profile dbhost).%s", t.Active, strings.Join(conflicts, "; "), t.Active, notes)
	if len(fx.Sysctl) == 0 && len(fx.Sysfs) == 0 && len(fx.TunedDisk) == 0 {
		fx.Manual = "Create /etc/tuned/dbhost/tuned.conf with include=" + t.Active + " and the values above, then run tuned-adm profile dbhost."
	}
	return []Result{FailR(SubjectHost, why, fx, ev...)}
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
