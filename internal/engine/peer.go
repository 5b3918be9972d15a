package engine

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/dbhost/dbhost/internal/host"
)

// ServiceAccounts are the accounts packages run each engine's server as.
// Only a server running as one of them, or as root, is sent a password:
// anyone can start a process with a server's name, but not as these users.
var ServiceAccounts = map[Engine][]string{
	Postgres: {"postgres"},
	MySQL:    {"mysql", "mariadb"},
	Redis:    {"redis", "valkey"},
	MongoDB:  {"mongodb", "mongod"},
}

// MayReceiveCredentials says why the instance must not be sent a password
// from dbhost's credential sources (a DSN, ~/.pgpass, ~/.my.cnf), or "":
// its process must run as root or as the engine's service account.
func (i *Instance) MayReceiveCredentials() string {
	if i.UID == 0 {
		return ""
	}
	for _, a := range ServiceAccounts[i.Engine] {
		if i.User == a {
			return ""
		}
	}
	return fmt.Sprintf("the server runs as %s (uid %d), not root or %s: no password is sent to it",
		orUID(i.User, i.UID), i.UID, strings.Join(ServiceAccounts[i.Engine], " or "))
}

func orUID(user string, uid int) string {
	if user == "" {
		return "uid " + strconv.Itoa(uid)
	}
	return user
}

// ErrWrongServer is returned when the process behind a socket is not the
// discovered instance.
var ErrWrongServer = errors.New("not the discovered server")

// PeerCred returns the PID and UID of the process at the other end of a
// Unix stream connection: for a client, the process that called listen().
func PeerCred(c net.Conn) (pid, uid int, err error) {
	uc, ok := c.(*net.UnixConn)
	if !ok {
		return 0, 0, errors.New("not a Unix socket")
	}
	raw, err := uc.SyscallConn()
	if err != nil {
		return 0, 0, err
	}
	var cred *unix.Ucred
	var serr error
	if err := raw.Control(func(fd uintptr) { cred, serr = unix.GetsockoptUcred(int(fd), unix.SOL_SOCKET, unix.SO_PEERCRED) }); err != nil {
		return 0, 0, err
	}
	if serr != nil {
		return 0, 0, serr
	}
	return int(cred.Pid), int(cred.Uid), nil
}

// DialVerified connects to the instance's Unix socket and checks, before a
// byte is sent, that the process listening on it is the instance (its
// PID, also as seen from inside its PID namespace). A default or configured
// socket path can belong to another server, or to a user's fake one.
func (i *Instance) DialVerified(ctx context.Context, h *host.Host, socket string, timeout time.Duration) (net.Conn, error) {
	d := net.Dialer{Timeout: timeout}
	c, err := d.DialContext(ctx, "unix", socket)
	if err != nil {
		return nil, err
	}
	pid, uid, err := PeerCred(c)
	if err != nil {
		c.Close()
		return nil, fmt.Errorf("%s: cannot tell who listens on it: %w", socket, err)
	}
	if !i.isPID(h, pid) {
		c.Close()
		return nil, fmt.Errorf("%w: the socket %s is served by pid %d (uid %d), not the discovered pid %d; not connected", ErrWrongServer, socket, pid, uid, i.PID)
	}
	return c, nil
}

// isPID reports whether pid is the instance's process: its PID, or the PID
// it has inside its own PID namespace.
func (i *Instance) isPID(h *host.Host, pid int) bool {
	if pid == i.PID {
		return true
	}
	st, err := h.Status(i.PID)
	if err != nil {
		return false
	}
	for _, n := range st.NSpids {
		if int(n) == pid {
			return true
		}
	}
	return false
}

// OwnsListener reports whether the instance's process holds the listening
// TCP socket for addr:port (or a wildcard listener on port), so that a
// connection there reaches it and not another process.
func (i *Instance) OwnsListener(h *host.Host, addr string, port int) bool {
	probe := &Instance{PID: i.PID}
	AttachListeners(h, []*Instance{probe})
	ip := net.ParseIP(addr)
	for _, l := range probe.Listen {
		if l.Proto == "unix" || l.Port != port {
			continue
		}
		lip := net.ParseIP(l.Addr)
		switch {
		case l.Addr == addr, lip != nil && ip != nil && lip.Equal(ip):
			return true
		case l.Wildcard() && ip != nil && ip.IsLoopback():
			return true
		case l.Wildcard() && addr == "localhost":
			return true
		}
	}
	return false
}
