// Package knob sets what an experiment arm changes — kernel settings,
// transparent and explicit huge pages, the queue of the disk under a data
// directory, PostgreSQL parameters, MySQL/MariaDB variables — so that every
// change is journaled before it is made and read back after it: a value the
// kernel or the server silently refused (fewer huge pages than asked, a
// parameter overridden on the server's command line) is an error naming the
// knob, the value wanted and the value got, never a trial run under the
// wrong conditions.
//
// Knob names:
//
//	vm.swappiness              any sysctl, dotted; a component that holds a
//	                           dot (eth0.100) is written with slashes instead:
//	                           net/ipv4/conf/eth0.100/rp_filter
//	thp.enabled, thp.defrag    /sys/kernel/mm/transparent_hugepage/
//	hugepages.2M, hugepages.1G explicit huge pages of a size (count);
//	                           "hugepages" means 2M
//	disk.scheduler             a queue attribute (scheduler, read_ahead_kb,
//	disk.read_ahead_kb         nr_requests, ...) of every whole device under
//	                           the data directory: partition → disk, dm/md
//	                           → members, loop → the backing file's device
//	pg.<parameter>             ALTER SYSTEM, then reload or restart as the
//	                           parameter's context requires
//	mysql.<variable>           SET GLOBAL; variables that are not dynamic go
//	                           to an option file and need a restart
//
// Every change is a change kind of internal/change, journaled before it is
// made and undone by the journal in this process or, after a crash, in a
// new one (change.Recover). This package checks names and values and
// plans; the writes and undos are the change layer's.
package knob

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"sync"

	"github.com/dbhost/dbhost/internal/change"
	"github.com/dbhost/dbhost/internal/engine"
	"github.com/dbhost/dbhost/internal/host"
	"github.com/dbhost/dbhost/internal/textio"
)

// Setting is one knob assignment of an arm, as written by users.
type Setting struct{ Name, Value string }

func (s Setting) String() string {
	v := s.Value
	if v == "" || strings.ContainsAny(v, " \t,'\"") {
		v = quote(v)
	}
	return s.Name + "=" + v
}

// quote puts a value in the quotes ParseArm reads back.
func quote(v string) string {
	if !strings.Contains(v, `"`) {
		return `"` + v + `"`
	}
	return `'` + v + `'`
}

// class is what kind of thing a knob changes.
type class int

const (
	sysctl class = iota
	thp
	hugepages
	disk
	pg
	mysql
)

var (
	sysctlName = textio.LazyRegexp(`^[A-Za-z0-9_][A-Za-z0-9_.:/@+-]*$`)
	pgName     = textio.LazyRegexp(`^[a-z_][a-z0-9_$]*(\.[a-z_][a-z0-9_$]*)?$`)
	mysqlName  = textio.LazyRegexp(`^[a-z_][a-z0-9_]*$`)
	diskAttr   = textio.LazyRegexp(`^[a-z][a-z0-9_]*$`)
	hugeSize   = textio.LazyRegexp(`^(?i)([0-9]+)\s*(k|kb|m|mb|g|gb)$`)
	armName    = textio.LazyRegexp(`^[A-Za-z0-9][A-Za-z0-9_.+-]*$`)
)

