package check_test

import (
	"strings"
	"testing"

	"github.com/dbhost/dbhost/internal/check"
)

func TestNetSomaxconn(t *testing.T) {
	fd := hxFind(t, "net-somaxconn-128", "net.somaxconn", "host", check.Fail)
	if fd.Fix == nil || len(fd.Fix.Sysctl) != 1 || fd.Fix.Sysctl[0].Value != "4096" {
		t.Errorf("fix %+v", fd.Fix)
	}
	// The private servers started after somaxconn dropped to 128: the
	// kernel cut the backlog they asked for. sock_diag shows it.
	pg := hxPrivate(t, "net-somaxconn-128", "postgres")
	fd = hxFind(t, "net-somaxconn-128", "net.somaxconn", pg, check.Fail)
	hxHas(t, "reason", fd.Reason, "= 244", "got a backlog of 128")
	rd := hxPrivate(t, "net-somaxconn-128", "redis")
	fd = hxFind(t, "net-somaxconn-128", "net.somaxconn", rd, check.Fail)
	hxHas(t, "reason", fd.Reason, "tcp-backlog is 511", "backlog of 128")
	// The shared servers started earlier and kept their full backlog.
	fd = hxFind(t, "net-somaxconn-128", "net.somaxconn", "postgres:5432", check.Pass)
	hxHas(t, "reason", fd.Reason, "backlog of 244")
	hxFind(t, "net-somaxconn-128", "net.somaxconn", "mysql:3306", check.Pass)
	hxFind(t, "net-tuned", "net.somaxconn", "host", check.Pass)
	hxFind(t, "net-unreadable", "net.somaxconn", "host", check.Unknown)
}

func TestNetSimpleParameters(t *testing.T) {
	for _, c := range []struct{ id, frag string }{
		{"net.keepalive", "7200"},
		{"net.fin_timeout", "60"},
	} {
		fd := hxFind(t, "net-somaxconn-128", c.id, "host", check.Fail)
		hxHas(t, c.id, fd.Reason, c.frag)
		if fd.Fix == nil || len(fd.Fix.Sysctl) == 0 {
			t.Errorf("%s: no sysctl fix", c.id)
		}
		hxFind(t, "net-tuned", c.id, "host", check.Pass)
		hxFind(t, "net-unreadable", c.id, "host", check.Unknown)
	}
	fd := hxFind(t, "net-tuned", "net.keepalive", "host", check.Pass)
	hxHas(t, "keepalive", fd.Reason, "tcp-keepalive 300")

	// tcp_max_syn_backlog 2048 drops SYNs only with cookies off.
	fd = hxFind(t, "net-syncookies-off", "net.syn_backlog", "host", check.Fail)
	hxHas(t, "syn_backlog", fd.Reason, "is 2048, below 4096")
	if fd.Fix == nil || len(fd.Fix.Sysctl) == 0 || fd.Fix.Sysctl[0].Value != "4096" {
		t.Errorf("net.syn_backlog: fix %+v", fd.Fix)
	}
	fd = hxFind(t, "net-somaxconn-128", "net.syn_backlog", "host", check.Pass)
	hxHas(t, "syn_backlog", fd.Reason, "(2048) drops nothing and is moot")
	hxFind(t, "net-unreadable", "net.syn_backlog", "host", check.Unknown)
}

func TestNetLocalPortRange(t *testing.T) {
	// testdb asks the kernel for a free port, which comes from the
	// ephemeral range.
	pg := hxPrivate(t, "net-somaxconn-128", "postgres")
	rd := hxPrivate(t, "net-somaxconn-128", "redis")
	a := hxFind(t, "net-somaxconn-128", "net.local_port_range", pg, check.Fail)
	b := hxFind(t, "net-somaxconn-128", "net.local_port_range", rd, check.Fail)
	// Both fixes set the same parameter and must agree: every port.
	pgPort, rdPort := strings.TrimPrefix(pg, "postgres:"), strings.TrimPrefix(rd, "redis:")
	for _, fd := range []check.Finding{a, b} {
		v := fd.Fix.Sysctl[0].Value
		if fd.Fix.Sysctl[0].Key != "net.ipv4.ip_local_reserved_ports" || !strings.Contains(v, pgPort) || !strings.Contains(v, rdPort) {
			t.Errorf("fix %+v", fd.Fix.Sysctl)
		}
	}
	hxFind(t, "net-somaxconn-128", "net.local_port_range", "postgres:5432", check.Pass)
	hxFind(t, "net-somaxconn-128", "net.local_port_range", "host", check.Pass)
	// Reserved, and a narrow range.
	pg = hxPrivate(t, "net-ports", "postgres")
	fd := hxFind(t, "net-ports", "net.local_port_range", pg, check.Pass)
	hxHas(t, "reason", fd.Reason, "is reserved")
	fd = hxFind(t, "net-ports", "net.local_port_range", "host", check.Fail)
	hxHas(t, "reason", fd.Reason, "Only 5000 ephemeral ports")
	hxFind(t, "net-unreadable", "net.local_port_range", "host", check.Unknown)
}

func TestNetListenAll(t *testing.T) {
	pg := hxPrivate(t, "net-listen-all", "postgres")
	fd := hxFind(t, "net-listen-all", "net.listen_all", pg, check.Fail)
	hxHas(t, "reason", fd.Reason, "0.0.0.0:", "[::]:")
	hxHas(t, "fix", fd.Fix.Manual, "listen_addresses")
	rd := hxPrivate(t, "net-listen-all", "redis")
	fd = hxFind(t, "net-listen-all", "net.listen_all", rd, check.Fail)
	hxHas(t, "fix", fd.Fix.Manual, "bind 127.0.0.1")
	hxFind(t, "net-listen-all", "net.listen_all", "postgres:5432", check.Pass)
	// Without the servers' socket inodes (not root) nothing can be said.
	fd = hxFind(t, "net-nonroot", "net.listen_all", "postgres:5432", check.Unknown)
	hxHas(t, "reason", fd.Reason, "permission denied")
}
