// Package galeralab runs a private MariaDB Galera cluster on this host, from
// the distribution's packages only (mariadb-server, galera-4,
// galera-arbitrator-4), for tests and for users who want to try a change or
// watch the quorum rule at work before production.
//
// Every member lives in a network namespace of its own
// (dbhost-lab-NAME-node1, ..., dbhost-lab-NAME-garbd); a hub namespace
// (dbhost-lab-NAME-hub) holds a bridge, and each member has a veth pair made
// inside the namespaces, so the host's root namespace never gets an
// interface and the cluster's traffic never leaves the addresses the lab
// made (a private 10.238.X.0/24, X free among running labs and the host's
// interfaces). Files live under Root/NAME; the journal Root/NAME.journal
// records every namespace, veth, directory and process group before it is
// made, so Stop — or a later Stop after a crash, or a new Start of the same
// name — removes everything.
package galeralab

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/dbhost/dbhost/internal/galera"
	"github.com/dbhost/dbhost/internal/journal"
	"github.com/dbhost/dbhost/internal/safefile"
	"github.com/dbhost/dbhost/internal/textio"
)

const (
	// DefaultRoot holds every lab's directory and journal.
	DefaultRoot = "/var/lib/dbhost/lab"
	// DefaultName is the lab's name when Config.Name is empty.
	DefaultName = "galera"
	// DefaultSuspectTimeout is the lab's evs.suspect_timeout: short, so
	// that a failure is noticed (and a test or proof goes on) in seconds,
	// long enough that a loaded 2-CPU host does not suspect a live node.
	DefaultSuspectTimeout = 2 * time.Second
	// MaxNodes bounds the data nodes: each takes ~150 MB and a share of
	// 2 CPUs.
	MaxNodes = 7
	// Arbitrator is garbd's member name.
	Arbitrator = "garbd"
)

// Config describes a lab.
type Config struct {
	Name           string         // lab name (default "galera"): directory Root/Name, namespaces dbhost-lab-NAME-*
	Root           string         // default /var/lib/dbhost/lab
	Nodes          int            // data nodes, 2..7 (default 3)
	Arbitrator     bool           // add garbd (member name "garbd")
	Segments       int            // 1..3: data nodes round-robin over gmcast.segment 0..S-1; garbd in the last one
	Weights        map[string]int // pc.weight by member name (default 1)
	Options        []string       // extra mariadbd options NAME=VALUE for every data node
	SuspectTimeout time.Duration  // evs.suspect_timeout (0: DefaultSuspectTimeout)
	Log            io.Writer      // progress lines (nil: none)
}

// Node is one member of a lab.
type Node struct {
	Name       string `json:"name"` // node1..nodeN, garbd
	Arbitrator bool   `json:"arbitrator,omitempty"`
	Segment    int    `json:"segment"`
	Weight     int    `json:"weight"`
	Addr       string `json:"addr"` // its address inside the lab network
	// Port is the client port, unique among running labs: a lab node on
	// 3306 would share the name mysql:3306 with the host's own server in
	// audits and the exporter's labels while the lab runs.
	Port    int    `json:"port,omitempty"`
	Netns   string `json:"netns"`
	Socket  string `json:"socket,omitempty"` // client socket, "" for garbd
	DataDir string `json:"datadir,omitempty"`
	PID     int    `json:"pid"`
}

// state is Root/NAME/lab.json: what Open needs to work a lab another
// process started.
type state struct {
	Version        int      `json:"version"`
	Name           string   `json:"name"`
	Cluster        string   `json:"cluster"` // wsrep_cluster_name
	Subnet         string   `json:"subnet"`  // "10.238.X"
	SuspectTimeout string   `json:"suspect_timeout"`
	Options        []string `json:"options,omitempty"`
	Nodes          []Node   `json:"nodes"`
	StartSeconds   float64  `json:"start_seconds"`
}

const stateVersion = 1

