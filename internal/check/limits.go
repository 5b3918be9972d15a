package check

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/dbhost/dbhost/internal/engine"
	"github.com/dbhost/dbhost/internal/facts"
	"github.com/dbhost/dbhost/internal/fix"
	"github.com/dbhost/dbhost/internal/host"
)

// limitTarget is the usual nofile/nproc target for a database's service
// user, soft and hard (MongoDB's production notes, and the common advice
// for MySQL and PostgreSQL hosts).
const limitTarget = 64000

func init() {
	Register(Check{
		ID:        "limits.nofile",
		Title:     "Database processes may open enough files",
		Problem:   "Database processes may not open enough files",
		Severity:  Warning,
		AppliesTo: []string{"postgres", "mysql", "mongodb", "redis"},
		Doc: `Reads the running server's "Max open files" from /proc/PID/limits, soft and
hard, not the shell's ulimit, and compares both with what the server's own
configuration needs (defaults are named as defaults). PostgreSQL: each process keeps
at most max_files_per_process open (default 1000, counting those already open and 10
reserved for system() and dlopen); the postmaster probes the limit once at start
(set_max_safe_fds) and, below it, keeps fewer files open and reopens them more often.
MySQL asks for max(10 + max_connections + 2 x table_open_cache, 5 x max_connections,
open_files_limit as configured) (MariaDB also counts extra_max_connections), raises its
soft limit to that up to the hard limit, and otherwise lowers table_open_cache and
max_connections with a warning. Redis needs maxclients + 32 and lowers maxclients
otherwise. MongoDB's recommended ulimit settings ask for 64000 and mongod warns below.
The fix raises the limit for the service user in limits.d (logins and services started
outside systemd) and with LimitNOFILE= in a drop-in for the systemd unit (limits.d does
not apply to services); it raises a running MySQL or Redis with prlimit, and says when
only a restart lets the server use the new limit (PostgreSQL, MongoDB).`,
		Refs: []string{
			"https://www.mongodb.com/docs/manual/reference/ulimit/",
			"https://dev.mysql.com/doc/refman/8.0/en/server-system-variables.html#sysvar_open_files_limit",
			"https://www.postgresql.org/docs/current/runtime-config-resource.html#GUC-MAX-FILES-PER-PROCESS",
			"https://mariadb.com/kb/en/server-system-variables/#open_files_limit",
			"https://redis.io/docs/latest/develop/reference/clients/#maximum-concurrent-connected-clients",
		},
		Run: checkNofile,
	})
	Register(Check{
		ID:        "limits.nproc",
		Title:     "Database processes may start enough processes and threads",
		Problem:   "Database processes' limit on processes and threads is too low or missing",
		Severity:  Warning,
		AppliesTo: []string{"postgres", "mysql", "mongodb", "redis"},
		Doc: `Reads "Max processes" from /proc/PID/limits of the running server. The limit
counts every process and thread of the user, so it caps PostgreSQL backends (one
process per connection plus autovacuum workers, background workers, WAL senders and
about 10 auxiliary processes) and MySQL/MongoDB connection threads. Target: the tasks
the server runs at its configured connection limit, at most the usual 64000 (MongoDB's
recommended setting; also used where dbhost cannot count the tasks). "unlimited" is a
risk of its own: a runaway server or fork loop can then exhaust the kernel's task
table and take sshd and everything else down with it. The fix sets twice the need
(the rest of the user's tasks count too) in limits.d, LimitNPROC= in a drop-in for the
systemd unit, and prlimit for the running process (the kernel checks it at each fork).
For a server running as root the limit is moot: the kernel does not enforce
RLIMIT_NPROC for real user ID 0 (getrlimit(2)), so the check passes and points at
security.db_as_root, which judges running as root itself.`,
		Refs: []string{"https://www.mongodb.com/docs/manual/reference/ulimit/", "https://man7.org/linux/man-pages/man2/getrlimit.2.html"},
		Run:  checkNproc,
	})
	Register(Check{
		ID:        "limits.systemd_unit",
		Title:     "The database's systemd unit grants the file and process limits",
		Problem:   "The database's systemd unit grants too few files or processes",
		Severity:  Warning,
		AppliesTo: []string{"postgres", "mysql", "mongodb", "redis"},
		Doc: `Reads the systemd unit the instance runs in (from its cgroup), or the unit the
distribution installed for it, from the unit file and its drop-ins on disk (no
systemctl or D-Bus needed), and takes LimitNOFILE= and LimitNPROC= from them, else
DefaultLimitNOFILE= of system.conf, else systemd's default (nofile 1024 soft, 524288
hard). Services do not go through PAM, so limits.conf and limits.d never apply to
them: a host where limits.d gives the database user 64000 still starts the service
with 1024. Target: what the server's configuration needs, as limits.nofile and
limits.nproc compute it. The fix is a drop-in for the unit.`,
		Refs:    []string{"https://www.freedesktop.org/software/systemd/man/latest/systemd.exec.html#Process%20Properties"},
		Sysctls: []string{"kernel.threads-max"},
		Run:     checkUnitLimits,
	})
	Register(Check{
		ID:        "limits.file_max",
		Title:     "fs.file-max exceeds what the databases may open",
		Problem:   "fs.file-max is below what the databases may open",
		Severity:  Warning,
		AppliesTo: []string{"host"},
		Doc: `Compares fs.file-max, the kernel-wide ceiling of open files, with what the
databases may open together at their connection limits, and shows how many handles
are in use (fs.file-nr). RLIMIT_NOFILE is per process: PostgreSQL's host-wide need is
max_files_per_process (or the soft limit, if lower) times its processes
(max_connections + autovacuum_max_workers + max_worker_processes + max_wal_senders +
about 10); other servers are one process each and count their need (or their soft
limit, if lower). When the system runs out, every process gets ENFILE ("Too many open
files in system"), not only the database.`,
		Refs:    []string{"https://docs.kernel.org/admin-guide/sysctl/fs.html#file-max-file-nr"},
		Sysctls: []string{"fs.file-max", "fs.file-nr"},
		Run:     checkFileMax,
	})
	Register(Check{
		ID:        "limits.oom_score_adj",
		Title:     "The PostgreSQL postmaster is protected from the OOM killer, its backends are not",
		Problem:   "The PostgreSQL postmaster is exposed to the OOM killer, or its backends are shielded too",
		Severity:  Warning,
		AppliesTo: []string{"postgres"},
		Doc: `Reads /proc/PID/oom_score_adj of the postmaster and of its child processes. When
the OOM killer kills the postmaster, the whole server goes down and nothing restarts
it; when it kills a backend, the postmaster resets all sessions and recovers by
itself. PostgreSQL's documentation therefore starts the postmaster with
oom_score_adj -1000 (OOMScoreAdjust=-1000 in the unit; Debian's unit uses -900) and
sets PG_OOM_ADJUST_FILE=/proc/self/oom_score_adj and PG_OOM_ADJUST_VALUE=0 so that
every child resets itself to 0 and remains a candidate. A protected postmaster whose
children stay protected too leaves the OOM killer only other processes (sshd) to
kill. vm.overcommit_memory=2 is the other remedy (see the memory checks).`,
		Refs: []string{"https://www.postgresql.org/docs/current/kernel-resources.html#LINUX-MEMORY-OVERCOMMIT"},
		Run:  checkOOMScoreAdj,
	})
	Register(Check{
		ID:        "limits.tasks_max",
		Title:     "systemd TasksMax leaves room for every connection",
		Problem:   "systemd TasksMax leaves no room for every connection",
		Severity:  Info,
		AppliesTo: []string{"postgres", "mysql", "mongodb"},
		Doc: `TasksMax= caps the processes and threads in a unit's cgroup (the pids
controller); systemd's default is 15% of the kernel's task limit
(min(kernel.pid_max, kernel.threads-max)). A thread-per-connection server (MySQL,
MariaDB, MongoDB) needs max_connections threads plus its background threads; a
PostgreSQL server one process per connection plus its auxiliary processes. Past the
limit, fork() and pthread_create() fail and new connections are refused with
"Resource temporarily unavailable".`,
		Refs:    []string{"https://www.freedesktop.org/software/systemd/man/latest/systemd.resource-control.html#TasksMax=N"},
		Sysctls: []string{"kernel.pid_max", "kernel.threads-max"},
		Run:     checkTasksMax,
	})
}

