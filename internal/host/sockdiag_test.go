package host

import (
	"fmt"
	"net"
	"strconv"
	"testing"

	"github.com/dbhost/dbhost/internal/testdb"
)

// TestListenSockets listens on IPv4 and IPv6 loopback and finds both again
// through sock_diag, with the addresses, ports and inodes /proc/net/tcp
// shows, and the backlog /proc/net/tcp does not: Go listens with the
// current net.core.somaxconn.
func TestListenSockets(t *testing.T) {
	var ls []net.Listener
	for _, addr := range []string{"127.0.0.1:0", "[::1]:0"} {
		l, err := net.Listen("tcp", addr)
		if err != nil {
			t.Logf("skip %s: %v", addr, err)
			continue
		}
		defer l.Close()
		ls = append(ls, l)
	}
	testdb.Need(t, "a loopback address to listen on", len(ls) > 0)
	h, err := Open("/")
	if err != nil {
		t.Fatal(err)
	}
	socks, err := h.ListenSockets()
	testdb.Need(t, fmt.Sprintf("sock_diag (%v)", err), err == nil)
	somaxconn, _ := h.Sysctl("net.core.somaxconn")
	want, _ := strconv.Atoi(somaxconn)
	tcp, err := h.NetTCP()
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range ls {
		a := l.Addr().(*net.TCPAddr)
		var found *ListenSocket
		for i := range socks {
			if socks[i].Port == a.Port && socks[i].Addr == a.IP.String() {
				found = &socks[i]
			}
		}
		if found == nil {
			t.Fatalf("%s not in the sock_diag answer %+v", a, socks)
		}
		if want > 0 && want <= 65535 && found.Backlog != want {
			t.Errorf("%s: backlog %d, want somaxconn %d", a, found.Backlog, want)
		}
		inode := uint64(0)
		for _, s := range tcp {
			if int(s.LocalPort) == a.Port && s.St == 0x0A {
				inode = s.Inode
			}
		}
		if inode == 0 || inode != found.Inode {
			t.Errorf("%s: sock_diag inode %d, /proc/net/tcp %d", a, found.Inode, inode)
		}
	}
}
