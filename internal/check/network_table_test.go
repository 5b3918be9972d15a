package check_test

import (
	"github.com/dbhost/dbhost/internal/check"
	"github.com/dbhost/dbhost/internal/engine"
	"github.com/dbhost/dbhost/internal/facts"
)

// backlog sets the accept backlog of an instance's TCP listeners.
func backlog(subject string, n int) func(*facts.Facts) {
	return func(f *facts.Facts) {
		in := instance(f, subject)
		for i := range in.Listen {
			if in.Listen[i].Proto != "unix" {
				in.Listen[i].Backlog = n
			}
		}
	}
}

// listenOn replaces an instance's TCP listeners by one on addr.
func listenOn(subject, addr string) func(*facts.Facts) {
	return func(f *facts.Facts) {
		in := instance(f, subject)
		var keep []engine.Listener
		for _, l := range in.Listen {
			if l.Proto == "unix" {
				keep = append(keep, l)
			}
		}
		in.Listen = append(keep, engine.Listener{Proto: "tcp", Addr: addr, Port: in.Port, Backlog: 4096})
	}
}

// On the baseline the servers want backlogs of 244 (PostgreSQL), 80
// (MariaDB) and 511 (Redis): the host target stays 4096.
func init() {
	const b, h, pg, rd = "baseline", check.SubjectHost, "postgres:5432", "redis:6379"
	addCases(
		// net.somaxconn: 4096 on the host; each listener's backlog what
		// its server asked for.
		tcase{name: "4096", base: b, mutate: sysctl("net.core.somaxconn", "4096"), id: "net.somaxconn", subject: h, want: check.Pass},
		tcase{name: "4095", base: b, mutate: sysctl("net.core.somaxconn", "4095"), id: "net.somaxconn", subject: h, want: check.Fail},
		tcase{name: "Redis got its 511", base: b, mutate: backlog(rd, 511), id: "net.somaxconn", subject: rd, want: check.Pass},
		tcase{name: "Redis got 510", base: b, mutate: backlog(rd, 510), id: "net.somaxconn", subject: rd, want: check.Fail},

		// net.syn_backlog: 4096 while SYN cookies are off; moot with
		// them on (1, the default, or 2), however small.
		tcase{name: "4096 without cookies", base: "net-syncookies-off", mutate: sysctl("net.ipv4.tcp_max_syn_backlog", "4096"), id: "net.syn_backlog", subject: h, want: check.Pass},
		tcase{name: "4095 without cookies", base: "net-syncookies-off", mutate: sysctl("net.ipv4.tcp_max_syn_backlog", "4095"), id: "net.syn_backlog", subject: h, want: check.Fail, says: []string{"below 4096: with SYN cookies off (net.ipv4.tcp_syncookies 0)"}},
		tcase{name: "128 with cookies", base: b, mutate: sysctl("net.ipv4.tcp_max_syn_backlog", "128"), id: "net.syn_backlog", subject: h, want: check.Pass, says: []string{"tcp_syncookies is 1", "moot"}},
		tcase{name: "128 with cookies always", base: b, mutate: all(sysctl("net.ipv4.tcp_max_syn_backlog", "128"), sysctl("net.ipv4.tcp_syncookies", "2")), id: "net.syn_backlog", subject: h, want: check.Pass, says: []string{"tcp_syncookies is 2"}},
		tcase{name: "cookies unreadable: judged", base: b, mutate: all(sysctl("net.ipv4.tcp_max_syn_backlog", "128"), sysctl("net.ipv4.tcp_syncookies", "x")), id: "net.syn_backlog", subject: h, want: check.Fail},

		// net.keepalive: first probe after at most 120 s, then every 30 s.
		tcase{name: "120 and 30", base: b, mutate: all(sysctl("net.ipv4.tcp_keepalive_time", "120"), sysctl("net.ipv4.tcp_keepalive_intvl", "30")), id: "net.keepalive", subject: h, want: check.Pass},
		tcase{name: "121", base: b, mutate: all(sysctl("net.ipv4.tcp_keepalive_time", "121"), sysctl("net.ipv4.tcp_keepalive_intvl", "30")), id: "net.keepalive", subject: h, want: check.Fail},
		tcase{name: "interval 31", base: b, mutate: all(sysctl("net.ipv4.tcp_keepalive_time", "120"), sysctl("net.ipv4.tcp_keepalive_intvl", "31")), id: "net.keepalive", subject: h, want: check.Fail},
		tcase{name: "0 is no value", base: b, mutate: sysctl("net.ipv4.tcp_keepalive_time", "0"), id: "net.keepalive", subject: h, want: check.Unknown},

		// net.fin_timeout: at most 30 s.
		tcase{name: "30", base: b, mutate: sysctl("net.ipv4.tcp_fin_timeout", "30"), id: "net.fin_timeout", subject: h, want: check.Pass},
		tcase{name: "31", base: b, mutate: sysctl("net.ipv4.tcp_fin_timeout", "31"), id: "net.fin_timeout", subject: h, want: check.Fail},

		// net.local_port_range: at least 10000 ephemeral ports, none a
		// server's port unless reserved.
		tcase{name: "10000 ports", base: b, mutate: sysctl("net.ipv4.ip_local_port_range", "32768 42767"), id: "net.local_port_range", subject: h, want: check.Pass},
		tcase{name: "9999 ports", base: b, mutate: sysctl("net.ipv4.ip_local_port_range", "32768 42766"), id: "net.local_port_range", subject: h, want: check.Fail},
		tcase{name: "a range without ports", base: b, mutate: sysctl("net.ipv4.ip_local_port_range", "40000 30000"), id: "net.local_port_range", subject: h, want: check.Unknown},
		tcase{name: "5432 inside", base: b, mutate: sysctl("net.ipv4.ip_local_port_range", "5432 60999"), id: "net.local_port_range", subject: pg, want: check.Fail},
		tcase{name: "5432 just below", base: b, mutate: sysctl("net.ipv4.ip_local_port_range", "5433 60999"), id: "net.local_port_range", subject: pg, want: check.Pass},
		tcase{name: "5432 inside, reserved", base: b, mutate: all(sysctl("net.ipv4.ip_local_port_range", "5000 60999"), sysctl("net.ipv4.ip_local_reserved_ports", "5432")), id: "net.local_port_range", subject: pg, want: check.Pass},

		// net.listen_all: no wildcard address.
		tcase{name: "0.0.0.0", base: b, mutate: listenOn(pg, "0.0.0.0"), id: "net.listen_all", subject: pg, want: check.Fail},
		tcase{name: "::", base: b, mutate: listenOn(pg, "::"), id: "net.listen_all", subject: pg, want: check.Fail},
		tcase{name: "10.0.0.5", base: b, mutate: listenOn(pg, "10.0.0.5"), id: "net.listen_all", subject: pg, want: check.Pass},
	)
}