// ---- limits.nofile ----

// nofileNeed is what the engine itself needs as open files per process,
// with why; an engine without a rule gets the usual target.
func nofileNeed(in *facts.Instance) engine.Need {
	n := in.Profile().Descriptors(in.Instance)
	if n.N == 0 {
		n.N = limitTarget
		n.Why = fmt.Sprintf("dbhost has no rule for what %s needs, so it asks for the usual target of %d", in.Flavor, limitTarget)
	}
	return n
}

func checkNofile(f *facts.Facts) []Result {
	var out []Result
	for _, in := range f.Instances {
		subj := in.Name()
		r, ok := in.Limits[host.LimitNofile]
		if !ok {
			out = append(out, UnknownR(subj, "cannot read the open-files limit of "+limPidDesc(in)+": "+hostOr(in.LimitsErr, "no \"Max open files\" line in /proc/PID/limits")))
			continue
		}
		need := nofileNeed(in)
		ev := append([]Evidence{limitEv(in, "nofile", r)}, needEv(need)...)
		problems := limBelow(r, need.N)
		if len(problems) == 0 {
			out = append(out, PassR(subj, fmt.Sprintf("%s may open %s files (hard %s): %s.", limPidDesc(in), host.FormatLimit(r.Soft), host.FormatLimit(r.Hard), need.Why), ev...))
			continue
		}
		reason := fmt.Sprintf("%s: %s; %s. ", limPidDesc(in), strings.Join(problems, ", "), need.Why)
		if need.Short != "" {
			reason += need.Short // the engine adapts instead of failing
		} else {
			reason += "At the limit the server fails with EMFILE (\"Too many open files\")."
		}
		out = append(out, FailR(subj, reason, limitFix(f, in, "nofile", "LimitNOFILE", limRoundUp(need.N, 1024), need), ev...))
	}
	return out
}

