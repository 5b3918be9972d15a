package mongo

import (
	"fmt"
	"strconv"

	"github.com/dbhost/dbhost/internal/engine"
)

func (detector) Name() string              { return "mongodb" }
func (detector) Aliases() []string         { return []string{"mongo", "mongod"} }
func (detector) ServiceAccounts() []string { return []string{"mongodb", "mongod"} }
func (detector) RootRisk() string {
	return "mongod then writes its files as root and any server-side flaw runs with root's rights."
}

func (detector) Units(*engine.Instance) []string {
	return []string{"mongod.service", "mongodb.service"}
}

func (detector) BindAdvice(*engine.Instance) string {
	return "Set net.bindIp: 127.0.0.1,<private address> in mongod.conf (not bindIpAll) and restart mongod."
}

// Backlog: without net.listenBacklog mongod asks for SOMAXCONN.
func (detector) Backlog(in *engine.Instance) engine.Need {
	v, ok := in.Uint("net.listenBacklog", 0)
	if !ok {
		return engine.Need{Why: "net.listenBacklog is not set: mongod asks for SOMAXCONN, so the kernel's somaxconn decides"}
	}
	return engine.Need{N: v, Why: fmt.Sprintf("net.listenBacklog is %d", v), Inputs: []engine.Input{in.UintInput("net.listenBacklog", true, v)}}
}

// Descriptors: MongoDB's recommended ulimit settings ask for 64000 open
// files (a descriptor per connection, data file and journal file); mongod
// warns at start below it and sizes its connection limit from the soft
// limit it finds then.
func (detector) Descriptors(*engine.Instance) engine.Need {
	return engine.Need{N: mongoNofile, Why: fmt.Sprintf("MongoDB's recommended ulimit settings ask for %d open files (a descriptor per connection and per data file); mongod warns at start below it", mongoNofile),
		AtStart: "mongod derives its connection limit from the soft limit when it starts: a raised limit is used after the next restart"}
}

// mongoNofile is the open-files limit MongoDB's ulimit page recommends.
const mongoNofile = 64000

func (detector) Tasks(in *engine.Instance) engine.Need {
	mc, ok := in.Uint("net.maxIncomingConnections", 0)
	if !ok || mc == 0 {
		return engine.Need{} // default: as many as the limits allow
	}
	n := mc + 100
	return engine.Need{N: n, Why: fmt.Sprintf("one thread per connection plus about 100 internal threads: %d", n), Inputs: []engine.Input{in.UintInput("net.maxIncomingConnections", ok, mc)}}
}

// mongoReadAheadKB is MongoDB's starting point for WiredTiger (32 sectors).
const mongoReadAheadKB = 16

func (detector) ReadAhead(*engine.Instance) engine.ReadAhead {
	return engine.ReadAhead{KB: mongoReadAheadKB, Why: "MongoDB's production notes start WiredTiger data devices at 16 KB (32 sectors) of read-ahead and raise it only when a test shows a benefit"}
}

const cacheKey = "storage.wiredTiger.engineConfig.cacheSizeGB"

// MainCache is the WiredTiger cache; the proposal mirrors WiredTiger's own
// default under the limit.
func (detector) MainCache(in *engine.Instance, limit uint64) engine.Cache {
	c := engine.Cache{Key: cacheKey, Proposal: wtProposal(limit)}
	if g, err := strconv.ParseFloat(in.SettingValue(cacheKey), 64); err == nil && g > 0 {
		c.Bytes, c.Known = uint64(g*(1<<30)), true
	}
	return c
}

// wtProposal mirrors WiredTiger's own default: 50% of (memory - 1 GB), at
// least 0.25 GB.
func wtProposal(limit uint64) string {
	g := (float64(limit)/(1<<30) - 1) / 2
	if g < 0.25 {
		g = 0.25
	}
	return strconv.FormatFloat(float64(int(g*100))/100, 'f', -1, 64)
}

// THP: MongoDB 8.0 with its upgraded TCMalloc wants THP on, with the
// companion settings of its documented setup; it ships that allocator only
// on x86_64 and ARM64 and keeps the legacy one (which wants THP off) on
// ppc64le and s390x. Earlier versions want it off everywhere.
func (detector) THP(in *engine.Instance, arch string) engine.THPAdvice {
	if in.Version == "" {
		return engine.THPAdvice{UnknownWhy: "MongoDB 8.0 reversed its THP advice"}
	}
	if !engine.VersionAtLeast(in.Version, "8.0") {
		return thpOff("MongoDB before 8.0")
	}
	switch engine.NormArch(arch) {
	case "x86_64", "aarch64":
		return engine.THPAdvice{Enabled: []string{"always"}, Defrag: []string{"defer+madvise"}, PtesZero: true, Overcommit: 1,
			Why: "wants THP (enabled always, defrag defer+madvise, max_ptes_none 0, and vm.overcommit_memory 1) for its upgraded TCMalloc with per-CPU caches, which MongoDB 8 ships on x86_64 and ARM64"}
	case "ppc64le", "s390x":
		return thpOff("MongoDB 8 keeps the legacy TCMalloc on " + engine.NormArch(arch))
	case "":
		return engine.THPAdvice{UnknownWhy: "MongoDB 8 wants THP on x86_64 and ARM64 but off on ppc64le and s390x, and the host's architecture was not recorded"}
	}
	return engine.THPAdvice{UnknownWhy: "MongoDB 8 documents its THP advice for x86_64 and ARM64 (on) and ppc64le and s390x (off), not for " + arch}
}

func thpOff(who string) engine.THPAdvice {
	return engine.THPAdvice{Enabled: []string{"never"}, Defrag: []string{"never"}, PtesZero: true, OnlyIfAlways: true,
		Why: "wants THP off (" + who + "): its sparse memory access suffers from huge page compaction and bloat"}
}

func (detector) MainConfig(in *engine.Instance) string { return engine.ConfigNamed(in, "mongod.conf") }

// ConfigSnippet: "name value" lines with mongod.conf's dotted names next
// to the main file, for a person to merge into its YAML.
func (detector) ConfigSnippet(s engine.Snippet) (string, string) { return s.Merge(confLine) }

func (detector) DefaultPort() int { return 27017 }
