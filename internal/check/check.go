// Package check holds dbhost's check catalog. A check is a pure function of
// the gathered facts: it looks at one practice (vm.swappiness, the I/O
// scheduler of a data device, a database's open-files limit) and returns a
// verdict per subject with evidence, reason and fix. Checks register
// themselves from init, one file per domain, one function per check.
package check

import (
	"fmt"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/dbhost/dbhost/internal/engine"
	"github.com/dbhost/dbhost/internal/facts"
	"github.com/dbhost/dbhost/internal/fix"
	"github.com/dbhost/dbhost/internal/host"
	"github.com/dbhost/dbhost/internal/termsafe"
)

// Severity ranks how much a failed check matters.
type Severity int

// Severities, lowest first.
const (
	Info Severity = iota + 1
	Warning
	Critical
)

func (s Severity) String() string {
	switch s {
	case Info:
		return "info"
	case Warning:
		return "warning"
	case Critical:
		return "critical"
	}
	return "none"
}

// MarshalText writes the severity's name.
func (s Severity) MarshalText() ([]byte, error) { return []byte(s.String()), nil }

// UnmarshalText reads a severity name.
func (s *Severity) UnmarshalText(b []byte) error {
	v, err := ParseSeverity(string(b))
	*s = v
	return err
}

// ParseSeverity reads "info", "warning" or "critical" ("none" never fails).
func ParseSeverity(s string) (Severity, error) {
	switch strings.ToLower(s) {
	case "info":
		return Info, nil
	case "warning", "warn":
		return Warning, nil
	case "critical", "crit":
		return Critical, nil
	case "none":
		return Critical + 1, nil
	}
	return 0, fmt.Errorf("unknown severity %q (want info, warning, critical or none)", s)
}

// Status is a check's verdict for one subject.
type Status string

// Verdicts. Unknown always carries the reason it could not judge.
const (
	Pass    Status = "pass"
	Fail    Status = "fail"
	Unknown Status = "unknown"
)

// Evidence is one observed value and where it was observed.
type Evidence struct {
	Key    string `json:"key"`
	Value  string `json:"value"`
	Source string `json:"source,omitempty"`
}

// Result is a check's verdict on one subject.
type Result struct {
	// Subject: "host", "device:vda", "mount:/var/lib/mysql",
	// "postgres:5432".
	Subject  string
	Status   Status
	Evidence []Evidence
	// Reason explains the verdict: why it matters, with the measured effect
	// where one is known; for Unknown, why it could not be judged.
	Reason string
	Fix    *fix.Fix
	// Severity, when set, overrides the check's severity for this result:
	// one practice can be advice in one case and an outage in another
	// (huge_pages=on without the pages to restart is critical).
	Severity Severity
}

// Check is one entry of the catalog.
type Check struct {
	ID string
	// Title is the desired state ("The host has some swap"): what the
	// catalog lists and a passing finding shows.
	Title string
	// Problem is the failing state in the same words ("The host has no
	// swap"): what a failing finding shows, so that it reads as the problem.
	Problem  string
	Severity Severity
	// AppliesTo names the engines or conditions the check judges: "host",
	// "postgres", "mysql", "mongodb", "redis", "galera", "numa", "nfs",
	// "zfs", "container", "tuned", "selinux".
	AppliesTo []string
	// Doc explains what the check looks at and why, for `dbhost checks`
	// and docs/checks.md.
	Doc  string
	Refs []string
	// Sysctls names the kernel parameters Run reads (f.SysctlReading);
	// GatherOptions has the facts gather them. A name read but not declared
	// reads as "not gathered" (TestSysctlsDeclared catches it).
	Sysctls []string
	// AllSysctls: Run reads every gathered kernel parameter, whoever
	// declared it (sysctl.drift compares each with its next-boot value).
	// Its own Sysctls are then parameters it alone wants gathered.
	AllSysctls bool
	// Run judges the facts. It returns no result when the check does not
	// apply (no such engine, no such device).
	Run func(f *facts.Facts) []Result
}

var (
	mu sync.Mutex
	// registered is the catalog in registration order; byID indexes it,
	// built on first use rather than in every command's start-up.
	registered []*Check
	byID       map[string]*Check
)

// Register adds a check to the catalog. A malformed entry is a programming
// error and panics at start-up; a duplicate ID, when the catalog is first
// read.
func Register(c Check) {
	mu.Lock()
	defer mu.Unlock()
	if c.ID == "" || c.Title == "" || c.Problem == "" || c.Doc == "" || c.Run == nil || c.Severity == 0 || len(c.AppliesTo) == 0 {
		panic("check: incomplete registration of " + c.ID)
	}
	for _, n := range c.Sysctls {
		if n == "" || strings.ContainsAny(n, "*/ ") {
			panic("check: " + c.ID + " declares kernel parameter " + strconv.Quote(n) + " (want a dotted name)")
		}
	}
	registered = append(registered, &c)
	byID = nil
}

