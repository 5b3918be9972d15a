package facts

import (
	"context"
	"sort"
	"sync"

	"github.com/dbhost/dbhost/internal/host"
)

var (
	sysctlMu    sync.Mutex
	sysctlNames = map[string]bool{}
)

// WantSysctl declares kernel parameters to gather; the sysctl gatherer reads
// each once. check.Register calls it with the names a check declares, so the
// gathered set (and what `dbhost collect` records) is the union of what the
// checks read. Call it from init: Gather reads the set when it runs.
func WantSysctl(names ...string) {
	sysctlMu.Lock()
	defer sysctlMu.Unlock()
	for _, n := range names {
		sysctlNames[n] = true
	}
}

// SysctlNames lists the gathered kernel parameters, sorted.
func SysctlNames() []string {
	sysctlMu.Lock()
	defer sysctlMu.Unlock()
	out := make([]string, 0, len(sysctlNames))
	for n := range sysctlNames {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

func init() { registerHost(DomainSysctl, gatherSysctl) }

func gatherSysctl(_ context.Context, h *host.Host, f *Facts) {
	for _, n := range SysctlNames() {
		f.Sysctl[n] = h.ReadSysctl(n)
	}
}
