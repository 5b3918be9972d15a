package host

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path"
	"strconv"
	"strings"
	"sync"
	"syscall"
)

// ErrUntrusted is returned for a program root must not run: someone other
// than root can change it or a directory or link on its path.
var ErrUntrusted = errors.New("not trusted")

// UntrustedError names the path component that others can change.
type UntrustedError struct {
	Program string // what was to be run
	Path    string // the file, directory or link others control
	UID     int
	Mode    fs.FileMode
	Why     string
}

func (e *UntrustedError) Error() string {
	return fmt.Sprintf("%s is not run: %s %s", e.Program, e.Path, e.Why)
}

// Unwrap lets errors.Is(err, ErrUntrusted) match.
func (e *UntrustedError) Unwrap() error { return ErrUntrusted }

// Lstat stats a path without following a final symbolic link.
func (h *Host) Lstat(p string) (FileInfo, error) { return h.statInfo("lstat", p, false) }

// maxTrustLinks bounds the links followed while checking a path.
const maxTrustLinks = 40

// CheckTrusted reports why root must not run the program at absolute path
// p, or nil: the file and every directory from / down to it (after
// resolving each symbolic link, whose own owner must be root too) must be
// owned by root and writable by no one else. Otherwise whoever can write
// there chooses what root runs.
func (h *Host) CheckTrusted(p string) error { return h.checkTrusted(p, false) }

// CheckTrustedDir is CheckTrusted for a directory root writes files into.
func (h *Host) CheckTrustedDir(p string) error { return h.checkTrusted(p, true) }

func (h *Host) checkTrusted(p string, dir bool) error {
	if !path.IsAbs(p) {
		return &UntrustedError{Program: p, Path: p, Why: "is not an absolute path"}
	}
	untrusted := func(at string, fi FileInfo, why string) error {
		return &UntrustedError{Program: p, Path: at, UID: fi.UID, Mode: fi.Mode, Why: why}
	}
	rest := strings.Split(strings.Trim(path.Clean(p), "/"), "/")
	where := "/"
	if fi, err := h.plain().Lstat("/"); err != nil {
		return err
	} else if why := ownedByRootOnly(fi); why != "" {
		return untrusted("/", fi, why)
	}
	links := 0
	for len(rest) > 0 {
		c := rest[0]
		rest = rest[1:]
		if c == "" || c == "." {
			continue
		}
		if c == ".." {
			where = path.Dir(where)
			continue
		}
		at := path.Join(where, c)
		fi, err := h.plain().Lstat(at)
		if err != nil {
			return err
		}
		if fi.Mode&fs.ModeSymlink != 0 {
			if fi.UID != 0 {
				return untrusted(at, fi, fmt.Sprintf("is a symbolic link owned by uid %d", fi.UID))
			}
			if links++; links > maxTrustLinks {
				return untrusted(at, fi, "has too many levels of symbolic links")
			}
			target, err := h.plain().Readlink(at)
			if err != nil {
				return err
			}
			if path.IsAbs(target) {
				where = "/"
			}
			rest = append(strings.Split(strings.Trim(target, "/"), "/"), rest...)
			continue
		}
		if why := ownedByRootOnly(fi); why != "" {
			return untrusted(at, fi, why)
		}
		if len(rest) > 0 && !fi.IsDir {
			return untrusted(at, fi, "is not a directory")
		}
		if len(rest) == 0 && !dir && !fi.Mode.IsRegular() {
			return untrusted(at, fi, "is not a regular file")
		}
		if len(rest) == 0 && dir && !fi.IsDir {
			return untrusted(at, fi, "is not a directory")
		}
		where = at
	}
	return nil
}

// ownedByRootOnly says why a file or directory others could change is not
// trusted, or "". A group-writable file is refused even for group root:
// whoever is in that group is not root.
func ownedByRootOnly(fi FileInfo) string {
	if fi.UID != 0 {
		return fmt.Sprintf("is owned by uid %d, not root", fi.UID)
	}
	if fi.Mode.Perm()&0o022 != 0 {
		return fmt.Sprintf("is writable by group or others (mode %04o)", fi.Mode.Perm())
	}
	return ""
}

