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
	return h.openNoLinks(resolved, flags)
}

// openNoLinks opens a resolved, link-free path one directory at a time,
// following no link: a directory swapped for a link after walkInRoot
// looked at it makes the open fail instead of leaving the root.
func (h *Host) openNoLinks(resolved string, flags int) (int, error) {
	if resolved == "." {
		return unix.Openat(h.rootFD, ".", flags, 0)
	}
	parts := strings.Split(resolved, "/")
	dir := h.rootFD
	for _, c := range parts[:len(parts)-1] {
		fd, err := unix.Openat(dir, c, unix.O_PATH|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
		if dir != h.rootFD {
			unix.Close(dir)
		}
		if err != nil {
			return -1, err
		}
		dir = fd
	}
	fd, err := unix.Openat(dir, parts[len(parts)-1], flags|unix.O_NOFOLLOW, 0)
	if dir != h.rootFD {
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
// beyond). A FIFO or device is not read: only regular files and the
// pseudo-files of /proc and /sys (which stat as regular, size 0).
func (h *Host) readKey(key string, limit int64) ([]byte, error) {
	fd, err := h.openKey(key, unix.O_RDONLY|unix.O_NONBLOCK)
	if err != nil {
		return nil, &fs.PathError{Op: "open", Path: "/" + key, Err: err}
	}
	// The descriptor is used as is, not through an *os.File: os.NewFile
	// would ask whether it is non-blocking and try to add it to the
	// network poller (two system calls that fail for regular files), and
	// a snapshot's facts are hundreds of small files.
	defer unix.Close(fd)
	size := 0
	var st unix.Stat_t
	if err := ignoringEINTR(func() error { return unix.Fstat(fd, &st) }); err == nil {
		switch {
		case st.Mode&unix.S_IFMT != unix.S_IFREG:
			return nil, &fs.PathError{Op: "open", Path: "/" + key, Err: errors.New("not a regular file")}
		case st.Size > limit:
			return nil, ErrTooLarge // refused unread
		case st.Size > 0:
			size = int(st.Size) // one allocation; /proc files say 0
		}
	}
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
	return FileInfo{Mode: mode, UID: int(st.Uid), GID: int(st.Gid), Size: st.Size, Dev: uint64(st.Dev), IsDir: st.Mode&unix.S_IFMT == unix.S_IFDIR}
}
