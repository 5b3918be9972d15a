package host

import (
	"net"
	"strconv"
	"testing"
)

// TestListenBacklogs listens with a known backlog and finds it again through
// sock_diag: the kernel caps it at net.core.somaxconn, Go asks for the
// maximum, so the socket's backlog is somaxconn.
func TestListenBacklogs(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Skip(err)
	}
	defer l.Close()
	h, err := Open("/")
	if err != nil {
		t.Fatal(err)
	}
	m, err := h.ListenBacklogs()
	if err != nil {
		t.Skipf("sock_diag unavailable: %v", err)
	}
	somaxconn, err := h.Sysctl("net.core.somaxconn")
	if err != nil {
		t.Skip(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	tcp, err := h.NetTCP()
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range tcp {
		if int(s.LocalPort) == port && s.St == 0x0A {
			got, ok := m[s.Inode]
			if !ok {
				t.Fatalf("listening socket inode %d not in sock_diag answer %v", s.Inode, m)
			}
			// Go's net package listens with the current somaxconn as backlog.
			if want, err := strconv.Atoi(somaxconn); err == nil && want <= 65535 && got != want {
				t.Fatalf("backlog %d, want somaxconn %d", got, want)
			}
			return
		}
	}
	t.Fatalf("listening socket on port %d not in /proc/net/tcp", port)
}