// Lab is a running lab. Its methods are safe for concurrent use.
type Lab struct {
	mu      sync.Mutex
	root    string
	name    string
	dir     string
	log     io.Writer
	j       *journal.Journal // nil for a lab Open found: Stop recovers the file
	st      state
	suspect time.Duration
	bins    bins
	procs   map[string]*proc // processes this Lab started (reaped here)
	net     *journal.Journal // the partition's rules, nil when healed
	start   time.Duration
	stop    time.Duration
	stopped bool
	t0      time.Time // when the current Start or Recover began
}

var nameRE = textio.LazyRegexp(`^[a-z][a-z0-9]{0,19}$`)

// ErrNoLab: no lab of that name.
var ErrNoLab = errors.New("no such lab")

// Check says why Start would refuse cfg, without starting anything.
func Check(cfg Config) error { return cfg.normalize() }

// Up reports whether any member of the lab runs.
func (l *Lab) Up() bool {
	for _, n := range l.Nodes() {
		if l.Running(n.Name) {
			return true
		}
	}
	return false
}

// normalize fills defaults and refuses what the lab cannot run.
func (c *Config) normalize() error {
	if c.Name == "" {
		c.Name = DefaultName
	}
	if !nameRE.MatchString(c.Name) {
		return fmt.Errorf("lab name %q: want a lower-case letter, then up to 19 letters or digits", c.Name)
	}
	if c.Root == "" {
		c.Root = DefaultRoot
	}
	if !filepath.IsAbs(c.Root) {
		return fmt.Errorf("lab root %q is not an absolute path", c.Root)
	}
	c.Root = filepath.Clean(c.Root)
	if c.Nodes == 0 {
		c.Nodes = 3
	}
	if c.Nodes < 2 || c.Nodes > MaxNodes {
		return fmt.Errorf("%d data nodes: the lab runs 2 to %d (each takes ~150 MB and a share of this host's CPUs)", c.Nodes, MaxNodes)
	}
	if c.Segments == 0 {
		c.Segments = 1
	}
	if c.Segments < 1 || c.Segments > 3 {
		return fmt.Errorf("%d segments: the lab runs 1 to 3", c.Segments)
	}
	if c.Segments > c.Nodes {
		return fmt.Errorf("%d segments for %d data nodes: each segment needs a data node", c.Segments, c.Nodes)
	}
	members := map[string]bool{}
	for i := 1; i <= c.Nodes; i++ {
		members[fmt.Sprintf("node%d", i)] = true
	}
	if c.Arbitrator {
		members[Arbitrator] = true
	}
	for n, w := range c.Weights {
		if !members[n] {
			return fmt.Errorf("weight for %q: no such member (members: %s)", n, strings.Join(sortedKeys(members), ", "))
		}
		if w < 0 || w > 255 {
			return fmt.Errorf("weight %d for %s: pc.weight is 0..255", w, n)
		}
	}
	if c.SuspectTimeout == 0 {
		c.SuspectTimeout = DefaultSuspectTimeout
	}
	if c.SuspectTimeout < 500*time.Millisecond || c.SuspectTimeout > 5*time.Minute {
		return fmt.Errorf("suspect timeout %v: the lab takes 0.5 s to 5 min", c.SuspectTimeout)
	}
	for _, o := range c.Options {
		if _, _, err := parseOption(o); err != nil {
			return err
		}
	}
	return nil
}

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// layoutNodes assigns names, segments, weights and addresses.
func layoutNodes(c Config, subnet, dir string) []Node {
	var nodes []Node
	w := func(n string) int {
		if v, ok := c.Weights[n]; ok {
			return v
		}
		return 1
	}
	for i := 1; i <= c.Nodes; i++ {
		n := fmt.Sprintf("node%d", i)
		d := filepath.Join(dir, n)
		nodes = append(nodes, Node{Name: n, Segment: (i - 1) % c.Segments, Weight: w(n),
			Addr: fmt.Sprintf("%s.%d", subnet, i), Port: clientPort(subnet, i), Netns: nsName(c.Name, n),
			Socket: filepath.Join(d, "mysqld.sock"), DataDir: filepath.Join(d, "data")})
	}
	if c.Arbitrator {
		nodes = append(nodes, Node{Name: Arbitrator, Arbitrator: true, Segment: c.Segments - 1, Weight: w(Arbitrator),
			Addr: fmt.Sprintf("%s.%d", subnet, MaxNodes+1), Netns: nsName(c.Name, Arbitrator)})
	}
	return nodes
}

