package engine

import (
	"context"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/procfs"

	"github.com/dbhost/dbhost/internal/host"
	"github.com/dbhost/dbhost/internal/termsafe"
)

// Options control how instances are inspected.
type Options struct {
	// PGDSN and MySQLDSN are explicit connection strings; when empty the
	// usual local credentials are tried (peer/socket auth, ~/.pgpass,
	// PG* variables, ~/.my.cnf).
	PGDSN    string
	MySQLDSN string
	// NoConnect skips live connections: settings come from files only.
	NoConnect bool
	// Timeout bounds each live connection.
	Timeout time.Duration
	// NoInspect finds instances without inspecting them: engine, main
	// process and listening sockets, Port the lowest TCP port listened on.
	// No configuration is read, no command run, no connection made; for
	// commands that only group processes by instance (dbhost mem).
	NoInspect bool
	// TrustServers are data directories whose servers the user vouches
	// for (--trust-server): trusted although they fail the rule, when the
	// process runs as the directory's owner.
	TrustServers []string
	// MaxUntrusted bounds the untrusted instances described (0:
	// MaxUntrusted).
	MaxUntrusted int
}

func (o Options) maxUntrusted() int {
	if o.MaxUntrusted > 0 {
		return o.MaxUntrusted
	}
	return MaxUntrusted
}

// Table is the host's process table.
type Table struct {
	Procs  []Process
	byPID  map[int]*Process
	users  map[int]string
	groups map[int]string
}

// Get returns a process by PID.
func (t *Table) Get(pid int) (Process, bool) {
	p, ok := t.byPID[pid]
	if !ok {
		return Process{}, false
	}
	return *p, true
}

// Children lists the direct children of pid.
func (t *Table) Children(pid int) []int {
	var out []int
	for _, p := range t.Procs {
		if p.PPID == pid {
			out = append(out, p.PID)
		}
	}
	return out
}

// UserName maps a UID to a name from /etc/passwd.
func (t *Table) UserName(uid int) string {
	if n, ok := t.users[uid]; ok {
		return n
	}
	return strconv.Itoa(uid)
}

// GroupName maps a GID to a name from /etc/group.
func (t *Table) GroupName(gid int) string {
	if n, ok := t.groups[gid]; ok {
		return n
	}
	return strconv.Itoa(gid)
}

// ByComm returns the processes whose command name is one of names.
func (t *Table) ByComm(names ...string) []Process {
	var out []Process
	for _, p := range t.Procs {
		for _, n := range names {
			if p.Comm == n {
				out = append(out, p)
				break
			}
		}
	}
	return out
}

// ReadTable reads every process's comm and status. Processes that exit while
// being read are skipped: a scan is a moment, not a transaction.
func ReadTable(h *host.Host) (*Table, error) {
	pids, err := h.PIDs()
	if err != nil {
		return nil, fmt.Errorf("process table: %w", err)
	}
	t := &Table{byPID: map[int]*Process{}}
	t.users = readIDNames(h, "/etc/passwd")
	t.groups = readIDNames(h, "/etc/group")
	var buf []byte
	for _, pid := range pids {
		var ids host.ProcIDs
		ids, buf, err = h.ProcIDs(pid, buf)
		if err != nil {
			continue
		}
		// Effective IDs: what the process runs as.
		p := Process{PID: pid, PPID: ids.PPID, Comm: ids.Name, UID: ids.UID, GID: ids.GID}
		p.User = t.UserName(p.UID)
		t.Procs = append(t.Procs, p)
	}
	for i := range t.Procs {
		t.byPID[t.Procs[i].PID] = &t.Procs[i]
	}
	return t, nil
}

// readIDNames maps numeric IDs to names from a passwd-style file.
func readIDNames(h *host.Host, file string) map[int]string {
	m := map[int]string{}
	b, err := h.ReadFile(file)
	if err != nil {
		return m
	}
	for _, ln := range strings.Split(string(b), "\n") {
		f := strings.Split(ln, ":")
		if len(f) < 3 {
			continue
		}
		if id, err := strconv.Atoi(f[2]); err == nil {
			if _, dup := m[id]; !dup {
				m[id] = f[0]
			}
		}
	}
	return m
}

