package check

import (
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"

	"github.com/dbhost/dbhost/internal/facts"
	"github.com/dbhost/dbhost/internal/fix"
)

// Network targets (knowledge §4).
const (
	somaxconnTarget  = 4096
	synBacklogTarget = 4096
	keepaliveTime    = 120
	keepaliveIntvl   = 30
	finTimeout       = 30
	// narrowPortRange: fewer ephemeral ports than this run out under many
	// outgoing connections (replication, FDWs, an application on the host).
	narrowPortRange = 10000
)

func init() {
	Register(Check{
		ID:        "net.somaxconn",
		Title:     "net.core.somaxconn does not cut the databases' accept queues",
		Problem:   "net.core.somaxconn cuts the databases' accept queues",
		Severity:  Warning,
		AppliesTo: []string{"host", "postgres", "mysql", "mongodb", "redis"},
		Doc: `net.core.somaxconn caps the accept queue (the listen(2) backlog) of every
listening socket at the moment the server calls listen(). Connections that arrive
while the queue is full are dropped or reset, which clients see as connect timeouts
during bursts (a pool reconnecting, a failover). Target: 4096 (the default since
Linux 5.4; 128 before). Per instance dbhost compares the backlog the server asks for
- PostgreSQL: 2 x max_connections (16+), min(2 x MaxBackends, 10000) before 16;
MySQL/MariaDB: back_log; Redis: tcp-backlog (511; Redis warns when somaxconn is
lower); MongoDB: net.listenBacklog - with the backlog the kernel really gave its
listening sockets (sock_diag, as ss -lnt shows in Send-Q). A socket keeps the backlog
it got until the server restarts.`,
		Refs: []string{
			"https://docs.kernel.org/networking/ip-sysctl.html",
			"https://www.postgresql.org/docs/current/kernel-resources.html",
			"https://redis.io/docs/latest/operate/oss_and_stack/management/config-file/",
		},
		Sysctls: []string{"net.core.somaxconn"},
		Run:     checkSomaxconn,
	})
	Register(Check{
		ID:        "net.syn_backlog",
		Title:     "net.ipv4.tcp_max_syn_backlog is large enough",
		Problem:   "net.ipv4.tcp_max_syn_backlog is too small",
		Severity:  Warning,
		AppliesTo: []string{"host"},
		Doc: `tcp_max_syn_backlog bounds half-open connections (SYN received, handshake not
complete) per listening socket, but only while SYN cookies are off
(net.ipv4.tcp_syncookies=0): then, during connection storms, SYNs beyond three quarters
of it are dropped and clients retry after a second or more. Target: 4096 (a busy
MySQL/NFS host used 10240). With tcp_syncookies 1 (the kernel default) or 2 a full
queue is answered with SYN cookies and the connection still completes, so the setting
is moot and passes; the listen backlog (net.somaxconn) is then what bounds the queue.`,
		Refs: []string{"https://docs.kernel.org/networking/ip-sysctl.html",
			"https://git.kernel.org/pub/scm/linux/kernel/git/torvalds/linux.git/tree/net/ipv4/tcp_input.c (tcp_conn_request)"},
		Sysctls: []string{"net.ipv4.tcp_max_syn_backlog", "net.ipv4.tcp_syncookies"},
		Run:     checkSynBacklog,
	})
	Register(Check{
		ID:        "net.keepalive",
		Title:     "TCP keepalive detects dead peers before load balancers drop idle connections",
		Problem:   "TCP keepalive finds dead peers only after load balancers drop idle connections",
		Severity:  Warning,
		AppliesTo: []string{"host"},
		Doc: `net.ipv4.tcp_keepalive_time (default 7200 s) is how long a connection stays idle
before the kernel probes it, tcp_keepalive_intvl (default 75 s) the gap between
probes. Load balancers, NAT gateways and firewalls drop idle flows after minutes
(cloud load balancers at 4 to 10 minutes), so with the defaults a pooled database
connection dies silently and the next query hangs until TCP gives up; dead clients
hold server sessions and locks for over two hours. Target: 120 s and 30 s (MongoDB's
production notes also ask for 120 s). Servers can override per socket: PostgreSQL
tcp_keepalives_idle (0 = system default), Redis tcp-keepalive (300 s by default).`,
		Refs:    []string{"https://docs.kernel.org/networking/ip-sysctl.html", "https://www.mongodb.com/docs/manual/faq/diagnostics/#does-tcp-keepalive-time-affect-mongodb-deployments-"},
		Sysctls: []string{"net.ipv4.tcp_keepalive_time", "net.ipv4.tcp_keepalive_intvl", "net.ipv4.tcp_keepalive_probes"},
		Run:     checkKeepalive,
	})
	Register(Check{
		ID:        "net.fin_timeout",
		Title:     "net.ipv4.tcp_fin_timeout releases closed connections quickly",
		Problem:   "net.ipv4.tcp_fin_timeout keeps closed connections too long",
		Severity:  Warning,
		AppliesTo: []string{"host"},
		Doc: `tcp_fin_timeout (default 60 s) is how long an orphaned connection stays in
FIN-WAIT-2 after this side closed it. Hosts that open and close many connections
(no pooling, health checks) pile these up. Target: 30 s.`,
		Refs:    []string{"https://docs.kernel.org/networking/ip-sysctl.html"},
		Sysctls: []string{"net.ipv4.tcp_fin_timeout"},
		Run:     checkFinTimeout,
	})
	Register(Check{
		ID:        "net.local_port_range",
		Title:     "Database ports are outside the ephemeral port range, or reserved",
		Problem:   "Database ports are inside the ephemeral port range and not reserved",
		Severity:  Warning,
		AppliesTo: []string{"host", "postgres", "mysql", "mongodb", "redis", "galera"},
		Doc: `net.ipv4.ip_local_port_range is where the kernel picks source ports for
outgoing connections. A database whose listening port lies inside it can find the
port taken by an outgoing connection when it restarts, and then fails to bind
("Address already in use") until that connection closes. The fix reserves the port in
net.ipv4.ip_local_reserved_ports, which keeps it out of automatic assignment. Every
listening TCP port of the server counts (Galera's 4567, 4568, 4444 too). The check
also flags a range narrower than 10000 ports, which outgoing connections can exhaust.`,
		Refs:    []string{"https://docs.kernel.org/networking/ip-sysctl.html#ip-variables"},
		Sysctls: []string{"net.ipv4.ip_local_port_range", "net.ipv4.ip_local_reserved_ports"},
		Run:     checkLocalPortRange,
	})
	Register(Check{
		ID:        "net.listen_all",
		Title:     "Databases listen only on the addresses they serve",
		Problem:   "Databases listen on every address, not only those they serve",
		Severity:  Warning,
		AppliesTo: []string{"postgres", "mysql", "mongodb", "redis", "galera"},
		Doc: `Reads the sockets each server really listens on (/proc/net/tcp and tcp6 matched
to the process's socket inodes), not what its configuration asks for: Galera's SST
port 4444 was seen listening on 0.0.0.0 whatever the configuration said. A server on
0.0.0.0 or :: accepts connections on every interface, public ones included, and its
protection is then only authentication and the firewall. Bind it to the private
address the clients use. Whether Redis and MongoDB require authentication is judged
by their own checks.`,
		Refs: []string{"https://www.postgresql.org/docs/current/runtime-config-connection.html#GUC-LISTEN-ADDRESSES", "https://galeracluster.com/library/documentation/firewall-settings.html"},
		Run:  checkListenAll,
	})
}

