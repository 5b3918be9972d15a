package host

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// A Host's private files (an unpacked snapshot; the confined copies procfs
// reads under --root) live in tmpfs (/dev/shm) unless TMPDIR says
// otherwise: hundreds of small files, read once and removed. Each Host gets
// its own directory under one per-user directory and holds an flock on a
// file in it while open, so that the next Host can tell a directory whose
// process died (kill -9 mid-unpack) and remove it.

// privateKinds are the prefixes of the directories Hosts make.
var privateKinds = []string{"snapshot-", "root-"}

// unpackParents are where the per-user directory may live, best first.
func unpackParents() []string {
	var out []string
	if os.Getenv("TMPDIR") == "" {
		if st, err := os.Stat("/dev/shm"); err == nil && st.IsDir() && st.Mode().Perm()&0o002 != 0 {
			out = append(out, "/dev/shm")
		}
	}
	return append(out, os.TempDir())
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

// cleanStale removes private directories whose process is gone.
func cleanStale(base string) {
	ents, err := os.ReadDir(base)
	if err != nil {
		return
	}
	for _, e := range ents {
		if !e.IsDir() || !hasKindPrefix(e.Name()) {
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

func hasKindPrefix(name string) bool {
	for _, k := range privateKinds {
		if strings.HasPrefix(name, k) {
			return true
		}
	}
	return false
}

// privateArea is a locked directory of one Host.
type privateArea struct {
	dir  string
	lock *os.File
}

func (a privateArea) remove() error {
	err := os.RemoveAll(a.dir)
	a.lock.Close()
	return err
}

// makePrivateDir creates a directory of this Host ("snapshot-PID-*" or
// "root-PID-*") and takes its lock, released by Close or by the kernel
// when the process dies. A Host dropped without Close has it removed when
// the garbage collector finds its state, which outlives the Host while
// another shares it.
func (h *Host) makePrivateDir(kind string) (string, error) {
	var base string
	parents := unpackParents()
	for _, parent := range parents {
		if b, err := unpackBase(parent); err == nil {
			base = b
			break
		}
	}
	if base != "" {
		cleanStale(base)
	} else {
		base = parents[len(parents)-1] // a private directory of its own, which only Close removes
	}
	dir, err := os.MkdirTemp(base, fmt.Sprintf("%s%d-", kind, os.Getpid()))
	if err != nil {
		return "", err
	}
	// The lock file appears under its name already locked: another
	// process's cleanStale must never find it unlocked.
	lock, err := os.OpenFile(filepath.Join(dir, ".lock-new"), os.O_CREATE|os.O_EXCL|os.O_RDWR|syscall.O_NOFOLLOW, 0o600)
	if err == nil {
		if err = unix.Flock(int(lock.Fd()), unix.LOCK_EX|unix.LOCK_NB); err == nil {
			err = os.Rename(filepath.Join(dir, ".lock-new"), filepath.Join(dir, ".lock"))
		}
		if err != nil {
			lock.Close()
		}
	}
	if err != nil {
		os.RemoveAll(dir)
		return "", err
	}
	h.area = &privateArea{dir: dir, lock: lock}
	h.areaCleanup = runtime.AddCleanup(h.state, func(a privateArea) { a.remove() }, *h.area)
	return dir, nil
}

// removePrivateDir removes the Host's directory (Close).
func (h *Host) removePrivateDir() error {
	if h.area == nil {
		return nil
	}
	h.areaCleanup.Stop()
	err := h.area.remove()
	h.area = nil
	return err
}
