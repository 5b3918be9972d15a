package engine

import "strconv"

// MemoryPlan is the memory a server is configured to use: what it keeps
// whatever the load (its caches), what each connection may add at worst, and
// the limits of every setting so that a proposal stays within what the
// server accepts.
type MemoryPlan struct {
	// Parts are the server's memory settings; Cache marks the main cache.
	Parts []MemPart
	// Conns is the connection limit per-connection parts multiply with (N 0:
	// no per-connection rule).
	Conns Input
	N     uint64
	// Factor is how many times one connection may use each per-connection
	// part at once, FactorWhy the rule behind it.
	Factor    uint64
	FactorWhy string
}

// MemPart is one memory setting of a server.
type MemPart struct {
	Key string
	// Value and Source are the setting as found; Source is "default" when
	// neither the configuration nor the server gave it.
	Value, Source string
	Bytes         uint64
	// Known: Bytes holds the setting's size. Unbounded: the setting means
	// "no limit" (Redis maxmemory 0). Auto: the server sizes it from memory
	// when unset (WiredTiger's cache); AutoSize says how much.
	Known, Unbounded, Auto bool
	// Cache: the engine's main cache. PerConn: each connection may use it.
	// Hint: the planner's estimate, not memory the server allocates.
	Cache, PerConn, Hint bool
	// Times: the part is allocated this many times (autovacuum workers).
	Times uint64
	// Min and Max are what the server accepts; Format renders a size in a
	// unit it accepts (rounded down, never below Min).
	Min, Max uint64
	Format   func(uint64) string `json:"-"`
	// AutoSize, for an Auto part, is the size the server picks for itself
	// on a host with ram bytes whose cgroup (version cgv) limits it to limit
	// bytes (0: no limit), and how it got there.
	AutoSize func(ram, limit uint64, cgv int) (uint64, string) `json:"-"`
	// Why explains the part for reasons ("each autovacuum worker").
	Why string
	// Unread says why a value not found may still be set: the
	// configuration could not be read in full.
	Unread string
}

// Default reports whether the value is the compiled-in default rather than
// one observed in the configuration or the running server.
func (p MemPart) Default() bool { return p.Source == "default" || p.Source == "" }

// Total is the part's bytes times its count.
func (p MemPart) Total() uint64 {
	if p.Times > 1 {
		return p.Bytes * p.Times
	}
	return p.Bytes
}

// Propose clamps b to the part's limits and renders it.
func (p MemPart) Propose(b uint64) string {
	b = p.Clamp(b)
	if p.Format == nil {
		return strconv.FormatUint(b, 10)
	}
	return p.Format(b)
}

// Clamp bounds b by the part's minimum and maximum.
func (p MemPart) Clamp(b uint64) uint64 {
	if b < p.Min {
		b = p.Min
	}
	if p.Max > 0 && b > p.Max {
		b = p.Max
	}
	return b
}

// Part returns the plan's part named key.
func (m MemoryPlan) Part(key string) (MemPart, bool) {
	for _, p := range m.Parts {
		if p.Key == key {
			return p, true
		}
	}
	return MemPart{}, false
}

// MainCache is the plan's main cache part.
func (m MemoryPlan) MainCache() (MemPart, bool) {
	for _, p := range m.Parts {
		if p.Cache {
			return p, true
		}
	}
	return MemPart{}, false
}

// SettingPart reads a setting into a part with the instance's value and
// source, or def marked as the default; size converts a value to bytes.
func SettingPart(in *Instance, key, def string, size func(Setting) (uint64, bool)) MemPart {
	s, ok := in.Setting(key)
	if !ok {
		s = Setting{Value: def, Source: "default"}
	}
	p := MemPart{Key: key, Value: s.Value, Source: s.Source}
	p.Bytes, p.Known = size(s)
	return p
}

// Unknowable marks each part that holds only a default as unknown when gap
// says the configuration was not read in full: the setting may be there.
func (m MemoryPlan) Unknowable(gap string) MemoryPlan {
	if gap == "" {
		return m
	}
	for i, p := range m.Parts {
		if p.Default() {
			m.Parts[i].Known, m.Parts[i].Auto, m.Parts[i].Unbounded, m.Parts[i].Unread = false, false, false, gap
		}
	}
	return m
}

// FilesGap says why settings read from files (not the running server) may
// be incomplete, or "".
func FilesGap(in *Instance) string {
	if in.SettingsSource == "live" || len(in.ConfigErrors) == 0 {
		return ""
	}
	return "the configuration was not read in full (" + in.ConfigErrors[0] + ")"
}