// canonical checks a knob name and returns its canonical spelling (lower
// case for THP, disk and database names; "hugepages" as "hugepages.2M")
// and class.
func canonical(name string) (string, class, error) {
	name = strings.TrimSpace(name)
	lower := strings.ToLower(name)
	switch {
	case name == "":
		return "", 0, errors.New("empty knob name")
	case lower == "thp.enabled" || lower == "thp.defrag":
		return lower, thp, nil
	case strings.HasPrefix(lower, "thp."):
		return "", 0, fmt.Errorf("%s: unknown THP knob (thp.enabled, thp.defrag)", name)
	case lower == "hugepages":
		return "hugepages.2M", hugepages, nil
	case strings.HasPrefix(lower, "hugepages."):
		kb, err := parseHugeSize(name[len("hugepages."):])
		if err != nil {
			return "", 0, fmt.Errorf("%s: %w", name, err)
		}
		return "hugepages." + hugeSizeName(kb), hugepages, nil
	case strings.HasPrefix(lower, "disk."):
		attr := lower[len("disk."):]
		if !diskAttr.MatchString(attr) {
			return "", 0, fmt.Errorf("%s: not a block queue attribute (disk.scheduler, disk.read_ahead_kb)", name)
		}
		return "disk." + attr, disk, nil
	case strings.HasPrefix(lower, "pg."):
		p := lower[len("pg."):]
		if !pgName.MatchString(p) {
			return "", 0, fmt.Errorf("%s: not a PostgreSQL parameter name", name)
		}
		return "pg." + p, pg, nil
	case strings.HasPrefix(lower, "mysql."):
		v := strings.ReplaceAll(lower[len("mysql."):], "-", "_")
		if !mysqlName.MatchString(v) {
			return "", 0, fmt.Errorf("%s: not a MySQL variable name", name)
		}
		return "mysql." + v, mysql, nil
	}
	if !sysctlName.MatchString(name) || !strings.ContainsAny(name, "./") {
		return "", 0, fmt.Errorf("%s: not a knob name (a sysctl such as vm.swappiness, thp.*, hugepages.*, disk.*, pg.*, mysql.*)", name)
	}
	for _, c := range strings.FieldsFunc(host.SysctlPath(name), func(r rune) bool { return r == '/' }) {
		if c == ".." || c == "." {
			return "", 0, fmt.Errorf("%s: not a sysctl name", name)
		}
	}
	return name, sysctl, nil
}

// parseHugeSize reads a huge page size ("2M", "1G", "2048kB") in kB.
func parseHugeSize(s string) (uint64, error) {
	m := hugeSize.FindStringSubmatch(strings.TrimSpace(s))
	if m == nil {
		return 0, fmt.Errorf("huge page size %q not understood (2M, 1G)", s)
	}
	n, err := strconv.ParseUint(m[1], 10, 32)
	if err != nil || n == 0 {
		return 0, fmt.Errorf("huge page size %q not understood (2M, 1G)", s)
	}
	switch strings.ToLower(m[2][:1]) {
	case "m":
		n <<= 10
	case "g":
		n <<= 20
	}
	return n, nil
}

// hugeSizeName writes a size in kB the way knob names do: 2M, 1G, 64K.
func hugeSizeName(kb uint64) string {
	switch {
	case kb%(1<<20) == 0:
		return strconv.FormatUint(kb>>20, 10) + "G"
	case kb%(1<<10) == 0:
		return strconv.FormatUint(kb>>10, 10) + "M"
	}
	return strconv.FormatUint(kb, 10) + "K"
}

// CanonicalName returns a knob name's canonical spelling ("hugepages" →
// "hugepages.2M", "pg.Work_Mem" → "pg.work_mem"), the form Applied.Values,
// Current and Fingerprint use as keys.
func CanonicalName(name string) (string, error) {
	n, _, err := canonical(name)
	return n, err
}

// Parse reads one "name=value" assignment. The value may be quoted with
// single or double quotes (needed for values with spaces or commas).
func Parse(s string) (Setting, error) {
	name, value, ok := strings.Cut(strings.TrimSpace(s), "=")
	if !ok {
		return Setting{}, fmt.Errorf("%q: not name=value", s)
	}
	value = strings.TrimSpace(value)
	if len(value) >= 2 && (value[0] == '"' || value[0] == '\'') && value[len(value)-1] == value[0] {
		value = value[1 : len(value)-1]
	}
	return newSetting(name, value)
}

func newSetting(name, value string) (Setting, error) {
	n, cl, err := canonical(name)
	if err != nil {
		return Setting{}, err
	}
	if strings.ContainsAny(value, "\n\r\x00") {
		return Setting{}, fmt.Errorf("%s: value holds a line break or NUL", n)
	}
	if value == "" && cl != pg && cl != mysql {
		return Setting{}, fmt.Errorf("%s: empty value", n)
	}
	return Setting{Name: n, Value: value}, nil
}

