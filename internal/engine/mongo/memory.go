package mongo

import (
	"fmt"
	"strconv"

	"github.com/dbhost/dbhost/internal/engine"
)

// WiredTiger's cache limits: cacheSizeGB accepts 0.25 to 10000.
const (
	wtMin = 1 << 28
	wtMax = 10000 << 30
)

// Memory: the WiredTiger cache. Unset, WiredTiger takes 50% of (memory -
// 1 GB), at least 256 MB, of the host's RAM or, where this version reads
// it, the cgroup's limit.
func (detector) Memory(in *engine.Instance) engine.MemoryPlan {
	p := engine.SettingPart(in, cacheKey, "", func(s engine.Setting) (uint64, bool) {
		g, err := strconv.ParseFloat(s.Value, 64)
		if err != nil || g <= 0 {
			return 0, false
		}
		return uint64(g * (1 << 30)), true
	})
	p.Cache, p.Min, p.Max = true, wtMin, wtMax
	p.Auto = !p.Known
	p.AutoSize = func(ram, limit uint64, cgv int) (uint64, string) { return wtDefault(in.Version, ram, limit, cgv) }
	p.Format = func(b uint64) string {
		return strconv.FormatFloat(float64(b*100>>30)/100, 'f', -1, 64)
	}
	plan := engine.MemoryPlan{Parts: []engine.MemPart{p}}
	if in.Mongo != nil && in.Mongo.ConfigErr != "" {
		return plan.Unknowable(in.Mongo.ConfigErr)
	}
	return plan.Unknowable(engine.FilesGap(in))
}

// wtDefault is the cache WiredTiger sizes for itself. MongoDB reads a
// cgroup v1 memory limit from 4.0 and a cgroup v2 one only in later
// releases; where the version does not show it reads the limit, the host's
// RAM is assumed, which is what older servers do.
func wtDefault(version string, ram, limit uint64, cgv int) (uint64, string) {
	base, from := ram, "the host's RAM"
	switch {
	case limit == 0:
	case version == "":
		from = "the host's RAM (the version is unknown; MongoDB before 4.0 ignores a cgroup limit)"
	case cgv == 1 && engine.VersionAtLeast(version, "4.0"), cgv == 2 && engine.VersionAtLeast(version, "7.0"):
		base, from = limit, "the cgroup's memory limit"
	default:
		from = fmt.Sprintf("the host's RAM: MongoDB %s does not read a cgroup v%d memory limit", version, cgv)
	}
	b := uint64(wtMin)
	if base > 1<<30 && (base-1<<30)/2 > b {
		b = (base - 1<<30) / 2
	}
	return b, "50% of (" + from + " - 1 GB), at least 256 MB"
}