// catalog is the checks by ID. The caller holds mu.
func catalog() map[string]*Check {
	if byID == nil {
		byID = make(map[string]*Check, len(registered))
		for _, c := range registered {
			if _, dup := byID[c.ID]; dup {
				panic("check: duplicate ID " + c.ID)
			}
			byID[c.ID] = c
		}
	}
	return byID
}

// Sysctls lists, sorted, the kernel parameters the catalog's checks declare:
// what the facts must gather (GatherOptions) for them to be judged.
func Sysctls() []string {
	mu.Lock()
	defer mu.Unlock()
	var out []string
	for _, c := range catalog() {
		out = append(out, c.Sysctls...)
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// GatherOptions are the facts options an audit of the catalog gathers with:
// the engines' options and every kernel parameter a check declares.
func GatherOptions(e engine.Options) facts.Options {
	return facts.Options{Engine: e, Sysctls: Sysctls()}
}

// All returns the catalog sorted by ID.
func All() []*Check {
	mu.Lock()
	defer mu.Unlock()
	cat := catalog()
	out := make([]*Check, 0, len(cat))
	for _, c := range cat {
		out = append(out, c)
	}
	sort.Slice(out, func(a, b int) bool { return out[a].ID < out[b].ID })
	return out
}

// Lookup finds a check by ID.
func Lookup(id string) (*Check, bool) {
	mu.Lock()
	defer mu.Unlock()
	c, ok := catalog()[id]
	return c, ok
}

// Finding is a Result together with its check's identity, as reported.
type Finding struct {
	ID    string `json:"id"`
	Title string `json:"title"`
	// Problem is the check's wording of the failing state (Check.Problem),
	// what a report shows beside a failing finding instead of Title.
	Problem  string     `json:"problem"`
	Severity Severity   `json:"severity"`
	Subject  string     `json:"subject"`
	Status   Status     `json:"status"`
	Evidence []Evidence `json:"evidence"`
	Reason   string     `json:"reason"`
	Fix      *fix.Fix   `json:"fix,omitempty"`
	Refs     []string   `json:"refs,omitempty"`
	// Untrusted: the subject is an instance dbhost does not trust; the
	// finding has advice, never a fix (see engine.Trust).
	Untrusted bool `json:"untrusted,omitempty"`
	// Waiver: the finding is accepted on this host (internal/waiver); its
	// status stays what the check found.
	Waiver *Waiver `json:"waiver,omitempty"`
}

// Waiver is an operator's acceptance of one finding: why, until when, and
// where it was written.
type Waiver struct {
	Reason  string    `json:"reason"`
	Expires time.Time `json:"expires,omitzero"`
	Source  string    `json:"source,omitempty"`
}

// Selector picks checks by ID or domain prefix ("mem", "storage.nfs").
type Selector struct {
	Only []string
	Skip []string
}

// Match reports whether a check ID is selected.
func (s Selector) Match(id string) bool {
	if len(s.Only) > 0 && !matchAny(id, s.Only) {
		return false
	}
	return !matchAny(id, s.Skip)
}

func matchAny(id string, pats []string) bool {
	for _, p := range pats {
		p = strings.TrimSuffix(strings.TrimSpace(p), ".*")
		if p != "" && (id == p || strings.HasPrefix(id, p+".")) {
			return true
		}
	}
	return false
}

// Run evaluates the selected checks. A check that panics yields an unknown
// finding instead of taking the audit down. A failing finding carries its
// fix as the check gave it; RenderFixes adds the commands and files.
//
// The host and its trusted servers are judged as if no untrusted instance
// ran: what such an instance claims (its settings, ports, limits, memory)
// must not move a host-wide value or another server's fix. Each untrusted
// instance is then judged beside the trusted servers, and only the findings
// about it are kept, with advice in place of a fix.
func Run(f *facts.Facts, sel Selector) []Finding {
	trusted, untrusted := f.SplitTrust()
	base := f
	if len(untrusted) > 0 {
		base = f.WithInstances(trusted)
	}
	out := runSelected(base, sel, nil)
	for _, u := range untrusted {
		view := f.WithInstances(append(slices.Clone(trusted), u))
		name := u.Name()
		for _, fd := range runSelected(view, sel, func(subject string) bool { return subject == name }) {
			fd.Untrusted = true
			if fd.Fix != nil {
				fd.Fix = untrustedAdvice(u, fd.Fix)
			}
			out = append(out, fd)
		}
	}
	Sort(out)
	return out
}

// UntrustedNote says, in one line, which failing findings get no fix
// because their instance is not trusted ("" when none).
func UntrustedNote(fds []Finding) string {
	n, names := 0, map[string]bool{}
	for _, fd := range fds {
		if fd.Untrusted && fd.Status == Fail {
			n++
			names[fd.Subject] = true
		}
	}
	if n == 0 {
		return ""
	}
	list := make([]string, 0, len(names))
	for k := range names {
		list = append(list, k)
	}
	sort.Strings(list)
	return fmt.Sprintf("%d failing findings about untrusted instances (%s) get no fix: dbhost writes, sets and runs nothing for an instance it does not trust (dbhost audit says why; --trust-server vouches for a server)", n, strings.Join(list, ", "))
}

// runSelected runs the selected checks on f and keeps the findings whose
// subject keep accepts (all when keep is nil).
func runSelected(f *facts.Facts, sel Selector, keep func(subject string) bool) []Finding {
	var out []Finding
	for _, c := range All() {
		if !sel.Match(c.ID) {
			continue
		}
		for _, r := range runOne(c, f) {
			if keep != nil && !keep(r.Subject) {
				continue
			}
			fd := Finding{ID: c.ID, Title: c.Title, Problem: c.Problem, Severity: c.Severity, Subject: r.Subject,
				Status: r.Status, Evidence: r.Evidence, Reason: r.Reason, Refs: c.Refs}
			if r.Severity != 0 {
				fd.Severity = r.Severity
			}
			if fd.Evidence == nil {
				fd.Evidence = []Evidence{}
			}
			if r.Status == Fail && !r.Fix.Empty() {
				fd.Fix = r.Fix
			}
			out = append(out, fd)
		}
	}
	return out
}

// untrustedAdvice replaces the fix of a finding about an untrusted instance
// with advice: nothing to write, set or run, and no text taken from it but
// its printable name.
func untrustedAdvice(u *facts.Instance, fx *fix.Fix) *fix.Fix {
	return &fix.Fix{
		Summary: "No fix: " + u.Name() + " is not a trusted server",
		Manual: "dbhost writes, sets and runs nothing for an instance it does not trust (" + termsafe.Line(u.Trust.Why) +
			"). If it is a server you run, vouch for it with --trust-server and its data directory, or fix it by hand: " + termsafe.Line(fx.Summary) + ".",
	}
}

// RenderFixes completes each fix of findings (from Run) for showing it: the
// commands that apply it now (Runtime) and its persistent files alone
// (Files). Call it once: the commands are derived from the fix as the
// check gave it. `dbhost fix` does not need it, it renders all fixes
// together.
func RenderFixes(fds []Finding, fc fix.Context) {
	for i := range fds {
		fd := &fds[i]
		if fd.Fix == nil {
			continue
		}
		// A copy: the check's fix may be shared, and judging stays
		// repeatable on the same facts.
		fd.Fix = fix.Complete(fd.Fix, fc, fd.ID, fd.Subject)
	}
}

func runOne(c *Check, f *facts.Facts) (res []Result) {
	defer func() {
		if p := recover(); p != nil {
			res = []Result{{Subject: "host", Status: Unknown, Reason: fmt.Sprintf("internal error in check: %v", p)}}
		}
	}()
	return c.Run(f)
}

// Headline is how the finding reads in a report: the problem when it
// fails, the check's title (the desired state) otherwise.
func (fd Finding) Headline() string {
	if fd.Status == Fail && fd.Problem != "" {
		return fd.Problem
	}
	return fd.Title
}

// Sort orders findings by severity (highest first), status, ID, subject.
func Sort(fs []Finding) {
	rank := map[Status]int{Fail: 0, Unknown: 1, Pass: 2}
	sort.SliceStable(fs, func(a, b int) bool {
		x, y := fs[a], fs[b]
		if rank[x.Status] != rank[y.Status] {
			return rank[x.Status] < rank[y.Status]
		}
		if x.Severity != y.Severity {
			return x.Severity > y.Severity
		}
		if x.ID != y.ID {
			return x.ID < y.ID
		}
		return x.Subject < y.Subject
	})
}

// Helpers that keep check functions short.

// Ev builds an evidence entry.
func Ev(key, value, source string) Evidence { return Evidence{Key: key, Value: value, Source: source} }

// EvReading turns a Reading into evidence.
func EvReading(key string, r host.Reading) Evidence {
	v := r.Value
	if !r.OK() {
		v = "unreadable: " + r.Err
	}
	return Evidence{Key: key, Value: v, Source: r.Source}
}

// PassR, FailR and UnknownR build results.
func PassR(subject, reason string, ev ...Evidence) Result {
	return Result{Subject: subject, Status: Pass, Reason: reason, Evidence: ev}
}

// FailR builds a failing result with its fix.
func FailR(subject, reason string, fx *fix.Fix, ev ...Evidence) Result {
	return Result{Subject: subject, Status: Fail, Reason: reason, Fix: fx, Evidence: ev}
}

// UnknownR builds an unknown result; why must say what was missing.
func UnknownR(subject, why string, ev ...Evidence) Result {
	return Result{Subject: subject, Status: Unknown, Reason: why, Evidence: ev}
}

// SubjectHost is the subject of host-wide checks.
const SubjectHost = "host"

// eachOf judges every instance of an engine with judge.
func eachOf(f *facts.Facts, e engine.Engine, judge func(*facts.Facts, *facts.Instance) Result) []Result {
	var out []Result
	for _, in := range f.ByEngine(e) {
		out = append(out, judge(f, in))
	}
	return out
}
