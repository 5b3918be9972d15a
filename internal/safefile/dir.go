package safefile

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"strings"

	"golang.org/x/sys/unix"
)

// Dir is a directory that dbhost writes into as root (or as the invoking
// user) and that others may have prepared: every path inside it is resolved
// one component at a time with O_NOFOLLOW, so no symbolic link is ever
// followed, and every directory on the way must belong to the effective
// user and be writable by nobody else — otherwise someone else could swap a
// component for a link between the check and the write. (openat2 with
// RESOLVE_NO_SYMLINKS would refuse links too, but checks no owner on the
// way, so the walk is needed on every kernel and is the only path.)
type Dir struct {
	fd   int
	path string
	euid int
}

// maxLinks bounds the symbolic links followed while opening the directory
// itself (the kernel's own limit is 40).
const maxLinks = 40

// OpenDir opens (creating it and missing parents 0755, as mkdir -p would)
// the directory at name for confined writes. The path to it is walked from
// /: each ancestor must be owned by root or the effective user and, if
// others can write to it, carry the sticky bit (like /tmp); a symbolic link
// on the way is followed only if the link itself is owned by root or the
// effective user (as the kernel's protected_symlinks would). The directory
// itself must be owned by the effective user and not writable by group or
// others.
func OpenDir(name string) (*Dir, error) {
	abs, err := filepath.Abs(name)
	if err != nil {
		return nil, err
	}
	euid := os.Geteuid()
	fd, err := walk(abs, euid)
	if err != nil {
		return nil, err
	}
	return &Dir{fd: fd, path: abs, euid: euid}, nil
}

// walk resolves abs from / without following a link nobody trusted made,
// creating missing directories (0755, like mkdir -p) on the way. Every
// directory it holds is checked before it goes on, so a refusal comes
// before anything below an unsafe directory is created.
func walk(abs string, euid int) (int, error) {
	fd, err := openRoot(euid)
	if err != nil {
		return -1, err
	}
	where := "/"
	rest := splitPath(abs)
	links := 0
	for len(rest) > 0 {
		c := rest[0]
		rest = rest[1:]
		if c == "." {
			continue
		}
		if c == ".." {
			// ".." of a directory reached from / leads to one checked
			// on the way down (or to / itself); it is checked again
			// below all the same.
			next, err := unix.Openat(fd, "..", unix.O_DIRECTORY|unix.O_RDONLY|unix.O_CLOEXEC|unix.O_NOFOLLOW, 0)
			unix.Close(fd)
			if err != nil {
				return -1, &os.PathError{Op: "open", Path: where + "/..", Err: err}
			}
			fd, where = next, path.Dir(where)
			if err := checkFd(fd, where, euid, safeAncestor); err != nil {
				unix.Close(fd)
				return -1, err
			}
			continue
		}
		p := path.Join(where, c)
		var st unix.Stat_t
		err := unix.Fstatat(fd, c, &st, unix.AT_SYMLINK_NOFOLLOW)
		if errors.Is(err, unix.ENOENT) {
			// Created by us in a directory already checked; if someone
			// else wins the race, the checks below see their directory.
			if err := unix.Mkdirat(fd, c, 0o755); err != nil && !errors.Is(err, unix.EEXIST) {
				unix.Close(fd)
				return -1, &os.PathError{Op: "mkdir", Path: p, Err: err}
			}
			err = unix.Fstatat(fd, c, &st, unix.AT_SYMLINK_NOFOLLOW)
		}
		if err != nil {
			unix.Close(fd)
			return -1, &os.PathError{Op: "stat", Path: p, Err: err}
		}
		if st.Mode&unix.S_IFMT == unix.S_IFLNK {
			if int(st.Uid) != 0 && int(st.Uid) != euid {
				unix.Close(fd)
				return -1, fmt.Errorf("refusing %s: it is a symbolic link owned by uid %d, neither root nor uid %d: not followed", p, st.Uid, euid)
			}
			links++
			if links > maxLinks {
				unix.Close(fd)
				return -1, &os.PathError{Op: "open", Path: p, Err: unix.ELOOP}
			}
			target, err := readlinkat(fd, c)
			if err != nil {
				unix.Close(fd)
				return -1, &os.PathError{Op: "readlink", Path: p, Err: err}
			}
			rest = append(splitPath(target), rest...)
			if strings.HasPrefix(target, "/") {
				unix.Close(fd)
				if fd, err = openRoot(euid); err != nil {
					return -1, err
				}
				where = "/"
			}
			continue
		}
		next, err := unix.Openat(fd, c, unix.O_DIRECTORY|unix.O_RDONLY|unix.O_CLOEXEC|unix.O_NOFOLLOW, 0)
		unix.Close(fd)
		if err != nil {
			return -1, &os.PathError{Op: "open", Path: p, Err: err}
		}
		fd, where = next, p
		if err := checkFd(fd, where, euid, safeAncestor); err != nil {
			unix.Close(fd)
			return -1, err
		}
	}
	// The directory reached, however the path got there (also "/" or a
	// link ending in ".."), is the one dbhost writes into.
	if err := checkFd(fd, where, euid, ownedOnlyBy); err != nil {
		unix.Close(fd)
		return -1, err
	}
	return fd, nil
}