// ParseArm reads an arm: an optional "name:" and assignments separated by
// commas or spaces ("low: vm.swappiness=1, thp.enabled=never"). Without a
// name the arm is named after its settings. An arm without settings
// ("base:") keeps the host as it is. A knob may appear once per arm.
func ParseArm(s string) (name string, set []Setting, err error) {
	rest := strings.TrimSpace(s)
	if i := strings.IndexByte(rest, ':'); i >= 0 {
		if n := strings.TrimSpace(rest[:i]); armName.MatchString(n) {
			name, rest = n, rest[i+1:]
		}
	}
	seen := map[string]bool{}
	for {
		rest = strings.TrimLeft(rest, " \t,")
		if rest == "" {
			break
		}
		var k, v string
		k, v, rest, err = nextAssignment(rest)
		if err != nil {
			return "", nil, fmt.Errorf("arm %q: %w", s, err)
		}
		st, err := newSetting(k, v)
		if err != nil {
			return "", nil, fmt.Errorf("arm %q: %w", s, err)
		}
		if seen[st.Name] {
			return "", nil, fmt.Errorf("arm %q: %s set twice", s, st.Name)
		}
		seen[st.Name] = true
		set = append(set, st)
	}
	if name == "" {
		if len(set) == 0 {
			return "", nil, fmt.Errorf("arm %q: no name and no settings", s)
		}
		parts := make([]string, len(set))
		for i, st := range set {
			parts[i] = st.String()
		}
		name = strings.Join(parts, " ")
	}
	return name, set, nil
}

// nextAssignment scans "name = value" off the front of s; the value ends
// at a comma or white space unless quoted.
func nextAssignment(s string) (name, value, rest string, err error) {
	i := strings.IndexAny(s, "=, \t")
	if i < 0 {
		i = len(s)
	}
	after := strings.TrimLeft(s[i:], " \t")
	if i == 0 || after == "" || after[0] != '=' {
		return "", "", "", fmt.Errorf("%q: not name=value", s[:i])
	}
	name = s[:i]
	s = strings.TrimLeft(after[1:], " \t")
	if s != "" && (s[0] == '"' || s[0] == '\'') {
		end := strings.IndexByte(s[1:], s[0])
		if end < 0 {
			return "", "", "", fmt.Errorf("%s: unterminated quote", name)
		}
		value, rest = s[1:1+end], s[2+end:]
		if rest != "" && !strings.ContainsRune(", \t", rune(rest[0])) {
			return "", "", "", fmt.Errorf("%s: text after the closing quote", name)
		}
		return name, value, rest, nil
	}
	end := strings.IndexAny(s, ", \t")
	if end < 0 {
		end = len(s)
	}
	return name, s[:end], s[end:], nil
}

// Target is what the knobs apply to.
type Target struct {
	Engine  engine.Engine // "" when no database (kernel knobs only)
	DataDir string        // the database's data directory (for disk.* and pg.*)
	// PG or MySQL is how to connect (superuser) to the server of Engine.
	// An endpoint Locate has not resolved is resolved on the first
	// connection: knobs are set only on a server discovered on this host.
	PG    *engine.Endpoint
	MySQL *engine.Endpoint
	// Restart restarts the database server and waits until it accepts
	// connections; nil when dbhost may not restart it (then knobs that
	// need a restart are refused before anything changes, with a clear
	// error).
	Restart func(ctx context.Context) error
	// RestartArgv is how a new process (recovery) restarts it: argv and
	// OS user; empty when unknown. Stored in the journal.
	RestartArgv []string
	RestartUser string
	// RestartUnit is the systemd unit a new process restarts the server
	// with instead (journaled as a restart of the unit).
	RestartUnit string
}

// Applier applies knobs to one host and target through one change layer:
// kernel and sysfs values (change.Changer.Kernel), database settings on
// the engine profile's connection (Setting: ALTER SYSTEM and a reload,
// SET GLOBAL), MySQL's option file (File) and the restart an undo needs
// (RestartOnUndo).
type Applier struct {
	h *host.Host
	c *change.Changer
	t Target

	mu   sync.Mutex
	devs *dataDevices // the devices under DataDir, found once
	ep   *engine.Endpoint
	// restartParams are the parameters read only at start this Applier
	// changed (lower case): an in-process undo restarts for them.
	restartParams map[string]bool
}