// Detector finds and describes the instances of one engine.
type Detector interface {
	Engine() Engine
	// Match reports whether p is the main server process of an instance
	// (not a worker or a client).
	Match(p Process, t *Table) bool
	// Inspect describes the instance whose main process is p. It fills what
	// it can and records what it could not read in the instance's error
	// fields; it returns an error only when p is not an instance after all
	// (for example it exited).
	Inspect(ctx context.Context, h *host.Host, p Process, t *Table, opts Options) (*Instance, error)
}

// Discover finds every database instance on the host. Problems that stop one
// instance from being described are returned as notes, not errors.
func Discover(ctx context.Context, h *host.Host, t *Table, opts Options) ([]*Instance, []string) {
	d := DiscoverAll(ctx, h, t, opts)
	return d.Instances, d.Notes
}

// Discovery is what DiscoverAll found.
type Discovery struct {
	Instances []*Instance
	Notes     []string
	// NotDescribed counts, by engine, the untrusted instances beyond
	// MaxUntrusted that were only counted.
	NotDescribed map[Engine]int
}

// DiscoverAll is Discover with the count of untrusted instances it did not
// describe. Each instance is judged (Trust) before anything it names is
// read: a trusted server's files are read as its account could and its
// live settings over a verified connection; an untrusted instance's files
// only as its owner could read them, never recorded in a snapshot, and no
// connection is made to it.
func DiscoverAll(ctx context.Context, h *host.Host, t *Table, opts Options) Discovery {
	if opts.Timeout == 0 {
		opts.Timeout = 3 * time.Second
	}
	type job struct {
		d Profile
		p Process
		v processVerdict
	}
	var jobs []job
	res := Discovery{NotDescribed: map[Engine]int{}}
	untrusted := 0
	owners := vouchedOwners(h, opts.TrustServers)
	for _, p := range t.Procs {
		for _, d := range Profiles() {
			if !d.Match(p, t) {
				continue
			}
			// A zombie has exited; only its parent has not collected its
			// status. Its name and IDs still read like a server's.
			if st, err := h.ProcStat(p.PID); err == nil && (st.State == "Z" || st.State == "X") {
				res.Notes = append(res.Notes, fmt.Sprintf("%s pid %d: a zombie (exited, not reaped by its parent pid %d); not a running server", d.Engine(), p.PID, p.PPID))
				break
			}
			j := job{d: d, p: p}
			if !opts.NoInspect {
				j.v = judgeProcess(h, p, d)
				// Any user can start thousands of look-alikes: past a few,
				// they are counted, not described. A process that runs as
				// the owner of a vouched-for directory is always described.
				if !j.v.OK && !owners[p.UID] {
					if untrusted++; untrusted > opts.maxUntrusted() {
						res.NotDescribed[d.Engine()]++
						break
					}
				}
			}
			jobs = append(jobs, j)
			break
		}
	}
	out := make([]*Instance, len(jobs))
	errs := make([]error, len(jobs))
	var wg sync.WaitGroup
	for i, j := range jobs {
		if opts.NoInspect {
			out[i] = &Instance{Engine: j.d.Engine(), PID: j.p.PID, Comm: j.p.Comm, UID: j.p.UID, GID: j.p.GID, User: j.p.User, profile: j.d}
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			out[i], errs[i] = inspectJudged(ctx, h, j.d, j.p, j.v, t, opts)
		}()
	}
	wg.Wait()
	var found []*Instance
	for i, inst := range out {
		if errs[i] != nil {
			res.Notes = append(res.Notes, fmt.Sprintf("%s pid %d: %s", jobs[i].d.Engine(), jobs[i].p.PID, host.Explain(errs[i])))
			continue
		}
		if inst == nil {
			continue
		}
		// A short-lived process with a server's name (`postgres -V` run by
		// a package script, say) can match and be gone by now: it was
		// never a server.
		if _, err := h.ProcStat(inst.PID); host.IsNotExist(err) {
			res.Notes = append(res.Notes, fmt.Sprintf("%s pid %d: exited during discovery; not a running server", jobs[i].d.Engine(), inst.PID))
			continue
		}
		found = append(found, inst)
	}
	for _, e := range Engines {
		if n := res.NotDescribed[e]; n > 0 {
			res.Notes = append(res.Notes, fmt.Sprintf("%d more untrusted %s processes were counted, not described: dbhost describes at most %d untrusted instances", n, e, opts.maxUntrusted()))
		}
	}
	AttachListeners(h, found)
	if opts.NoInspect {
		for _, in := range found {
			for _, l := range in.Listen {
				if l.Proto != "unix" && l.Port > 0 && (in.Port == 0 || l.Port < in.Port) {
					in.Port = l.Port // the lowest: 3306 before the X protocol's 33060
				}
			}
		}
	}
	SortInstances(found)
	uniqueNames(found)
	res.Instances = found
	return res
}