// openRoot opens / as the first directory of a walk; it is an ancestor
// like any other.
func openRoot(euid int) (int, error) {
	fd, err := unix.Open("/", unix.O_DIRECTORY|unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return -1, err
	}
	if err := checkFd(fd, "/", euid, safeAncestor); err != nil {
		unix.Close(fd)
		return -1, err
	}
	return fd, nil
}

// checkFd applies rule to the directory open at fd.
func checkFd(fd int, where string, euid int, rule func(unix.Stat_t, int) string) error {
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return &os.PathError{Op: "stat", Path: where, Err: err}
	}
	if why := rule(st, euid); why != "" {
		return fmt.Errorf("refusing %s: %s", where, why)
	}
	return nil
}

func splitPath(p string) []string {
	var out []string
	for _, c := range strings.Split(p, "/") {
		if c != "" {
			out = append(out, c)
		}
	}
	return out
}

// safeAncestor says why a directory on the way to the output directory
// would let someone else replace what lies below it, or "".
func safeAncestor(st unix.Stat_t, euid int) string {
	if int(st.Uid) != 0 && int(st.Uid) != euid {
		return fmt.Sprintf("it is owned by uid %d (mode %04o), neither root nor uid %d, so its owner could replace what lies below it", st.Uid, st.Mode&0o7777, euid)
	}
	if st.Mode&0o022 != 0 && st.Mode&unix.S_ISVTX == 0 {
		return fmt.Sprintf("group or others can write to it and it has no sticky bit (owner uid %d, mode %04o)", st.Uid, st.Mode&0o7777)
	}
	return ""
}

// ownedOnlyBy says why a directory dbhost writes into is not the effective
// user's alone, or "".
func ownedOnlyBy(st unix.Stat_t, euid int) string {
	if int(st.Uid) != euid {
		return fmt.Sprintf("it is owned by uid %d (mode %04o), not uid %d: dbhost writes only into its own directories", st.Uid, st.Mode&0o7777, euid)
	}
	if st.Mode&0o022 != 0 {
		return fmt.Sprintf("group or others can write to it (owner uid %d, mode %04o)", st.Uid, st.Mode&0o7777)
	}
	return ""
}

func readlinkat(fd int, name string) (string, error) {
	buf := make([]byte, 4096)
	n, err := unix.Readlinkat(fd, name, buf)
	if err != nil {
		return "", err
	}
	if n == len(buf) {
		return "", unix.ENAMETOOLONG
	}
	return string(buf[:n]), nil
}

// Path is the directory's absolute path.
func (d *Dir) Path() string { return d.path }

// Close releases the directory.
func (d *Dir) Close() error {
	if d.fd < 0 {
		return nil
	}
	err := unix.Close(d.fd)
	d.fd = -1
	return err
}

// Local checks that rel names something beneath the directory: relative,
// no "..", no empty or absolute path.
func Local(rel string) error {
	if rel == "" || !filepath.IsLocal(rel) || strings.Contains(rel, "\x00") {
		return fmt.Errorf("%q is not a path beneath the directory", rel)
	}
	return nil
}

