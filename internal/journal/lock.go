package journal

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"golang.org/x/sys/unix"
)

// HostLock is the lock that everything changing this machine takes: fix
// --apply, --rollback, --recover and experiments (their recover too) take
// it exclusively with LockContext; fixture recording and tests that change
// kernel knobs exclusively with Lock (or Hold); tests that only start
// private servers take it shared (so a recording never captures another
// test's servers).
const HostLock = "dbhost-host"

// PassEnv is the variable through which a process that holds a lock hands
// it to a command it starts (a test's dbhost, killed mid-apply): NAME=FD,
// the lock file open on descriptor FD. The command holds the lock through
// that descriptor only after checking that it is the lock file and that
// it holds the lock already (a non-blocking flock on the shared open file
// succeeds only then); anything else is ignored and the lock taken as
// usual. The holder never gives the lock up in between.
const PassEnv = "DBHOST_LOCK_FD"

var (
	lockMu    sync.Mutex
	exclusive int // exclusive holds by this process
)

// Held is a lock this process holds.
type Held struct {
	name string
	f    *os.File
	once sync.Once
	// passed: held through a descriptor the parent handed over; releasing
	// it must not unlock the parent's open file.
	passed bool
}

// Lock takes name exclusively, blocking until it is free, and returns its
// release.
func Lock(name string) (func(), error) {
	h, err := Hold(name)
	if err != nil {
		return nil, err
	}
	return h.Release, nil
}

// Hold takes name exclusively, blocking until it is free (or holds it
// through a descriptor the parent passed, see PassEnv).
func Hold(name string) (*Held, error) {
	f, passed, err := passedLock(name)
	if err != nil {
		return nil, err
	}
	if f == nil {
		if f, err = flock(name, unix.LOCK_EX); err != nil {
			return nil, err
		}
	}
	return hold(name, f, passed), nil
}

// hold counts an exclusive hold of name through f until its release.
func hold(name string, f *os.File, passed bool) *Held {
	lockMu.Lock()
	exclusive++
	lockMu.Unlock()
	return &Held{name: name, f: f, passed: passed}
}

// lockPoll is how often LockContext tries again while name is held.
const lockPoll = 100 * time.Millisecond

// LockContext is Lock for a command: when name is held elsewhere it calls
// waiting once (to say so) and tries again until it gets the lock or ctx
// is done. A blocking flock would not see ctx: Ctrl-C, which the command
// catches, could not stop the wait. (Polling, it may lose the lock to a
// later taker; tests, which share it, take it with Lock.)
func LockContext(ctx context.Context, name string, waiting func()) (func(), error) {
	f, passed, err := passedLock(name)
	if err != nil {
		return nil, err
	}
	if f == nil {
		if f, err = openLock(name); err != nil {
			return nil, err
		}
		if err := pollLock(ctx, f, waiting); err != nil {
			f.Close()
			return nil, err
		}
	}
	return hold(name, f, passed).Release, nil
}

// pollLock takes f's lock exclusively, trying again every lockPoll.
func pollLock(ctx context.Context, f *os.File, waiting func()) error {
	fd := int(f.Fd())
	var tick *time.Ticker
	for {
		err := unix.Flock(fd, unix.LOCK_EX|unix.LOCK_NB)
		if err == nil {
			return nil
		}
		if !errors.Is(err, unix.EWOULDBLOCK) {
			return err
		}
		if tick == nil {
			if waiting != nil {
				waiting()
			}
			tick = time.NewTicker(lockPoll)
			defer tick.Stop()
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-tick.C:
		}
	}
}

// Release gives the lock up (once).
func (h *Held) Release() {
	h.once.Do(func() {
		lockMu.Lock()
		exclusive--
		lockMu.Unlock()
		if !h.passed {
			unix.Flock(int(h.f.Fd()), unix.LOCK_UN)
		}
		h.f.Close()
	})
}

// Pass hands the lock to cmd (before it starts): cmd inherits the lock
// file's descriptor and finds it through PassEnv, so that the lock is
// never free between the holder and the command.
func (h *Held) Pass(cmd *exec.Cmd) {
	fd := 3 + len(cmd.ExtraFiles)
	cmd.ExtraFiles = append(cmd.ExtraFiles, h.f)
	if cmd.Env == nil {
		cmd.Env = os.Environ()
	}
	cmd.Env = append(cmd.Env, fmt.Sprintf("%s=%s=%d", PassEnv, h.name, fd))
}

