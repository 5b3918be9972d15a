package host

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"slices"
	"strings"
	"sync"

	"golang.org/x/sys/unix"
)

// dbhost finds database servers in the process table and reads, as root,
// the files their arguments name. Anyone can start a process called
// postgres whose config_file is /etc/shadow, or whose data directory
// holds a PG_VERSION linked there. So a path a process names is read
// through a view (For) that reads it only as that process could: each
// directory searchable by it, each link made by root (or by the server's
// own account, once trusted), the file readable by it and owned by it or
// by root.

// Claim is the process a read is made for: dbhost reads a path a process
// named only as that process could.
type Claim struct {
	UID  int
	GIDs []int // primary group first, then supplementary groups
	// OwnLinks: symbolic links owned by UID are followed too (a trusted
	// server's own account); otherwise only root's links are.
	OwnLinks bool
	// Record: reads through the view go into a snapshot being collected.
	// False for untrusted instances: collect copies only files a trusted
	// server reads.
	Record bool
}

// ErrRefused is what errors.Is finds in a read a view refused.
var ErrRefused = errors.New("not read for the process that names it")

// RefusedError says why a view did not read a path.
type RefusedError struct {
	Path string // as asked for
	UID  int    // the claim's
	Why  string // names the component at fault when it is not Path
}

func (e *RefusedError) Error() string {
	return fmt.Sprintf("%s: not read for uid %d: %s", e.Path, e.UID, e.Why)
}

// Unwrap lets errors.Is(err, ErrRefused) match.
func (e *RefusedError) Unwrap() error { return ErrRefused }

// errChanged fails a read whose path changed between the walk that
// checked it and the open.
var errChanged error = refusal("replaced or changed while it was read")

// refusal is an error a read is refused with; it is an ErrRefused.
type refusal string

func (e refusal) Error() string        { return string(e) }
func (e refusal) Is(target error) bool { return target == ErrRefused }

// claimView is what a view adds to the host it shares.
type claimView struct {
	claim  Claim
	parent *Host // the host For was called on: keeps it (and its area) alive

	// Directories and links walked, for the life of the view: a server's
	// reads share most of them. Regular files are looked at anew.
	mu    sync.Mutex
	dirs  map[string]FileInfo // lstat, by key
	links map[string]string   // readlink, by key
}

// For returns a view of h that reads a path only as c could. The path is
// walked with Lstat from the root: every directory passed must be
// searchable by c (mode bits; uid 0 may search all), and a symbolic link
// is followed only when root owns it (or c.UID, with OwnLinks), at most
// 40, by its text. ReadFile, ReadConfig (and ReadString) read only a
// regular file owned by root or c.UID, readable by c, within the size
// limit, ReadDir only such a directory; they open the resolved path
// following no link, and read only the object the walk saw. Stat, Exists
// and Realpath apply the rules of directories and links, Lstat and
// Readlink those of the directories above the last component. Refusals
// are *RefusedError.
//
// The view shares h's state: what it records goes into h's collection,
// it is valid while h is open, and closing it does nothing. A snapshot
// collected before views (no Manifest.Claims) holds none of the walks'
// observations: there a view reads as h does. Every other method (reads
// of /proc, ReadSecret, commands, probes) is h's.
func (h *Host) For(c Claim) *Host {
	c.GIDs = slices.Clone(c.GIDs)
	p := h.plain()
	return &Host{state: p.state, view: &claimView{claim: c, parent: p, dirs: map[string]FileInfo{}, links: map[string]string{}}}
}

// plain is the host a view was made of, or h: reads of paths no process
// names (its /proc files, a program's path) are made as it.
func (h *Host) plain() *Host {
	if h.view != nil {
		return h.view.parent
	}
	return h
}

// claimed reports whether h reads paths under a claim's rules.
func (h *Host) claimed() bool { return h.view != nil && (h.live || h.manifest.Claims) }

// walked is a path as a view resolved it.
type walked struct {
	key string   // root-relative, holding no link (but the last component when not followed)
	fi  FileInfo // its lstat
}

