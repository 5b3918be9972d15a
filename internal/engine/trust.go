package engine

// Trust: which discovered instances root may act for. A process tells
// dbhost its name, argv, data directory and configuration; any local user
// can start one named postgres whose argv says anything. Only a server that
// root or the engine's service account started from a binary root alone can
// change, on a data directory and configuration root or that account owns,
// is believed: its settings may size fixes, its files may be collected, its
// name may address a change. Every other instance is listed and judged for
// what it is, and nothing it claims reaches a file or setting root writes.

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"path"
	"slices"
	"strconv"
	"strings"

	"github.com/dbhost/dbhost/internal/host"
	"github.com/dbhost/dbhost/internal/termsafe"
	"github.com/dbhost/dbhost/internal/textio"
)

// Trust is the verdict on an instance.
type Trust struct {
	Trusted bool `json:"trusted"`
	// Basis says how it was reached: "rule" (it meets the rule),
	// "vouched" (--trust-server names its data directory), "unverified"
	// (a snapshot taken before dbhost recorded trust, or a root other than
	// /: believed as earlier versions did), or "untrusted".
	Basis string `json:"basis"`
	// Why says what was verified, or the first rule the instance fails.
	Why string `json:"why"`
}

// Bases of a Trust.
const (
	TrustRule       = "rule"
	TrustVouched    = "vouched"
	TrustUnverified = "unverified"
	TrustNone       = "untrusted"
)

// Trusted reports whether root may act on what the instance claims. An
// instance whose trust was never judged (built by hand, or read from an
// older JSON) is not.
func (i *Instance) Trusted() bool { return i.Trust.Trusted }

// MaxUntrusted bounds how many untrusted instances one discovery describes:
// each costs reads and checks, and any user can start thousands. The rest
// are counted, not described.
const MaxUntrusted = 16

// processVerdict is the part of trust the process table and the kernel
// tell before anything the process names is read.
type processVerdict struct {
	OK bool `json:"ok"`
	// Unverified: the executable could not be examined (a snapshot from
	// before trust was recorded, or a root other than /).
	Unverified bool   `json:"unverified,omitempty"`
	Why        string `json:"why"`
	// unrecorded: nothing about the executable is known (a snapshot from
	// before trust was recorded), so nothing else is checked either.
	unrecorded bool
}

// judgeProcess applies the rule's process half: the process runs as root
// or as one of the profile's service accounts, and its executable is a
// regular file root owns and alone can write, in directories only root
// can change. The verdict is recorded in snapshots (probe
// "process-trust:PID") so that an audit of the snapshot reaches the same
// one; a snapshot without it predates trust and is believed.
func judgeProcess(h *host.Host, p Process, prof Profile) processVerdict {
	b, err := h.Probe("process-trust:"+strconv.Itoa(p.PID), func() ([]byte, error) {
		accounts := prof.ServiceAccounts()
		if p.UID != 0 && !slices.Contains(accounts, p.User) {
			return json.Marshal(processVerdict{Why: fmt.Sprintf("runs as %s, not as root or %s", owner(p.User, p.UID), strings.Join(accounts, " or "))})
		}
		return json.Marshal(judgeExe(h, p.PID))
	})
	var v processVerdict
	if err == nil {
		err = json.Unmarshal(b, &v)
	}
	if err != nil {
		if errors.Is(err, host.ErrNotLive) || host.IsNotExist(err) {
			return processVerdict{OK: true, Unverified: true, unrecorded: true, Why: "runs as " + owner(p.User, p.UID) + "; not examined: " + notExamined(h)}
		}
		return processVerdict{Why: "cannot be examined: " + host.Explain(err)}
	}
	return v
}

func notExamined(h *host.Host) string {
	if h.Live() {
		return "the host root is not /"
	}
	return "the snapshot was taken before dbhost recorded it"
}