// ---- net.somaxconn ----

// wantedBacklog is the backlog a server passes to listen(2), with how it
// was derived.
func wantedBacklog(in *facts.Instance) (int, string, []Evidence) {
	n := in.Profile().Backlog(in.Instance)
	return int(n.N), n.Why, needEv(n)
}

func checkSomaxconn(f *facts.Facts) []Result {
	r := f.SysctlReading("net.core.somaxconn")
	ev := EvReading("net.core.somaxconn", r)
	smc, why := r.Count()
	if why != "" {
		return []Result{UnknownR(SubjectHost, "cannot judge net.core.somaxconn: "+why, ev)}
	}
	// One value for every finding's fix: they set the same parameter.
	target := somaxconnTarget
	for _, in := range f.Instances {
		if w, _, _ := wantedBacklog(in); roundPow2(w) > target {
			target = roundPow2(w)
		}
	}
	var out []Result
	if smc >= int64(target) {
		out = append(out, PassR(SubjectHost, fmt.Sprintf("net.core.somaxconn is %d (at least %d): listen backlogs up to that are not cut.", smc, target), ev))
	} else {
		out = append(out, FailR(SubjectHost, fmt.Sprintf("net.core.somaxconn is %d: every listen backlog is cut to it, and connection bursts beyond it are dropped. Use %d; servers get the new value at their next restart.", smc, target),
			netFix(f, "Raise net.core.somaxconn", "net.core.somaxconn", strconv.Itoa(target)), ev))
	}
	for _, in := range f.Instances {
		want, why, iev := wantedBacklog(in)
		var tcp []string
		got := -1
		for _, l := range in.Listen {
			if l.Proto == "unix" {
				continue
			}
			tcp = append(tcp, fmt.Sprintf("%s backlog %d", l, l.Backlog))
			if l.Backlog > 0 && (got < 0 || l.Backlog < got) {
				got = l.Backlog
			}
		}
		if len(tcp) == 0 {
			continue // no TCP listener: nothing to cut
		}
		subj := in.Name()
		iev = append([]Evidence{ev, Ev("listening sockets", strings.Join(tcp, ", "), "sock_diag (ss -lnt Send-Q)")}, iev...)
		if want == 0 {
			want = int(smc)
		}
		switch {
		case got > 0 && got < want:
			fx := netFix(f, "Raise net.core.somaxconn and restart "+in.Name(), "net.core.somaxconn", strconv.Itoa(target))
			fx.Manual = "Restart " + in.Name() + " afterwards: a listening socket keeps the backlog it got at listen()."
			out = append(out, FailR(subj, fmt.Sprintf("%s, but its listening socket got a backlog of %d: net.core.somaxconn was lower when the server started, so the kernel cut it. Connection bursts beyond %d are dropped.", why, got, got), fx, iev...))
		case got < 0 && int64(want) > smc:
			fx := netFix(f, "Raise net.core.somaxconn", "net.core.somaxconn", strconv.Itoa(target))
			out = append(out, FailR(subj, fmt.Sprintf("%s, above net.core.somaxconn (%d), which cuts it (the socket's own backlog could not be read).", why, smc), fx, iev...))
		case got < 0:
			out = append(out, PassR(subj, fmt.Sprintf("%s, within net.core.somaxconn (%d).", why, smc), iev...))
		default:
			out = append(out, PassR(subj, fmt.Sprintf("%s and its listening sockets got a backlog of %d: not cut by net.core.somaxconn.", why, got), iev...))
		}
	}
	return out
}

