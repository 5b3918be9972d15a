package engine

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"

	"github.com/dbhost/dbhost/internal/host"
	"github.com/dbhost/dbhost/internal/textio"
)

// Profile is everything dbhost knows about one engine, or one product of an
// engine family (Valkey is a profile of the Redis engine): how to find and
// describe its servers, its names, accounts and units, what it needs from
// the host and how to count its queries. Each engine package registers one
// or more; checks, facts, mem and contention ask the instance's profile
// instead of switching on the engine. Base gives the neutral answers.
type Profile interface {
	Detector
	// Name is the profile's own name ("postgres", "valkey"); --engine
	// accepts it and Aliases.
	Name() string
	Aliases() []string
	// ServiceAccounts are the accounts packages run the server as, the
	// one to propose first.
	ServiceAccounts() []string
	// Units lists the systemd units distributions ship for the instance,
	// most specific first.
	Units(in *Instance) []string
	// UnitStarts decides whether a packaged unit, which the process does
	// not run under now, is the one that would start this instance;
	// mentions reports whether the unit's files name a path. decided is
	// false when the profile has no rule (the caller then looks for the
	// instance's configuration files in the unit).
	UnitStarts(in *Instance, unit string, mentions func(string) bool) (starts, decided bool)

	// Backlog is the accept queue the server asks listen(2) for.
	Backlog(in *Instance) Need
	// Descriptors is what the server itself needs as open files.
	Descriptors(in *Instance) Need
	// Tasks is the processes and threads the server runs at
	// max_connections.
	Tasks(in *Instance) Need
	// BindAdvice says how to bind the server to one address.
	BindAdvice(in *Instance) string
	// RootRisk says what running as root adds for this engine ("" none).
	RootRisk() string
	// KeepaliveOverride names a per-socket keepalive the server sets
	// ("" none).
	KeepaliveOverride(in *Instance) string
	// ReadAhead is the read-ahead the engine's data device wants.
	ReadAhead(in *Instance) ReadAhead
	// PageSize is the engine's data page in bytes (0: no pages on disk).
	PageSize(in *Instance) (int64, string)
	// MainCache is the engine's main cache and the size to propose under
	// a memory limit.
	MainCache(in *Instance, limit uint64) Cache
	// Memory is the memory the server is configured to use, setting by
	// setting, with each setting's limits.
	Memory(in *Instance) MemoryPlan
	// THP is what the instance wants of transparent huge pages on arch.
	THP(in *Instance, arch string) THPAdvice
	// OpenQueries opens a cumulative query counter over one connection.
	OpenQueries(ctx context.Context, h *host.Host, in *Instance, opts Options) (*QueryCounter, error)

	// DefaultPort is the TCP port the server listens on unless told
	// otherwise (0: none).
	DefaultPort() int
	// MainConfig is the configuration file an edit of the instance goes
	// to ("" unknown).
	MainConfig(in *Instance) string
	// ConfigSnippet renders settings as a file the server reads: where it
	// must go and its text.
	ConfigSnippet(s Snippet) (path, text string)
}

// Snippet is a set of settings for one instance's configuration.
type Snippet struct {
	// Instance names the instance; Dir is the directory its server reads
	// every file of ("" none), File its main configuration file.
	Instance, Dir, File string
	// Name is the file name stem dbhost's snippets use.
	Name string
	// Restart: a setting takes effect only after a restart.
	Restart bool
	Entries []SnippetEntry
	// Refuse, if set, is told of each entry left out because the
	// server's syntax cannot hold it safely, and why.
	Refuse func(e SnippetEntry, why string)
}

// SnippetEntry is one setting with the findings that ask for it.
type SnippetEntry struct {
	Key, Value string
	Tags       []string
}

// Input is a setting a Need was derived from.
type Input struct{ Name, Value, Source string }

// Need is an amount an instance asks of the host, with how it was derived.
// N 0 with a Why is "no fixed need" (the server adapts); Why "" means the
// engine has no rule.
type Need struct {
	N      uint64
	Why    string
	Inputs []Input
	// Short, if set, is what to add when the host gives less.
	Short string
	// Processes is how many processes may each hold N (PostgreSQL: one
	// per connection and auxiliary process); 0 means the server is one
	// process.
	Processes uint64
	// AtStart, if set, says what the server sizes from the amount only
	// when it starts: raising it for the running process does not make
	// the server use more until its next restart.
	AtStart string
	// Live, if set, says what makes the running server use a raised
	// amount without a restart.
	Live string
}

// ReadAhead is the largest read-ahead an engine's data device should have
// (KB 0: no limit) and why.
type ReadAhead struct {
	KB  int64
	Why string
}

// Cache is an engine's main memory cache: its size if known, the setting
// that holds it and a size to propose under a memory limit.
type Cache struct {
	Bytes    uint64
	Known    bool
	Key      string
	Proposal string
}

