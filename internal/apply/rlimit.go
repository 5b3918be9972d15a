package apply

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"regexp"
	"runtime"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/dbhost/dbhost/internal/check"
	"github.com/dbhost/dbhost/internal/fix"
	"github.com/dbhost/dbhost/internal/host"
	"github.com/dbhost/dbhost/internal/journal"
)

// The resource limits of running servers that limits fixes raise
// (fix.Rlimit, the structured "prlimit --pid" of their runtime commands)
// are planned and applied as values whose path is /proc/PID/limits:ITEM,
// old and new "SOFT:HARD". They are set with prlimit(2), journaled with the
// previous limits (kind "rlimit") so that a rollback or a recovery puts
// them back, and never fail an apply: a limit that cannot be set, or no
// longer applies (the process ended), is said in the plan or in the change
// set's notes.
//
// Permissions: prlimit(2) on another process needs CAP_SYS_RESOURCE, or
// the caller's real, effective and saved user and group IDs all equal to
// the target's. Without the capability (root in some containers and VMs),
// dbhost sets the limit from a thread that took the server's user and
// group IDs. That thread may lower the hard limit but never raise it: a
// raise above the current hard limit is left out of the plan, and so is a
// lowering of the hard limit, which a rollback could not raise back.

// KindRlimit is the journal kind of a running process's resource limit.
const KindRlimit = "rlimit"

func init() { journal.RegisterKind(KindRlimit, undoRlimit) }

var rlimitPathRe = regexp.MustCompile(`^/proc/([1-9][0-9]*)/limits:(nofile|nproc|memlock)$`)

// rlimits maps fix.Rlimit items to the resource and its /proc/PID/limits
// line.
var rlimits = map[string]struct {
	resource int
	name     string
}{
	"nofile":  {unix.RLIMIT_NOFILE, host.LimitNofile},
	"nproc":   {unix.RLIMIT_NPROC, host.LimitNproc},
	"memlock": {unix.RLIMIT_MEMLOCK, host.LimitMemlock},
}

func rlimitPath(pid int, item string) string { return fmt.Sprintf("/proc/%d/limits:%s", pid, item) }

// parseRlimitPath returns the PID and item of a value path, ok false for a
// kernel knob.
func parseRlimitPath(p string) (pid int, item string, ok bool) {
	m := rlimitPathRe.FindStringSubmatch(p)
	if m == nil {
		return 0, "", false
	}
	pid, err := strconv.Atoi(m[1])
	return pid, m[2], err == nil
}

func isRlimitPath(p string) bool {
	_, _, ok := parseRlimitPath(p)
	return ok
}

// rlimitAllowed checks a planned limit value ("SOFT:HARD").
func rlimitAllowed(p, v string) error {
	if _, ok := parseLimitPair(v); !ok {
		return fmt.Errorf("refusing to set %s to %q: not SOFT:HARD", p, v)
	}
	return nil
}

func formatLimitPair(l unix.Rlimit) string {
	return fix.FormatRlimit(l.Cur) + ":" + fix.FormatRlimit(l.Max)
}

func parseLimitPair(s string) (unix.Rlimit, bool) {
	a, b, ok := strings.Cut(s, ":")
	if !ok {
		return unix.Rlimit{}, false
	}
	parse := func(s string) (uint64, bool) {
		if s == "unlimited" {
			return fix.Unlimited, true
		}
		v, err := strconv.ParseUint(s, 10, 64)
		return v, err == nil
	}
	soft, ok1 := parse(a)
	hard, ok2 := parse(b)
	if !ok1 || !ok2 || soft > hard {
		return unix.Rlimit{}, false
	}
	return unix.Rlimit{Cur: soft, Max: hard}, true
}

// procIdentity is what identifies a running process beyond its PID (which
// the kernel reuses): its start time, and the credentials prlimit needs.
type procIdentity struct {
	Start    uint64 // clock ticks after boot, /proc/PID/stat field 22
	UID, GID int
	// Settable: real, effective and saved IDs are equal, so a thread
	// with them may call prlimit on the process.
	Settable bool
}

