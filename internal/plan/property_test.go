package plan

import (
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/dbhost/dbhost/internal/check"
	"github.com/dbhost/dbhost/internal/engine"
	"github.com/dbhost/dbhost/internal/facts"
	"github.com/dbhost/dbhost/internal/fix"
	"github.com/dbhost/dbhost/internal/fixture"
)

// The host plan's promise, measured on every recorded host from the
// planned host's numbers rather than from the checks' verdicts: applied
// whole, the plan breaks nothing. The same measures taken on the fixes
// merged as `fix --out` merged them before the plan (each finding alone,
// the first of two values kept, no derived value recomputed) show what the
// plan prevents; TestPlanBreaksNoRecordedHost prints both.

// breakage kinds, as the issue counts them.
const (
	kindPool      = "huge page pool below the planned need"
	kindCommit    = "CommitLimit below the planned caches under strict overcommit"
	kindCaches    = "caches above 90% of the memory available"
	kindTwoValues = "a setting with two values"
)

// measure returns the kinds of breakage of the host g that items make of f.
func measure(f, g *facts.Facts, items []fix.Item) []string {
	var out []string
	if short := poolShort(f, g); short != "" {
		out = append(out, kindPool)
	}
	caches, inPool := plannedCaches(g)
	if room := memRoom(g); room > 0 && float64(caches) > 0.9*float64(room) {
		out = append(out, kindCaches)
	}
	if limit, strict := commitLimit(g); strict && limit < caches-inPool {
		out = append(out, kindCommit)
	}
	if len(twoValues(items)) > 0 {
		out = append(out, kindTwoValues)
	}
	return out
}

// setting reads an instance's setting as the planned host holds it.
func setting(in *facts.Instance, k string) string {
	if s, ok := in.Settings[k]; ok {
		return strings.Trim(strings.ToLower(s.Value), "'\"")
	}
	return ""
}

func partBytes(in *facts.Instance, key string) (uint64, bool) {
	for _, p := range in.Profile().Memory(in.Instance).Parts {
		if p.Key == key && p.Known {
			return p.Bytes, true
		}
	}
	return 0, false
}

// poolShort says which server would not start: the pages PostgreSQL with
// huge_pages=on (and MySQL with large_pages) need at their planned sizes,
// summed, against the planned pool. PostgreSQL's overhead beyond
// shared_buffers is taken from today's server (shared_memory_size minus
// shared_buffers), not from the model.
func poolShort(f, g *facts.Facts) string {
	pool, ok := g.Memory.Pool(0)
	if !ok || pool.SizeKB == 0 {
		return ""
	}
	page := pool.Bytes()
	var need int64
	var who []string
	for _, in := range trusted(g) {
		var b uint64
		switch in.Engine {
		case engine.Postgres:
			if setting(in, "huge_pages") != "on" {
				continue
			}
			sb, ok := partBytes(in, "shared_buffers")
			if !ok {
				continue
			}
			b = sb + pgOverhead(f, in)
		case engine.MySQL:
			if v := setting(in, "large_pages"); v != "on" && v != "1" {
				continue
			}
			b, _ = partBytes(in, "innodb_buffer_pool_size")
		default:
			continue
		}
		need += int64((b + page - 1) / page)
		who = append(who, in.Name())
	}
	if need > pool.Total {
		return fmt.Sprintf("%s need %d pages, the pool has %d", strings.Join(who, "+"), need, pool.Total)
	}
	return ""
}

// pgOverhead is today's shared memory beyond shared_buffers of the same
// server (by PID) on the observed host.
func pgOverhead(f *facts.Facts, planned *facts.Instance) uint64 {
	for _, in := range f.Instances {
		if in.PID != planned.PID || in.Engine != engine.Postgres {
			continue
		}
		sb, ok := partBytes(in, "shared_buffers")
		mb, err := strconv.ParseUint(setting(in, "shared_memory_size"), 10, 64)
		if ok && err == nil && mb<<20 > sb {
			return mb<<20 - sb
		}
	}
	return 0
}

// plannedCaches sums the main caches of the planned host's servers, and
// the part of them held in huge pages (not committed memory).
func plannedCaches(g *facts.Facts) (total, inPool uint64) {
	ram, _ := g.Memory.MemTotal()
	for _, in := range trusted(g) {
		limit, _ := in.Cgroup.MemoryLimit()
		for _, p := range in.Profile().Memory(in.Instance).Parts {
			if !p.Cache {
				continue
			}
			b := p.Bytes
			if p.Auto && p.AutoSize != nil && !p.Known {
				b, _ = p.AutoSize(ram, limit, 2)
			}
			if !p.Known && !p.Auto {
				continue
			}
			total += b
			if in.Engine == engine.Postgres && setting(in, "huge_pages") == "on" {
				inPool += b
			}
		}
	}
	return total, inPool
}

