package change

// A running process's resource limit is set with prlimit(2), journaled with
// the previous limits so that a rollback or a recovery puts them back.
// A limit that cannot be set, or no longer applies (the process ended), is
// a note, never an error: the persistent limits apply from the next start.
//
// Permissions: prlimit(2) on another process needs CAP_SYS_RESOURCE, or
// the caller's real, effective and saved user and group IDs all equal to
// the target's. Without the capability (root in some containers and VMs),
// the limit is set from a thread that took the server's user and group
// IDs. That thread may lower the hard limit but never raise it.

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"runtime"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/dbhost/dbhost/internal/fix"
	"github.com/dbhost/dbhost/internal/host"
	"github.com/dbhost/dbhost/internal/textio"
)

var rlimitPathRe = textio.LazyRegexp(`^/proc/([1-9][0-9]*)/limits:(nofile|nproc|memlock)$`)

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

// RlimitItem reports whether item is a limit this package sets.
func RlimitItem(item string) bool { _, ok := rlimits[item]; return ok }

// RlimitPath names a process's limit as a value path:
// /proc/PID/limits:ITEM.
func RlimitPath(pid int, item string) string { return fmt.Sprintf("/proc/%d/limits:%s", pid, item) }

// ParseRlimitPath returns the PID and item of a value path, ok false for
// a kernel value.
func ParseRlimitPath(p string) (pid int, item string, ok bool) {
	m := rlimitPathRe.FindStringSubmatch(p)
	if m == nil {
		return 0, "", false
	}
	pid, err := strconv.Atoi(m[1])
	return pid, m[2], err == nil
}

// FormatLimitPair prints a limit as "SOFT:HARD".
func FormatLimitPair(l unix.Rlimit) string {
	return fix.FormatRlimit(l.Cur) + ":" + fix.FormatRlimit(l.Max)
}

// ParseLimitPair parses "SOFT:HARD" (soft not above hard).
func ParseLimitPair(s string) (unix.Rlimit, bool) {
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

// ProcIdentity is what identifies a running process beyond its PID (which
// the kernel reuses): its start time, and the credentials prlimit needs.
type ProcIdentity struct {
	Start    uint64 // clock ticks after boot, /proc/PID/stat field 22
	UID, GID int
	// Settable: real, effective and saved IDs are equal, so a thread
	// with them may call prlimit on the process.
	Settable bool
}

// ReadIdentity reads a process's identity through the host.
func (cfg Config) ReadIdentity(pid int) (ProcIdentity, error) {
	var id ProcIdentity
	h, done, err := cfg.host()
	if err != nil {
		return id, err
	}
	defer done()
	st, err := h.ProcStat(pid)
	if err != nil {
		return id, err
	}
	status, err := h.Status(pid)
	if err != nil {
		return id, err
	}
	u, g := status.UIDs, status.GIDs
	id.Start, id.UID, id.GID = st.Starttime, int(u[0]), int(g[0])
	id.Settable = u[1] == u[0] && u[2] == u[0] && g[1] == g[0] && g[2] == g[0]
	return id, nil
}

// ReadRlimit reads one limit of a process from /proc/PID/limits (readable
// by root without any capability, unlike prlimit(2)).
func (cfg Config) ReadRlimit(pid int, item string) (unix.Rlimit, error) {
	h, done, err := cfg.host()
	if err != nil {
		return unix.Rlimit{}, err
	}
	defer done()
	l, err := h.Limits(pid)
	if err != nil {
		return unix.Rlimit{}, err
	}
	r, ok := l[rlimits[item].name]
	if !ok {
		return unix.Rlimit{}, fmt.Errorf("/proc/%d/limits has no %q line", pid, rlimits[item].name)
	}
	return unix.Rlimit{Cur: r.Soft, Max: r.Hard}, nil
}

// HasSysResource reports whether this process has CAP_SYS_RESOURCE in its
// effective set.
func (cfg Config) HasSysResource() bool {
	h, done, err := cfg.host()
	if err != nil {
		return false
	}
	defer done()
	st, err := h.Status(os.Getpid())
	return err == nil && st.CapEff&(1<<unix.CAP_SYS_RESOURCE) != 0
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

// Rlimit sets item of process pid from old to want ("SOFT:HARD"), and
// reads it back. An error is returned only when the journal cannot be
// written or the values are malformed; a limit not set is a note.
func (c *Changer) Rlimit(pid int, item, old, want string) (note string, err error) {
	p := RlimitPath(pid, item)
	l, good := ParseLimitPair(want)
	if !good || !RlimitItem(item) {
		return "", fmt.Errorf("refusing to set %s to %q: not SOFT:HARD", p, want)
	}
	skip := func(format string, a ...any) (string, error) {
		return fmt.Sprintf("%s not set to %s: %s", p, want, fmt.Sprintf(format, a...)), nil
	}
	id, err := c.cfg.ReadIdentity(pid)
	if err != nil {
		return skip("the process is gone (%v)", err)
	}
	now, err := c.cfg.ReadRlimit(pid, item)
	if err != nil {
		return skip("%v", err)
	}
	if FormatLimitPair(now) != old {
		return skip("it is %s now, not the %s the plan read (the process changed it, or is another one)", FormatLimitPair(now), old)
	}
	u := rlimitUndo{PID: pid, Start: id.Start, UID: id.UID, GID: id.GID, Item: item, Old: old, New: want, Settable: id.Settable}
	if err := c.j.Record(KindRlimit, "limit "+p, u); err != nil {
		return "", err
	}
	if err := setRlimit(pid, item, id, l); err != nil {
		return skip("%v", err)
	}
	if now, err := c.cfg.ReadRlimit(pid, item); err != nil || now != l {
		return skip("it reads back %s", FormatLimitPair(now))
	}
	return "", nil
}

// undoRlimit puts a process's limit back, unless the process has ended
// (its limits went with it) or its limit is no longer the one dbhost set
// (the server or a person changed it since: theirs is kept).
func undoRlimit(cfg Config, data json.RawMessage) error {
	var u rlimitUndo
	if err := json.Unmarshal(data, &u); err != nil {
		return err
	}
	if !RlimitItem(u.Item) {
		return fmt.Errorf("unknown limit %q", u.Item)
	}
	old, ok := ParseLimitPair(u.Old)
	if !ok {
		return fmt.Errorf("bad limit %q", u.Old)
	}
	id, err := cfg.ReadIdentity(u.PID)
	if err != nil || id.Start != u.Start {
		return nil // the process ended
	}
	now, err := cfg.ReadRlimit(u.PID, u.Item)
	if err != nil {
		return nil
	}
	if FormatLimitPair(now) != u.New {
		return nil // already put back, or changed since
	}
	return setRlimit(u.PID, u.Item, id, old)
}

// setRlimit calls prlimit(2) on pid; without CAP_SYS_RESOURCE, from a
// thread with the process's user and group IDs.
func setRlimit(pid int, item string, id ProcIdentity, l unix.Rlimit) error {
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
	return fmt.Errorf("prlimit --pid %d --%s=%s: %w%s", pid, item, FormatLimitPair(l), err, why)
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
