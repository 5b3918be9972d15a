package redis

import (
	"fmt"

	"github.com/dbhost/dbhost/internal/engine"
)

// maxmemoryMin is the smallest maxmemory dbhost proposes: Redis accepts
// less, but then evicts or refuses almost every write.
const maxmemoryMin = 1 << 20

// Memory: maxmemory bounds the dataset; 0 (the default) is no bound, and
// the server grows until the kernel stops it.
func (detector) Memory(in *engine.Instance) engine.MemoryPlan {
	p := engine.SettingPart(in, "maxmemory", "0", func(s engine.Setting) (uint64, bool) { return MemoryBytes(s.Value) })
	p.Cache, p.Min = true, maxmemoryMin
	p.Unbounded = p.Known && p.Bytes == 0
	p.Format = func(b uint64) string { return fmt.Sprintf("%dmb", b>>20) }
	plan := engine.MemoryPlan{Parts: []engine.MemPart{p}}
	if in.Redis != nil && in.Redis.ConfigErr != "" {
		return plan.Unknowable(in.Redis.ConfigErr)
	}
	return plan.Unknowable(engine.FilesGap(in))
}
