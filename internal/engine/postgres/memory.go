package postgres

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/dbhost/dbhost/internal/engine"
)

// Limits PostgreSQL enforces at startup (guc_tables.c): a value below the
// minimum stops the server from starting.
const (
	minSharedBuffers = 16 * 8 << 10 // 16 blocks
	maxSharedBuffers = (1<<30 - 1) * 8 << 10
	minWorkMem       = 64 << 10
	maxWorkMem       = (1<<31 - 1) << 10
	minMaintWorkMem  = 1 << 20
	minCacheSize     = 8 << 10
	// pgtune's cap for maintenance_work_mem: more rarely helps.
	maxMaintWorkMem = 2 << 30
)

// workMemFactor is how many sort or hash operations one connection is
// assumed to run at once: the planner gives each of them work_mem (hash
// tables hash_mem_multiplier times as much), and pgtune sizes work_mem for
// three per connection.
const workMemFactor = 3

// Memory: shared_buffers (the main cache), maintenance_work_mem for every
// autovacuum worker, work_mem for each connection's sorts and hashes, and
// effective_cache_size, the planner's estimate of the cache.
func (detector) Memory(in *engine.Instance) engine.MemoryPlan {
	d := defaultsFor(in.Major())
	sb := memPart(in, "shared_buffers", d, minSharedBuffers, maxSharedBuffers, 8<<10)
	sb.Cache = true
	maint := memPart(in, "maintenance_work_mem", d, minMaintWorkMem, maxMaintWorkMem, 1<<10)
	workers, known := in.Uint("autovacuum_max_workers", 3)
	maint.Times = workers
	maint.Why = fmt.Sprintf("each of the %s autovacuum workers may use it", inputText(in.UintInput("autovacuum_max_workers", known, workers)))
	if av := memPart(in, "autovacuum_work_mem", map[string]string{"autovacuum_work_mem": "-1"}, minMaintWorkMem, maxMaintWorkMem, 1<<10); av.Known {
		av.Times, av.Why = workers, maint.Why
		maint = av
	}
	wm := memPart(in, "work_mem", d, minWorkMem, maxWorkMem, 1<<10)
	wm.PerConn = true
	ecs := memPart(in, "effective_cache_size", d, minCacheSize, maxSharedBuffers, 8<<10)
	ecs.Hint = true
	conns, cknown := in.Uint("max_connections", 100)
	plan := engine.MemoryPlan{
		Parts: []engine.MemPart{sb, maint, wm, ecs},
		Conns: in.UintInput("max_connections", cknown, conns), N: conns,
		Factor:    workMemFactor,
		FactorWhy: "each connection may run several sorts and hashes at once, each allowed work_mem (hashes hash_mem_multiplier times it); pgtune assumes three",
	}
	return plan.Unknowable(engine.FilesGap(in))
}

// memPart reads a memory setting in bytes with its limits; -1 ("use another
// setting") is not a size.
func memPart(in *engine.Instance, key string, defaults map[string]string, min, max, block uint64) engine.MemPart {
	p := engine.SettingPart(in, key, defaults[key], func(s engine.Setting) (uint64, bool) { return SettingBytes(key, s) })
	p.Min, p.Max = min, max
	p.Format = func(b uint64) string { return FormatBytes(b, block) }
	return p
}

// inputText is a count for a reason, marked when it is the default.
func inputText(i engine.Input) string {
	if strings.HasPrefix(i.Source, "default") {
		return i.Value + " (default)"
	}
	return i.Value
}

// FormatBytes renders a size the way postgresql.conf accepts it: a whole
// number of GB, MB or kB (fractions are not accepted for every setting),
// rounded down to the setting's block.
func FormatBytes(b, block uint64) string {
	if block > 0 {
		b -= b % block
	}
	switch {
	case b >= 1<<30 && b%(1<<30) == 0:
		return strconv.FormatUint(b>>30, 10) + "GB"
	case b >= 1<<20:
		return strconv.FormatUint(b>>20, 10) + "MB"
	}
	return strconv.FormatUint(b>>10, 10) + "kB"
}