// judgeExe examines /proc/PID/exe on the live system: the file the process
// runs (through the link, also after it was replaced on disk) and the
// directories of its path.
func judgeExe(h *host.Host, pid int) processVerdict {
	link := fmt.Sprintf("/proc/%d/exe", pid)
	target, err := h.Readlink(link)
	if err != nil {
		if host.IsPermission(err) {
			// Without root the kernel hides other users' executables;
			// the account rule is all that can be checked.
			return processVerdict{OK: true, Unverified: true, Why: "its executable cannot be examined without root"}
		}
		return processVerdict{Why: "its executable cannot be examined: " + host.Explain(err)}
	}
	exe := strings.TrimSuffix(target, " (deleted)")
	fi, err := h.Stat(link)
	if err != nil {
		return processVerdict{Why: "its executable cannot be examined: " + host.Explain(err)}
	}
	switch {
	case !fi.Mode.IsRegular():
		return processVerdict{Why: fmt.Sprintf("its executable %s is not a regular file", exe)}
	case fi.UID != 0:
		return processVerdict{Why: fmt.Sprintf("its executable %s is owned by uid %d, not root", exe, fi.UID)}
	case fi.Mode.Perm()&0o022 != 0:
		return processVerdict{Why: fmt.Sprintf("its executable %s is writable by group or others (mode %04o)", exe, fi.Mode.Perm())}
	}
	if !path.IsAbs(exe) {
		return processVerdict{Why: fmt.Sprintf("its executable has no path (%q)", target)}
	}
	if err := h.CheckTrustedDir(path.Dir(exe)); err != nil {
		var ue *host.UntrustedError
		if errors.As(err, &ue) {
			return processVerdict{Why: fmt.Sprintf("its executable %s lies under %s, which %s", exe, ue.Path, ue.Why)}
		}
		return processVerdict{Why: fmt.Sprintf("the directory of its executable %s cannot be examined: %s", exe, host.Explain(err))}
	}
	why := "runs " + exe + ", which only root can change"
	if exe != target {
		why += " (replaced on disk since it started)"
	}
	return processVerdict{OK: true, Why: why}
}

// judgeFiles applies the rule's other half once the instance is described:
// its data directory and every configuration file it read, and each
// directory above them, belong to root or to the server's own account and
// no one else can write them. Otherwise whoever can write there chose the
// settings dbhost would act on.
func judgeFiles(h *host.Host, in *Instance) string {
	var paths []string
	if in.DataDir != "" {
		paths = append(paths, in.DataDir)
	}
	paths = append(paths, in.ConfigFiles...)
	for _, p := range paths {
		if why := ownChain(h, p, in.UID, in.GID); why != "" {
			return why
		}
	}
	return ""
}

// ownChain says why the path p (after its links) is not the server's own,
// or "": every component belongs to root or uid, a link too; none is
// writable by others, nor by a group other than root's or gid.
func ownChain(h *host.Host, p string, uid, gid int) string {
	if !path.IsAbs(p) {
		return p + " is not an absolute path"
	}
	rest := strings.Split(strings.Trim(path.Clean(p), "/"), "/")
	where := "/"
	for links := 0; ; {
		fi, err := h.Lstat(where)
		if err != nil {
			if host.IsPermission(err) || errors.Is(err, host.ErrNotLive) {
				return "" // unknown is not wrong: the account rule stands
			}
			return fmt.Sprintf("%s cannot be examined: %s", where, host.Explain(err))
		}
		// A sticky directory root owns (/tmp) may hold the path: others
		// can add entries there but not replace this one.
		parent := len(rest) > 0 && fi.IsDir && fi.UID == 0 && fi.Mode&fs.ModeSticky != 0
		if why := foreign(fi, uid, gid); why != "" && !parent {
			return fmt.Sprintf("%s (for %s) %s", where, p, why)
		}
		if fi.Mode&fs.ModeSymlink != 0 {
			if links++; links > 40 {
				return p + " has too many levels of symbolic links"
			}
			target, err := h.Readlink(where)
			if err != nil {
				return fmt.Sprintf("%s cannot be examined: %s", where, host.Explain(err))
			}
			if path.IsAbs(target) {
				rest = append(strings.Split(strings.Trim(target, "/"), "/"), rest...)
				where = "/"
			} else {
				rest = append(strings.Split(target, "/"), rest...)
				where = path.Dir(where)
			}
			continue
		}
		if len(rest) == 0 {
			return ""
		}
		c := rest[0]
		rest = rest[1:]
		switch c {
		case "", ".":
		case "..":
			where = path.Dir(where)
		default:
			where = path.Join(where, c)
		}
	}
}

