package check

import (
	"fmt"

	"github.com/dbhost/dbhost/internal/engine"
	"github.com/dbhost/dbhost/internal/facts"
	"github.com/dbhost/dbhost/internal/fix"
)

// cacheShareMax is the largest share of a cgroup memory limit a database's
// main cache may take: the rest is for connections, sorts, replication
// buffers and the page cache the group is also charged for.
const cacheShareMax = 0.75

func init() {
	Register(Check{
		ID:        "container.limits",
		Title:     "Database caches fit the cgroup memory limit",
		Problem:   "Database caches do not fit the cgroup memory limit",
		Severity:  Warning,
		AppliesTo: []string{"container", "postgres", "mysql", "mongodb", "redis"},
		Doc: `Reads the memory and CPU limits of each server's control group (cgroup v2
memory.max and cpu.max, v1 memory.limit_in_bytes and cpu.cfs_quota_us, taking the
lowest limit of the group and its parents) and compares the memory limit with the
database's main cache: PostgreSQL shared_buffers, InnoDB's innodb_buffer_pool_size,
Redis maxmemory, WiredTiger's cacheSizeGB. The cgroup is also charged for
connections, sorts and its page cache, so a cache above 75% of the limit, let alone
above it, is an OOM kill waiting for the first busy hour; Redis without maxmemory
grows until the kernel kills it, and its fork for BGSAVE can double the memory it
touches. When dbhost itself runs in a container, kernel settings (vm.*, THP, block
queues, most kernel.* parameters) are the host's and can only be fixed there;
findings say so.`,
		Refs: []string{"https://docs.kernel.org/admin-guide/cgroup-v2.html#memory-interface-files", "https://www.mongodb.com/docs/manual/reference/configuration-options/#mongodb-setting-storage.wiredTiger.engineConfig.cacheSizeGB"},
		Run:  checkContainerLimits,
	})
}

// ctrMainCache returns an instance's main cache size, the setting that holds
// it, and the value to propose for a limit.
func ctrMainCache(in *facts.Instance, limit uint64) (size uint64, known bool, key, proposal string) {
	c := in.Profile().MainCache(in.Instance, limit)
	return c.Bytes, c.Known, c.Key, c.Proposal
}

// ctrWTProposal mirrors WiredTiger's own default: 50% of (memory - 1 GB), at
// least 0.25 GB.

func checkContainerLimits(f *facts.Facts) []Result {
	var out []Result
	if c := f.System.Container; c != "" {
		out = append(out, PassR(SubjectHost, fmt.Sprintf("dbhost runs in a %s container (%s). Kernel settings are shared with the host: vm.* (swappiness, dirty ratios, overcommit), transparent huge pages, huge page reservations, block device queues and most kernel.* parameters can only be changed on the host, and the fixes of those findings are marked for the host. net.* parameters belong to the container's network namespace and are set in its definition.", c, f.System.ContainerEvidence),
			Ev("container", c, f.System.ContainerEvidence)))
	}
	for _, in := range f.Instances {
		subj := in.Name()
		cg := in.Cgroup
		ev := []Evidence{Ev("cgroup", fmt.Sprintf("v%d %s", cg.Version, cg.Path), fmt.Sprintf("/proc/%d/cgroup", in.PID)), EvReading("memory limit", cg.MemoryMax)}
		if cg.CPUMax.OK() {
			ev = append(ev, EvReading("cpu limit (quota period)", cg.CPUMax))
		}
		if cg.Err != "" {
			out = append(out, UnknownR(subj, "cannot read the server's control group: "+cg.Err, ev...))
			continue
		}
		if why := cg.Garbled(); why != "" {
			out = append(out, UnknownR(subj, "cannot judge the server's control group: "+why, ev...))
			continue
		}
		cpu := ""
		if cpus, ok := cg.CPULimit(); ok {
			cpu = fmt.Sprintf(" Its CPU quota is %.2g CPUs: work beyond that is throttled, which shows as latency spikes.", cpus)
		}
		limit, limited := cg.MemoryLimit()
		if !limited {
			if !cg.MemoryMax.OK() {
				out = append(out, UnknownR(subj, "cannot read the memory limit of its control group: "+cg.MemoryMax.Err, ev...))
				continue
			}
			out = append(out, PassR(subj, "Its control group has no memory limit."+cpu, ev...))
			continue
		}
		size, known, key, proposal := ctrMainCache(in, limit)
		if key == "" {
			continue
		}
		if s, ok := in.Setting(key); ok {
			ev = append(ev, Ev(key, s.Value, s.Source))
		}
		fx := &fix.Fix{Summary: fmt.Sprintf("Size %s for the %s memory limit", key, humanBytes(limit)),
			Config: []fix.ConfigChange{{Instance: subj, Engine: string(in.Engine), Key: key, Value: proposal, Restart: in.Engine != engine.Redis}},
			Manual: "Or raise the control group's memory limit (the container's --memory, the unit's MemoryMax=) well above the cache."}
		switch {
		case in.Engine == engine.Redis && (!known || size == 0):
			out = append(out, FailR(subj, fmt.Sprintf("Its control group may use %s, but Redis has no maxmemory: it grows until the kernel's OOM killer kills it inside the group, and a BGSAVE fork can double the memory it touches.%s", humanBytes(limit), cpu), fx, ev...))
		case !known && in.Engine == engine.MongoDB:
			out = append(out, PassR(subj, fmt.Sprintf("Its control group may use %s; WiredTiger's cache is not set, and MongoDB sizes it itself, from the group's limit only in versions that read it (mongodb.wt_cache judges the size this version picks).%s", humanBytes(limit), cpu), ev...))
		case !known:
			out = append(out, UnknownR(subj, fmt.Sprintf("Its control group may use %s, but %s is not known%s.", humanBytes(limit), key, kernLiveWhy(in)), ev...))
		case float64(size) > cacheShareMax*float64(limit):
			share := float64(size) / float64(limit) * 100
			what := "leaving too little for connections, sorts and the page cache the group is also charged for"
			if size >= limit {
				what = "larger than the limit itself"
			}
			out = append(out, FailR(subj, fmt.Sprintf("%s is %s, %.0f%% of the control group's memory limit of %s, %s: once the cache fills, the kernel's OOM killer kills the server inside the group.%s", key, humanBytes(size), share, humanBytes(limit), what, cpu), fx, ev...))
		default:
			out = append(out, PassR(subj, fmt.Sprintf("%s is %s, %.0f%% of the control group's memory limit of %s.%s", key, humanBytes(size), float64(size)/float64(limit)*100, humanBytes(limit), cpu), ev...))
		}
	}
	return out
}

// ctrRedisMemory parses a Redis memory value the way Redis does: k, m, g are
// powers of 1000, kb, mb, gb powers of 1024, a bare number is bytes.