// openParent opens the directory that holds rel, creating missing
// directories (0755) on the way when create is set; each is opened with
// O_NOFOLLOW and must be the effective user's alone. It returns the
// directory and the last component.
func (d *Dir) openParent(rel string, create bool) (int, string, error) {
	if err := Local(rel); err != nil {
		return -1, "", err
	}
	parts := splitPath(filepath.ToSlash(filepath.Clean(rel)))
	fd, err := unix.Dup(d.fd)
	if err != nil {
		return -1, "", err
	}
	where := d.path
	for _, c := range parts[:len(parts)-1] {
		p := filepath.Join(where, c)
		if create {
			if err := unix.Mkdirat(fd, c, 0o755); err != nil && !errors.Is(err, unix.EEXIST) {
				unix.Close(fd)
				return -1, "", &os.PathError{Op: "mkdir", Path: p, Err: err}
			}
		}
		next, err := unix.Openat(fd, c, unix.O_DIRECTORY|unix.O_RDONLY|unix.O_CLOEXEC|unix.O_NOFOLLOW, 0)
		if err != nil {
			err = describeOpenErr(fd, c, p, err)
			unix.Close(fd)
			return -1, "", err
		}
		unix.Close(fd)
		fd, where = next, p
		if err := checkFd(fd, where, d.euid, ownedOnlyBy); err != nil {
			unix.Close(fd)
			return -1, "", err
		}
	}
	return fd, parts[len(parts)-1], nil
}

// describeOpenErr turns the error of opening a directory component into
// one that says what is there instead.
func describeOpenErr(dir int, c, p string, err error) error {
	if !errors.Is(err, unix.ELOOP) && !errors.Is(err, unix.ENOTDIR) {
		return &os.PathError{Op: "open", Path: p, Err: err}
	}
	var st unix.Stat_t
	if unix.Fstatat(dir, c, &st, unix.AT_SYMLINK_NOFOLLOW) == nil && st.Mode&unix.S_IFMT == unix.S_IFLNK {
		return fmt.Errorf("refusing %s: it is a symbolic link (owner uid %d); links inside the output directory are never followed", p, st.Uid)
	}
	return fmt.Errorf("refusing %s: it is not a directory", p)
}

// Check says, without changing anything, why WriteFile(rel) would be
// refused: a directory on the way that is a link, not a directory, or not
// the effective user's alone, or a directory where the file goes. Missing
// directories are fine (WriteFile creates them). Checking every path
// before writing the first lets a caller refuse a tree as a whole.
func (d *Dir) Check(rel string) error {
	dir, name, err := d.openParent(rel, false)
	if errors.Is(err, unix.ENOENT) {
		return nil
	}
	if err != nil {
		return err
	}
	defer unix.Close(dir)
	var st unix.Stat_t
	err = unix.Fstatat(dir, name, &st, unix.AT_SYMLINK_NOFOLLOW)
	switch {
	case errors.Is(err, unix.ENOENT):
		return nil
	case err != nil:
		return &os.PathError{Op: "stat", Path: filepath.Join(d.path, rel), Err: err}
	case st.Mode&unix.S_IFMT == unix.S_IFDIR:
		return fmt.Errorf("refusing %s: it is a directory", filepath.Join(d.path, rel))
	}
	return nil
}

// WriteFile replaces rel (a path beneath the directory) atomically with b:
// a temporary file created with O_EXCL|O_NOFOLLOW is synced and renamed
// over it. rename replaces a symbolic link itself, never what it points to.
func (d *Dir) WriteFile(rel string, mode os.FileMode, b []byte) error {
	return d.WriteFileOwned(rel, mode, -1, -1, b)
}

