package engine

import (
	"context"
	"errors"
	"fmt"
	"net"
	"slices"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/dbhost/dbhost/internal/host"
)

// MayReceiveCredentials says why the instance must not be sent a password
// from dbhost's credential sources (a DSN, ~/.pgpass, ~/.my.cnf), or "":
// its process must run as root or as the engine's service account, and once
// discovery has judged it, it must be trusted.
func (i *Instance) MayReceiveCredentials() string {
	if i.Trust.Basis != "" && !i.Trust.Trusted {
		return "the instance is not trusted (" + i.Trust.Why + "): no password is sent to it"
	}
	if i.UID == 0 {
		return ""
	}
	accounts := i.Profile().ServiceAccounts()
	if slices.Contains(accounts, i.User) {
		return ""
	}
	return fmt.Sprintf("the server runs as %s (uid %d), not root or %s: no password is sent to it",
		orUID(i.User, i.UID), i.UID, strings.Join(accounts, " or "))
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

// WrongServerError is an ErrWrongServer with what was found instead. A
// driver that tries several addresses joins their errors; errors.As finds
// this one among them.
type WrongServerError struct{ Reason string }

func (e *WrongServerError) Error() string        { return ErrWrongServer.Error() + ": " + e.Reason }
func (e *WrongServerError) Is(target error) bool { return target == ErrWrongServer }

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
	if !i.IsPID(h, pid) {
		c.Close()
		return nil, &WrongServerError{fmt.Sprintf("the socket %s is served by pid %d (uid %d), not the discovered pid %d; not connected", socket, pid, uid, i.PID)}
	}
	return c, nil
}

// IsPID reports whether pid is the instance's process: its PID, or the PID
// it has inside its own PID namespace (what a containerised server reports
// of itself).
func (i *Instance) IsPID(h *host.Host, pid int) bool {
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

// Dial connects to one of the instance's own endpoints and to nothing
// else: a Unix socket whose listener is the instance (DialVerified), or a
// TCP address whose listening socket the instance holds (DialTCPVerified).
// It is the dial function given to the drivers, so that every address they
// try — each host of a multi-host string, each address a name resolves
// to — is checked before the server sees a byte.
func (i *Instance) Dial(ctx context.Context, h *host.Host, network, addr string, timeout time.Duration) (net.Conn, error) {
	switch network {
	case "unix":
		return i.DialVerified(ctx, h, addr, timeout)
	case "tcp", "tcp4", "tcp6":
		return i.DialTCPVerified(ctx, h, addr, timeout)
	}
	return nil, fmt.Errorf("%s %s: only Unix sockets and TCP are used", network, addr)
}

// DialTCPVerified connects to host:port at an address of this host where
// the connection reaches a listening socket the instance holds. A TCP peer
// has no credentials to ask for; which socket accepts is what the kernel's
// tables say: an address bound exactly wins over a wildcard, and a
// wildcard of one family says nothing about the other (0.0.0.0 does not
// cover ::1, where a user may listen).
func (i *Instance) DialTCPVerified(ctx context.Context, h *host.Host, addr string, timeout time.Duration) (net.Conn, error) {
	hostName, portText, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, err
	}
	port, err := strconv.Atoi(portText)
	if err != nil {
		return nil, fmt.Errorf("%s: bad port", addr)
	}
	ips, err := resolve(ctx, hostName)
	if err != nil {
		return nil, err
	}
	v, err := i.tcpView(h)
	if err != nil {
		return nil, fmt.Errorf("%s: cannot tell who listens on it: %w", addr, err)
	}
	var refused []string
	wrong := false
	for _, ip := range ips {
		target := net.JoinHostPort(ip.String(), portText)
		switch v.receiver(ip, port) {
		case byInstance:
			d := net.Dialer{Timeout: timeout}
			c, err := d.DialContext(ctx, "tcp", target)
			if err == nil {
				return c, nil
			}
			refused = append(refused, err.Error())
		case byOther:
			wrong = true
			refused = append(refused, fmt.Sprintf("%s is served by a socket the discovered pid %d does not hold", target, i.PID))
		default:
			if !localIP(ip) {
				refused = append(refused, fmt.Sprintf("%s is not an address of this host", target))
			} else {
				refused = append(refused, fmt.Sprintf("nothing listens on %s", target))
			}
		}
	}
	if len(refused) == 0 {
		return nil, fmt.Errorf("%s: no address to connect to", addr)
	}
	why := strings.Join(refused, "; ") + "; not connected"
	if wrong {
		return nil, &WrongServerError{why}
	}
	return nil, errors.New(why)
}