// limBelow says which of a limit's values are below need.
func limBelow(r host.Rlimit, need uint64) []string {
	var p []string
	if r.Soft < need {
		p = append(p, fmt.Sprintf("soft limit %s is below %d", host.FormatLimit(r.Soft), need))
	}
	if r.Hard < need {
		p = append(p, fmt.Sprintf("hard limit %s is below %d", host.FormatLimit(r.Hard), need))
	}
	return p
}

// ---- limits.nproc ----

// nprocNeed is the tasks the server runs at its connection limit, at most
// the usual target of 64000 (MongoDB's recommended setting): a server
// configured for more connections (mongod's default allows a million)
// meets other ceilings first (kernel.threads-max, TasksMax, its open
// files). Without an engine count, the usual target.
func nprocNeed(in *facts.Instance) engine.Need {
	n := in.Profile().Tasks(in.Instance)
	switch {
	case n.N == 0:
		n.N = limitTarget
		n.Why = fmt.Sprintf("dbhost cannot count the tasks %s runs at its connection limit, so it asks for the usual target of %d (MongoDB's recommended setting)", in.Flavor, limitTarget)
		n.Inputs = nil
	case n.N > limitTarget:
		n.Why = fmt.Sprintf("it could run %s; dbhost asks for at most the usual target of %d", n.Why, limitTarget)
		n.N = limitTarget
	default:
		n.Why = "it needs " + n.Why
	}
	return n
}