// foreign says why a file or directory is not root's or the server's
// account's alone, or "".
func foreign(fi host.FileInfo, uid, gid int) string {
	switch {
	case fi.UID != 0 && fi.UID != uid:
		return fmt.Sprintf("is owned by uid %d, neither root nor the server's account", fi.UID)
	case fi.Mode&fs.ModeSymlink != 0:
		return ""
	case fi.Mode.Perm()&0o002 != 0:
		return fmt.Sprintf("is writable by everyone (mode %04o)", fi.Mode.Perm()|stickyBit(fi))
	case fi.Mode.Perm()&0o020 != 0 && fi.GID != 0 && fi.GID != gid:
		return fmt.Sprintf("is writable by group %d (mode %04o)", fi.GID, fi.Mode.Perm())
	}
	return ""
}

func stickyBit(fi host.FileInfo) fs.FileMode {
	if fi.Mode&fs.ModeSticky != 0 {
		return 0o1000
	}
	return 0
}

// vouched reports whether the user vouched for the instance: its data
// directory is one --trust-server names, and the process runs as that
// directory's owner (or root), so a look-alike that merely names the
// directory is still not believed.
func vouched(h *host.Host, in *Instance, dirs []string) (string, bool) {
	if in.DataDir == "" || len(dirs) == 0 {
		return "", false
	}
	dd := path.Clean(in.DataDir)
	if !slices.Contains(dirs, dd) {
		return "", false
	}
	fi, err := h.Stat(dd)
	if err != nil {
		return "", false
	}
	if in.UID != 0 && fi.UID != in.UID {
		return "", false
	}
	return fmt.Sprintf("vouched for with --trust-server %s; runs as %s, the directory's owner", dd, owner(in.User, in.UID)), true
}

// versionRE is what a server's version looks like: "15", "15.4",
// "10.11.6-MariaDB-0+deb12u1", "7.0.15", "v8.0.4".
var versionRE = textio.LazyRegexp(`^v?[0-9]{1,4}(\.[0-9]{1,6}){0,3}([-+~._][0-9A-Za-z._+~-]{0,48})?$`)

// ValidVersion reports whether s reads as a version: a file or a server
// answer that does not is not believed (a PG_VERSION linked to another
// file would otherwise carry that file into reports and metric labels).
func ValidVersion(s string) bool { return versionRE.MatchString(s) }

// checkVersion drops a version that is not one, and says so.
func checkVersion(in *Instance) {
	if in.Version == "" || ValidVersion(in.Version) {
		return
	}
	in.ConfigErrors = append(in.ConfigErrors, fmt.Sprintf("version from %s is not a version (%d bytes): not used", termsafe.Line(in.VersionSource), len(in.Version)))
	in.Version, in.VersionSource = "", ""
}

// vouchedOwners are the owners of the directories --trust-server names:
// processes running as one of them may be a vouched-for server.
func vouchedOwners(h *host.Host, dirs []string) map[int]bool {
	out := map[int]bool{}
	for _, d := range dirs {
		if fi, err := h.Stat(d); err == nil {
			out[fi.UID] = true
		}
	}
	return out
}

func owner(user string, uid int) string {
	if user == "" || user == strconv.Itoa(uid) {
		return "uid " + strconv.Itoa(uid)
	}
	return fmt.Sprintf("%s (uid %d)", user, uid)
}

// Reader is the host as the instance's process may read it: paths the
// instance names are read through it (see host.Claim). An instance not
// found by discovery reads as h does.
func (i *Instance) Reader(h *host.Host) *host.Host {
	if i.claim == nil {
		return h
	}
	return h.For(*i.claim)
}

// processGroups reads the supplementary groups of a process (the Groups
// line of /proc/PID/status, which procfs does not parse).
func processGroups(h *host.Host, pid int) []int {
	b, err := h.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return nil
	}
	for _, ln := range strings.Split(string(b), "\n") {
		rest, ok := strings.CutPrefix(ln, "Groups:")
		if !ok {
			continue
		}
		var out []int
		for _, f := range strings.Fields(rest) {
			if n, err := strconv.Atoi(f); err == nil {
				out = append(out, n)
			}
		}
		return out
	}
	return nil
}