func roundPow2(n int) int {
	p := 1
	for p < n {
		p <<= 1
	}
	return p
}

// ---- simple kernel parameters ----

// netAtLeast judges one parameter against a minimum.
func netAtLeast(f *facts.Facts, name string, target int64, why string) []Result {
	r := f.SysctlReading(name)
	ev := EvReading(name, r)
	v, bad := r.Count()
	if bad != "" {
		return []Result{UnknownR(SubjectHost, "cannot judge "+name+": "+bad, ev)}
	}
	if v >= target {
		return []Result{PassR(SubjectHost, fmt.Sprintf("%s is %d, at least %d.", name, v, target), ev)}
	}
	return []Result{FailR(SubjectHost, fmt.Sprintf("%s is %d, below %d: %s", name, v, target, why),
		netFix(f, "Raise "+name, name, strconv.FormatInt(target, 10)), ev)}
}

// checkSynBacklog: the kernel drops SYNs for want of tcp_max_syn_backlog
// only with SYN cookies off (tcp_conn_request); with them on, a full
// queue answers with cookies and the connection completes, so the size is
// moot and the listen backlog (net.somaxconn) is what bounds the queue.
func checkSynBacklog(f *facts.Facts) []Result {
	const name = "net.ipv4.tcp_max_syn_backlog"
	ck := f.SysctlReading("net.ipv4.tcp_syncookies")
	if v, why := ck.IntIn(0, 2); why == "" && v > 0 {
		return []Result{PassR(SubjectHost, fmt.Sprintf("net.ipv4.tcp_syncookies is %d: when half-open connections fill the queue the kernel answers with SYN cookies instead of dropping the SYN, so %s (%s) drops nothing and is moot; the listen backlog bounds the queue (see net.somaxconn).", v, name, f.SysctlReading(name).Value),
			EvReading(name, f.SysctlReading(name)), EvReading("net.ipv4.tcp_syncookies", ck))}
	}
	rs := netAtLeast(f, name, synBacklogTarget,
		"with SYN cookies off (net.ipv4.tcp_syncookies "+ck.Value+"), during a connection storm (a pool reconnecting after a failover) half-open connections beyond three quarters of it are dropped and clients retry only after a second or more.")
	for i := range rs {
		rs[i].Evidence = append(rs[i].Evidence, EvReading("net.ipv4.tcp_syncookies", ck))
	}
	return rs
}