func checkNproc(f *facts.Facts) []Result {
	var out []Result
	for _, in := range f.Instances {
		subj := in.Name()
		r, ok := in.Limits[host.LimitNproc]
		if !ok {
			out = append(out, UnknownR(subj, "cannot read the process limit of "+limPidDesc(in)+": "+hostOr(in.LimitsErr, "no \"Max processes\" line in /proc/PID/limits")))
			continue
		}
		need := nprocNeed(in)
		ev := append([]Evidence{limitEv(in, "nproc", r)}, needEv(need)...)
		if in.UID == 0 {
			// fork and clone skip RLIMIT_NPROC for a real uid 0
			// (kernel/fork.c): whatever the limit says, it is moot.
			out = append(out, PassR(subj, fmt.Sprintf("%s runs as root, for which the kernel does not enforce the process limit (soft %s, hard %s): the value is moot here. Running as root is the problem (see security.db_as_root); once the server runs as its own user, this limit applies: %s.",
				limPidDesc(in), host.FormatLimit(r.Soft), host.FormatLimit(r.Hard), need.Why), ev...))
			continue
		}
		// The limit counts every task of the user: twice the need leaves
		// room for the rest of them.
		want := limRoundUp(2*need.N, 1024)
		problems := limBelow(r, need.N)
		switch {
		case r.Soft == host.Unlimited || r.Hard == host.Unlimited:
			out = append(out, FailR(subj, fmt.Sprintf("%s has no process limit (soft %s, hard %s): a runaway server or a fork loop under its user can fill the kernel's task table, and then sshd cannot fork a shell to fix it. Use a high but finite limit: %s.",
				limPidDesc(in), host.FormatLimit(r.Soft), host.FormatLimit(r.Hard), need.Why), limitFix(f, in, "nproc", "LimitNPROC", want, engine.Need{}), ev...))
		case len(problems) > 0:
			out = append(out, FailR(subj, fmt.Sprintf("%s: %s for the processes and threads of its whole user; %s. With one backend process (PostgreSQL) or thread (MySQL, MongoDB) per connection, connections beyond it fail with \"Resource temporarily unavailable\".",
				limPidDesc(in), strings.Join(problems, ", "), need.Why), limitFix(f, in, "nproc", "LimitNPROC", want, engine.Need{}), ev...))
		default:
			out = append(out, PassR(subj, fmt.Sprintf("%s may run %s processes and threads (hard %s), finite: %s.", limPidDesc(in), host.FormatLimit(r.Soft), host.FormatLimit(r.Hard), need.Why), ev...))
		}
	}
	return out
}

// limitFix raises an rlimit for the instance: limits.d for its user, a
// drop-in for its systemd unit, and, where the server can use it without a
// restart, prlimit for the running process. need says what the server
// sizes only at start (then the restart is the only way, and said so) and
// how the running server takes up the new limit.
func limitFix(f *facts.Facts, in *facts.Instance, item, unitKey string, value uint64, need engine.Need) *fix.Fix {
	v := strconv.FormatUint(value, 10)
	fx := &fix.Fix{Summary: fmt.Sprintf("Raise %s of %s to %s", item, in.Name(), v)}
	if in.User != "" && in.UID != 0 {
		fx.Limits = []fix.LimitLine{{Domain: in.User, Type: "soft", Item: item, Value: v}, {Domain: in.User, Type: "hard", Item: item, Value: v}}
	}
	u := dropinUnit(in)
	if u != "" {
		fx.Dropins = []fix.Dropin{{Unit: u, Section: "Service", Key: unitKey, Value: v}}
	} else {
		fx.Manual = "The server is not started by a systemd unit dbhost could find: raise the limit where it is started (ulimit -n/-u in its start script)."
	}
	if need.AtStart != "" {
		fx.Restart = &fix.Restart{Unit: u, Why: need.AtStart}
		return fx
	}
	// prlimit changes the running process's limit at once; the kernel
	// checks it at every open, fork and clone.
	rl := fix.Rlimit{PID: in.PID, Item: item, Soft: value, Hard: value}
	fx.Runtime, fx.Rlimits = []string{rl.Command()}, []fix.Rlimit{rl}
	if need.Live != "" {
		fx.Manual = strings.TrimSpace(fx.Manual + " Then: " + need.Live + ".")
	}
	return fx
}

// dropinUnit is the unit a drop-in for the instance belongs to: its real
// name, so that the drop-in directory is the one systemd reads.
func dropinUnit(in *facts.Instance) string {
	if in.Unit == nil || in.Unit.Masked {
		return ""
	}
	if in.Unit.Alias != "" {
		return in.Unit.Alias
	}
	return in.Unit.Name
}

