package galeralab

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/dbhost/dbhost/internal/host"
	"github.com/dbhost/dbhost/internal/journal"
	"github.com/dbhost/dbhost/internal/textio"
)

// bins are the programs the lab runs, each checked to be root's alone
// (file, directories and links on its path) before it is run as root.
type bins struct {
	ip, iptables, nsenter, setpriv, sed, mariadbd, installDB, garbd, provider string
}

// Paths of the distribution's packages (Debian/Ubuntu).
var binPaths = bins{
	ip:        "/usr/bin/ip",
	iptables:  "/usr/sbin/iptables",
	nsenter:   "/usr/bin/nsenter",
	setpriv:   "/usr/bin/setpriv",
	sed:       "/usr/bin/sed",
	mariadbd:  "/usr/sbin/mariadbd",
	installDB: "/usr/bin/mariadb-install-db",
	garbd:     "/usr/bin/garbd",
	provider:  "/usr/lib/galera/libgalera_smm.so",
}

// sstPrograms are what mariadbd runs for an rsync state transfer.
var sstPrograms = []string{"/usr/bin/wsrep_sst_rsync", "/usr/bin/wsrep_sst_common", "/usr/bin/rsync"}

var packageOf = map[string]string{
	"/usr/bin/ip": "iproute2", "/usr/sbin/iptables": "iptables", "/usr/bin/setpriv": "util-linux", "/usr/bin/nsenter": "util-linux", "/usr/bin/sed": "sed",
	"/usr/sbin/mariadbd": "mariadb-server", "/usr/bin/mariadb-install-db": "mariadb-server",
	"/usr/bin/garbd": "galera-arbitrator-4", "/usr/lib/galera/libgalera_smm.so": "galera-4",
	"/usr/bin/wsrep_sst_rsync": "mariadb-server", "/usr/bin/wsrep_sst_common": "mariadb-server", "/usr/bin/rsync": "rsync",
}

// trustedBins checks every program the lab may run. Only the arbitrator
// is optional: garbd is checked when a lab wants one.
func trustedBins() (bins, error) {
	h, err := host.Open("/")
	if err != nil {
		return bins{}, err
	}
	defer h.Close()
	for _, p := range append([]string{binPaths.ip, binPaths.iptables, binPaths.nsenter, binPaths.setpriv, binPaths.sed, binPaths.mariadbd,
		binPaths.installDB, binPaths.provider}, sstPrograms...) {
		if err := trusted(h, p); err != nil {
			return bins{}, err
		}
	}
	return binPaths, nil
}

func trusted(h *host.Host, p string) error {
	if _, err := os.Stat(p); err != nil {
		return fmt.Errorf("lab: %s missing (apt-get install %s)", p, packageOf[p])
	}
	if err := h.CheckTrusted(p); err != nil {
		return fmt.Errorf("lab: %w", err)
	}
	return nil
}

func checkGarbd() error {
	h, err := host.Open("/")
	if err != nil {
		return err
	}
	defer h.Close()
	return trusted(h, binPaths.garbd)
}

// cleanEnv is every lab program's environment: nothing of dbhost's own.
var cleanEnv = []string{"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", "LC_ALL=C"}

// run runs a program (argument list, no shell) with a deadline and returns
// its combined output.
func (b bins) run(ctx context.Context, name string, args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Env = cleanEnv
	cmd.Dir = "/"
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	return strings.TrimSpace(out.String()), err
}

func (b bins) must(ctx context.Context, name string, args ...string) error {
	if out, err := b.run(ctx, name, args...); err != nil {
		return fmt.Errorf("%s %s: %v: %s", filepath.Base(name), strings.Join(args, " "), err, out)
	}
	return nil
}

const netnsDir = "/run/netns"

func nsExists(name string) bool {
	_, err := os.Lstat(filepath.Join(netnsDir, name))
	return err == nil
}

