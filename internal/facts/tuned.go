package facts

import (
	"context"

	"github.com/dbhost/dbhost/internal/host"
)

// Tuned describes an active TuneD profile, which re-applies its values at
// every start and so overrides sysctl.d.
type Tuned struct {
	// Active is the profile name(s) in /etc/tuned/active_profile; empty
	// when TuneD is not configured.
	Active string `json:"active,omitempty"`
	// Running reports a tuned process.
	Running bool `json:"running"`
	// Chain lists the profiles in include order, most specific last.
	Chain []string `json:"chain,omitempty"`
	// Sysctl, VM (transparent_hugepages) and Disk (elevator, readahead)
	// are the values the chain applies, with the profile file they come
	// from.
	Sysctl map[string]Persisted `json:"sysctl,omitempty"`
	VM     map[string]Persisted `json:"vm,omitempty"`
	Disk   map[string]Persisted `json:"disk,omitempty"`
	// ReapplySysctl is reapply_sysctl from /etc/tuned/tuned-main.conf
	// (default true): TuneD re-reads sysctl.d after its profile, so
	// sysctl.d wins for kernel parameters, but not for THP or disks.
	ReapplySysctl bool   `json:"reapply_sysctl"`
	Err           string `json:"error,omitempty"`
}

func init() { registerHost("tuned", gatherTuned) }

func gatherTuned(_ context.Context, h *host.Host, f *Facts) {}