// inspectJudged describes the instance whose main process is p and judges
// its trust. A process that fails the rule's process half is described as
// its owner could see it, without a connection; one the user vouched for is
// then described again as a server.
func inspectJudged(ctx context.Context, h *host.Host, d Profile, p Process, v processVerdict, t *Table, opts Options) (*Instance, error) {
	gids := append([]int{p.GID}, processGroups(h, p.PID)...)
	inspect := func(trusted bool) (*Instance, error) {
		o := opts
		if !trusted {
			o.NoConnect = true
		}
		claim := host.Claim{UID: p.UID, GIDs: gids, OwnLinks: trusted, Record: trusted}
		in, err := d.Inspect(ctx, h.For(claim), p, t, o)
		if in != nil {
			in.profile, in.claim = d, &claim
			checkVersion(in)
		}
		return in, err
	}
	in, err := inspect(v.OK)
	if err != nil || in == nil {
		return in, err
	}
	in.Trust = Trust{Trusted: v.OK, Basis: TrustRule, Why: v.Why}
	switch {
	case !v.OK:
		in.Trust.Basis = TrustNone
	case v.Unverified:
		in.Trust.Basis = TrustUnverified
	}
	if v.OK && !v.unrecorded {
		if why := judgeFiles(h, in); why != "" {
			in.Trust = Trust{Basis: TrustNone, Why: why}
		}
	}
	if in.Trust.Trusted {
		return in, nil
	}
	if why, ok := vouched(h, in, opts.TrustServers); ok {
		if again, err := inspect(true); err == nil && again != nil {
			again.Trust = Trust{Trusted: true, Basis: TrustVouched, Why: why}
			return again, nil
		}
	}
	if in.SettingsSource != "live" && !opts.NoConnect {
		in.LiveErr = "not connected: the instance is not trusted"
	}
	return in, nil
}

// uniqueNames tags instances that would share a subject name (two servers
// on one port in different network namespaces, or with sockets only, or a
// user's process that only claims the port): by data directory where that
// tells them apart, else by PID. Findings and metrics are keyed by the
// name, so it must be unique. The rule uses only what a run without root
// sees as well (trust, data directories from the command line), never the
// listening sockets (/proc/PID/fd is root's): the same server gets the
// same name whoever runs dbhost, or its series would change with the
// privileges. The one trusted instance of a name keeps it plain: a user
// cannot rename the system's server by starting a look-alike, whose name
// gets the PID.
func uniqueNames(insts []*Instance) {
	byName := map[string][]*Instance{}
	for _, in := range insts {
		byName[in.Name()] = append(byName[in.Name()], in)
	}
	for _, group := range byName {
		if len(group) < 2 {
			continue
		}
		trusted := 0
		dirs := map[string]int{}
		for _, in := range group {
			if in.Trusted() {
				trusted++
			}
			dirs[in.DataDir]++
		}
		for _, in := range group {
			switch {
			case !in.Trusted():
				in.Tag = fmt.Sprintf("pid%d", in.PID)
			case trusted == 1:
			case in.DataDir != "" && dirs[in.DataDir] == 1 && in.Port > 0:
				in.Tag = termsafe.Line(in.DataDir)
			default:
				in.Tag = fmt.Sprintf("pid%d", in.PID)
			}
		}
	}
	// A data directory can read like another instance's tag; PIDs cannot
	// repeat.
	seen := map[string]bool{}
	for _, in := range insts {
		if seen[in.Name()] {
			in.Tag = fmt.Sprintf("pid%d", in.PID)
		}
		seen[in.Name()] = true
	}
}