// THPAdvice is what an instance wants of transparent huge pages. Enabled
// and Defrag list the acceptable modes (nil: no wish); Why follows the
// instance's description ("wants THP off: ..."). UnknownWhy, when set, says
// why the wish cannot be known (the version is unknown).
type THPAdvice struct {
	Enabled, Defrag []string
	// PtesZero: khugepaged's max_ptes_none should be 0; OnlyIfAlways: the
	// defrag and max_ptes_none wishes matter only while enabled is always.
	PtesZero, OnlyIfAlways bool
	// Overcommit, when not 0, is the vm.overcommit_memory mode the
	// engine's documented THP setup sets alongside (MongoDB 8: 1).
	Overcommit      int
	Why, UnknownWhy string
}

// NormArch names an architecture as uname -m does (x86_64, aarch64,
// ppc64le, s390x), from either that or Go's name (amd64, arm64), which
// snapshots record.
func NormArch(a string) string {
	switch a {
	case "amd64":
		return "x86_64"
	case "arm64":
		return "aarch64"
	}
	return a
}

// QueryCounter reads a cumulative count of an instance's queries over one
// connection kept open between samples.
type QueryCounter struct {
	Read  func(ctx context.Context) (uint64, error)
	Close func()
	// Source names the counter; Via how dbhost connected; Note qualifies
	// the source.
	Source, Via, Note string
	// Transactions: the counter counts transactions, each one or more
	// statements.
	Transactions bool
	// Own holds the PIDs/TIDs serving dbhost's connection.
	Own []int
}

// Base answers every Profile question neutrally; a profile embeds it and
// overrides what its engine knows.
type Base struct{}

func (Base) Aliases() []string                                            { return nil }
func (Base) ServiceAccounts() []string                                    { return nil }
func (Base) Units(*Instance) []string                                     { return nil }
func (Base) UnitStarts(*Instance, string, func(string) bool) (bool, bool) { return false, false }
func (Base) Backlog(*Instance) Need                                       { return Need{} }
func (Base) Descriptors(*Instance) Need                                   { return Need{} }
func (Base) Tasks(*Instance) Need                                         { return Need{} }
func (Base) BindAdvice(*Instance) string                                  { return "Bind the server to its private address." }
func (Base) DefaultPort() int                                             { return 0 }
func (Base) RootRisk() string                                             { return "" }
func (Base) KeepaliveOverride(*Instance) string                           { return "" }
func (Base) ReadAhead(*Instance) ReadAhead                                { return ReadAhead{} }
func (Base) PageSize(*Instance) (int64, string)                           { return 0, "" }
func (Base) MainCache(*Instance, uint64) Cache                            { return Cache{} }
func (Base) THP(*Instance, string) THPAdvice                              { return THPAdvice{} }
func (Base) Memory(*Instance) MemoryPlan                                  { return MemoryPlan{} }

// MainConfig is the first configuration file the server reads.
func (Base) MainConfig(in *Instance) string {
	if len(in.ConfigFiles) > 0 {
		return in.ConfigFiles[0]
	}
	return ""
}

// ConfigSnippet: a file of "key value" lines next to the main
// configuration, for a person to merge.
func (Base) ConfigSnippet(s Snippet) (string, string) { return s.Merge(plainLine) }

// ConfigNamed returns the configuration file among the instance's whose
// name ends in suffix, else the first.
func ConfigNamed(in *Instance, suffix string) string {
	for _, f := range in.ConfigFiles {
		if strings.HasSuffix(f, suffix) {
			return f
		}
	}
	return Base{}.MainConfig(in)
}

// OpenQueries: the engine has no query counter.
func (Base) OpenQueries(_ context.Context, _ *host.Host, in *Instance, _ Options) (*QueryCounter, error) {
	return nil, fmt.Errorf("dbhost does not read query counts from %s", in.Flavor)
}

var (
	profilesMu sync.Mutex
	profiles   []Profile
)

// Register adds a profile; engine packages call it from init. A profile
// whose name or alias is taken is a programming error.
func Register(p Profile) {
	profilesMu.Lock()
	defer profilesMu.Unlock()
	for _, q := range profiles {
		for _, n := range append([]string{p.Name()}, p.Aliases()...) {
			if n == q.Name() || slices.Contains(q.Aliases(), n) {
				panic("engine: profile name " + n + " registered twice")
			}
		}
	}
	profiles = append(profiles, p)
}

// Profiles returns the registered profiles.
func Profiles() []Profile {
	profilesMu.Lock()
	defer profilesMu.Unlock()
	return append([]Profile(nil), profiles...)
}

// Profile is the instance's profile: the one that found it, else its
// engine's.
func (i *Instance) Profile() Profile {
	if i.profile != nil {
		return i.profile
	}
	return ProfileOf(i.Engine)
}