// memRoom is RAM, or the smallest cgroup limit of a server when one is set.
func memRoom(g *facts.Facts) uint64 {
	room, _ := g.Memory.MemTotal()
	for _, in := range trusted(g) {
		if l, ok := in.Cgroup.MemoryLimit(); ok && l < room {
			room = l
		}
	}
	return room
}

// commitLimit computes CommitLimit as the kernel does from the planned
// overcommit settings, and whether the planned mode is strict.
func commitLimit(g *facts.Facts) (uint64, bool) {
	if g.SysctlReading("vm.overcommit_memory").Value != "2" {
		return 0, false
	}
	ram, _ := g.Memory.MemTotal()
	var huge uint64
	for _, p := range g.Memory.HugePages {
		huge += uint64(p.Total) * p.Bytes()
	}
	if kb, _ := strconv.ParseUint(g.SysctlReading("vm.overcommit_kbytes").Value, 10, 64); kb > 0 {
		return g.Memory.SwapTotalBytes() + kb<<10, true
	}
	ratio, err := strconv.ParseUint(g.SysctlReading("vm.overcommit_ratio").Value, 10, 64)
	if err != nil {
		ratio = 50
	}
	return g.Memory.SwapTotalBytes() + (ram-min(ram, huge))*ratio/100, true
}

func trusted(f *facts.Facts) []*facts.Instance {
	t, _ := f.SplitTrust()
	return t
}

// twoValues lists the settings items give two values.
func twoValues(items []fix.Item) []string {
	vals := map[string]map[string]bool{}
	for _, it := range items {
		for s, v := range settingsOf(it.Fix) {
			if vals[s] == nil {
				vals[s] = map[string]bool{}
			}
			vals[s][v] = true
		}
	}
	var out []string
	for s, vs := range vals {
		if len(vs) > 1 {
			out = append(out, s)
		}
	}
	sort.Strings(out)
	return out
}

// naive is every failing finding's fix applied together as `fix --out`
// did before the host plan: each computed alone on today's host.
func naive(f *facts.Facts) []fix.Item {
	var items []fix.Item
	for _, fd := range check.Run(f, check.Selector{}) {
		if fixable(fd) {
			items = append(items, fix.Item{ID: fd.ID, Subject: fd.Subject, Fix: fd.Fix})
		}
	}
	return items
}

func recordedHosts(t *testing.T) []string {
	ms, err := filepath.Glob(filepath.Join(fixture.Dir(), "*.tar.gz"))
	if err != nil || len(ms) == 0 {
		t.Fatalf("no recorded hosts in %s: %v", fixture.Dir(), err)
	}
	var out []string
	for _, m := range ms {
		out = append(out, strings.TrimSuffix(filepath.Base(m), ".tar.gz"))
	}
	return out
}

// TestPlanBreaksNoRecordedHost is the property: on every recorded
// host the plan, applied whole, leaves no server short of huge pages, no
// cache beyond the memory, no allocation beyond CommitLimit, no setting
// with two values, and no check failing that it fixes or that passed; or
// it is refused, naming the checks. It logs the same measures for the
// fixes merged without a plan.
func TestPlanBreaksNoRecordedHost(t *testing.T) {
	hosts := recordedHosts(t)
	before, after := map[string][]string{}, map[string][]string{}
	var refused []string
	for _, name := range hosts {
		f := fixture.Facts(t, name)
		old := naive(f)
		g0, _ := Model(f, old)
		for _, k := range measure(f, g0, old) {
			before[k] = append(before[k], name)
		}
		hp := Make(f, check.Selector{})
		if hp.Refused() {
			var why []string
			for _, r := range hp.Refusals {
				why = append(why, r.ID+" "+r.Subject)
			}
			refused = append(refused, name+" ("+strings.Join(why, "; ")+")")
			continue
		}
		g, _ := Model(f, hp.Items)
		kinds := measure(f, g, hp.Items)
		for _, k := range kinds {
			after[k] = append(after[k], name)
		}
		if len(kinds) > 0 {
			t.Errorf("%s: the plan breaks the host: %s (pool: %s; two values: %v)", name, strings.Join(kinds, ", "),
				poolShort(f, g), twoValues(hp.Items))
		}
	}
	report := func(m map[string][]string) string {
		var b strings.Builder
		broken := map[string]bool{}
		for _, k := range []string{kindPool, kindCommit, kindCaches, kindTwoValues} {
			fmt.Fprintf(&b, "\n  %-62s %3d", k, len(m[k]))
			for _, h := range m[k] {
				broken[h] = true
			}
		}
		return fmt.Sprintf("hosts broken: %d of %d%s", len(broken), len(hosts), b.String())
	}
	t.Logf("without the host plan: %s", report(before))
	t.Logf("with the host plan: %s", report(after))
	t.Logf("refused plans: %d: %s", len(refused), strings.Join(refused, ", "))
	if os.Getenv("DBHOST_PLAN_TABLE") != "" {
		fmt.Printf("before: %s\nafter: %s\nrefused: %v\n", report(before), report(after), refused)
	}
}