// OwnsListener reports whether a connection to addr:port (an address or a
// name) reaches a listening TCP socket the instance holds, at every address
// the name stands for where anything listens.
func (i *Instance) OwnsListener(h *host.Host, addr string, port int) bool {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	ips, err := resolve(ctx, addr)
	if err != nil {
		return false
	}
	v, err := i.tcpView(h)
	if err != nil {
		return false
	}
	owned := false
	for _, ip := range ips {
		switch v.receiver(ip, port) {
		case byInstance:
			owned = true
		case byOther:
			return false
		}
	}
	return owned
}

// resolve turns a host name or address into addresses; an unspecified
// address (connecting to 0.0.0.0 reaches this host) becomes loopback.
func resolve(ctx context.Context, name string) ([]net.IP, error) {
	var ips []net.IP
	if ip := net.ParseIP(name); ip != nil {
		ips = []net.IP{ip}
	} else {
		addrs, err := net.DefaultResolver.LookupIPAddr(ctx, name)
		if err != nil {
			return nil, err
		}
		for _, a := range addrs {
			if a.Zone == "" {
				ips = append(ips, a.IP)
			}
		}
	}
	for k, ip := range ips {
		switch {
		case ip.Equal(net.IPv4zero):
			ips[k] = net.IPv4(127, 0, 0, 1)
		case ip.Equal(net.IPv6unspecified):
			ips[k] = net.IPv6loopback
		}
	}
	return ips, nil
}

// tcpView is the host's listening TCP sockets and which of them the
// instance's process holds.
type tcpView struct {
	all  map[uint64]Listener
	mine map[uint64]bool
}

func (i *Instance) tcpView(h *host.Host) (*tcpView, error) {
	all, err := tcpListeners(h)
	if err != nil {
		return nil, err
	}
	inodes, err := h.SocketInodes(i.PID)
	if err != nil {
		return nil, err
	}
	v := &tcpView{all: all, mine: map[uint64]bool{}}
	for _, ino := range inodes {
		v.mine[ino] = true
	}
	return v, nil
}

type receiver int

const (
	byNobody receiver = iota
	byInstance
	byOther
)

// receiver says whose socket accepts a connection to ip:port. Sockets
// bound to the address itself take it; else the wildcards of its family,
// and for IPv4 also "::" (dual-stack unless IPV6_V6ONLY, which the tables
// do not show). Several candidates (SO_REUSEPORT, or both wildcards) must
// all be the instance's. Only addresses of this host count: a wildcard
// listener says nothing about another machine's address.
func (v *tcpView) receiver(ip net.IP, port int) receiver {
	if !localIP(ip) {
		return byNobody
	}
	v4 := ip.To4() != nil
	var exact, wild []uint64
	for ino, l := range v.all {
		lip := net.ParseIP(l.Addr)
		if l.Port != port || lip == nil {
			continue
		}
		switch {
		case lip.Equal(ip):
			exact = append(exact, ino)
		case lip.IsUnspecified() && (v4 || lip.To4() == nil):
			wild = append(wild, ino)
		}
	}
	cands := exact
	if len(cands) == 0 {
		cands = wild
	}
	if len(cands) == 0 {
		return byNobody
	}
	for _, ino := range cands {
		if !v.mine[ino] {
			return byOther
		}
	}
	return byInstance
}

// localIP reports whether ip is an address of this host (in dbhost's
// network namespace).
func localIP(ip net.IP) bool {
	if ip.IsLoopback() {
		return true
	}
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		return false
	}
	for _, a := range addrs {
		if n, ok := a.(*net.IPNet); ok && n.IP.Equal(ip) {
			return true
		}
	}
	return false
}