func checkKeepalive(f *facts.Facts) []Result {
	t := f.SysctlReading("net.ipv4.tcp_keepalive_time")
	i := f.SysctlReading("net.ipv4.tcp_keepalive_intvl")
	ev := []Evidence{EvReading("net.ipv4.tcp_keepalive_time", t), EvReading("net.ipv4.tcp_keepalive_intvl", i)}
	if p := f.SysctlReading("net.ipv4.tcp_keepalive_probes"); p.OK() {
		ev = append(ev, EvReading("net.ipv4.tcp_keepalive_probes", p))
	}
	// The kernel takes 1 s at least for both.
	tv, why1 := t.IntIn(1, math.MaxInt32)
	iv, why2 := i.IntIn(1, math.MaxInt32)
	if why := firstNonEmpty(why1, why2); why != "" {
		return []Result{UnknownR(SubjectHost, "cannot judge the keepalive parameters: "+why, ev...)}
	}
	notes := keepaliveOverrides(f)
	if tv <= keepaliveTime && iv <= keepaliveIntvl {
		return []Result{PassR(SubjectHost, fmt.Sprintf("Idle connections are probed after %d s, every %d s: dead peers are found before load balancers drop idle flows.%s", tv, iv, notes), ev...)}
	}
	fx := netFix(f, "Probe idle TCP connections sooner", "net.ipv4.tcp_keepalive_time", strconv.Itoa(keepaliveTime), "net.ipv4.tcp_keepalive_intvl", strconv.Itoa(keepaliveIntvl))
	return []Result{FailR(SubjectHost, fmt.Sprintf("Idle connections are first probed after %d s, then every %d s (want %d and %d): load balancers, NAT and firewalls drop idle flows after a few minutes, so pooled connections die silently and the next query hangs; dead clients keep server sessions and their locks for hours.%s", tv, iv, keepaliveTime, keepaliveIntvl, notes), fx, ev...)}
}

// keepaliveOverrides notes servers that set their own keepalive per socket.
func keepaliveOverrides(f *facts.Facts) string {
	var notes []string
	for _, in := range f.Instances {
		if n := in.Profile().KeepaliveOverride(in.Instance); n != "" {
			notes = append(notes, n)
		}
	}
	if len(notes) == 0 {
		return ""
	}
	return " (" + strings.Join(notes, "; ") + ".)"
}

func checkFinTimeout(f *facts.Facts) []Result {
	r := f.SysctlReading("net.ipv4.tcp_fin_timeout")
	ev := EvReading("net.ipv4.tcp_fin_timeout", r)
	v, why := r.Count()
	if why != "" {
		return []Result{UnknownR(SubjectHost, "cannot judge net.ipv4.tcp_fin_timeout: "+why, ev)}
	}
	if v <= finTimeout {
		return []Result{PassR(SubjectHost, fmt.Sprintf("Orphaned connections leave FIN-WAIT-2 after %d s (at most %d).", v, finTimeout), ev)}
	}
	return []Result{FailR(SubjectHost, fmt.Sprintf("Orphaned connections stay in FIN-WAIT-2 for %d s: hosts with many short connections accumulate them. Use %d.", v, finTimeout),
		netFix(f, "Lower net.ipv4.tcp_fin_timeout", "net.ipv4.tcp_fin_timeout", strconv.Itoa(finTimeout)), ev)}
}