func readIdentity(pid int) (procIdentity, error) {
	var id procIdentity
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return id, err
	}
	// The command name (field 2) may hold spaces and parentheses: the
	// fields after it start after the last ')'.
	s := string(stat)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return id, fmt.Errorf("/proc/%d/stat: no command name", pid)
	}
	f := strings.Fields(s[i+1:])
	if len(f) < 20 {
		return id, fmt.Errorf("/proc/%d/stat: too few fields", pid)
	}
	if id.Start, err = strconv.ParseUint(f[19], 10, 64); err != nil {
		return id, fmt.Errorf("/proc/%d/stat: start time: %w", pid, err)
	}
	status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return id, err
	}
	uids, gids := statusIDs(string(status), "Uid:"), statusIDs(string(status), "Gid:")
	if len(uids) < 3 || len(gids) < 3 {
		return id, fmt.Errorf("/proc/%d/status: no Uid or Gid line", pid)
	}
	id.UID, id.GID = uids[0], gids[0]
	id.Settable = uids[1] == uids[0] && uids[2] == uids[0] && gids[1] == gids[0] && gids[2] == gids[0]
	return id, nil
}

func statusIDs(status, key string) []int {
	for _, ln := range strings.Split(status, "\n") {
		if rest, ok := strings.CutPrefix(ln, key); ok {
			var out []int
			for _, f := range strings.Fields(rest) {
				v, err := strconv.Atoi(f)
				if err != nil {
					return nil
				}
				out = append(out, v)
			}
			return out
		}
	}
	return nil
}

// readRlimit reads one limit of a process from /proc/PID/limits (readable
// by root without any capability, unlike prlimit(2)).
func readRlimit(pid int, item string) (unix.Rlimit, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/limits", pid))
	if err != nil {
		return unix.Rlimit{}, err
	}
	l, err := host.ParseLimits(b)
	if err != nil {
		return unix.Rlimit{}, err
	}
	r, ok := l[rlimits[item].name]
	if !ok {
		return unix.Rlimit{}, fmt.Errorf("/proc/%d/limits has no %q line", pid, rlimits[item].name)
	}
	return unix.Rlimit{Cur: r.Soft, Max: r.Hard}, nil
}

// hasSysResource reports whether this process has CAP_SYS_RESOURCE in its
// effective set.
func hasSysResource() bool {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return false
	}
	for _, ln := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(ln, "CapEff:"); ok {
			v, err := strconv.ParseUint(strings.TrimSpace(rest), 16, 64)
			return err == nil && v&(1<<unix.CAP_SYS_RESOURCE) != 0
		}
	}
	return false
}

