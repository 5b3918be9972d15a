package host

import (
	"net"
	"os"
	"strings"
	"testing"

	"github.com/dbhost/dbhost/internal/testdb"
)

// TestListenSocketsIn enters dbhost's own namespace through a process's
// namespace file and finds the same listener ListenSockets finds; a
// namespace the process is not in is refused rather than dumped.
func TestListenSocketsIn(t *testing.T) {
	testdb.Need(t, "root (setns)", os.Geteuid() == 0)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	port := l.Addr().(*net.TCPAddr).Port
	h, err := Open("/")
	if err != nil {
		t.Fatal(err)
	}
	ns, err := h.NetNS(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	if self, _ := h.NetNS(0); self != ns {
		t.Fatalf("own namespace %q, /proc/PID says %q", self, ns)
	}
	socks, err := h.ListenSocketsIn(os.Getpid(), ns)
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, s := range socks {
		found = found || s.Port == port && s.Addr == "127.0.0.1"
	}
	if !found {
		t.Errorf("127.0.0.1:%d not in %+v", port, socks)
	}
	if _, err := h.ListenSocketsIn(os.Getpid(), "net:[1]"); err == nil || !strings.Contains(err.Error(), "exited or moved") {
		t.Errorf("another namespace's inode: %v", err)
	}
	if _, err := h.ListenSocketsIn(os.Getpid(), "mnt:[1]"); err == nil {
		t.Error("a mount namespace name was accepted")
	}
}