// endpoint is the target's connection for engine e, located once.
func (a *Applier) endpoint(ctx context.Context, e engine.Engine) (engine.Endpoint, error) {
	t, what := a.t.PG, "PostgreSQL"
	if e == engine.MySQL {
		t, what = a.t.MySQL, "MySQL/MariaDB"
	}
	if a.t.Engine != e || t == nil {
		return engine.Endpoint{}, fmt.Errorf("the target is not a %s server", what)
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.ep != nil {
		return *a.ep, nil
	}
	ep := *t
	if !ep.Located() {
		var err error
		if ep, err = engine.Locate(ctx, a.h, ep); err != nil {
			return ep, err
		}
	}
	a.ep = &ep
	return ep, nil
}

// NewApplier returns an Applier. Changes go through c; h must be the live
// system to apply anything (Current and Fingerprint also read fixtures).
func NewApplier(h *host.Host, c *change.Changer, t Target) *Applier {
	a := &Applier{h: h, c: c, t: t}
	if t.Restart != nil {
		_, key := a.restarter()
		registerRestart(key, inprocRestart{restart: t.Restart, pending: a.pendingRestart})
	}
	return a
}

// Applied is what Apply set, as read back.
type Applied struct {
	// Values maps each knob's canonical name to its value read back.
	Values map[string]string
	// Restarted says the database server was restarted.
	Restarted bool
}

// item is one setting resolved against this host and target.
type item struct {
	Setting
	class class
	// Kernel knobs: the files to write, the value each must read back,
	// (disk.*) the device of each, and the value each read back.
	files, wants, devs []string
	got                []string
	// Database knobs.
	pg        *pgParam
	mysql     *myVar
	mysqlWarn string // warnings of the SET GLOBAL
}

// plan is a checked set of settings: nothing has changed yet.
type plan struct {
	items   []*item
	restart bool // a database knob needs a restart
}

// Check validates names and values and that every knob can be applied on
// this host and target (the file exists and is writable, the parameter
// exists, a restart is available where needed) — before anything changes.
// It reports every problem found, not only the first.
func (a *Applier) Check(ctx context.Context, set []Setting) error {
	_, err := a.plan(ctx, set)
	return err
}

func (a *Applier) plan(ctx context.Context, set []Setting) (*plan, error) {
	if !a.h.System() {
		return nil, errors.New("knobs can only be changed on the live system (not a snapshot or another root)")
	}
	p := &plan{}
	var errs []error
	seen := map[string]bool{}
	var pgSet, mySet []*item
	for _, s := range set {
		st, err := newSetting(s.Name, strings.TrimSpace(s.Value))
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if seen[st.Name] {
			errs = append(errs, fmt.Errorf("%s set twice", st.Name))
			continue
		}
		seen[st.Name] = true
		_, cl, _ := canonical(st.Name)
		it := &item{Setting: st, class: cl}
		switch cl {
		case pg:
			pgSet = append(pgSet, it)
		case mysql:
			mySet = append(mySet, it)
		default:
			if err := a.planKernel(it); err != nil {
				errs = append(errs, err)
				continue
			}
		}
		p.items = append(p.items, it)
	}
	if err := a.checkHugeTotal(p.items); err != nil {
		errs = append(errs, err)
	}
	if len(pgSet) > 0 {
		r, err := a.planPG(ctx, pgSet)
		errs = append(errs, err)
		p.restart = p.restart || r
	}
	if len(mySet) > 0 {
		r, err := a.planMySQL(ctx, mySet)
		errs = append(errs, err)
		p.restart = p.restart || r
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return p, nil
}

// Current reads the present value of each named knob (for filling arms
// that do not mention a knob, and for fingerprints), by canonical name.
// A disk.* knob whose devices differ reads "vda=mq-deadline loop0=none".
func (a *Applier) Current(ctx context.Context, names []string) (map[string]string, error) {
	out := map[string]string{}
	var errs []error
	var pgNames, myNames []string
	for _, n := range names {
		name, cl, err := canonical(n)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		switch cl {
		case pg:
			pgNames = append(pgNames, name)
		case mysql:
			myNames = append(myNames, name)
		default:
			v, err := a.currentKernel(name, cl)
			if err != nil {
				errs = append(errs, err)
				continue
			}
			out[name] = v
		}
	}
	if len(pgNames) > 0 {
		vals, err := a.currentPG(ctx, pgNames)
		errs = append(errs, err)
		for k, v := range vals {
			out[k] = v
		}
	}
	if len(myNames) > 0 {
		vals, err := a.currentMySQL(ctx, myNames)
		errs = append(errs, err)
		for k, v := range vals {
			out[k] = v
		}
	}
	return out, errors.Join(errs...)
}

// Apply journals and sets the knobs, restarts the server once if any knob
// needs it (or force is true), then reads every knob back; a value the
// kernel or server silently refused (e.g. fewer huge pages allocated) is an
// error naming knob, wanted and got. Nothing changes when Check fails. What
// was changed before an error stays journaled: the caller's j.Restore puts
// it back.
//
// Order: PostgreSQL's parameters (ALTER SYSTEM and a reload, after a
// journaled restart-on-undo when one is read only at start) and MySQL's
// option file, then the kernel knobs (huge page pools that shrink first,
// so that the memory they free can back the pools that grow), the
// restart, MySQL's SET GLOBAL (a restart would lose it), then the
// read-back. The journal undoes in reverse: kernel knobs first, then the
// database's configuration, then its restart — so a server that used huge
// pages lets go of them after their pool was shrunk, and comes back
// without them instead of taking them again.
func (a *Applier) Apply(ctx context.Context, set []Setting, force bool) (Applied, error) {
	res := Applied{Values: map[string]string{}}
	if force && a.t.Restart == nil {
		return res, errors.New("a restart was asked for, but this database server may not be restarted (no restart method)")
	}
	if force && a.t.Engine == "" {
		return res, errors.New("a restart was asked for, but there is no database server")
	}
	p, err := a.plan(ctx, set)
	if err != nil {
		return res, err
	}
	c := changes{kernel: a.kernelOrder(p.items), restart: p.restart || force}
	for _, it := range p.items {
		switch it.class {
		case pg:
			c.pg = append(c.pg, it)
		case mysql:
			c.mysql = append(c.mysql, it)
		}
	}
	if err := a.change(ctx, c, &res); err != nil {
		return res, err
	}
	return res, a.readBack(ctx, c, res.Values)
}

// changes are a plan's items in the order Apply makes them.
type changes struct {
	kernel, pg, mysql []*item
	restart           bool
}

// change makes the changes in Apply's order.
func (a *Applier) change(ctx context.Context, c changes, res *Applied) error {
	if len(c.pg) > 0 {
		if err := a.applyPG(ctx, c.pg); err != nil {
			return err
		}
	}
	if len(c.mysql) > 0 {
		if err := a.applyMySQLFile(ctx, c.mysql); err != nil {
			return err
		}
	}
	for _, it := range c.kernel {
		it.got = make([]string, len(it.files))
		for i, f := range it.files {
			got, err := a.c.Kernel(f, it.wants[i])
			if err != nil {
				return fmt.Errorf("%s: writing %q to %s: %w", it.Name, it.wants[i], f, explainWrite(err))
			}
			it.got[i] = got
		}
	}
	if c.restart {
		if err := a.t.Restart(ctx); err != nil {
			return fmt.Errorf("restarting the database server: %w", err)
		}
		res.Restarted = true
		// The server is a new process: locate it again before the
		// settings connection names it.
		a.mu.Lock()
		a.ep = nil
		a.mu.Unlock()
		// A server that let go of huge pages when it stopped (or took
		// them when it started) moved the pools: read them again.
		if err := a.reread(c.kernel); err != nil {
			return err
		}
	}
	if len(c.mysql) > 0 {
		if err := a.applyMySQLGlobal(ctx, c.mysql); err != nil {
			return err
		}
	}
	return nil
}

// readBack reads every changed knob back into values; what differs from
// the value asked for is an error.
func (a *Applier) readBack(ctx context.Context, c changes, values map[string]string) error {
	var errs []error
	for _, it := range c.kernel {
		v, err := kernelResult(it)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		values[it.Name] = v
	}
	for _, db := range []struct {
		items []*item
		read  func(context.Context, []*item) (map[string]string, error)
	}{{c.pg, a.readBackPG}, {c.mysql, a.readBackMySQL}} {
		if len(db.items) == 0 {
			continue
		}
		vals, err := db.read(ctx, db.items)
		errs = append(errs, err)
		for k, v := range vals {
			values[k] = v
		}
	}
	return errors.Join(errs...)
}

// sortedKeys returns a map's keys in order.
func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
