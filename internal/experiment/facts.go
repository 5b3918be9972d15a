package experiment

import (
	"fmt"
	"runtime"
	"slices"
	"strconv"
	"strings"

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

// HostFacts reads the host part of Facts through h.
func HostFacts(h *host.Host) (Facts, error) {
	var f Facts
	mi, err := h.Meminfo()
	if err != nil {
		return f, fmt.Errorf("memory: %s", host.Explain(err))
	}
	if mi.MemTotal != nil {
		f.MemTotal = *mi.MemTotal * 1024
	}
	if mi.MemAvailable != nil {
		f.MemAvailable = *mi.MemAvailable * 1024
	}
	if b, err := h.ReadFile("/sys/devices/system/cpu/online"); err == nil {
		f.CPUs = countCPUList(strings.TrimSpace(string(b)))
	}
	if f.CPUs == 0 {
		f.CPUs = numCPU()
	}
	dirs, _ := h.ReadDir(host.HugePagesRoot)
	for _, d := range dirs {
		if kb, ok := host.HugePageSizeKB(d); ok {
			f.HugePageSizes = append(f.HugePageSizes, kb*1024)
		}
	}
	slices.Sort(f.HugePageSizes)
	for file, dst := range map[string]*uint64{"dirty_bytes": &f.DirtyBytes, "dirty_background_bytes": &f.DirtyBackgroundBytes} {
		if b, err := h.ReadFile("/proc/sys/vm/" + file); err == nil {
			*dst, _ = strconv.ParseUint(strings.TrimSpace(string(b)), 10, 64)
		}
	}
	if b, err := h.ReadFile("/proc/sys/kernel/osrelease"); err == nil {
		f.Kernel = strings.TrimSpace(string(b))
	}
	if b, err := h.ReadFile("/proc/sys/kernel/hostname"); err == nil {
		f.Hostname = strings.TrimSpace(string(b))
	}
	return f, nil
}

// countCPUList counts the CPUs in a list such as "0-3,8,10-11".
func countCPUList(s string) int {
	n := 0
	for _, part := range strings.Split(s, ",") {
		lo, hi, isRange := strings.Cut(part, "-")
		a, err := strconv.Atoi(lo)
		if err != nil {
			return 0
		}
		b := a
		if isRange {
			if b, err = strconv.Atoi(hi); err != nil || b < a {
				return 0
			}
		}
		n += b - a + 1
	}
	return n
}

// OffersPageSize reports whether the kernel offers explicit huge pages of
// this size.
func (f Facts) OffersPageSize(size uint64) bool { return slices.Contains(f.HugePageSizes, size) }

func numCPU() int { return runtime.NumCPU() }