// nsPIDs lists the processes whose network namespace is name's.
func nsPIDs(name string) []int {
	var want syscall.Stat_t
	if syscall.Stat(filepath.Join(netnsDir, name), &want) != nil {
		return nil
	}
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	self := os.Getpid()
	var pids []int
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == self {
			continue
		}
		var st syscall.Stat_t
		if syscall.Stat(fmt.Sprintf("/proc/%d/ns/net", pid), &st) != nil {
			continue
		}
		if st.Ino == want.Ino && st.Dev == want.Dev && !zombie(pid) {
			pids = append(pids, pid)
		}
	}
	return pids
}

// zombie reports a process that exited (or is gone).
func zombie(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return true
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 || i+2 >= len(s) {
		return true
	}
	return s[i+2] == 'Z' || s[i+2] == 'X'
}

// killNetns ends every process in a namespace: SIGTERM, then SIGKILL
// after grace.
func killNetns(name string, grace time.Duration) error {
	pids := nsPIDs(name)
	if len(pids) == 0 {
		return nil
	}
	for _, p := range pids {
		syscall.Kill(p, syscall.SIGTERM)
	}
	deadline := time.Now().Add(grace)
	for len(nsPIDs(name)) > 0 && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
	}
	for _, p := range nsPIDs(name) {
		syscall.Kill(p, syscall.SIGKILL)
	}
	deadline = time.Now().Add(10 * time.Second)
	for {
		left := nsPIDs(name)
		if len(left) == 0 {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("processes %v in namespace %s survived SIGKILL", left, name)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// netLock serialises the choice of a lab's subnet between labs.
const netLock = "dbhost-lab-net"

var linkRE = textio.LazyRegexp(`^v[0-9]{1,2}$`)

// subnetsInUse are the X of 10.238.X.0/24 that the host's interfaces or a
// running lab's hub use.
func (b bins) subnetsInUse() (map[int]bool, error) {
	used := map[int]bool{}
	mark := func(addr string) {
		ip := net.ParseIP(addr).To4()
		if ip != nil && ip[0] == 10 && ip[1] == 238 {
			used[int(ip[2])] = true
		}
	}
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		return nil, err
	}
	for _, a := range addrs {
		if ipn, ok := a.(*net.IPNet); ok {
			mark(ipn.IP.String())
		}
	}
	ents, _ := os.ReadDir(netnsDir)
	for _, e := range ents {
		if !strings.HasPrefix(e.Name(), nsPrefix) {
			continue
		}
		out, err := b.run(context.Background(), b.ip, "-n", e.Name(), "-4", "-o", "addr", "show")
		if err != nil {
			continue
		}
		for _, f := range strings.Fields(out) {
			if a, _, ok := strings.Cut(f, "/"); ok {
				mark(a)
			}
		}
	}
	return used, nil
}

// hubAddr is the bridge's address in the hub namespace: it marks the
// subnet as taken for other labs.
const hubHost = 254

// makeNetwork makes the hub and one namespace per member, each recorded
// in the journal before it is made. The subnet is chosen and marked (the
// hub's address) under netLock.
func (l *Lab) makeNetwork(ctx context.Context, c Config) (string, error) {
	b := l.bins
	unlock, err := journal.Lock(netLock)
	if err != nil {
		return "", err
	}
	defer unlock()
	used, err := b.subnetsInUse()
	if err != nil {
		return "", err
	}
	x := 0
	for i := 1; i < 255; i++ {
		if !used[i] {
			x = i
			break
		}
	}
	if x == 0 {
		return "", fmt.Errorf("no free subnet 10.238.X.0/24 for the lab")
	}
	subnet := fmt.Sprintf("10.238.%d", x)
	hub := nsName(c.Name, "hub")
	if err := l.addNs(ctx, hub); err != nil {
		return "", err
	}
	for _, args := range [][]string{
		{"-n", hub, "link", "set", "lo", "up"},
		{"-n", hub, "link", "add", "br0", "type", "bridge"},
		{"-n", hub, "addr", "add", fmt.Sprintf("%s.%d/24", subnet, hubHost), "dev", "br0"},
		{"-n", hub, "link", "set", "br0", "up"},
	} {
		if err := b.must(ctx, b.ip, args...); err != nil {
			return "", err
		}
	}
	return subnet, nil
}

func (l *Lab) addNs(ctx context.Context, ns string) error {
	// Checked before it is journaled: the undo of a namespace this lab
	// did not make must not delete it.
	if nsExists(ns) {
		return fmt.Errorf("namespace %s exists already and no lab journal names it: `ip netns delete %s` if nothing runs in it", ns, ns)
	}
	if err := l.j.Record(kindNetns, "network namespace "+ns, netnsRecord{Name: ns}); err != nil {
		return err
	}
	return l.bins.must(ctx, l.bins.ip, "netns", "add", ns)
}

// addMember makes a member's namespace and its veth to the hub: the
// member's end is made inside its namespace (eth0), the hub's end inside
// the hub, so the root namespace never holds either.
func (l *Lab) addMember(ctx context.Context, n Node, i int) error {
	b := l.bins
	hub := nsName(l.name, "hub")
	if err := l.addNs(ctx, n.Netns); err != nil {
		return err
	}
	link := fmt.Sprintf("v%d", i)
	if err := l.j.Record(kindVeth, "veth "+link+" from "+hub+" to "+n.Netns, vethRecord{Netns: hub, Link: link}); err != nil {
		return err
	}
	for _, args := range [][]string{
		{"-n", hub, "link", "add", link, "type", "veth", "peer", "name", "eth0", "netns", n.Netns},
		{"-n", hub, "link", "set", link, "master", "br0", "up"},
		{"-n", n.Netns, "addr", "add", n.Addr + "/24", "dev", "eth0"},
		{"-n", n.Netns, "link", "set", "eth0", "up"},
		{"-n", n.Netns, "link", "set", "lo", "up"},
	} {
		if err := b.must(ctx, b.ip, args...); err != nil {
			return err
		}
	}
	return nil
}

func netJournalFile(dir string) string { return filepath.Join(dir, "partition.journal") }

// Partition drops all traffic between the sides: in every member's
// namespace, INPUT from and OUTPUT to the addresses of the members on the
// other sides. Members named on no side keep talking to everyone. An
// earlier partition is healed first. The rules are journaled before they
// are added; Heal (or Stop) removes them.
func (l *Lab) Partition(sides ...[]string) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	side := map[string]int{}
	for i, s := range sides {
		for _, name := range s {
			if _, _, err := l.node(name); err != nil {
				return err
			}
			if _, dup := side[name]; dup {
				return fmt.Errorf("partition: %s is on two sides", name)
			}
			side[name] = i
		}
	}
	if len(sides) < 2 {
		return fmt.Errorf("partition: want at least two sides, got %d", len(sides))
	}
	if err := l.heal(); err != nil {
		return err
	}
	j, err := journal.Open(netJournalFile(l.dir), kinds())
	if err != nil {
		return err
	}
	l.net = j
	for _, n := range l.st.Nodes {
		s, in := side[n.Name]
		if !in {
			continue
		}
		var others []string
		for _, o := range l.st.Nodes {
			if so, oin := side[o.Name]; oin && so != s {
				others = append(others, o.Addr)
			}
		}
		if len(others) == 0 {
			continue
		}
		list := strings.Join(others, ",")
		rules := [][]string{{"INPUT", "-s", list, "-j", "DROP"}, {"OUTPUT", "-d", list, "-j", "DROP"}}
		if err := j.Record(kindRules, "partition rules in "+n.Netns, rulesRecord{Netns: n.Netns, Rules: rules}); err != nil {
			return err
		}
		for _, r := range rules {
			if err := l.bins.must(context.Background(), l.bins.ip, append([]string{"netns", "exec", n.Netns, l.bins.iptables, "-w", "5", "-I"}, r...)...); err != nil {
				return err
			}
		}
	}
	l.logf("partitioned: %v", sides)
	return nil
}

// Heal removes a partition's rules.
func (l *Lab) Heal() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.heal()
}

func (l *Lab) heal() error {
	if l.net != nil {
		err := l.net.Restore()
		if err == nil {
			l.net = nil
		}
		return err
	}
	// A partition another process made.
	return journal.Recover(netJournalFile(l.dir), kinds())
}