// walk resolves key for the claim with Lstat and Readlink from the root
// (recorded while collecting and replayed from a snapshot, so a replay
// reaches the same verdicts). Every directory passed must be searchable
// by the claim, and a link is followed only when its owner is trusted; its
// target is walked as text, so a magic link of /proc (fd/N, cwd, root)
// leads only where its text says. follow says whether a last component
// that is a link is followed. Errors name key, as op's.
func (v *claimView) walk(op, key string, follow bool) (walked, error) {
	c := v.claim
	var done []string // resolved so far: directories, link-free
	cur, err := v.lstat("")
	rest := strings.Split(key, "/")
	for links := 0; err == nil && len(rest) > 0; {
		name := rest[0]
		rest = rest[1:]
		if name == "" {
			continue
		}
		// A name is looked up in cur, which the claim must search.
		if !cur.IsDir {
			return walked{}, walkErr(op, key, unix.ENOTDIR)
		}
		if !c.may(cur, 1) {
			return walked{}, v.refuse(key, path.Join(done...), fmt.Sprintf("a directory %s, not searchable by uid %d", describe(cur), c.UID))
		}
		switch name {
		case ".":
			continue
		case "..":
			if len(done) > 0 {
				done = done[:len(done)-1]
				cur, err = v.lstat(path.Join(done...))
			}
			continue
		}
		at := path.Join(append(done, name)...)
		var fi FileInfo
		if fi, err = v.lstat(at); err != nil {
			break
		}
		if fi.Mode&fs.ModeSymlink == 0 || len(rest) == 0 && !follow {
			done, cur = append(done, name), fi
			continue
		}
		if fi.UID != 0 && (!c.OwnLinks || fi.UID != c.UID) {
			return walked{}, v.refuse(key, at, fmt.Sprintf("a symbolic link owned by uid %d", fi.UID))
		}
		if links++; links > maxTrustLinks {
			return walked{}, walkErr(op, key, unix.ELOOP)
		}
		var target string
		if target, err = v.readlink(at); err != nil {
			break
		}
		if path.IsAbs(target) {
			done = nil
		}
		rest = append(strings.Split(target, "/"), rest...)
		cur, err = v.lstat(path.Join(done...)) // where the target is looked up: walked already
	}
	if err != nil {
		return walked{}, walkErr(op, key, err)
	}
	return walked{key: path.Join(done...), fi: cur}, nil
}

// lstat is the host's Lstat of a root-relative key, kept for the view
// when it is a directory or a link.
func (v *claimView) lstat(key string) (FileInfo, error) {
	return remember(v, v.dirs, key, v.parent.Lstat, func(fi FileInfo) bool { return fi.IsDir || fi.Mode&fs.ModeSymlink != 0 })
}

// readlink is the host's Readlink of a key, kept for the view.
func (v *claimView) readlink(key string) (string, error) {
	return remember(v, v.links, key, v.parent.Readlink, func(string) bool { return true })
}

// remember returns get(key), kept in m when keep says so.
func remember[T any](v *claimView, m map[string]T, key string, get func(string) (T, error), keep func(T) bool) (T, error) {
	v.mu.Lock()
	x, ok := m[key]
	v.mu.Unlock()
	if ok {
		return x, nil
	}
	x, err := get(key)
	if err == nil && keep(x) {
		v.mu.Lock()
		m[key] = x
		v.mu.Unlock()
	}
	return x, err
}

// may reports whether the claim may read (bit 4) or search (bit 1) fi,
// by its mode bits as the kernel applies them: the owner's when the claim
// owns it, else the group's when it is in the group, else the others'.
// ACLs are not looked at.
func (c Claim) may(fi FileInfo, bit fs.FileMode) bool {
	perm := fi.Mode.Perm()
	switch {
	case c.UID == 0:
		return true
	case fi.UID == c.UID:
		return perm&(bit<<6) != 0
	case slices.Contains(c.GIDs, fi.GID):
		return perm&(bit<<3) != 0
	}
	return perm&bit != 0
}

// checkRead says why the claim must not read w (a regular file, or a
// directory for a listing), or nil: it must be owned by root or by the
// claim, and readable by the claim.
func (v *claimView) checkRead(key string, w walked, dir bool) error {
	c := v.claim
	switch {
	case dir && !w.fi.IsDir:
		return walkErr("open", key, unix.ENOTDIR)
	case !dir && !w.fi.Mode.IsRegular():
		return v.refuse(key, w.key, notRegular(w.fi.Mode))
	case w.fi.UID != 0 && w.fi.UID != c.UID:
		others := "root"
		if c.UID != 0 {
			others = fmt.Sprintf("root or uid %d", c.UID)
		}
		return v.refuse(key, w.key, fmt.Sprintf("owned by uid %d, not by %s", w.fi.UID, others))
	case !c.may(w.fi, 4):
		return v.refuse(key, w.key, fmt.Sprintf("%s, not readable by uid %d", describe(w.fi), c.UID))
	}
	return nil
}

// refuse is the refusal of key because of at (a component, or key).
func (v *claimView) refuse(key, at, why string) error {
	if at != key {
		why = "/" + at + " is " + why
	}
	return &RefusedError{Path: "/" + key, UID: v.claim.UID, Why: why}
}

// describe says who owns fi and its mode: "owned by root, mode 0640".
func describe(fi FileInfo) string {
	owner := "root"
	if fi.UID != 0 {
		owner = fmt.Sprintf("uid %d", fi.UID)
	}
	return fmt.Sprintf("owned by %s, mode %04o", owner, fi.Mode.Perm())
}

