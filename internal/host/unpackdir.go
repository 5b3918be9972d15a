package host

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// Snapshots unpack into tmpfs (/dev/shm) unless TMPDIR says otherwise: a
// snapshot is hundreds of small files, read once and removed. Every unpack
// gets its own directory under one per-user directory, and holds an flock
// on a file in it while in use, so that the next OpenSnapshot can tell a
// directory whose process died (kill -9 mid-unpack) and remove it.

// unpackParent is where the per-user directory lives.
func unpackParent() string {
	if os.Getenv("TMPDIR") == "" {
		if st, err := os.Stat("/dev/shm"); err == nil && st.IsDir() && st.Mode().Perm()&0o002 != 0 {
			return "/dev/shm"
		}
	}
	return os.TempDir()
}

// unpackBase returns the per-user directory, creating it. In a shared
// (world-writable) parent another user may have made the name first, as a
// file, a link or a directory of theirs: then it is not used.
func unpackBase(parent string) (string, error) {
	base := filepath.Join(parent, fmt.Sprintf("dbhost-unpack-%d", os.Geteuid()))
	if err := os.Mkdir(base, 0o700); err != nil && !errors.Is(err, fs.ErrExist) {
		return "", err
	}
	st, err := os.Lstat(base)
	if err != nil {
		return "", err
	}
	sys, _ := st.Sys().(*syscall.Stat_t)
	switch {
	case !st.IsDir():
		return "", fmt.Errorf("%s is not a directory", base)
	case sys == nil || int(sys.Uid) != os.Geteuid():
		return "", fmt.Errorf("%s belongs to another user", base)
	case st.Mode().Perm() != 0o700:
		return "", fmt.Errorf("%s has mode %04o, not 0700", base, st.Mode().Perm())
	}
	return base, nil
}

// staleAge is how old a directory without a held lock must be before it
// is removed: one that was just made has not taken its lock yet.
const staleAge = time.Minute

// cleanStale removes unpack directories whose process is gone.
func cleanStale(base string) {
	ents, err := os.ReadDir(base)
	if err != nil {
		return
	}
	for _, e := range ents {
		if !e.IsDir() || !strings.HasPrefix(e.Name(), "snapshot-") {
			continue
		}
		dir := filepath.Join(base, e.Name())
		f, err := os.OpenFile(filepath.Join(dir, ".lock"), os.O_RDWR|syscall.O_NOFOLLOW, 0)
		if err != nil {
			if info, err := e.Info(); err == nil && time.Since(info.ModTime()) > staleAge {
				os.RemoveAll(dir)
			}
			continue
		}
		if unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB) == nil {
			os.RemoveAll(dir) // its owner died: the kernel released the lock
		}
		f.Close()
	}
}

// makeUnpackDir creates the directory this snapshot unpacks into and takes
// its lock (released by Close, or by the kernel when the process dies).
func (h *Host) makeUnpackDir() error {
	parent := unpackParent()
	base, err := unpackBase(parent)
	if err == nil {
		cleanStale(base)
	} else {
		base = parent // a private directory of its own, which only Close removes
	}
	dir, err := os.MkdirTemp(base, fmt.Sprintf("snapshot-%d-", os.Getpid()))
	if err != nil {
		return err
	}
	lock, err := os.OpenFile(filepath.Join(dir, ".lock"), os.O_CREATE|os.O_RDWR|syscall.O_NOFOLLOW, 0o600)
	if err != nil {
		os.RemoveAll(dir)
		return err
	}
	if err := unix.Flock(int(lock.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
		lock.Close()
		os.RemoveAll(dir)
		return err
	}
	h.tmpdir, h.unpackLock, h.root = dir, lock, filepath.Join(dir, "fs")
	return nil
}