// ---- limits.systemd_unit ----

func checkUnitLimits(f *facts.Facts) []Result {
	var out []Result
	for _, in := range f.Instances {
		u := in.Unit
		if u == nil {
			continue
		}
		subj := in.Name()
		ev := []Evidence{Ev("unit", unitDesc(u), strings.Join(u.Files, ", "))}
		if u.Err != "" && len(u.Files) == 0 {
			out = append(out, UnknownR(subj, "cannot read unit "+u.Name+": "+u.Err, ev...))
			continue
		}
		var low []string
		var dropins []fix.Dropin
		nofile, nproc := nofileNeed(in).N, nprocNeed(in).N
		for _, l := range []struct {
			key, item  string
			need, want uint64
		}{{"LimitNOFILE", "nofile", nofile, limRoundUp(nofile, 1024)}, {"LimitNPROC", "nproc", nproc, limRoundUp(2*nproc, 1024)}} {
			s, soft, ok := unitLimit(f, u, l.key)
			if !ok {
				ev = append(ev, Ev(l.key, "unreadable: "+s.Value, s.Source))
				continue
			}
			ev = append(ev, Ev(l.key, s.Value, s.Source))
			if soft >= l.need && (l.item != "nproc" || soft != host.Unlimited) {
				continue
			}
			desc := fmt.Sprintf("%s=%s (%s)", l.key, s.Value, s.Source)
			if l.item == "nproc" && soft == host.Unlimited {
				desc += " is unlimited"
			} else {
				desc += fmt.Sprintf(" gives a soft limit of %s, below the %d the server needs (see limits.%s)", host.FormatLimit(soft), l.need, l.item)
			}
			if se, he := f.Persist.LimitFor(in.User, nil, l.item); se != nil || he != nil {
				e := se
				if e == nil {
					e = he
				}
				desc += fmt.Sprintf(", although %s:%d gives %s %s %s: limits.d applies to PAM logins only, never to systemd services", e.File, e.Line, e.Domain, l.item, e.Value)
				ev = append(ev, Ev("limits.d "+l.item, e.Domain+" "+e.Type+" "+e.Value, fmt.Sprintf("%s:%d", e.File, e.Line)))
			}
			low = append(low, desc)
			dropins = append(dropins, fix.Dropin{Unit: dropinUnit(in), Section: "Service", Key: l.key, Value: strconv.FormatUint(l.want, 10)})
		}
		if len(low) == 0 {
			out = append(out, PassR(subj, fmt.Sprintf("%s grants the %d open files and a finite process limit of the %d tasks the server needs. %s", u.Name, nofile, nproc, unitHow(f, u)), ev...))
			continue
		}
		fx := &fix.Fix{Summary: "Raise the limits of " + dropinUnit(in), Dropins: dropins}
		if dropinUnit(in) == "" {
			fx = &fix.Fix{Summary: "Unmask and fix " + u.Name, Manual: u.Name + " is masked: the instance is not started by it."}
		}
		out = append(out, FailR(subj, strings.Join(low, "; ")+". "+unitHow(f, u), fx, ev...))
	}
	return out
}

// unitLimit returns a unit's effective Limit setting and its soft value.
// LimitNPROC not set anywhere is inherited from PID 1, whose limit is the
// kernel's default: threads-max / 2.
func unitLimit(f *facts.Facts, u *facts.Unit, key string) (facts.UnitSetting, uint64, bool) {
	s, ok := u.Effective(key)
	if !ok && key == "LimitNPROC" {
		tm, why := f.SysctlReading("kernel.threads-max").Count()
		if why != "" {
			return facts.UnitSetting{Value: "not set, and kernel.threads-max unknown (" + why + ")", Source: "kernel default"}, 0, false
		}
		n := uint64(tm / 2)
		return facts.UnitSetting{Value: strconv.FormatUint(n, 10), Source: "not set: inherited from PID 1, the kernel's default of kernel.threads-max / 2"}, n, true
	}
	if !ok {
		return facts.UnitSetting{Value: "not set", Source: "unit"}, 0, false
	}
	soft, _, ok := facts.ParseUnitLimit(s.Value)
	if !ok {
		return facts.UnitSetting{Value: "cannot parse " + s.Value, Source: s.Source}, 0, false
	}
	return s, soft, true
}

