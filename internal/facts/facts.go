// Package facts gathers, once, everything dbhost's checks judge: kernel
// settings, memory, storage, limits, time, security and the database
// instances. Gathering reads through a *host.Host (live or snapshot); checks
// then read only these typed facts and never touch the filesystem.
package facts

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"sync"

	"github.com/dbhost/dbhost/internal/budget"
	"github.com/dbhost/dbhost/internal/engine"
	_ "github.com/dbhost/dbhost/internal/engine/all" // register every engine
	"github.com/dbhost/dbhost/internal/host"
)

// Facts is one observation of a host.
type Facts struct {
	Source   string        `json:"source"` // "live" or the snapshot file
	Manifest host.Manifest `json:"manifest"`
	// AsRoot: the observation had root privileges; without them some facts
	// are missing and their checks say so.
	AsRoot bool `json:"as_root"`

	System   System                  `json:"system"`
	Sysctl   map[string]host.Reading `json:"sysctl"`
	Persist  Persist                 `json:"persist"`
	Memory   Memory                  `json:"memory"`
	Storage  Storage                 `json:"storage"`
	Time     Time                    `json:"time"`
	Security Security                `json:"security"`
	Tuned    Tuned                   `json:"tuned"`

	// Processes is the process table (comm, user, parent) of the host.
	Processes []engine.Process `json:"processes"`
	Instances []*Instance      `json:"instances"`
	// NotDescribed counts, by engine, the untrusted instances past
	// engine.MaxUntrusted: counted, not described.
	NotDescribed map[engine.Engine]int `json:"not_described,omitempty"`

	// Notes lists what could not be gathered at all, and why.
	Notes []string `json:"notes,omitempty"`

	// SysctlKeep is the user's answer to sysctl.drift, per kernel
	// parameter: "running" persists the running value, "file" sets the
	// running value back to what the next boot sets (--keep-running,
	// --keep-file). Not observed: set by the command line.
	SysctlKeep map[string]string `json:"sysctl_keep,omitempty"`
	// Budget holds the user's memory shares of the databases (--budget,
	// DBHOST_BUDGET): not observed, but given, so that the sizing checks
	// stay functions of the facts.
	Budget budget.Shares `json:"budget,omitzero"`

	// sysctlSeen, when set, is told each kernel parameter SysctlReading is
	// asked for (see TrackSysctls).
	sysctlSeen func(name string)
}

// Instance is a database instance plus the host facts that are about it:
// its limits, cgroup, service unit, storage and memory.
type Instance struct {
	*engine.Instance
	Limits    host.Limits   `json:"limits,omitempty"`
	LimitsErr string        `json:"limits_error,omitempty"`
	OOMScore  host.Reading  `json:"oom_score_adj"`
	Cgroup    Cgroup        `json:"cgroup"`
	Unit      *Unit         `json:"unit,omitempty"`
	Storage   []PathStorage `json:"storage,omitempty"`
	Mem       InstanceMem   `json:"mem"`
	// Label is the security label of the process (/proc/PID/attr/current).
	Label host.Reading `json:"label"`
	// DataLabel is the SELinux label of the data directory; ChildOOM the
	// oom_score_adj of worker processes (PostgreSQL backends).
	DataLabel host.Reading  `json:"data_label"`
	ChildOOM  []ProcReading `json:"child_oom_score_adj,omitempty"`

	// StartConf is a packaged cluster's boot setting (Debian's start.conf:
	// auto, manual, disabled), when there is one.
	StartConf *Persisted `json:"start_conf,omitempty"`

	// SSTAuth is where a Galera node's option files set wsrep_sst_auth,
	// with the file's mode and owner (nil: not a Galera node, or not set).
	SSTAuth *SecretSource `json:"sst_auth,omitempty"`
}