// ---- net.local_port_range ----

// portSet parses ip_local_reserved_ports ("3306,5432,8000-8100").
type portSet [][2]int

func parsePortSet(s string) portSet {
	var out portSet
	for _, part := range strings.Split(s, ",") {
		part = strings.TrimSpace(part)
		if part == "" {
			continue
		}
		a, b, isRange := strings.Cut(part, "-")
		lo, err1 := strconv.Atoi(strings.TrimSpace(a))
		hi := lo
		var err2 error
		if isRange {
			hi, err2 = strconv.Atoi(strings.TrimSpace(b))
		}
		if err1 == nil && err2 == nil {
			out = append(out, [2]int{lo, hi})
		}
	}
	return out
}

func (p portSet) has(port int) bool {
	for _, r := range p {
		if port >= r[0] && port <= r[1] {
			return true
		}
	}
	return false
}

// String prints the set the way the kernel accepts it, sorted.
func (p portSet) String() string {
	sort.Slice(p, func(a, b int) bool { return p[a][0] < p[b][0] })
	parts := make([]string, 0, len(p))
	for _, r := range p {
		if r[0] == r[1] {
			parts = append(parts, strconv.Itoa(r[0]))
		} else {
			parts = append(parts, fmt.Sprintf("%d-%d", r[0], r[1]))
		}
	}
	return strings.Join(parts, ",")
}

func checkLocalPortRange(f *facts.Facts) []Result {
	r := f.SysctlReading("net.ipv4.ip_local_port_range")
	res := f.SysctlReading("net.ipv4.ip_local_reserved_ports")
	ev := []Evidence{EvReading("net.ipv4.ip_local_port_range", r), EvReading("net.ipv4.ip_local_reserved_ports", res)}
	fl := r.Fields()
	if !r.OK() || len(fl) != 2 {
		return []Result{UnknownR(SubjectHost, "cannot read net.ipv4.ip_local_port_range: "+hostOr(r.Err, "unexpected value "+r.Value), ev...)}
	}
	lo, err1 := strconv.Atoi(fl[0])
	hi, err2 := strconv.Atoi(fl[1])
	if err1 != nil || err2 != nil || lo < 1 || hi > 65535 || lo > hi {
		return []Result{UnknownR(SubjectHost, fmt.Sprintf("%s holds %q, not a range of ports", r.Source, r.Value), ev...)}
	}
	reserved := parsePortSet(res.Value)
	var out []Result
	if width := hi - lo + 1; width < narrowPortRange {
		out = append(out, FailR(SubjectHost, fmt.Sprintf("Only %d ephemeral ports (%d-%d): a host that opens many outgoing connections (replication, foreign data wrappers, an application on the same host) runs out of source ports and connect() fails with EADDRNOTAVAIL.", width, lo, hi),
			netFix(f, "Widen the ephemeral port range", "net.ipv4.ip_local_port_range", "32768 60999"), ev...))
	} else {
		out = append(out, PassR(SubjectHost, fmt.Sprintf("%d ephemeral ports (%d-%d).", width, lo, hi), ev...))
	}
	// One reserved-ports value for every instance: the fixes of several
	// findings set the same parameter and must agree.
	all := append(portSet(nil), reserved...)
	type inPorts struct {
		in    *facts.Instance
		ports []int
	}
	var hits []inPorts
	for _, in := range f.Instances {
		var ports []int
		seen := map[int]bool{}
		for _, l := range in.Listen {
			if l.Proto == "unix" || l.Port == 0 || seen[l.Port] {
				continue
			}
			seen[l.Port] = true
			if l.Port >= lo && l.Port <= hi && !reserved.has(l.Port) {
				ports = append(ports, l.Port)
				all = append(all, [2]int{l.Port, l.Port})
			}
		}
		hits = append(hits, inPorts{in, ports})
	}
	want := all.String()
	for _, h := range hits {
		if r, ok := judgeInstancePorts(f, h.in, h.ports, lo, hi, want, ev); ok {
			out = append(out, r)
		}
	}
	return out
}