func unitDesc(u *facts.Unit) string {
	d := u.Name
	if u.Alias != "" {
		d += " (alias of " + u.Alias + ")"
	}
	if u.How == "installed" {
		d += ", installed"
	} else {
		d += ", running"
	}
	return d
}

// unitHow explains whether the unit's values are in force now.
func unitHow(f *facts.Facts, u *facts.Unit) string {
	if u.How == "cgroup" {
		return "The server runs under this unit, so these are its limits."
	}
	s := "The server does not run under " + u.Name + " now"
	if !f.System.Systemd {
		s += " (PID 1 is not systemd here)"
	}
	return s + ", but it is the unit that starts it at boot: these limits apply from the next start by systemd."
}

// ---- limits.file_max ----

func checkFileMax(f *facts.Facts) []Result {
	if len(f.Instances) == 0 {
		return nil
	}
	r := f.SysctlReading("fs.file-max")
	ev := []Evidence{EvReading("fs.file-max", r)}
	fileMax, why := r.Count()
	if why != "" {
		return []Result{UnknownR(SubjectHost, "cannot judge fs.file-max: "+why, ev...)}
	}
	var sum uint64
	var parts []string
	for _, in := range f.Instances {
		l, ok := in.Limits[host.LimitNofile]
		if !ok {
			return []Result{UnknownR(SubjectHost, "cannot read the open-files limit of "+limPidDesc(in)+": "+hostOr(in.LimitsErr, "no \"Max open files\" line"), ev...)}
		}
		n, part := fileMaxShare(in, l)
		sum += n
		parts = append(parts, part)
	}
	ev = append(ev, Ev("databases' open files at their limits", strings.Join(parts, "; ")+fmt.Sprintf(" (sum %d)", sum), "/proc/PID/limits and the servers' configuration"))
	if nr := f.SysctlReading("fs.file-nr"); nr.OK() {
		ev = append(ev, EvReading("fs.file-nr (allocated, free, max)", nr))
	}
	if uint64(fileMax) > sum {
		return []Result{PassR(SubjectHost, fmt.Sprintf("fs.file-max (%d) exceeds what the databases may open together (%d): %s.", fileMax, sum, strings.Join(parts, "; ")), ev...)}
	}
	want := limRoundUp(2*sum, 65536)
	return []Result{FailR(SubjectHost,
		fmt.Sprintf("fs.file-max (%d) does not exceed what the databases may open together (%d: %s): at their connection limits they may try to open more files than the kernel allows system-wide, and then every process on the host fails with ENFILE (\"Too many open files in system\").", fileMax, sum, strings.Join(parts, "; ")),
		sysctlFix(f, "Raise fs.file-max above what the databases may open", "fs.file-max", strconv.FormatUint(want, 10)), ev...)}
}

// fileMaxShare is how many files one instance may hold open host-wide: per
// process the smaller of its need and its soft limit, times its processes
// (PostgreSQL: every connection and auxiliary process has its own limit).
func fileMaxShare(in *facts.Instance, l host.Rlimit) (uint64, string) {
	need := in.Profile().Descriptors(in.Instance)
	per, src := l.Soft, "soft limit"
	if need.N > 0 && need.N < per {
		per, src = need.N, "need"
	}
	if per == host.Unlimited {
		return 0, in.Name() + " unlimited (not counted)"
	}
	if need.Processes <= 1 {
		return per, fmt.Sprintf("%s %d (%s)", in.Name(), per, src)
	}
	return per * need.Processes, fmt.Sprintf("%s %d per process (%s) x %d processes = %d", in.Name(), per, src, need.Processes, per*need.Processes)
}

// ---- limits.oom_score_adj ----