// walkErr reports a failure of the walk for key as op's: the kernel's
// error alone (live or replayed, the same), or a refusal as it is.
func walkErr(op, key string, err error) error {
	var r *RefusedError
	var errno unix.Errno
	switch {
	case errors.As(err, &r):
		return err
	case errors.As(err, &errno):
		return &fs.PathError{Op: op, Path: "/" + key, Err: errno}
	}
	return err
}

// testHookWalked, when set, runs between a view's walk and its open.
var testHookWalked func(key string)

// readClaimed is ReadFile or ReadConfig on a view.
func (h *Host) readClaimed(p string, redact bool) ([]byte, error) {
	key := rel(p)
	v := h.view
	limit, tooLarge := int64(MaxFileSize), ErrTooLarge
	if redact {
		limit, tooLarge = MaxConfigSize, ErrConfigTooLarge
	}
	w, err := v.walk("open", key, true)
	if err == nil {
		err = v.checkRead(key, w, false)
	}
	if err == nil && w.fi.Size > limit {
		err = pathErr("open", key, tooLarge)
	}
	if err != nil {
		return nil, err
	}
	record := v.claim.Record && h.rec != nil
	switch {
	case !h.live && !v.claim.Record:
		return nil, pathErr("open", key, ErrNotLive) // never collected
	case !h.live:
		return v.parent.readFile(key, redact)
	case record:
		if b, err, ok := h.rec.seen(key, redact); ok {
			return b, err
		}
	}
	if testHookWalked != nil {
		testHookWalked(key)
	}
	b, err := h.readWalked(key, w, limit)
	if errors.Is(err, ErrTooLarge) {
		err = tooLarge
	}
	if record {
		h.rec.file(key, b, err, redact)
	}
	if err != nil {
		return nil, pathErr("open", key, err)
	}
	return b, nil
}

// readWalked reads the file a walk found, opened by its resolved path
// without following any link, and only if it is still what the walk saw:
// a component swapped after the walk fails the read.
func (h *Host) readWalked(key string, w walked, limit int64) ([]byte, error) {
	pfd, err := h.openResolved(w.key, unix.O_PATH)
	if err != nil {
		return nil, err
	}
	fd, size, err := reopenRegular(pfd, limit, func(st *unix.Stat_t) error { return w.same(st) })
	if err != nil {
		return nil, err
	}
	return readFD(fd, key, size, limit)
}

// same reports errChanged unless st is the object the walk saw, owned and
// readable as it was.
func (w walked) same(st *unix.Stat_t) error {
	fi := fileInfo(*st)
	if fi.Dev != w.fi.Dev || fi.Ino != w.fi.Ino || fi.UID != w.fi.UID || fi.GID != w.fi.GID || fi.Mode != w.fi.Mode {
		return errChanged
	}
	return nil
}

// openResolved opens a resolved, link-free key following no link: a
// directory swapped for a link since the walk fails the open, as
// errChanged.
func (h *Host) openResolved(key string, flags int) (int, error) {
	flags |= unix.O_CLOEXEC | unix.O_NOFOLLOW
	dir, p := h.rootFD, key
	how := unix.OpenHow{Flags: uint64(flags), Resolve: unix.RESOLVE_NO_SYMLINKS | unix.RESOLVE_BENEATH}
	if !h.confined() {
		dir, p, how.Resolve = unix.AT_FDCWD, "/"+key, unix.RESOLVE_NO_SYMLINKS
	} else if key == "" {
		p = "."
	}
	fd, err := openat2(dir, p, &how)
	if errors.Is(err, unix.ENOSYS) {
		if !h.confined() {
			if dir, err = unix.Open("/", unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0); err != nil {
				return -1, err
			}
			defer unix.Close(dir)
		}
		if key == "" {
			key = "."
		}
		fd, err = openNoLinks(dir, key, flags)
	}
	if err == unix.ELOOP || err == unix.ENOTDIR { // the walk saw directories, not links
		err = errChanged
	}
	return fd, err
}

// readDirClaimed is ReadDir on a view: a directory the claim may list,
// listed by its resolved path.
func (h *Host) readDirClaimed(p string) ([]string, error) {
	key := rel(p)
	v := h.view
	w, err := v.walk("open", key, true)
	if err == nil {
		err = v.checkRead(key, w, true)
	}
	if err != nil {
		return nil, err
	}
	return h.readDirProbe(key, func() ([]string, error) {
		fd, err := h.openResolved(w.key, unix.O_RDONLY|unix.O_DIRECTORY)
		if err != nil {
			return nil, err
		}
		f := os.NewFile(uintptr(fd), key)
		defer f.Close()
		var st unix.Stat_t
		if err := unix.Fstat(fd, &st); err != nil {
			return nil, err
		}
		if err := w.same(&st); err != nil {
			return nil, err
		}
		return f.Readdirnames(-1)
	})
}