// clientPort is 20000 + 10*X + i for node i of 10.238.X: the subnet is
// unique among running labs, and so is the port.
func clientPort(subnet string, i int) int {
	x := 0
	if k := strings.LastIndexByte(subnet, '.'); k >= 0 {
		x, _ = strconv.Atoi(subnet[k+1:])
	}
	return 20000 + 10*x + i
}

func nsName(lab, member string) string { return "dbhost-lab-" + lab + "-" + member }

// journalFile is where a lab's journal lives: beside its directory, so
// that removing the directory cannot take the journal with it.
func journalFile(root, name string) string { return filepath.Join(root, name+".journal") }

func (l *Lab) logf(format string, a ...any) {
	if l.log != nil {
		fmt.Fprintf(l.log, "lab %s: %s\n", l.name, fmt.Sprintf(format, a...))
	}
}

// Nodes returns the members, data nodes first, each with the PID of its
// server (or garbd) now, 0 when it is down.
func (l *Lab) Nodes() []Node {
	l.mu.Lock()
	nodes := append([]Node(nil), l.st.Nodes...)
	l.mu.Unlock()
	for i := range nodes {
		nodes[i].PID = l.mainPID(nodes[i])
	}
	return nodes
}

// Name is the lab's name; Dir its directory.
func (l *Lab) Name() string { return l.name }

// Dir is the lab's directory (Root/NAME).
func (l *Lab) Dir() string { return l.dir }

// Layout is the lab's members as the quorum model reads them: every weight
// and segment was set by the lab, so nothing is assumed.
func (l *Lab) Layout() galera.Layout {
	var lay galera.Layout
	for _, n := range l.Nodes() {
		lay.Members = append(lay.Members, galera.Member{Name: n.Name, Address: n.Addr, Weight: n.Weight,
			Segment: n.Segment, Arbitrator: n.Arbitrator})
	}
	return lay
}

// SuspectTimeout is the lab's evs.suspect_timeout.
func (l *Lab) SuspectTimeout() time.Duration { return l.suspect }

// Times reports how long Start and Stop took (zero when not (yet) done by
// this Lab; Start's is kept in the lab's state for Open).
func (l *Lab) Times() (start, stop time.Duration) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.start, l.stop
}

func (l *Lab) node(name string) (Node, int, error) {
	for i, n := range l.st.Nodes {
		if n.Name == name {
			return n, i, nil
		}
	}
	return Node{}, -1, fmt.Errorf("lab %s has no member %q", l.name, name)
}

func (l *Lab) saveState() error {
	b, err := json.MarshalIndent(l.st, "", " ")
	if err != nil {
		return err
	}
	return safefile.WriteBytes(filepath.Join(l.dir, "lab.json"), 0o600, append(b, '\n'))
}

