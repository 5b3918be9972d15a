package experiment

import (
	"context"
	"fmt"
	"runtime"
	"slices"
	"strconv"

	hostfacts "github.com/dbhost/dbhost/internal/facts"
	"github.com/dbhost/dbhost/internal/host"
)

// Facts are what presets and defaults depend on: this host and the
// target database.
type Facts struct {
	CPUs         int    `json:"cpus"`
	MemTotal     uint64 `json:"mem_total_bytes"`
	MemAvailable uint64 `json:"mem_available_bytes"`
	// HugePageSizes are the explicit huge page sizes the kernel offers
	// (/sys/kernel/mm/hugepages), in bytes, ascending.
	HugePageSizes []uint64 `json:"huge_page_sizes"`
	Kernel        string   `json:"kernel,omitempty"`
	// DirtyBytes and DirtyBackgroundBytes are vm.dirty_bytes and
	// vm.dirty_background_bytes: non-zero when the host limits dirty
	// memory in bytes rather than as a ratio.
	DirtyBytes           uint64 `json:"dirty_bytes"`
	DirtyBackgroundBytes uint64 `json:"dirty_background_bytes"`
	Hostname             string `json:"hostname,omitempty"`

	Engine  string `json:"engine,omitempty"` // postgres or mysql
	Version string `json:"version,omitempty"`
	// Major is the PostgreSQL major version (15), or MySQL's (8).
	Major int `json:"major,omitempty"`
	// SharedBuffers is PostgreSQL's shared_buffers in bytes; SharedMemory
	// the whole main shared memory segment (shared_memory_size, reported
	// by PostgreSQL 15+; else 0).
	SharedBuffers uint64 `json:"shared_buffers_bytes,omitempty"`
	SharedMemory  uint64 `json:"shared_memory_bytes,omitempty"`
}

// The kernel parameters HostFacts reads, gathered by facts' sysctl
// gatherer like those the checks declare.
const (
	sysctlDirtyBytes           = "vm.dirty_bytes"
	sysctlDirtyBackgroundBytes = "vm.dirty_background_bytes"
)

// HostSysctls are the kernel parameters HostFacts gathers.
func HostSysctls() []string { return []string{sysctlDirtyBytes, sysctlDirtyBackgroundBytes} }

// HostFacts reads the host part of Facts through h, from the same gatherers
// as an audit: one observation of the host, however it is used. Only
// unreadable meminfo is an error; anything else unreadable is left zero.
func HostFacts(h *host.Host) (Facts, error) {
	hf := hostfacts.GatherHost(context.Background(), h, hostfacts.Options{Sysctls: HostSysctls()}, hostfacts.DomainMemory, hostfacts.DomainSysctl, hostfacts.DomainSystem)
	return fromHostFacts(hf)
}

func fromHostFacts(hf *hostfacts.Facts) (Facts, error) {
	var f Facts
	m := hf.Memory
	if m.MeminfoErr != "" {
		return f, fmt.Errorf("memory: %s", m.MeminfoErr)
	}
	f.MemTotal, _ = m.MemTotal()
	if m.Meminfo.MemAvailable != nil {
		f.MemAvailable = *m.Meminfo.MemAvailable << 10
	}
	// runtime.NumCPU is this process's view: right for the live host,
	// which is what experiments run on, when the kernel's list is missing.
	if f.CPUs = hf.System.OnlineCPUs(); f.CPUs == 0 {
		f.CPUs = numCPU()
	}
	// Pools are sorted by size; one whose counters are unreadable is still
	// a size the kernel offers.
	for _, p := range m.HugePages {
		f.HugePageSizes = append(f.HugePageSizes, p.Bytes())
	}
	f.DirtyBytes = sysctlUint(hf, sysctlDirtyBytes)
	f.DirtyBackgroundBytes = sysctlUint(hf, sysctlDirtyBackgroundBytes)
	f.Kernel = hf.System.Kernel.Value
	f.Hostname = hf.System.Hostname
	return f, nil
}

// sysctlUint is a gathered kernel parameter as a number, 0 when it is
// unreadable or not one.
func sysctlUint(hf *hostfacts.Facts, name string) uint64 {
	r := hf.SysctlReading(name)
	if !r.OK() {
		return 0
	}
	v, _ := strconv.ParseUint(r.Value, 10, 64)
	return v
}

// OffersPageSize reports whether the kernel offers explicit huge pages of
// this size.
func (f Facts) OffersPageSize(size uint64) bool { return slices.Contains(f.HugePageSizes, size) }

func numCPU() int { return runtime.NumCPU() }