// WriteFileOwned is WriteFile with the file's owner and group set (on the
// temporary file, before it is renamed into place); -1 keeps the writer's.
// Restoring a file dbhost replaced puts back its owner this way.
func (d *Dir) WriteFileOwned(rel string, mode os.FileMode, uid, gid int, b []byte) error {
	dir, name, err := d.openParent(rel, true)
	if err != nil {
		return err
	}
	defer unix.Close(dir)
	var rnd [8]byte
	rand.Read(rnd[:])
	tmp := "." + name + ".tmp-" + hex.EncodeToString(rnd[:])
	fd, err := unix.Openat(dir, tmp, unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL|unix.O_NOFOLLOW|unix.O_CLOEXEC, uint32(mode.Perm()))
	if err != nil {
		return &os.PathError{Op: "create", Path: filepath.Join(d.path, rel), Err: err}
	}
	f := os.NewFile(uintptr(fd), tmp)
	ok := false
	defer func() {
		if !ok {
			f.Close()
			unix.Unlinkat(dir, tmp, 0)
		}
	}()
	if uid >= 0 || gid >= 0 {
		if err := f.Chown(uid, gid); err != nil {
			return err
		}
	}
	if err := f.Chmod(mode.Perm()); err != nil { // the umask must not widen or narrow it (and chown clears set-id bits)
		return err
	}
	if _, err := f.Write(b); err != nil {
		return err
	}
	if err := f.Sync(); err != nil {
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	if err := unix.Renameat(dir, tmp, dir, name); err != nil {
		return &os.PathError{Op: "rename", Path: filepath.Join(d.path, rel), Err: err}
	}
	ok = true
	unix.Fsync(dir)
	return nil
}

// ReadFile reads a regular file beneath the directory (no link followed),
// at most max bytes. Anything else there (a link, FIFO, device) is not
// even opened.
func (d *Dir) ReadFile(rel string, max int64) ([]byte, error) {
	dir, name, err := d.openParent(rel, false)
	if err != nil {
		return nil, err
	}
	defer unix.Close(dir)
	b, _, err := readRegular(dir, name, filepath.Join(d.path, rel), max)
	return b, err
}

// FileInfo is what ReadFileInfo tells about a file besides its content.
type FileInfo struct {
	Mode     os.FileMode
	UID, GID int
}

// ReadFileInfo is ReadFile that also returns the permission bits and owner
// of the file it read.
func (d *Dir) ReadFileInfo(rel string, max int64) ([]byte, FileInfo, error) {
	dir, name, err := d.openParent(rel, false)
	if err != nil {
		return nil, FileInfo{}, err
	}
	defer unix.Close(dir)
	b, st, err := readRegular(dir, name, filepath.Join(d.path, rel), max)
	if err != nil {
		return nil, FileInfo{}, err
	}
	return b, FileInfo{Mode: os.FileMode(st.Mode & 0o777), UID: int(st.Uid), GID: int(st.Gid)}, nil
}

// readRegular reads name in dir if it is a regular file, and returns its
// identity as it was read.
func readRegular(dir int, name, full string, max int64) ([]byte, unix.Stat_t, error) {
	var lst unix.Stat_t
	if err := unix.Fstatat(dir, name, &lst, unix.AT_SYMLINK_NOFOLLOW); err != nil {
		return nil, lst, &os.PathError{Op: "stat", Path: full, Err: err}
	}
	if lst.Mode&unix.S_IFMT != unix.S_IFREG {
		return nil, lst, fmt.Errorf("%s is not a regular file", full)
	}
	fd, err := unix.Openat(dir, name, unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_CLOEXEC|unix.O_NONBLOCK, 0)
	if err != nil {
		return nil, lst, &os.PathError{Op: "open", Path: full, Err: err}
	}
	f := os.NewFile(uintptr(fd), name)
	defer f.Close()
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return nil, lst, err
	}
	if !sameFile(st, lst) {
		return nil, lst, fmt.Errorf("%s was replaced while being read", full)
	}
	b, err := io.ReadAll(io.LimitReader(f, max+1))
	if err != nil {
		return nil, st, err
	}
	if int64(len(b)) > max {
		return nil, st, fmt.Errorf("%s is larger than %d bytes", full, max)
	}
	return b, st, nil
}

func sameFile(a, b unix.Stat_t) bool { return a.Dev == b.Dev && a.Ino == b.Ino }

// Sum is the SHA-256 of content dbhost wrote, as lower-case hex.
func Sum(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

// RemoveIfUnchanged deletes rel only if it is a regular file (not a link)
// whose content still hashes to sum: dbhost deletes only what it wrote
// itself and nobody has edited since. It reports whether it deleted the
// file; a missing file is not an error.
func (d *Dir) RemoveIfUnchanged(rel, sum string) (bool, error) {
	dir, name, err := d.openParent(rel, false)
	if errors.Is(err, unix.ENOENT) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	defer unix.Close(dir)
	full := filepath.Join(d.path, rel)
	b, st, err := readRegular(dir, name, full, 16<<20)
	switch {
	case errors.Is(err, unix.ENOENT):
		return false, nil
	case err != nil:
		return false, err
	case Sum(b) != sum:
		return false, fmt.Errorf("%s changed since dbhost wrote it", full)
	}
	// The name must still be the file just hashed when it is unlinked.
	var now unix.Stat_t
	if err := unix.Fstatat(dir, name, &now, unix.AT_SYMLINK_NOFOLLOW); err != nil || !sameFile(now, st) {
		return false, fmt.Errorf("%s was replaced while being checked", full)
	}
	if err := unix.Unlinkat(dir, name, 0); err != nil {
		return false, &os.PathError{Op: "remove", Path: full, Err: err}
	}
	unix.Fsync(dir)
	return true, nil
}
