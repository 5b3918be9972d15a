package engine

import (
	"context"
	"errors"
	"fmt"
	"net"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
	"time"

	"github.com/dbhost/dbhost/internal/host"
)

// located is the discovered server an Endpoint was resolved to. Copies of
// the Endpoint share it: after a restart one of them finds the new process
// for all.
type located struct {
	h       *host.Host
	mu      sync.Mutex
	in      *Instance
	start   uint64 // the process's start time, to tell a restart
	dataDir string // a server found again must have the same
}

// ErrNotLocated is returned when a connection is asked of an Endpoint that
// Locate did not resolve: dbhost dials only servers it has checked.
var ErrNotLocated = errors.New("the endpoint was not resolved to a server discovered on this host (engine.Locate)")

// Locate resolves an endpoint to the database server discovered on this
// host that listens there — the process that owns the Unix socket (its
// peer credentials) or the TCP listener — and applies the trust rules: a
// server that may not receive credentials (an unprivileged user's
// look-alike, an untrusted instance) is refused, as is an address no
// discovered server of this host holds (another machine, a user's
// program). The endpoint returned dials only that server (Dial), and the
// engine packages' constructors (postgres.ConnConfig, mysql.EndpointConfig)
// refuse endpoints that were not located.
func Locate(ctx context.Context, h *host.Host, ep Endpoint) (Endpoint, error) {
	in, err := locate(ctx, h, ep)
	if err != nil {
		return ep, err
	}
	ep.srv = &located{h: h}
	ep.srv.set(in)
	ep.srv.dataDir = realDir(h, in.DataDir)
	return ep, nil
}

// Located reports whether Locate resolved the endpoint.
func (e Endpoint) Located() bool { return e.srv != nil }

// Instance is the discovered server the endpoint was resolved to (after a
// restart, the process found last), or nil.
func (e Endpoint) Instance() *Instance {
	if e.srv == nil {
		return nil
	}
	e.srv.mu.Lock()
	defer e.srv.mu.Unlock()
	return e.srv.in
}

// HostModel is the host model the endpoint was resolved on, or nil.
func (e Endpoint) HostModel() *host.Host {
	if e.srv == nil {
		return nil
	}
	return e.srv.h
}

// Dial connects to one of the located server's own endpoints
// (Instance.Dial): it is the dial function the drivers get. When the
// server has been restarted since (its process is gone), the endpoint is
// located again and must lead to a server of the same data directory.
func (e Endpoint) Dial(ctx context.Context, network, addr string, timeout time.Duration) (net.Conn, error) {
	if e.srv == nil {
		return nil, ErrNotLocated
	}
	in := e.Instance()
	c, err := in.Dial(ctx, e.srv.h, network, addr, timeout)
	if err == nil || !e.srv.restarted(in) {
		return c, err
	}
	in2, lerr := e.relocate(ctx)
	if lerr != nil {
		return nil, fmt.Errorf("%w; the server pid %d has exited and none of its data directory listens there now: %v", err, in.PID, lerr)
	}
	return in2.Dial(ctx, e.srv.h, network, addr, timeout)
}

// Check dials the endpoint's own address once through Dial: for the
// external tools (pgbench, sysbench) that connect by themselves, it proves
// just before they start that what listens there is the located server.
// Where nothing listens it says nothing: the tool finds no server either,
// and says so in its own words.
func (e Endpoint) Check(ctx context.Context, timeout time.Duration) error {
	network, addr := e.address()
	c, err := e.Dial(ctx, network, addr, timeout)
	switch {
	case err == nil:
		return c.Close()
	case errors.Is(err, syscall.ENOENT), errors.Is(err, syscall.ECONNREFUSED):
		return nil
	}
	return fmt.Errorf("%s: %w", e, err)
}

// address is where the endpoint points, as a dial takes it.
func (e Endpoint) address() (network, addr string) {
	if e.Socket() {
		if e.Engine == Postgres {
			return "unix", filepath.Join(e.Host, ".s.PGSQL."+strconv.Itoa(e.PortOrDefault()))
		}
		return "unix", e.Host
	}
	h := e.Host
	if h == "" {
		h = "localhost"
	}
	return "tcp", net.JoinHostPort(h, strconv.Itoa(e.PortOrDefault()))
}

