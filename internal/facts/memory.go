package facts

import (
	"context"

	"github.com/prometheus/procfs"

	"github.com/dbhost/dbhost/internal/host"
)

// Memory describes RAM, swap, transparent and explicit huge pages and NUMA.
type Memory struct {
	Meminfo    procfs.Meminfo `json:"meminfo"`
	MeminfoErr string         `json:"meminfo_error,omitempty"`
	Swaps      []Swap         `json:"swaps,omitempty"`
	SwapsErr   string         `json:"swaps_error,omitempty"`
	THP        THP            `json:"thp"`
	// HugePages has one pool per page size (2 MiB, 1 GiB).
	HugePages []HugePagePool `json:"hugepages,omitempty"`
	NUMA      NUMA           `json:"numa"`
}

// Swap is one active swap area.
type Swap struct {
	Filename string `json:"filename"`
	Type     string `json:"type"`
	SizeKB   int    `json:"size_kb"`
	UsedKB   int    `json:"used_kb"`
	Priority int    `json:"priority"`
}

// THP is the transparent huge page configuration
// (/sys/kernel/mm/transparent_hugepage). Enabled and Defrag hold the raw
// line ("always [madvise] never"); use Active for the bracketed choice.
type THP struct {
	Enabled          host.Reading `json:"enabled"`
	Defrag           host.Reading `json:"defrag"`
	KhugepagedDefrag host.Reading `json:"khugepaged_defrag"`
	MaxPtesNone      host.Reading `json:"khugepaged_max_ptes_none"`
	ShmemEnabled     host.Reading `json:"shmem_enabled"`
	// Boot lists where a THP mode is set to survive reboot: the kernel
	// command line, a systemd unit, rc.local, a TuneD profile.
	Boot []Persisted `json:"boot,omitempty"`
}

// Persisted is a setting found in a file that applies it at boot.
type Persisted struct {
	Key   string `json:"key"`
	Value string `json:"value"`
	File  string `json:"file"`
	Line  int    `json:"line,omitempty"`
}

// HugePagePool is one explicit huge page size
// (/sys/kernel/mm/hugepages/hugepages-SIZEkB).
type HugePagePool struct {
	SizeKB   int   `json:"size_kb"`
	Total    int64 `json:"total"`
	Free     int64 `json:"free"`
	Reserved int64 `json:"reserved"`
	Surplus  int64 `json:"surplus"`
	// Overcommit is nr_overcommit_hugepages.
	Overcommit int64  `json:"overcommit"`
	Err        string `json:"error,omitempty"`
}

// NUMA describes the memory nodes (/sys/devices/system/node).
type NUMA struct {
	Nodes []NUMANode `json:"nodes,omitempty"`
	Err   string     `json:"error,omitempty"`
}

// NUMANode is one memory node.
type NUMANode struct {
	ID        int    `json:"id"`
	CPUs      string `json:"cpus"`
	MemTotal  uint64 `json:"mem_total_bytes"`
	MemFree   uint64 `json:"mem_free_bytes"`
	Distances []int  `json:"distances,omitempty"`
}

// InstanceMem is what the memory gatherer learns about one instance.
type InstanceMem struct {
	// Shared lists the process's shared memory segments: anonymous shared
	// mappings, System V and POSIX segments, hugetlb mappings.
	Shared    []Segment `json:"shared,omitempty"`
	SharedErr string    `json:"shared_error,omitempty"`
	// HugetlbBytes is the hugetlb memory the process maps (from status).
	HugetlbBytes uint64 `json:"hugetlb_bytes"`
	// AnonHugeBytes is THP-backed anonymous memory (smaps_rollup).
	AnonHugeBytes uint64 `json:"anon_huge_bytes"`
	RSSBytes      uint64 `json:"rss_bytes"`
	// NUMAPolicy is the policy of the largest mapping in numa_maps
	// ("default", "interleave:0-1", "bind:0", "prefer:1").
	NUMAPolicy string `json:"numa_policy,omitempty"`
	// NodePages counts the process's resident pages per NUMA node.
	NodePages map[int]uint64 `json:"node_pages,omitempty"`
	NUMAErr   string         `json:"numa_error,omitempty"`
}

// Segment is one shared memory mapping of a process.
type Segment struct {
	// Kind: "anon" (/dev/zero, MAP_SHARED|MAP_ANONYMOUS), "sysv", "posix"
	// (/dev/shm), "memfd", "hugetlb".
	Kind string `json:"kind"`
	Path string `json:"path"`
	Size uint64 `json:"size_bytes"`
	// PageSizeKB is the kernel page size backing it (4, 2048, 1048576).
	PageSizeKB int `json:"page_size_kb"`
}

func init() {
	wantSysctl(
		"vm.swappiness", "vm.dirty_ratio", "vm.dirty_background_ratio",
		"vm.dirty_bytes", "vm.dirty_background_bytes", "vm.dirty_expire_centisecs",
		"vm.overcommit_memory", "vm.overcommit_ratio", "vm.overcommit_kbytes",
		"vm.zone_reclaim_mode", "kernel.numa_balancing", "vm.max_map_count",
		"vm.min_free_kbytes", "vm.nr_hugepages", "vm.hugetlb_shm_group",
		"vm.vfs_cache_pressure", "kernel.shmmax", "kernel.shmall", "kernel.sem",
		"kernel.shmmni", "kernel.msgmni",
	)
	registerHost("memory", gatherMemory)
	registerInstance("memory", gatherInstanceMem)
}

func gatherMemory(_ context.Context, h *host.Host, f *Facts) {
	m := &f.Memory
	mi, err := h.Meminfo()
	if err != nil {
		m.MeminfoErr = host.Explain(err)
	} else {
		m.Meminfo = mi
	}
}

func gatherInstanceMem(_ context.Context, h *host.Host, f *Facts, in *Instance) {}