// passedLock returns the lock file the parent passed for name, if it is
// the lock file and its lock is held through it.
func passedLock(name string) (*os.File, bool, error) {
	v, ok := os.LookupEnv(PassEnv)
	if !ok {
		return nil, false, nil
	}
	n, fdText, _ := strings.Cut(v, "=")
	fd, err := strconv.Atoi(fdText)
	if n != name || err != nil || fd < 3 {
		return nil, false, nil
	}
	file, err := lockFile(name)
	if err != nil {
		return nil, false, err
	}
	var got, want unix.Stat_t
	if unix.Fstat(fd, &got) != nil || unix.Lstat(file, &want) != nil ||
		got.Dev != want.Dev || got.Ino != want.Ino || got.Mode&unix.S_IFMT != unix.S_IFREG || int(got.Uid) != os.Geteuid() {
		return nil, false, nil
	}
	// On the open file that holds it, an exclusive flock succeeds at
	// once; on one that does not, another holder makes it fail.
	if unix.Flock(fd, unix.LOCK_EX|unix.LOCK_NB) != nil {
		return nil, false, nil
	}
	// A copy: the descriptor passed stays as it was (closing the copy
	// leaves the lock with the open file the holder keeps).
	dup, err := unix.FcntlInt(uintptr(fd), unix.F_DUPFD_CLOEXEC, 3)
	if err != nil {
		return nil, false, nil
	}
	return os.NewFile(uintptr(dup), file), true, nil
}

// LockShared takes name shared. When this process already holds it
// exclusively, it returns at once (a shared request would wait on itself).
func LockShared(name string) (func(), error) {
	lockMu.Lock()
	held := exclusive > 0
	lockMu.Unlock()
	if held {
		return func() {}, nil
	}
	f, err := flock(name, unix.LOCK_SH)
	if err != nil {
		return nil, err
	}
	return func() {
		unix.Flock(int(f.Fd()), unix.LOCK_UN)
		f.Close()
	}, nil
}

func flock(name string, how int) (*os.File, error) {
	f, err := openLock(name)
	if err != nil {
		return nil, err
	}
	if err := unix.Flock(int(f.Fd()), how); err != nil {
		f.Close()
		return nil, err
	}
	return f, nil
}

// openLock opens name's lock file.
func openLock(name string) (*os.File, error) {
	file, err := lockFile(name)
	if err != nil {
		return nil, err
	}
	fd, err := unix.Open(file, unix.O_CREAT|unix.O_RDWR|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o600)
	if err != nil {
		return nil, fmt.Errorf("lock %s: %w", file, err)
	}
	f := os.NewFile(uintptr(fd), file)
	// Another user's file would let that user hold the lock for ever.
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil || st.Mode&unix.S_IFMT != unix.S_IFREG || int(st.Uid) != os.Geteuid() {
		f.Close()
		return nil, fmt.Errorf("lock %s: not a regular file of this user's", file)
	}
	return f, nil
}

// LockDir holds root's locks: a directory only root can write in, so that
// no other user can plant the lock file (a link, or a file they hold
// locked for ever to stop every apply and experiment).
const LockDir = "/run/dbhost"

// lockFile names the lock file: in LockDir for root, after checking that
// the directory is root's own and no link; for other users (who change
// nothing on the host) a file of their own in the temporary directory.
func lockFile(name string) (string, error) {
	if os.Geteuid() != 0 {
		return filepath.Join(os.TempDir(), fmt.Sprintf("%s-%d.lock", name, os.Geteuid())), nil
	}
	if err := os.Mkdir(LockDir, 0o755); err != nil && !errors.Is(err, os.ErrExist) {
		return "", err
	}
	var st unix.Stat_t
	if err := unix.Lstat(LockDir, &st); err != nil {
		return "", err
	}
	if st.Mode&unix.S_IFMT != unix.S_IFDIR || st.Uid != 0 || st.Mode&0o022 != 0 {
		return "", fmt.Errorf("lock directory %s is not a directory only root can write in", LockDir)
	}
	return filepath.Join(LockDir, name+".lock"), nil
}