func (l *located) set(in *Instance) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.in = in
	l.start = 0
	if st, err := l.h.ProcStat(in.PID); err == nil {
		l.start = st.Starttime
	}
}

// restarted reports whether the process of in is gone (or its PID now
// belongs to a process started later).
func (l *located) restarted(in *Instance) bool {
	st, err := l.h.ProcStat(in.PID)
	if err != nil {
		return true
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.start != 0 && st.Starttime != l.start
}

// relocate finds the server again after a restart.
func (e Endpoint) relocate(ctx context.Context) (*Instance, error) {
	in, err := locate(ctx, e.srv.h, e)
	if err != nil {
		return nil, err
	}
	if d := realDir(e.srv.h, in.DataDir); e.srv.dataDir != "" && d != e.srv.dataDir {
		return nil, &WrongServerError{fmt.Sprintf("%s is now served by the server of %s, not of %s", e, d, e.srv.dataDir)}
	}
	e.srv.set(in)
	return in, nil
}

func realDir(h *host.Host, dir string) string {
	if dir == "" {
		return ""
	}
	if r, err := h.Realpath(dir); err == nil {
		return r
	}
	return filepath.Clean(dir)
}

// locate discovers the host's servers of the endpoint's engine and returns
// the one that listens where it points, if it may receive credentials.
func locate(ctx context.Context, h *host.Host, ep Endpoint) (*Instance, error) {
	if !h.System() {
		return nil, host.ErrNotLive
	}
	t, err := ReadTable(h)
	if err != nil {
		return nil, fmt.Errorf("%s: reading the process table: %w", ep, err)
	}
	all, _ := Discover(ctx, h, t, Options{NoConnect: true})
	var cands []*Instance
	for _, in := range all {
		if in.Engine == ep.Engine {
			cands = append(cands, in)
		}
	}
	in, err := listenerOf(ctx, h, ep, cands)
	if err != nil {
		return nil, err
	}
	if why := in.MayReceiveCredentials(); why != "" {
		return nil, &WrongServerError{fmt.Sprintf("%s is served by %s pid %d, which dbhost does not log in to: %s", ep, in.Engine, in.PID, why)}
	}
	return in, nil
}

// listenerOf picks the candidate that owns the endpoint's socket or TCP
// listener.
func listenerOf(ctx context.Context, h *host.Host, ep Endpoint, cands []*Instance) (*Instance, error) {
	network, addr := ep.address()
	if network == "unix" {
		d := net.Dialer{Timeout: 3 * time.Second}
		c, err := d.DialContext(ctx, "unix", addr)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", ep, err)
		}
		pid, uid, err := PeerCred(c)
		c.Close()
		if err != nil {
			return nil, fmt.Errorf("%s: cannot tell who listens on %s: %w", ep, addr, err)
		}
		for _, in := range cands {
			if in.IsPID(h, pid) {
				return in, nil
			}
		}
		return nil, &WrongServerError{fmt.Sprintf("%s: the socket %s is served by pid %d (uid %d), not by a %s server discovered on this host; not connected", ep, addr, pid, uid, ep.Engine)}
	}
	hostName, _, _ := net.SplitHostPort(addr)
	for _, in := range cands {
		if in.OwnsListener(h, hostName, ep.PortOrDefault()) {
			return in, nil
		}
	}
	ips, err := resolve(ctx, hostName)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", ep, err)
	}
	for _, ip := range ips {
		if !localIP(ip) {
			return nil, fmt.Errorf("%s: %s is not an address of this host: dbhost connects only to servers it has discovered on this host", ep, ip)
		}
	}
	return nil, &WrongServerError{fmt.Sprintf("%s: no %s server discovered on this host listens on %s (the listener, if any, is another program); not connected", ep, ep.Engine, addr)}
}