// Options tune gathering.
type Options struct {
	// Sysctls are the kernel parameters the sysctl domain reads: the
	// caller's list (check.GatherOptions: every one the checks declare),
	// so what is gathered does not hang on which packages are linked.
	Sysctls []string
	Engine  engine.Options
}

// Host-level domains: the names GatherHost takes, one per gatherer.
const (
	DomainMemory   = "memory"
	DomainPersist  = "persist"
	DomainSecurity = "security"
	DomainStorage  = "storage"
	DomainSysctl   = "sysctl"
	DomainSystem   = "system"
	DomainTime     = "time"
	DomainTuned    = "tuned"
)

// gatherer fills one domain of the facts. Host-level gatherers run in
// parallel, each writing only its own field of Facts; instance gatherers run
// after discovery, each writing only its own fields of the Instance.
type gatherer struct {
	name string
	host func(ctx context.Context, h *host.Host, f *Facts, o Options)
	inst func(ctx context.Context, h *host.Host, f *Facts, in *Instance)
}

var (
	gatherersMu sync.Mutex
	gatherers   []gatherer
)

// registerHost adds a host-level gatherer (called from init in domain files).
func registerHost(name string, fn func(ctx context.Context, h *host.Host, f *Facts)) {
	registerHostOptions(name, func(ctx context.Context, h *host.Host, f *Facts, _ Options) { fn(ctx, h, f) })
}

// registerHostOptions adds a host-level gatherer that reads the options.
func registerHostOptions(name string, fn func(ctx context.Context, h *host.Host, f *Facts, o Options)) {
	gatherersMu.Lock()
	defer gatherersMu.Unlock()
	gatherers = append(gatherers, gatherer{name: name, host: fn})
}

// registerInstance adds a per-instance gatherer.
func registerInstance(name string, fn func(ctx context.Context, h *host.Host, f *Facts, in *Instance)) {
	gatherersMu.Lock()
	defer gatherersMu.Unlock()
	gatherers = append(gatherers, gatherer{name: name, inst: fn})
}

// Gather observes the host. It never fails as a whole: what it cannot read
// is recorded next to the fact (Reading.Err) or in Notes.
func Gather(ctx context.Context, h *host.Host, opts Options) *Facts {
	f := newFacts(h)
	// The host-level gatherers run in parallel, each writing only its own
	// domain field of f. Discovery needs only the process table, so it
	// starts as soon as the table is read, beside them: connecting to the
	// servers waits on the network, not on the CPU the gatherers use.
	var hostWG sync.WaitGroup
	hostGatherers(ctx, h, f, opts, &hostWG, nil)
	table, err := engine.ReadTable(h)
	if err != nil {
		f.Note(host.Explain(err))
		table = &engine.Table{}
	}
	f.Processes = table.Procs
	d := engine.DiscoverAll(ctx, h, table, opts.Engine)
	for _, n := range d.Notes {
		f.Note(n)
	}
	if len(d.NotDescribed) > 0 {
		f.NotDescribed = d.NotDescribed
	}
	for _, in := range d.Instances {
		f.Instances = append(f.Instances, &Instance{Instance: in})
	}
	// Instance gatherers read host facts (mounts, memory): they wait for
	// the host-level gatherers.
	hostWG.Wait()
	var wg sync.WaitGroup
	// Instances are few; their gatherers run in parallel per instance.
	for _, in := range f.Instances {
		wg.Add(1)
		go func() {
			defer wg.Done()
			// What an instance names is read as its own process could.
			ih := in.Reader(h)
			for _, g := range registered() {
				if g.inst != nil {
					g.inst(ctx, ih, f, in)
				}
			}
		}()
	}
	wg.Wait()
	sort.Strings(f.Notes)
	return f
}

