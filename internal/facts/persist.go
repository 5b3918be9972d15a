package facts

import (
	"context"

	"github.com/dbhost/dbhost/internal/host"
)

// Persist is what the host will apply at the next boot: sysctl.d files,
// limits.d entries and udev rules that set queue attributes.
type Persist struct {
	// Sysctl lists kernel parameter settings in the order systemd-sysctl
	// and `sysctl --system` apply them (the last one wins).
	Sysctl    []Persisted `json:"sysctl,omitempty"`
	SysctlErr string      `json:"sysctl_error,omitempty"`
	// Limits lists pam_limits entries from limits.conf and limits.d.
	Limits []LimitEntry `json:"limits,omitempty"`
	// Udev lists rules that set block queue attributes (scheduler,
	// read_ahead_kb).
	Udev []UdevRule `json:"udev,omitempty"`
}

// LimitEntry is one line of limits.conf: domain type item value.
type LimitEntry struct {
	File   string `json:"file"`
	Line   int    `json:"line"`
	Domain string `json:"domain"`
	Type   string `json:"type"` // soft, hard, -
	Item   string `json:"item"` // nofile, nproc, memlock
	Value  string `json:"value"`
}

// UdevRule is a rule line that assigns a queue attribute.
type UdevRule struct {
	File string `json:"file"`
	Line int    `json:"line"`
	Text string `json:"text"`
	// Attr ("queue/scheduler", "queue/read_ahead_kb", "bdi/read_ahead_kb")
	// and Value assigned; Match is the KERNEL== pattern, if any.
	Attr  string `json:"attr"`
	Value string `json:"value"`
	Match string `json:"match,omitempty"`
}

// PersistedSysctl returns the value the next boot will set for a kernel
// parameter, and whether any file sets it.
func (p Persist) PersistedSysctl(name string) (Persisted, bool) {
	var last Persisted
	found := false
	for _, s := range p.Sysctl {
		if s.Key == name {
			last, found = s, true
		}
	}
	return last, found
}

func init() { registerHost("persist", gatherPersist) }

func gatherPersist(_ context.Context, h *host.Host, f *Facts) {}