func checkOOMScoreAdj(f *facts.Facts) []Result {
	var out []Result
	for _, in := range f.ByEngine(engine.Postgres) {
		subj := in.Name()
		ev := []Evidence{EvReading("postmaster oom_score_adj", in.OOMScore)}
		pm, why := in.OOMScore.IntIn(-1000, 1000)
		if why != "" {
			out = append(out, UnknownR(subj, "cannot judge the postmaster's oom_score_adj: "+why, ev...))
			continue
		}
		var protectedKids, readKids []string
		for _, c := range in.ChildOOM {
			v, why := c.Reading.IntIn(-1000, 1000)
			if why != "" {
				continue
			}
			readKids = append(readKids, fmt.Sprintf("%d %s=%d", c.PID, c.Comm, v))
			if v < 0 {
				protectedKids = append(protectedKids, fmt.Sprintf("%d (%s)", c.PID, c.Comm))
			}
		}
		if len(readKids) > 0 {
			ev = append(ev, Ev("children oom_score_adj", strings.Join(readKids, ", "), "/proc/PID/oom_score_adj"))
		}
		if in.Unit != nil {
			if s, ok := in.Unit.Effective("OOMScoreAdjust"); ok {
				ev = append(ev, Ev("unit OOMScoreAdjust", s.Value, s.Source))
			}
		}
		switch {
		case pm >= 0:
			out = append(out, FailR(subj, fmt.Sprintf("The postmaster (pid %d) has oom_score_adj %d: under memory pressure the OOM killer may choose it, which takes the whole server down with no automatic restart, instead of one backend whose death the postmaster recovers from.", in.PID, pm),
				pgOOMFix(in), ev...))
		case len(protectedKids) > 0:
			out = append(out, FailR(subj, fmt.Sprintf("The postmaster is protected (oom_score_adj %d) but so are its children %s: they inherited the value because PG_OOM_ADJUST_FILE was not set, so the OOM killer cannot pick a backend and kills other processes (sshd, agents) or nothing at all.", pm, strings.Join(protectedKids, ", ")),
				pgOOMFix(in), ev...))
		case len(readKids) == 0 && len(in.ChildOOM) > 0:
			out = append(out, UnknownR(subj, fmt.Sprintf("The postmaster is protected (oom_score_adj %d) but its children's values could not be read: %s", pm, in.ChildOOM[0].Reading.Err), ev...))
		default:
			out = append(out, PassR(subj, fmt.Sprintf("The postmaster is protected from the OOM killer (oom_score_adj %d) and its children reset themselves to a killable value.", pm), ev...))
		}
	}
	return out
}

// pgOOMFix protects the postmaster and lets its children reset themselves,
// the way PostgreSQL's documentation describes.
func pgOOMFix(in *facts.Instance) *fix.Fix {
	fx := &fix.Fix{Summary: "Start the postmaster with oom_score_adj -1000 and let backends reset to 0"}
	if u := dropinUnit(in); u != "" {
		fx.Dropins = []fix.Dropin{
			{Unit: u, Section: "Service", Key: "OOMScoreAdjust", Value: "-1000"},
			{Unit: u, Section: "Service", Key: "Environment", Value: "PG_OOM_ADJUST_FILE=/proc/self/oom_score_adj PG_OOM_ADJUST_VALUE=0"},
		}
		// Lowering the running postmaster's value alone would protect
		// every backend it forks from then on: the environment that lets
		// them reset themselves is read only at start.
		fx.Restart = &fix.Restart{Unit: u, Why: "the postmaster reads PG_OOM_ADJUST_FILE and PG_OOM_ADJUST_VALUE from its environment only when it starts, and lowering its oom_score_adj without them would protect every backend it forks"}
		return fx
	}
	fx.Manual = "The postmaster is not started by a systemd unit dbhost could find: in its start script, write -1000 to /proc/self/oom_score_adj before starting it and export PG_OOM_ADJUST_FILE=/proc/self/oom_score_adj and PG_OOM_ADJUST_VALUE=0, then restart it."
	return fx
}

// ---- limits.tasks_max ----

// tasksNeed estimates the tasks an instance runs at max_connections.
func tasksNeed(in *facts.Instance) (uint64, string, []Evidence) {
	n := in.Profile().Tasks(in.Instance)
	return n.N, n.Why, needEv(n)
}