// planRlimits plans the running processes' limits of the selected
// findings, one value per process and item; what cannot be set is said in
// the notes.
func planRlimits(selected []check.Finding) (values []ValuePlan, notes []string) {
	capable := hasSysResource()
	seen := map[string]int{}
	for _, f := range selected {
		t := Target{ID: f.ID, Subject: f.Subject}.String()
		for _, rl := range f.Fix.Rlimits {
			if _, ok := rlimits[rl.Item]; !ok || rl.PID <= 0 || rl.Soft > rl.Hard {
				notes = append(notes, fmt.Sprintf("%s: command not run: %s (dbhost does not set this limit)", t, rl.Command()))
				continue
			}
			p := rlimitPath(rl.PID, rl.Item)
			if i, ok := seen[p]; ok {
				values[i].Findings = append(values[i].Findings, t)
				continue
			}
			v, why := planRlimit(rl, capable)
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
func planRlimit(rl fix.Rlimit, capable bool) (ValuePlan, string) {
	id, err := readIdentity(rl.PID)
	if err != nil {
		return ValuePlan{}, fmt.Sprintf("process %d cannot be read (%v)", rl.PID, err)
	}
	old, err := readRlimit(rl.PID, rl.Item)
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
	return ValuePlan{Path: rlimitPath(rl.PID, rl.Item), Old: formatLimitPair(old), New: formatLimitPair(want), Unchanged: old == want}, ""
}

// rlimitUndo is what the journal keeps before a limit is set.
type rlimitUndo struct {
	PID      int    `json:"pid"`
	Start    uint64 `json:"start"`
	UID      int    `json:"uid"`
	GID      int    `json:"gid"`
	Item     string `json:"item"`
	Old      string `json:"old"`
	New      string `json:"new"`
	Settable bool   `json:"settable"`
}

// applyRlimit sets one planned limit; ok false for a kernel knob. An error
// is returned only when the journal cannot be written; a limit not set is
// a note.
func applyRlimit(j *journal.Journal, v ValuePlan) (note string, ok bool, err error) {
	pid, item, ok := parseRlimitPath(v.Path)
	if !ok {
		return "", false, nil
	}
	want, good := parseLimitPair(v.New)
	if !good {
		return "", true, rlimitAllowed(v.Path, v.New)
	}
	skip := func(format string, a ...any) (string, bool, error) {
		return fmt.Sprintf("%s not set to %s: %s", v.Path, v.New, fmt.Sprintf(format, a...)), true, nil
	}
	id, err := readIdentity(pid)
	if err != nil {
		return skip("the process is gone (%v)", err)
	}
	old, err := readRlimit(pid, item)
	if err != nil {
		return skip("%v", err)
	}
	if formatLimitPair(old) != v.Old {
		return skip("it is %s now, not the %s the plan read (the process changed it, or is another one)", formatLimitPair(old), v.Old)
	}
	u := rlimitUndo{PID: pid, Start: id.Start, UID: id.UID, GID: id.GID, Item: item, Old: v.Old, New: v.New, Settable: id.Settable}
	if err := j.Record(KindRlimit, "limit "+v.Path, u); err != nil {
		return "", true, err
	}
	if err := setRlimit(pid, item, id, want); err != nil {
		return skip("%v", err)
	}
	if now, err := readRlimit(pid, item); err != nil || now != want {
		return skip("it reads back %s", formatLimitPair(now))
	}
	return "", true, nil
}

// undoRlimit puts a process's limit back, unless the process has ended
// (its limits went with it) or its limit is no longer the one dbhost set
// (the server or a person changed it since: theirs is kept).
func undoRlimit(data json.RawMessage) error {
	var u rlimitUndo
	if err := json.Unmarshal(data, &u); err != nil {
		return err
	}
	if _, ok := rlimits[u.Item]; !ok {
		return fmt.Errorf("unknown limit %q", u.Item)
	}
	old, ok := parseLimitPair(u.Old)
	if !ok {
		return fmt.Errorf("bad limit %q", u.Old)
	}
	id, err := readIdentity(u.PID)
	if err != nil || id.Start != u.Start {
		return nil // the process ended
	}
	now, err := readRlimit(u.PID, u.Item)
	if err != nil {
		return nil
	}
	if formatLimitPair(now) != u.New {
		return nil // already put back, or changed since
	}
	return setRlimit(u.PID, u.Item, id, old)
}

// setRlimit calls prlimit(2) on pid; without CAP_SYS_RESOURCE, from a
// thread with the process's user and group IDs.
func setRlimit(pid int, item string, id procIdentity, l unix.Rlimit) error {
	res := rlimits[item].resource
	err := unix.Prlimit(pid, res, &l, nil)
	if !errors.Is(err, unix.EPERM) || !id.Settable || id.UID == os.Getuid() {
		return wrapPrlimit(err, pid, item, l)
	}
	return wrapPrlimit(prlimitAs(id.UID, id.GID, pid, res, &l), pid, item, l)
}

func wrapPrlimit(err error, pid int, item string, l unix.Rlimit) error {
	if err == nil {
		return nil
	}
	why := ""
	if errors.Is(err, unix.EPERM) {
		why = " (raising a hard limit needs CAP_SYS_RESOURCE)"
	}
	return fmt.Errorf("prlimit --pid %d --%s=%s: %w%s", pid, item, formatLimitPair(l), err, why)
}

// prlimitAs calls prlimit(2) from a thread of its own that first takes
// uid and gid (real, effective and saved), as the kernel's permission
// check wants. The thread is never given back to the runtime: the
// goroutine ends locked to it, so Go terminates the thread with its
// changed credentials.
func prlimitAs(uid, gid, pid, res int, l *unix.Rlimit) error {
	done := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		// Raw calls: unix.Setresuid would change every thread of the
		// process (Go's AllThreadsSyscall).
		if _, _, e := unix.RawSyscall(unix.SYS_SETRESGID, uintptr(gid), uintptr(gid), uintptr(gid)); e != 0 {
			done <- fmt.Errorf("setresgid %d: %w", gid, e)
			return
		}
		if _, _, e := unix.RawSyscall(unix.SYS_SETRESUID, uintptr(uid), uintptr(uid), uintptr(uid)); e != 0 {
			done <- fmt.Errorf("setresuid %d: %w", uid, e)
			return
		}
		done <- unix.Prlimit(pid, res, l, nil)
	}()
	return <-done
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
