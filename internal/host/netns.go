package host

import (
	"errors"
	"fmt"
	"runtime"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// NetNS returns the network namespace a process is in, as the kernel names
// it ("net:[4026531840]"), read from the /proc/PID/ns/net link (recorded,
// so a snapshot replays it). PID 0 means dbhost itself.
func (h *Host) NetNS(pid int) (string, error) {
	p := "/proc/self/ns/net"
	if pid > 0 {
		p = procPath(pid, "ns/net")
	}
	ns, err := h.plain().Readlink(p)
	if err != nil {
		return "", err
	}
	if _, err := netNSInode(ns); err != nil {
		return "", fmt.Errorf("%s: %w", p, err)
	}
	return ns, nil
}

// netNSInode parses "net:[N]".
func netNSInode(ns string) (uint64, error) {
	s, ok := strings.CutPrefix(ns, "net:[")
	if !ok || !strings.HasSuffix(s, "]") {
		return 0, fmt.Errorf("%q is not a network namespace", ns)
	}
	return strconv.ParseUint(strings.TrimSuffix(s, "]"), 10, 64)
}

// ErrForeignNetNS wraps the failure to enter another network namespace.
var ErrForeignNetNS = errors.New("in another network namespace")

// ListenSocketsIn lists the listening TCP sockets of the network namespace
// ns ("net:[N]", from NetNS) that process pid is in, as ListenSockets does
// for dbhost's own: sock_diag answers only for the namespace of the socket
// that asks, so a thread of dbhost enters ns for the dump. Entering needs
// root (CAP_SYS_ADMIN); without it the error says so.
func (h *Host) ListenSocketsIn(pid int, ns string) ([]ListenSocket, error) {
	b, err := h.Probe("sock_diag:tcp_listen:"+ns, func() ([]byte, error) {
		socks, err := listenInNetNS(pid, ns)
		if err != nil {
			return nil, err
		}
		return marshal(socks)
	})
	if err != nil {
		return nil, err
	}
	var out []ListenSocket
	return out, unmarshal(b, &out)
}

// nsGetNSType is NS_GET_NSTYPE, _IO(0xb7, 0x3): the CLONE_NEW* type of a
// namespace file.
const nsGetNSType = 0xb703

// listenInNetNS opens the namespace of pid, checks it is the network
// namespace ns (the PID may have been reused since ns was read), and dumps
// its listening sockets from a locked thread that enters it and comes back.
func listenInNetNS(pid int, ns string) ([]ListenSocket, error) {
	want, err := netNSInode(ns)
	if err != nil {
		return nil, err
	}
	p := procPath(pid, "ns/net")
	fd, err := unix.Open(p, unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, foreignErr(ns, err)
	}
	defer unix.Close(fd)
	var fs unix.Statfs_t
	var st unix.Stat_t
	if err := unix.Fstatfs(fd, &fs); err != nil || fs.Type != unix.NSFS_MAGIC {
		return nil, fmt.Errorf("%s: not a namespace file", p)
	}
	if t, err := unix.IoctlRetInt(fd, nsGetNSType); err != nil || t != unix.CLONE_NEWNET {
		return nil, fmt.Errorf("%s: not a network namespace", p)
	}
	if err := unix.Fstat(fd, &st); err != nil || st.Ino != want {
		return nil, fmt.Errorf("%s: process %d left %s (it exited or moved)", p, pid, ns)
	}
	type result struct {
		socks []ListenSocket
		err   error
	}
	done := make(chan result, 1)
	go func() {
		runtime.LockOSThread()
		// Back to this thread's own namespace before unlocking: a thread
		// that could not return stays locked, and the runtime discards it
		// when the goroutine ends.
		back, err := unix.Open("/proc/thread-self/ns/net", unix.O_RDONLY|unix.O_CLOEXEC, 0)
		if err != nil {
			runtime.UnlockOSThread()
			done <- result{err: fmt.Errorf("own network namespace: %w", err)}
			return
		}
		defer unix.Close(back)
		if err := unix.Setns(fd, unix.CLONE_NEWNET); err != nil {
			runtime.UnlockOSThread()
			done <- result{err: foreignErr(ns, err)}
			return
		}
		var r result
		for _, fam := range []uint8{unix.AF_INET, unix.AF_INET6} {
			socks, err := sockDiagListen(fam)
			if err != nil {
				if fam == unix.AF_INET6 && errors.Is(err, unix.ENOENT) {
					continue // IPv6 disabled there
				}
				r = result{err: fmt.Errorf("%s: %w", ns, err)}
				break
			}
			r.socks = append(r.socks, socks...)
		}
		if err := unix.Setns(back, unix.CLONE_NEWNET); err != nil {
			done <- result{err: fmt.Errorf("returning from %s: %w", ns, err)}
			return // still locked: the thread ends with the goroutine
		}
		runtime.UnlockOSThread()
		done <- r
	}()
	r := <-done
	return r.socks, r.err
}

// foreignErr says why another namespace's sockets could not be listed.
func foreignErr(ns string, err error) error {
	if IsPermission(err) {
		return fmt.Errorf("%w (%s); listing its sockets needs root", ErrForeignNetNS, ns)
	}
	return fmt.Errorf("%w (%s): %w", ErrForeignNetNS, ns, err)
}