// cleanPath is the PATH commands run with, and where a bare program name
// is looked up.
const cleanPath = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

// resolveProgram finds the program to run for name: an absolute path is
// checked as it is; a bare name is looked up in cleanPath, skipping every
// candidate that is not trusted (as if such directories were not on the
// path), and the refusals are reported when none is left.
func (h *Host) resolveProgram(name string) (string, error) {
	if strings.Contains(name, "/") {
		if err := h.CheckTrusted(name); err != nil {
			return "", err
		}
		return name, nil
	}
	var refused []string
	for _, dir := range strings.Split(cleanPath, ":") {
		p := path.Join(dir, name)
		fi, err := os.Stat(p)
		if err != nil || fi.IsDir() || fi.Mode().Perm()&0o111 == 0 {
			continue
		}
		if err := h.CheckTrusted(p); err != nil {
			refused = append(refused, err.Error())
			continue
		}
		return p, nil
	}
	if len(refused) > 0 {
		return "", fmt.Errorf("%w: %s", ErrUntrusted, strings.Join(refused, "; "))
	}
	return "", &fs.PathError{Op: "exec", Path: name, Err: exec.ErrNotFound}
}

// RunAs is Run with the command's user and group set to uid and gid (no
// supplementary groups): a server's own binary is run as the server's
// account, so even a trusted program never runs with more privilege than
// the server has. When dbhost is not root, or uid is root, it runs as
// dbhost does. The recorded key is Run's: a snapshot replays either.
func (h *Host) RunAs(ctx context.Context, uid, gid int, name string, args ...string) ([]byte, error) {
	return h.run(ctx, uid, gid, name, args...)
}

func (h *Host) run(ctx context.Context, uid, gid int, name string, args ...string) ([]byte, error) {
	return h.probe(cmdKey(name, args), func() ([]byte, error) {
		return h.runOnce(ctx, uid, gid, name, args...)
	})
}

// cmdRun is one command's run, shared by every caller of a run.
type cmdRun struct {
	once sync.Once
	out  []byte
	err  error
}

// runOnce runs a command once per Host for each user and group: servers
// of one binary (several mysqld instances, say) ask for its --version each,
// and the answer is the same. A collection already keeps one answer per
// command line; this keeps one per user too.
func (h *Host) runOnce(ctx context.Context, uid, gid int, name string, args ...string) ([]byte, error) {
	key := strconv.Itoa(uid) + ":" + strconv.Itoa(gid) + ":" + cmdKey(name, args)
	h.cmdsMu.Lock()
	r := h.cmds[key]
	if r == nil {
		if h.cmds == nil {
			h.cmds = map[string]*cmdRun{}
		}
		r = &cmdRun{}
		h.cmds[key] = r
	}
	h.cmdsMu.Unlock()
	r.once.Do(func() { r.out, r.err = h.runNow(ctx, uid, gid, name, args...) })
	return bytes.Clone(r.out), r.err
}

// cmdKey is the key a command's output is recorded under.
func cmdKey(name string, args []string) string {
	return "cmd:" + strings.Join(append([]string{name}, args...), "\x00")
}

// runNow runs a command on the live system (see Run).
func (h *Host) runNow(ctx context.Context, uid, gid int, name string, args ...string) ([]byte, error) {
	if !h.System() {
		return nil, ErrNotLive
	}
	prog, err := h.resolveProgram(name)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, h.cmdTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, prog, args...)
	cmd.Args[0] = name
	cmd.Env = []string{"LC_ALL=C", "PATH=" + cleanPath}
	if uid > 0 && os.Geteuid() == 0 {
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid), Groups: []uint32{}}}
		cmd.Dir = "/"
	}
	var out, stderr bytes.Buffer
	cmd.Stdout = &limitedWriter{w: &out, n: MaxFileSize}
	cmd.Stderr = &limitedWriter{w: &stderr, n: 4096}
	if err := cmd.Run(); err != nil {
		msg := strings.TrimSpace(stderr.String())
		if msg != "" {
			return out.Bytes(), fmt.Errorf("%s: %w: %s", name, err, firstLine(msg))
		}
		return out.Bytes(), fmt.Errorf("%s: %w", name, err)
	}
	return out.Bytes(), nil
}
