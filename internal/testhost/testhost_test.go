package testhost

import (
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestHosts: three hosts, each its own: hostname, network (net.* sysctls
// apart from this machine's and each other's), root (a file written in one
// is in no other, nor here), PostgreSQL on its port 5432, sshd taking
// root's key and known by its new host key; and nothing left once the
// hosts end.
func TestHosts(t *testing.T) {
	if testing.Short() {
		t.Skip("integration test (namespaces, sshd, PostgreSQL)")
	}
	hosts := StartN(t, []int{1, 2, 3}, Options{})
	mine, err := os.ReadFile("/proc/sys/net/ipv4/tcp_fin_timeout")
	if err != nil {
		t.Fatal(err)
	}
	for i, h := range hosts {
		if got := strings.TrimSpace(h.Exec(t, "hostname")); got != h.Name() {
			t.Errorf("hostname %q, want %q", got, h.Name())
		}
		// A value of its own network namespace, not this machine's.
		if _, err := h.Run(nil, "/sbin/sysctl", "-q", "-w", "net.ipv4.tcp_fin_timeout=4"+string(rune('1'+i))); err != nil {
			t.Fatal(err)
		}
		if err := h.WriteFile("/etc/dbhost-testhost-probe", []byte(h.Name()), 0o600); err != nil {
			t.Fatal(err)
		}
		for _, p := range []string{"/usr/bin/dbhost", "/var/lib/dbhost", "/etc/dbhost", "/etc/ssh/ssh_host_rsa_key", "/.dockerenv"} {
			if _, err := os.Stat(h.Path(p)); err == nil {
				t.Errorf("%s: %s present", h.Name(), p)
			}
		}
		// PostgreSQL answers on the host's own 127.0.0.1:5432 and socket.
		out := h.Exec(t, "/usr/sbin/runuser", "-u", "postgres", "--", "psql", "-h", "/var/run/postgresql", "-p", "5432", "-AtXc", "SELECT current_setting('data_directory')")
		if strings.TrimSpace(out) != h.PGData {
			t.Errorf("%s: data directory %q, want %q", h.Name(), out, h.PGData)
		}
		if _, err := h.Run(nil, "/usr/bin/python3", "-c", "import socket; socket.create_connection(('127.0.0.1', 5432), 5)"); err != nil {
			t.Errorf("%s: 127.0.0.1:5432: %v", h.Name(), err)
		}
		// ssh as root by the key, the host key checked strictly.
		cmd := exec.Command("ssh", "-i", h.KeyFile, "-o", "UserKnownHostsFile="+h.KnownHosts, "-o", "GlobalKnownHostsFile=/dev/null",
			"-o", "StrictHostKeyChecking=yes", "-o", "BatchMode=yes", "-o", "IdentitiesOnly=yes", "root@"+h.Addr(), "hostname; cat /etc/dbhost-testhost-probe")
		b, err := cmd.CombinedOutput()
		if err != nil || string(b) != h.Name()+"\n"+h.Name() {
			t.Errorf("ssh %s: %v: %q", h.Addr(), err, b)
		}
	}
	for i, h := range hosts {
		if v, err := h.Sysctl("net.ipv4.tcp_fin_timeout"); err != nil || v != "4"+string(rune('1'+i)) {
			t.Errorf("%s: tcp_fin_timeout %q (%v), want its own 4%d", h.Name(), v, err, i+1)
		}
	}
	if now, _ := os.ReadFile("/proc/sys/net/ipv4/tcp_fin_timeout"); string(now) != string(mine) {
		t.Errorf("this machine's tcp_fin_timeout changed: %q, was %q", now, mine)
	}
	if _, err := os.Stat("/etc/dbhost-testhost-probe"); err == nil {
		t.Error("a host's file reached this machine's /etc")
	}
	if err := hosts[1].StopPostgres(); err != nil {
		t.Fatal(err)
	}
	if _, err := hosts[1].Run(nil, "/usr/bin/python3", "-c", "import socket; socket.create_connection(('127.0.0.1', 5432), 5)"); err == nil {
		t.Error("PostgreSQL still answers after StopPostgres")
	}
	if err := hosts[1].StartPostgres(); err != nil {
		t.Fatal(err)
	}
	// Ending a host ends its processes and its veth.
	pid := hosts[0].PID()
	hosts[0].kill()
	deadline := time.Now().Add(10 * time.Second)
	for {
		_, errProc := os.Stat("/proc/" + strconv.Itoa(pid))
		_, errLink := net.InterfaceByName("dbht1")
		if errProc != nil && errLink != nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("host 1 left: init %v, veth %v", errProc, errLink)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