// ProfileOf is an engine's own profile: the one named after it, else the
// first registered for it, else Base.
func ProfileOf(e Engine) Profile {
	var first Profile
	for _, p := range Profiles() {
		if p.Engine() != e {
			continue
		}
		if p.Name() == string(e) {
			return p
		}
		if first == nil {
			first = p
		}
	}
	if first != nil {
		return first
	}
	return baseProfile{e: e}
}

// SetProfile records the profile that describes the instance.
func (i *Instance) SetProfile(p Profile) { i.profile = p }

// baseProfile stands for an engine no registered profile knows.
type baseProfile struct {
	e Engine
	Base
}

func (b baseProfile) Engine() Engine           { return b.e }
func (b baseProfile) Name() string             { return string(b.e) }
func (baseProfile) Match(Process, *Table) bool { return false }
func (baseProfile) Inspect(context.Context, *host.Host, Process, *Table, Options) (*Instance, error) {
	return nil, errors.New("no profile")
}

// Parse maps an engine's name or alias (any case) to the engine: the one
// parser of --engine for every command.
func Parse(s string) (Engine, error) {
	k := strings.ToLower(strings.TrimSpace(s))
	var names, alias []string
	for _, p := range Profiles() {
		if k == p.Name() || slices.Contains(p.Aliases(), k) {
			return p.Engine(), nil
		}
		if p.Name() == string(p.Engine()) {
			names = append(names, p.Name())
		} else {
			alias = append(alias, p.Name())
		}
		alias = append(alias, p.Aliases()...)
	}
	sort.Slice(names, func(a, b int) bool { return engineRank(Engine(names[a])) < engineRank(Engine(names[b])) })
	sort.Strings(alias)
	return "", fmt.Errorf("unknown engine %q (want %s, or an alias: %s)", s, textio.OrList(names), strings.Join(alias, ", "))
}

// Uint reads a whole-number setting (quotes allowed), or def and false.
func (i *Instance) Uint(name string, def uint64) (uint64, bool) {
	v := strings.Trim(strings.TrimSpace(i.SettingValue(name)), `'"`)
	if n, err := strconv.ParseUint(v, 10, 64); err == nil {
		return n, true
	}
	return def, false
}

// UintInput is the Input behind a Uint answer: the setting as found, or
// the default used, which is only an assumption when the configuration
// could not be read.
func (i *Instance) UintInput(name string, known bool, v uint64) Input {
	s, ok := i.Setting(name)
	if ok && known && s.Source != "default" {
		return Input{name, s.Value, s.Source}
	}
	if why := i.ConfigUnread(); why != "" {
		return Input{name, fmt.Sprintf("unknown (default %d assumed)", v), "the configuration was not read: " + why}
	}
	return Input{name, strconv.FormatUint(v, 10), "default (not found in the configuration)"}
}

// ConfigUnread says why an instance's configuration could not be read
// ("" when it was, or its settings came live): its "default" settings are
// then guesses, not observations.
func (i *Instance) ConfigUnread() string {
	switch {
	case i.SettingsSource == "live":
		return ""
	case i.Redis != nil && i.Redis.ConfigErr != "":
		return i.Redis.ConfigErr
	case i.Mongo != nil && i.Mongo.ConfigErr != "":
		return i.Mongo.ConfigErr
	}
	return ""
}

// UintNeed reads a whole-number setting a need is computed from: the
// larger of the running value and a different one a file sets (which the
// next start asks for again), with the term that explains it and its
// inputs.
func (i *Instance) UintNeed(name string, def uint64) (uint64, string, []Input) {
	v, ok := i.Uint(name, def)
	term, in := UintTerm(name, ok, v), []Input{i.UintInput(name, ok, v)}
	if cv, cs, cok := i.ConfiguredUint(name); cok && cv > v {
		term = fmt.Sprintf("%s %d (%s; the server runs with %d: it lowered it at start to fit its limits, or it was changed at runtime, and the next start asks for %d again)", name, cv, cs.Source, v, cv)
		return cv, term, append(in, Input{name + " (configured)", cs.Value, cs.Source})
	}
	return v, term, in
}

// UintTerm names a Uint answer for an explanation: "maxclients 10000",
// or "maxclients 10000 (default)" when the configuration does not set it.
func UintTerm(name string, known bool, v uint64) string {
	if known {
		return fmt.Sprintf("%s %d", name, v)
	}
	return fmt.Sprintf("%s %d (default)", name, v)
}

// DefaultReadAheadKB is the kernel's default read_ahead_kb.
const DefaultReadAheadKB = 128

// THPOffAdvice is the wish of servers that gain nothing from transparent
// huge pages (PostgreSQL, MySQL).
var THPOffAdvice = THPAdvice{
	Enabled: []string{"never"}, Defrag: []string{"never"}, PtesZero: true, OnlyIfAlways: true,
	Why: "wants THP off: it gets no benefit from transparent huge pages and suffers compaction stalls and memory bloat (use explicit huge pages instead)",
}