// judgeInstancePorts judges an instance's TCP ports against the ephemeral
// range lo-hi: ports are those in it and not reserved; want is the
// reserved-ports value every instance's fix sets. It has no verdict for
// an instance that listens on no TCP port.
func judgeInstancePorts(f *facts.Facts, in *facts.Instance, ports []int, lo, hi int, want string, ev []Evidence) (Result, bool) {
	var listen []string
	for _, l := range in.Listen {
		if l.Proto != "unix" {
			listen = append(listen, l.String())
		}
	}
	if len(listen) == 0 {
		return Result{}, false
	}
	iev := append([]Evidence{Ev("listening", strings.Join(listen, ", "), "/proc/net/tcp, /proc/net/tcp6")}, ev...)
	if len(ports) == 0 {
		var res []string
		seen := map[int]bool{}
		for _, l := range in.Listen {
			if l.Proto != "unix" && l.Port >= lo && l.Port <= hi && !seen[l.Port] {
				seen[l.Port] = true
				res = append(res, strconv.Itoa(l.Port))
			}
		}
		msg := fmt.Sprintf("Its TCP ports are outside the ephemeral range %d-%d.", lo, hi)
		if len(res) > 0 {
			msg = fmt.Sprintf("Its TCP port %s lies in the ephemeral range %d-%d but is reserved (ip_local_reserved_ports), so outgoing connections never take it.", strings.Join(res, ", "), lo, hi)
		}
		return PassR(in.Name(), msg, iev...), true
	}
	ps := make([]string, len(ports))
	for i, p := range ports {
		ps[i] = strconv.Itoa(p)
	}
	fx := netFix(f, "Reserve the database ports", "net.ipv4.ip_local_reserved_ports", want)
	return FailR(in.Name(), fmt.Sprintf("It listens on port %s, inside the ephemeral range %d-%d and not reserved: an outgoing connection can take the port while the server is down, and then it cannot bind at restart (\"Address already in use\").", strings.Join(ps, ", "), lo, hi), fx, iev...), true
}

// ---- net.listen_all ----

func checkListenAll(f *facts.Facts) []Result {
	var out []Result
	for _, in := range f.Instances {
		subj := in.Name()
		var wild, other []string
		for _, l := range in.Listen {
			if l.Proto == "unix" {
				continue
			}
			if l.Wildcard() {
				wild = append(wild, l.String())
			} else {
				other = append(other, l.String())
			}
		}
		if len(wild) == 0 && len(other) == 0 {
			if in.ListenErr != "" {
				out = append(out, UnknownR(subj, "cannot see the server's sockets: "+in.ListenErr))
			}
			continue
		}
		ev := []Evidence{Ev("listening", strings.Join(append(append([]string{}, wild...), other...), ", "), "/proc/net/tcp, /proc/net/tcp6, /proc/PID/fd")}
		if len(wild) == 0 {
			out = append(out, PassR(subj, "It listens only on specific addresses: "+strings.Join(other, ", ")+".", ev...))
			continue
		}
		out = append(out, FailR(subj, fmt.Sprintf("It listens on every interface (%s): any network that reaches this host, public ones included, reaches the server, and only authentication and the firewall stand in the way.", strings.Join(wild, ", ")),
			&fix.Fix{Summary: "Bind " + in.Name() + " to the private address its clients use", Manual: bindAdvice(in)}, ev...))
	}
	return out
}

// bindAdvice names the engine's setting for the listening address.
func bindAdvice(in *facts.Instance) string { return in.Profile().BindAdvice(in.Instance) }

// netFix is sysctlFix for net.* parameters, which belong to a network
// namespace: in a container they are set for the container, not the host.
func netFix(f *facts.Facts, summary string, kv ...string) *fix.Fix {
	fx := sysctlFix(f, summary, kv...)
	if f.System.Container != "" {
		fx.HostOnly = false
		fx.Manual = strings.TrimSpace(fx.Manual + " dbhost runs in a container and net.* parameters belong to its network namespace: set them in the container's definition (docker run --sysctl, Kubernetes securityContext.sysctls).")
	}
	return fx
}