// Open returns a lab that an earlier process started, from its state and
// journal. It refuses a name that is not a lab.
func Open(root, name string) (*Lab, error) {
	c := Config{Root: root, Name: name, Nodes: 2}
	if err := c.normalize(); err != nil {
		return nil, err
	}
	if err := checkRoot(c.Root); err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return nil, fmt.Errorf("%w: no lab named %s in %s", ErrNoLab, c.Name, c.Root)
		}
		return nil, err
	}
	jf := journalFile(c.Root, c.Name)
	if _, err := os.Lstat(jf); err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return nil, fmt.Errorf("%w: no lab named %s in %s", ErrNoLab, c.Name, c.Root)
		}
		return nil, err
	}
	l := &Lab{root: c.Root, name: c.Name, dir: filepath.Join(c.Root, c.Name), procs: map[string]*proc{}}
	if err := checkMarker(l.dir); err != nil {
		return nil, fmt.Errorf("%s is not a lab (%v): remove it with `dbhost lab galera --stop --name %s`", l.dir, err, c.Name)
	}
	b, err := os.ReadFile(filepath.Join(l.dir, "lab.json"))
	if err != nil {
		return nil, fmt.Errorf("lab %s: its state: %w (half made? `dbhost lab galera --stop --name %s` removes it)", c.Name, err, c.Name)
	}
	if err := json.Unmarshal(b, &l.st); err != nil || l.st.Version != stateVersion || l.st.Name != c.Name {
		return nil, fmt.Errorf("lab %s: unreadable state %s (`dbhost lab galera --stop --name %s` removes it)", c.Name, filepath.Join(l.dir, "lab.json"), c.Name)
	}
	if l.suspect, err = time.ParseDuration(l.st.SuspectTimeout); err != nil {
		return nil, fmt.Errorf("lab %s: state: suspect timeout: %w", c.Name, err)
	}
	l.start = time.Duration(l.st.StartSeconds * float64(time.Second))
	if l.bins, err = trustedBins(); err != nil {
		return nil, err
	}
	return l, nil
}

// Remove removes whatever a lab named name under root left (a lab that is
// running included), from its journal alone: for a lab whose state Open
// cannot read.
func Remove(root, name string) error {
	c := Config{Root: root, Name: name, Nodes: 2}
	if err := c.normalize(); err != nil {
		return err
	}
	if err := checkRoot(c.Root); err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return nil
		}
		return err
	}
	unlock, err := lockLab(c.Name)
	if err != nil {
		return err
	}
	defer unlock()
	return removeStale(c.Root, c.Name)
}

// removeStale restores a lab's partition journal and its journal.
func removeStale(root, name string) error {
	var errs []error
	if err := journal.Recover(netJournalFile(filepath.Join(root, name)), kinds()); err != nil {
		errs = append(errs, err)
	}
	if err := journal.Recover(journalFile(root, name), kinds()); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

func lockLab(name string) (func(), error) {
	return journal.Lock("dbhost-lab-" + name)
}

// Stop shuts the data nodes down cleanly (concurrently, SIGKILL after a
// timeout), then garbd, and undoes the journal: processes left in the
// lab's namespaces are killed, the namespaces (with their veths and
// iptables rules) deleted, the directory removed. Nothing is left.
func (l *Lab) Stop(ctx context.Context) error {
	t0 := time.Now()
	unlock, err := lockLab(l.name)
	if err != nil {
		return err
	}
	defer unlock()
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.stopped {
		return nil
	}
	var data, arb []string
	for _, n := range l.st.Nodes {
		if n.Arbitrator {
			arb = append(arb, n.Name)
		} else {
			data = append(data, n.Name)
		}
	}
	var errs []error
	// A failed clean shutdown is not Stop's failure: the journal's undo
	// kills what is left.
	if err := l.shutdown(ctx, stopTimeout, true, data...); err != nil {
		l.logf("%v", err)
	}
	if err := l.shutdown(ctx, stopTimeout, true, arb...); err != nil {
		l.logf("%v", err)
	}
	if l.net != nil {
		if err := l.net.Restore(); err != nil {
			errs = append(errs, err)
		}
		l.net = nil
	}
	if l.j != nil {
		if err := l.j.Restore(); err != nil {
			errs = append(errs, err)
		}
	} else if err := removeStale(l.root, l.name); err != nil {
		errs = append(errs, err)
	}
	for _, p := range l.procs {
		p.reaped(5 * time.Second)
	}
	l.stop = time.Since(t0)
	l.stopped = len(errs) == 0
	l.logf("stopped in %v", l.stop.Round(time.Millisecond))
	return errors.Join(errs...)
}
