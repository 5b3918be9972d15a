package facts

import (
	"context"

	"github.com/dbhost/dbhost/internal/host"
)

func init() { registerHostOptions(DomainSysctl, gatherSysctl) }

// gatherSysctl reads the kernel parameters the caller names, each once.
func gatherSysctl(_ context.Context, h *host.Host, f *Facts, o Options) {
	for _, n := range o.Sysctls {
		f.Sysctl[n] = h.ReadSysctl(n)
	}
}