// GatherHost observes only the named host-level domains (Domain*): no
// process table, no instances, and the other domains left zero. It is for
// callers that need a few host facts (experiments) from the same gatherers
// as an audit; opts.Sysctls names the kernel parameters DomainSysctl reads.
// An unknown domain panics: the names are constants.
func GatherHost(ctx context.Context, h *host.Host, opts Options, domains ...string) *Facts {
	want := map[string]bool{}
	for _, d := range domains {
		want[d] = true
	}
	for _, g := range registered() {
		if g.host != nil {
			delete(want, g.name)
		}
	}
	if len(want) > 0 {
		panic(fmt.Sprintf("facts.GatherHost: unknown domain %q", sortedNames(want)))
	}
	f := newFacts(h)
	var wg sync.WaitGroup
	hostGatherers(ctx, h, f, opts, &wg, func(name string) bool { return slices.Contains(domains, name) })
	wg.Wait()
	sort.Strings(f.Notes)
	return f
}

func newFacts(h *host.Host) *Facts {
	return &Facts{
		Source:   h.Source(),
		Manifest: h.Manifest(),
		AsRoot:   h.Manifest().AsRoot(),
		Sysctl:   map[string]host.Reading{},
	}
}

// hostGatherers starts on wg the host-level gatherers whose domain want
// accepts (every one when want is nil).
func hostGatherers(ctx context.Context, h *host.Host, f *Facts, opts Options, wg *sync.WaitGroup, want func(string) bool) {
	for _, g := range registered() {
		if g.host == nil || (want != nil && !want(g.name)) {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			g.host(ctx, h, f, opts)
		}()
	}
}

func sortedNames(m map[string]bool) []string {
	out := make([]string, 0, len(m))
	for n := range m {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

func registered() []gatherer {
	gatherersMu.Lock()
	defer gatherersMu.Unlock()
	return append([]gatherer(nil), gatherers...)
}

// Note records something that could not be gathered. Safe for concurrent use.
func (f *Facts) Note(msg string) {
	notesMu.Lock()
	defer notesMu.Unlock()
	f.Notes = append(f.Notes, msg)
}

var notesMu sync.Mutex

// ByEngine returns the instances of one engine.
func (f *Facts) ByEngine(e engine.Engine) []*Instance {
	var out []*Instance
	for _, in := range f.Instances {
		if in.Engine == e {
			out = append(out, in)
		}
	}
	return out
}

// SplitTrust divides the instances into the trusted servers and the
// untrusted instances (see engine.Trust).
func (f *Facts) SplitTrust() (trusted, untrusted []*Instance) {
	for _, in := range f.Instances {
		if in.Trusted() {
			trusted = append(trusted, in)
		} else {
			untrusted = append(untrusted, in)
		}
	}
	return trusted, untrusted
}

// WithInstances is a copy of the facts that holds only the instances ins:
// what the checks judge when some instances must not count.
func (f *Facts) WithInstances(ins []*Instance) *Facts {
	g := *f
	g.Instances = ins
	return &g
}

// Has reports whether an instance of the engine runs on the host.
func (f *Facts) Has(e engine.Engine) bool { return len(f.ByEngine(e)) > 0 }

// SysctlNames lists the gathered kernel parameters (Options.Sysctls), sorted.
func (f *Facts) SysctlNames() []string {
	out := make([]string, 0, len(f.Sysctl))
	for n := range f.Sysctl {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

// SysctlReading returns a gathered kernel parameter; a parameter nobody asked
// to gather (Options.Sysctls) reads as unknown rather than panicking.
func (f *Facts) SysctlReading(name string) host.Reading {
	if f.sysctlSeen != nil {
		f.sysctlSeen(name)
	}
	if r, ok := f.Sysctl[name]; ok {
		return r
	}
	return host.Missing(host.SysctlPath(name), "not gathered")
}

// TrackSysctls makes SysctlReading call seen with each name it is asked for
// (nil stops it). It is for tests that hold checks to the parameters they
// declare; set it on a copy of shared facts, and do not use those facts
// from other goroutines meanwhile.
func (f *Facts) TrackSysctls(seen func(name string)) { f.sysctlSeen = seen }