// AttachListeners fills each instance's Listen from the kernel's socket
// tables and the process's socket inodes: what is really listening, not what
// the configuration asks for.
func AttachListeners(h *host.Host, insts []*Instance) {
	if len(insts) == 0 {
		return
	}
	byInode, tcpErr := tcpListeners(h)
	for _, l := range unixListeners(h, "/proc/net/unix") {
		byInode[l.inode] = l.Listener
	}
	// A server in another network namespace (a container, a lab node)
	// listens in that namespace's tables: one dump per namespace.
	self, _ := h.NetNS(0)
	type nsTables struct {
		byInode map[uint64]Listener
		err     error
	}
	foreign := map[string]*nsTables{}
	for _, inst := range insts {
		inodes, err := h.SocketInodes(inst.PID)
		if err != nil {
			inst.ListenErr = host.Explain(err)
			continue
		}
		tables, terr := byInode, tcpErr
		if ns, err := h.NetNS(inst.PID); err == nil && self != "" && ns != self {
			t := foreign[ns]
			if t == nil {
				t = &nsTables{}
				t.byInode, t.err = nsListeners(h, inst.PID, ns)
				foreign[ns] = t
			}
			tables, terr = t.byInode, t.err
		}
		if terr != nil {
			inst.ListenErr = host.Explain(terr)
		}
		seen := map[string]bool{}
		for _, ino := range inodes {
			if l, ok := tables[ino]; ok && !seen[l.String()] {
				seen[l.String()] = true
				inst.Listen = append(inst.Listen, l)
			}
		}
		sort.Slice(inst.Listen, func(a, b int) bool { return inst.Listen[a].String() < inst.Listen[b].String() })
	}
}

// nsListeners maps the inodes of the listening sockets of network
// namespace ns, which process pid is in, to them: TCP through sock_diag
// from inside ns, Unix from /proc/PID/net/unix, which shows the sockets of
// the process's namespace.
func nsListeners(h *host.Host, pid int, ns string) (map[uint64]Listener, error) {
	byInode := map[uint64]Listener{}
	socks, err := h.ListenSocketsIn(pid, ns)
	for _, s := range socks {
		byInode[s.Inode] = tcpListener(s)
	}
	for _, l := range unixListeners(h, fmt.Sprintf("/proc/%d/net/unix", pid)) {
		byInode[l.inode] = l.Listener
	}
	return byInode, err
}

func tcpListener(s host.ListenSocket) Listener {
	proto := "tcp"
	if strings.Contains(s.Addr, ":") {
		proto = "tcp6"
	}
	return Listener{Proto: proto, Addr: s.Addr, Port: s.Port, Backlog: s.Backlog}
}

// tcpListeners maps the inodes of the host's listening TCP sockets to
// them. sock_diag first: cheap and it carries the backlog; the /proc files
// are the fallback (a seccomp profile without netlink, an old snapshot).
func tcpListeners(h *host.Host) (map[uint64]Listener, error) {
	byInode := map[uint64]Listener{}
	socks, err := h.ListenSockets()
	for _, s := range socks {
		byInode[s.Inode] = tcpListener(s)
	}
	if err != nil {
		var tcp procfs.NetTCP
		tcp, err = h.NetTCP()
		for _, s := range tcp {
			if s.St != 0x0A { // TCP_LISTEN
				continue
			}
			proto := "tcp"
			if s.LocalAddr.To4() == nil {
				proto = "tcp6"
			}
			byInode[s.Inode] = Listener{Proto: proto, Addr: s.LocalAddr.String(), Port: int(s.LocalPort)}
		}
	}
	return byInode, err
}

type unixListener struct {
	Listener
	inode uint64
}

// unixListeners reads listening Unix sockets from a net/unix file of /proc.
func unixListeners(h *host.Host, file string) []unixListener {
	b, err := h.ReadFile(file)
	if err != nil {
		return nil
	}
	var out []unixListener
	for _, ln := range strings.Split(string(b), "\n")[1:] {
		f := strings.Fields(ln)
		// Num RefCount Protocol Flags Type St Inode Path
		if len(f) < 8 || f[3] != "00010000" { // __SO_ACCEPTCON: listening
			continue
		}
		ino, err := strconv.ParseUint(f[6], 10, 64)
		if err != nil {
			continue
		}
		out = append(out, unixListener{Listener{Proto: "unix", Addr: f[7]}, ino})
	}
	return out
}
