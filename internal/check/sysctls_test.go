package check_test

import (
	"fmt"
	"reflect"
	"sort"
	"testing"

	"github.com/dbhost/dbhost/internal/check"
	"github.com/dbhost/dbhost/internal/facts"
	"github.com/dbhost/dbhost/internal/fixture"
	"github.com/dbhost/dbhost/internal/host"
)

// judgedFacts is every recorded host, each also with every kernel parameter
// unreadable, plus every table case's mutated copy of one: the table cases
// reach the branches (a swappiness of 60, huge pages in use, overcommit
// strict) where checks read further parameters, the unreadable copies the
// fallbacks.
func judgedFacts(t *testing.T) map[string]*facts.Facts {
	t.Helper()
	out := map[string]*facts.Facts{}
	for _, name := range fixture.Names(t) {
		f := fixture.Facts(t, name)
		out[name] = f
		unreadable := *f
		unreadable.Sysctl = map[string]host.Reading{}
		for n, r := range f.Sysctl {
			unreadable.Sysctl[n] = host.Missing(r.Source, "permission denied")
		}
		out[name+" with sysctls unreadable"] = &unreadable
	}
	for _, c := range tables {
		if c.mutate == nil {
			continue
		}
		f := cloneFacts(t, c.base)
		c.mutate(f)
		out[c.base+" for "+c.id+"/"+c.name] = f
	}
	return out
}

// sysctlsRead runs c on a shallow copy of f (the recorded hosts' facts are
// shared) and returns its results and the kernel parameters it asked for.
func sysctlsRead(c *check.Check, f *facts.Facts) (res []check.Result, read map[string]bool) {
	cp := *f
	read = map[string]bool{}
	cp.TrackSysctls(func(name string) { read[name] = true })
	defer func() {
		if p := recover(); p != nil {
			res = []check.Result{{Status: check.Unknown, Reason: fmt.Sprint("panic: ", p)}}
		}
	}()
	return c.Run(&cp), read
}

// onlyDeclared is f with only the kernel parameters c declares gathered.
func onlyDeclared(c *check.Check, f *facts.Facts) *facts.Facts {
	cp := *f
	cp.Sysctl = map[string]host.Reading{}
	for _, n := range c.Sysctls {
		if r, ok := f.Sysctl[n]; ok {
			cp.Sysctl[n] = r
		}
	}
	return &cp
}

// TestSysctlsDeclared holds each check to the kernel parameters it declares
// (Check.Sysctls), which are all that is gathered for it: it runs every
// check on every recorded host and table case and fails for each parameter
// a Run reads through the facts without declaring it. A check that reads
// the Sysctl map directly is caught too: given only its declared
// parameters, it must judge exactly as with all of them.
func TestSysctlsDeclared(t *testing.T) {
	all := judgedFacts(t)
	names := make([]string, 0, len(all))
	for n := range all {
		names = append(names, n)
	}
	sort.Strings(names)
	type key struct{ id, sysctl string }
	undeclared := map[key]string{}
	reads := 0
	for _, c := range check.All() {
		declared := map[string]bool{}
		for _, n := range c.Sysctls {
			declared[n] = true
		}
		unread := map[string]bool{}
		if !c.AllSysctls {
			for _, n := range c.Sysctls {
				unread[n] = true
			}
		}
		reported := false
		for _, name := range names {
			f := all[name]
			res, read := sysctlsRead(c, f)
			reads += len(read)
			for n := range read {
				delete(unread, n)
				k := key{c.ID, n}
				if _, seen := undeclared[k]; !declared[n] && !c.AllSysctls && !seen {
					undeclared[k] = name
				}
			}
			if c.AllSysctls || reported {
				continue
			}
			if only, _ := sysctlsRead(c, onlyDeclared(c, f)); !reflect.DeepEqual(only, res) {
				t.Errorf("check %s judges %s differently when only its declared sysctls %v are gathered: does it read f.Sysctl directly?", c.ID, name, c.Sysctls)
				reported = true
			}
		}
		// A stale declaration gathers for nobody; a read no input reaches
		// needs a table case.
		for _, n := range sortedKeys(unread) {
			t.Errorf("check %s declares sysctl %s but read it on no recorded host or table case", c.ID, n)
		}
	}
	keys := make([]key, 0, len(undeclared))
	for k := range undeclared {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(a, b int) bool { return keys[a].id+" "+keys[a].sysctl < keys[b].id+" "+keys[b].sysctl })
	for _, k := range keys {
		t.Errorf("check %s read sysctl %s without declaring it (first on %s)", k.id, k.sysctl, undeclared[k])
	}
	// The instrument itself: the catalog reads kernel parameters.
	if reads == 0 {
		t.Error("no check read a kernel parameter: is SysctlReading still tracked?")
	}
	t.Logf("%d checks on %d recorded hosts and table cases", len(check.All()), len(names))
}

// TestSysctlsGatheredForSomeone: gathered with GatherOptions, the facts hold
// exactly the union of what the checks declare (facts itself reads none), so
// nothing is gathered (and recorded by collect) for nobody, and nothing a
// check declares is missing. Other consumers name theirs in their own calls
// (experiment.HostFacts: vm.dirty_bytes and vm.dirty_background_bytes).
func TestSysctlsGatheredForSomeone(t *testing.T) {
	declared := map[string]bool{}
	for _, c := range check.All() {
		for _, n := range c.Sysctls {
			declared[n] = true
		}
	}
	gathered := fixture.Facts(t, "baseline").SysctlNames()
	if !reflect.DeepEqual(gathered, check.Sysctls()) {
		t.Errorf("gathered %v, check.Sysctls %v", gathered, check.Sysctls())
	}
	for _, n := range gathered {
		if !declared[n] {
			t.Errorf("sysctl %s is gathered, but no check declares it", n)
		}
		delete(declared, n)
	}
	for n := range declared {
		t.Errorf("sysctl %s is declared, but not gathered", n)
	}
	if len(gathered) == 0 {
		t.Error("no kernel parameter is gathered")
	}
}

func sortedKeys(m map[string]bool) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
