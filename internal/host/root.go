package host

import (
	"errors"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// A Host whose root is not "/" (--root, an unpacked snapshot) resolves
// every path inside that root, as the kernel would for a process chrooted
// there: an absolute symbolic link is relative to the root, and ".." stops
// at it. Without this, ROOT/etc/mysql/my.cnf -> /etc/shadow would read the
// real host's file. Paths are opened relative to a descriptor of the root
// with openat2(RESOLVE_IN_ROOT); kernels before 5.6 get the same rule from
// a component-by-component walk.

// openat2 is unix.Openat2; tests replace it to take the path of kernels
// without it.
var openat2 = unix.Openat2

// openRoot opens the root directory that confined lookups start from.
func openRoot(root string) (int, error) {
	return unix.Open(root, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
}

// confined reports whether paths are resolved inside the root.
func (h *Host) confined() bool { return h.rootFD >= 0 }

// openKey opens a root-relative path ("proc/meminfo") with flags.
func (h *Host) openKey(key string, flags int) (int, error) {
	flags |= unix.O_CLOEXEC
	if !h.confined() {
		return unix.Open("/"+key, flags, 0)
	}
	if key == "" {
		key = "."
	}
	how := unix.OpenHow{Flags: uint64(flags), Resolve: unix.RESOLVE_IN_ROOT | unix.RESOLVE_NO_MAGICLINKS}
	fd, err := openat2(h.rootFD, key, &how)
	if !errors.Is(err, unix.ENOSYS) {
		return fd, err
	}
	resolved, err := h.walkInRoot(key, flags&unix.O_NOFOLLOW == 0)
	if err != nil {
		return -1, err
	}
	return openNoLinks(h.rootFD, resolved, flags)
}

// openNoLinks opens a resolved, link-free path below the directory root
// one directory at a time, following no link: a directory swapped for a
// link after walkInRoot looked at it makes the open fail instead of
// leaving the root.
func openNoLinks(root int, resolved string, flags int) (int, error) {
	if resolved == "." {
		return unix.Openat(root, ".", flags, 0)
	}
	parts := strings.Split(resolved, "/")
	dir := root
	for _, c := range parts[:len(parts)-1] {
		fd, err := unix.Openat(dir, c, unix.O_PATH|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
		if dir != root {
			unix.Close(dir)
		}
		if err != nil {
			return -1, err
		}
		dir = fd
	}
	fd, err := unix.Openat(dir, parts[len(parts)-1], flags|unix.O_NOFOLLOW, 0)
	if dir != root {
		unix.Close(dir)
	}
	return fd, err
}

// walkInRoot resolves key inside the root without openat2: every link is
// read and spliced in, absolute targets restart at the root and ".." never
// climbs above it. The result holds no link (but the last component when
// follow is false).
func (h *Host) walkInRoot(key string, follow bool) (string, error) {
	var done []string
	rest := strings.Split(key, "/")
	for links := 0; len(rest) > 0; {
		c := rest[0]
		rest = rest[1:]
		switch c {
		case "", ".":
			continue
		case "..":
			if len(done) > 0 {
				done = done[:len(done)-1]
			}
			continue
		}
		cur := path.Join(append(done, c)...)
		var st unix.Stat_t
		if err := unix.Fstatat(h.rootFD, cur, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
			return "", err
		}
		if st.Mode&unix.S_IFMT != unix.S_IFLNK || (len(rest) == 0 && !follow) {
			done = append(done, c)
			continue
		}
		if links++; links > 40 {
			return "", unix.ELOOP
		}
		buf := make([]byte, 4096)
		n, err := unix.Readlinkat(h.rootFD, cur, buf)
		if err != nil {
			return "", err
		}
		target := string(buf[:n])
		if strings.HasPrefix(target, "/") {
			done = nil
		}
		rest = append(strings.Split(target, "/"), rest...)
	}
	if len(done) == 0 {
		return ".", nil
	}
	return path.Join(done...), nil
}

// readKey reads a root-relative file, at most limit bytes (ErrTooLarge
// beyond). Only a regular file is ever opened for reading: opening a
// device or a FIFO acts (arms a watchdog, waits for a writer, consumes
// kernel messages), and a process's arguments can name one. The path is
// opened with O_PATH, which opens nothing, and only a regular file is then
// reopened for reading (reopenRegular). The pseudo-files of /proc and /sys
// take one open instead (openPseudo): they are read hundreds of times per
// audit, and those file systems hold no device.
func (h *Host) readKey(key string, limit int64) ([]byte, error) {
	fd, size, err := h.openRead(key, limit)
	if err != nil {
		return nil, readErr(key, err)
	}
	return readFD(fd, key, size, limit)
}

// openRead opens a regular file of at most limit bytes for reading (see
// readKey) and returns its descriptor and size.
func (h *Host) openRead(key string, limit int64) (fd, size int, err error) {
	fd, size, err = h.openPseudo(key, limit)
	if fd >= 0 || err != nil {
		return fd, size, err
	}
	pfd, err := h.openKey(key, unix.O_PATH)
	if err != nil {
		return -1, 0, err
	}
	return reopenRegular(pfd, limit, nil)
}

// readErr reports a failed open of key: ErrTooLarge as is (callers tell a
// configuration file's limit from it), the rest as a path error.
func readErr(key string, err error) error {
	if errors.Is(err, ErrTooLarge) {
		return err
	}
	return &fs.PathError{Op: "open", Path: "/" + key, Err: err}
}

// openPseudo opens a file of /proc or /sys on the live system for reading
// in one call, below a descriptor of that mount: RESOLVE_NO_XDEV keeps it
// on procfs or sysfs, which hold no device, FIFO or socket, and
// RESOLVE_NO_MAGICLINKS keeps /proc/PID/fd/N or /proc/PID/root from
// leading anywhere else. fd is -1 without an error when the key needs the
// general path (another file system, a link that leaves the mount, a
// magic link, an old kernel).
func (h *Host) openPseudo(key string, limit int64) (fd, size int, err error) {
	dir := -1
	rest, ok := strings.CutPrefix(key, "proc/")
	if ok {
		dir = h.procFD
	} else if rest, ok = strings.CutPrefix(key, "sys/"); ok {
		dir = h.sysFD
	}
	if dir < 0 {
		return -1, 0, nil
	}
	how := unix.OpenHow{Flags: unix.O_RDONLY | unix.O_NONBLOCK | unix.O_CLOEXEC,
		Resolve: unix.RESOLVE_BENEATH | unix.RESOLVE_NO_XDEV | unix.RESOLVE_NO_MAGICLINKS}
	err = ignoringEINTR(func() (err error) { fd, err = openat2(dir, rest, &how); return err })
	switch {
	case err == unix.EXDEV || err == unix.ELOOP || err == unix.ENOSYS || err == unix.EAGAIN:
		return -1, 0, nil
	case err != nil:
		return -1, 0, err
	}
	size, err = regularSize(fd, limit, nil)
	if err != nil {
		unix.Close(fd)
		return -1, 0, err
	}
	return fd, size, nil
}

// openPseudoFS opens the mount point of /proc or /sys for openPseudo,
// or returns -1 when what is there is not that file system.
func openPseudoFS(dir string, magic int64) int {
	fd, err := unix.Open(dir, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return -1
	}
	var st unix.Statfs_t
	if unix.Fstatfs(fd, &st) != nil || st.Type != magic {
		unix.Close(fd)
		return -1
	}
	return fd
}

// reopenRegular takes an O_PATH descriptor and, when it is a regular file
// of at most limit bytes that check (if set) accepts, opens that same
// inode for reading through /proc/self/fd. It closes pfd.
func reopenRegular(pfd int, limit int64, check func(*unix.Stat_t) error) (fd, size int, err error) {
	defer unix.Close(pfd)
	if size, err = regularSize(pfd, limit, check); err != nil {
		return -1, 0, err
	}
	err = ignoringEINTR(func() (err error) {
		fd, err = unix.Open("/proc/self/fd/"+itoa(pfd), unix.O_RDONLY|unix.O_CLOEXEC, 0)
		return err
	})
	if err != nil {
		return -1, 0, err
	}
	return fd, size, nil
}

// regularSize fstats fd and returns its size (0 for pseudo-files, which
// say 0), or why it is not read: not a regular file, larger than limit,
// or refused by check.
func regularSize(fd int, limit int64, check func(*unix.Stat_t) error) (int, error) {
	var st unix.Stat_t
	if err := ignoringEINTR(func() error { return unix.Fstat(fd, &st) }); err != nil {
		return 0, err
	}
	switch {
	case st.Mode&unix.S_IFMT != unix.S_IFREG:
		return 0, errors.New(notRegular(fileInfo(st).Mode))
	case st.Size > limit:
		return 0, ErrTooLarge // refused unread
	}
	if check != nil {
		if err := check(&st); err != nil {
			return 0, err
		}
	}
	return int(st.Size), nil
}

// notRegular says what a file that is not read is instead.
func notRegular(m fs.FileMode) string {
	t := "type " + m.Type().String()
	switch m.Type() {
	case fs.ModeDir:
		t = "directory"
	case fs.ModeSymlink:
		t = "symbolic link"
	case fs.ModeNamedPipe:
		t = "FIFO"
	case fs.ModeSocket:
		t = "socket"
	case fs.ModeDevice | fs.ModeCharDevice:
		t = "character device"
	case fs.ModeDevice:
		t = "block device"
	}
	return "not a regular file (" + t + ")"
}

// readFD reads an open regular file, expected to hold size bytes, and
// closes it. The descriptor is used as is, not through an *os.File:
// os.NewFile would ask whether it is non-blocking and try to add it to
// the network poller (two system calls that fail for regular files), and
// a snapshot's facts are hundreds of small files.
func readFD(fd int, key string, size int, limit int64) ([]byte, error) {
	defer unix.Close(fd)
	buf := make([]byte, 0, max(size+1, 512))
	for {
		if len(buf) == cap(buf) {
			buf = append(buf, 0)[:len(buf)]
		}
		var n int
		err := ignoringEINTR(func() (err error) {
			n, err = unix.Read(fd, buf[len(buf):cap(buf)])
			return err
		})
		if err != nil {
			return nil, &fs.PathError{Op: "read", Path: key, Err: err}
		}
		if n == 0 {
			return buf, nil
		}
		buf = buf[:len(buf)+n]
		if int64(len(buf)) > limit {
			return nil, ErrTooLarge
		}
	}
}

// ignoringEINTR retries a system call the delivery of a signal
// interrupted.
func ignoringEINTR(call func() error) error {
	for {
		if err := call(); err != unix.EINTR {
			return err
		}
	}
}

// statKey stats a root-relative path; follow says whether a final link is
// followed (stat) or described (lstat).
func (h *Host) statKey(key string, follow bool) (unix.Stat_t, error) {
	var st unix.Stat_t
	if !h.confined() {
		if follow {
			return st, unix.Stat("/"+key, &st)
		}
		return st, unix.Lstat("/"+key, &st)
	}
	flags := unix.O_PATH
	if !follow {
		flags |= unix.O_NOFOLLOW
	}
	fd, err := h.openKey(key, flags)
	if err != nil {
		return st, err
	}
	defer unix.Close(fd)
	return st, unix.Fstat(fd, &st)
}

// readlinkKey reads a link without following it; the directories above it
// are resolved inside the root.
func (h *Host) readlinkKey(key string) (string, error) {
	if !h.confined() {
		return os.Readlink("/" + key)
	}
	fd, err := h.openKey(key, unix.O_PATH|unix.O_NOFOLLOW)
	if err != nil {
		return "", err
	}
	defer unix.Close(fd)
	buf := make([]byte, 4096)
	n, err := unix.Readlinkat(fd, "", buf)
	if err != nil {
		return "", err
	}
	return string(buf[:n]), nil
}

// realpathKey resolves every link of a root-relative path inside the root
// and returns the result as an absolute path of the host ("/var/lib/x").
func (h *Host) realpathKey(key string) (string, error) {
	if !h.confined() {
		r, err := filepath.EvalSymlinks("/" + key)
		if err != nil {
			return "", err
		}
		return r, nil
	}
	fd, err := h.openKey(key, unix.O_PATH)
	if err != nil {
		return "", err
	}
	defer unix.Close(fd)
	full, err := os.Readlink("/proc/self/fd/" + strconv.Itoa(fd))
	if err != nil {
		return "", err
	}
	rootReal, err := os.Readlink("/proc/self/fd/" + strconv.Itoa(h.rootFD))
	if err != nil {
		return "", err
	}
	r, err := filepath.Rel(rootReal, full)
	if err != nil || r == ".." || strings.HasPrefix(r, "../") {
		return "", errors.New("resolves outside the root")
	}
	return "/" + rel(filepath.ToSlash(r)), nil
}

// readDirKey lists a root-relative directory.
func (h *Host) readDirKey(key string) ([]string, error) {
	fd, err := h.openKey(key, unix.O_RDONLY|unix.O_DIRECTORY)
	if err != nil {
		return nil, err
	}
	f := os.NewFile(uintptr(fd), key)
	defer f.Close()
	return f.Readdirnames(-1)
}

// shadowTouched copies a file a procfs parser is about to read into the
// shadow tree the parser reads (live hosts with a root other than "/"):
// procfs opens files itself, by path, and would follow links out of the
// root. What is not in the shadow does not exist for procfs: a file that
// could not be read (a process that exited) loses its earlier copy.
func (h *Host) shadowTouched(key string, b []byte, readErr error) {
	if h.shadow == "" {
		return
	}
	dst := filepath.Join(h.shadow, filepath.FromSlash(key))
	if readErr != nil {
		os.Remove(dst)
		return
	}
	// Gatherers run concurrently and may touch the same file: each copy is
	// renamed into place whole, so a parser never reads a half-written one.
	if os.MkdirAll(filepath.Dir(dst), 0o700) != nil {
		return
	}
	f, err := os.CreateTemp(filepath.Dir(dst), ".copy-*")
	if err != nil {
		return
	}
	_, err = f.Write(b)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(f.Name(), dst)
	}
	if err != nil {
		os.Remove(f.Name())
	}
}

// fileInfo converts stat(2) output.
func fileInfo(st unix.Stat_t) FileInfo {
	mode := fs.FileMode(st.Mode & 0o777)
	switch st.Mode & unix.S_IFMT {
	case unix.S_IFDIR:
		mode |= fs.ModeDir
	case unix.S_IFLNK:
		mode |= fs.ModeSymlink
	case unix.S_IFIFO:
		mode |= fs.ModeNamedPipe
	case unix.S_IFSOCK:
		mode |= fs.ModeSocket
	case unix.S_IFCHR:
		mode |= fs.ModeDevice | fs.ModeCharDevice
	case unix.S_IFBLK:
		mode |= fs.ModeDevice
	}
	if st.Mode&unix.S_ISUID != 0 {
		mode |= fs.ModeSetuid
	}
	if st.Mode&unix.S_ISGID != 0 {
		mode |= fs.ModeSetgid
	}
	if st.Mode&unix.S_ISVTX != 0 {
		mode |= fs.ModeSticky
	}
	return FileInfo{Mode: mode, UID: int(st.Uid), GID: int(st.Gid), Size: st.Size, Dev: uint64(st.Dev), Ino: st.Ino, IsDir: st.Mode&unix.S_IFMT == unix.S_IFDIR}
}