func checkTasksMax(f *facts.Facts) []Result {
	var out []Result
	kmax := kernelTasksMax(f)
	for _, in := range f.Instances {
		if in.Unit == nil || in.Unit.Masked {
			continue
		}
		need, why, ev := tasksNeed(in)
		if need == 0 {
			continue
		}
		subj := in.Name()
		s, ok := in.Unit.Effective("TasksMax")
		if !ok {
			continue
		}
		ev = append([]Evidence{Ev("TasksMax", s.Value, s.Source), Ev("unit", unitDesc(in.Unit), strings.Join(in.Unit.Files, ", "))}, ev...)
		if in.Cgroup.PidsMax.OK() && in.Unit.How == "cgroup" {
			ev = append(ev, EvReading("pids.max", in.Cgroup.PidsMax))
		}
		tm, ok := facts.ParseTasksMax(s.Value, kmax)
		if !ok {
			out = append(out, UnknownR(subj, fmt.Sprintf("cannot resolve TasksMax=%s (%s): a percentage needs kernel.pid_max and kernel.threads-max", s.Value, s.Source), ev...))
			continue
		}
		if tm >= need {
			out = append(out, PassR(subj, fmt.Sprintf("TasksMax=%s allows %s tasks; the server needs %s. %s", s.Value, host.FormatLimit(tm), why, unitHow(f, in.Unit)), ev...))
			continue
		}
		want := limRoundUp(2*need, 1024)
		out = append(out, FailR(subj, fmt.Sprintf("TasksMax=%s (%s) allows %d tasks in the unit's cgroup, but the server needs %s: past the limit fork()/pthread_create() fail and new connections are refused. %s", s.Value, s.Source, tm, why, unitHow(f, in.Unit)),
			tasksMaxFix(in, want), ev...))
	}
	return out
}

// tasksMaxFix raises TasksMax in a drop-in and, when the server runs under
// the unit, in its cgroup now (systemctl set-property needs no restart).
func tasksMaxFix(in *facts.Instance, want uint64) *fix.Fix {
	u, v := dropinUnit(in), strconv.FormatUint(want, 10)
	fx := &fix.Fix{Summary: "Raise TasksMax of " + u, Dropins: []fix.Dropin{{Unit: u, Section: "Service", Key: "TasksMax", Value: v}}}
	if in.Unit.How == "cgroup" {
		fx.Runtime = []string{"systemctl set-property --runtime " + u + " TasksMax=" + v}
	}
	return fx
}

// kernelTasksMax is what systemd resolves TasksMax percentages against:
// min(kernel.pid_max, kernel.threads-max).
func kernelTasksMax(f *facts.Facts) uint64 {
	pm, why1 := f.SysctlReading("kernel.pid_max").Count()
	tm, why2 := f.SysctlReading("kernel.threads-max").Count()
	ok1, ok2 := why1 == "" && pm > 0, why2 == "" && tm > 0
	switch {
	case ok1 && ok2:
		return uint64(min(pm, tm))
	case ok1:
		return uint64(pm)
	case ok2:
		return uint64(tm)
	}
	return 0
}

// ---- helpers of the host-limits domain ----

// needEv is the evidence behind an engine's Need.
func needEv(n engine.Need) []Evidence {
	var ev []Evidence
	for _, i := range n.Inputs {
		ev = append(ev, Ev(i.Name, i.Value, i.Source))
	}
	return ev
}

func limitEv(in *facts.Instance, item string, r host.Rlimit) Evidence {
	return Ev(item+" (soft/hard)", host.FormatLimit(r.Soft)+" / "+host.FormatLimit(r.Hard), fmt.Sprintf("/proc/%d/limits", in.PID))
}

func limPidDesc(in *facts.Instance) string {
	name := in.Flavor
	if in.Version != "" {
		name += " " + in.Version
	}
	return fmt.Sprintf("%s (pid %d, user %s)", hostOr(name, string(in.Engine)), in.PID, hostOr(in.User, strconv.Itoa(in.UID)))
}

// hostOr returns s, or def when s is empty.
func hostOr(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

func limRoundUp(n, unit uint64) uint64 { return (n + unit - 1) / unit * unit }
