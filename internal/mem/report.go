// Package mem accounts a host's memory truthfully: per process (RSS, PSS,
// USS and their parts), per shared memory object counted once (shared
// anonymous regions, System V segments, POSIX shm, memfd, hugetlbfs), per
// database instance, and for the host against /proc/meminfo, with what is
// left unexplained shown. See docs/mem.md.
package mem

import "time"

// Schema names the JSON layout; fields are only added within a version.
const Schema = "dbhost.mem/1"

// Report is one scan of a host.
type Report struct {
	Schema string    `json:"schema"`
	Time   time.Time `json:"time"`
	Source string    `json:"source"`
	// Processes are the selected processes whose memory could be read.
	Processes []Process `json:"processes"`
	// Regions are the shared memory objects, each counted once.
	Regions   []Region   `json:"shared_regions"`
	Instances []Instance `json:"instances"`
	Host      HostView   `json:"host"`
	NUMA      NUMAView   `json:"numa"`
	// Scanned counts the processes with memory (kernel threads have none);
	// Unreadable those whose memory could not be read, and why.
	Scanned    int          `json:"scanned"`
	Unreadable []Unreadable `json:"unreadable,omitempty"`
	Notes      []string     `json:"notes,omitempty"`
	// Filtered is set when --pid or --engine selected processes: the
	// regions and instances shown are those the selection touches, the host
	// view still covers every process.
	Filtered bool `json:"filtered"`
}

// Process is one process's memory. Sizes in bytes.
type Process struct {
	PID      int    `json:"pid"`
	PPID     int    `json:"ppid"`
	Comm     string `json:"comm"`
	User     string `json:"user,omitempty"`
	Instance string `json:"instance,omitempty"`
	// Source of the totals: "smaps_rollup", or "smaps" (the sum of its
	// mappings) for a process with hugetlb pages, and where the kernel has
	// no rollup (before Linux 4.14) or no PAGEMAP_SCAN (before 6.7) for a
	// process holding shared region pages.
	Source string `json:"source"`

	RSS     uint64 `json:"rss_bytes"`
	PSS     uint64 `json:"pss_bytes"`
	USS     uint64 `json:"uss_bytes"` // Private_Clean + Private_Dirty + Private_Hugetlb
	Swap    uint64 `json:"swap_bytes"`
	SwapPSS uint64 `json:"swap_pss_bytes"`
	// Resident by type, from the kernel's counters in /proc/PID/status:
	// private anonymous (heap, stacks; pages shared copy-on-write with a
	// fork parent count here too), file-backed (program, libraries, mapped
	// files), and shmem (shared anonymous, System V, POSIX shm, memfd, tmpfs).
	Anon  uint64 `json:"anon_bytes"`
	File  uint64 `json:"file_bytes"`
	Shmem uint64 `json:"shmem_bytes"`
	// PSS split by type (smaps_rollup, Linux 5.8+; 0 before).
	PSSAnon  uint64 `json:"pss_anon_bytes"`
	PSSFile  uint64 `json:"pss_file_bytes"`
	PSSShmem uint64 `json:"pss_shmem_bytes"`
	Hugetlb  uint64 `json:"hugetlb_bytes"` // Shared_Hugetlb + Private_Hugetlb
	THP      uint64 `json:"thp_bytes"`     // AnonHugePages

	// RegionPSS is the process's PSS share of the shared regions it maps;
	// RegionUSS the part of those regions only it maps.
	RegionPSS uint64 `json:"region_pss_bytes"`
	RegionUSS uint64 `json:"region_uss_bytes"`
	// Own is what the process adds on top of the shared regions: its PSS
	// outside them plus its hugetlb pages outside them (PSS leaves hugetlb
	// out). Summed over processes and added to the regions' resident size it
	// counts every page once.
	Own uint64 `json:"own_bytes"`
	// Private is its USS outside the shared regions.
	Private uint64 `json:"private_bytes"`

	NUMA *ProcNUMA `json:"numa,omitempty"`

	hugetlbOutside uint64
}

// Region is one shared memory object, counted once.
type Region struct {
	Kind string `json:"kind"`
	// Name is the path the mappings show ("/dev/zero (deleted)",
	// "/SYSV0052e2c1 (deleted)", "/dev/shm/PostgreSQL.123").
	Name  string `json:"name"`
	Dev   string `json:"dev,omitempty"` // major:minor of its filesystem
	Inode uint64 `json:"inode,omitempty"`
	// ShmID and Key identify a System V segment.
	ShmID *uint64 `json:"shmid,omitempty"`
	Key   string  `json:"key,omitempty"`

	Size uint64 `json:"size_bytes"` // apparent size
	// Resident is the memory the object holds. ResidentSource says how it
	// was learnt: "map_files" (st_blocks of /proc/PID/map_files/START-END:
	// the tmpfs or hugetlbfs inode's allocated pages), "stat" (the same
	// through the file's path), "sysvipc" (the rss column of
	// /proc/sysvipc/shm), or "mapped" when neither could be read: then it
	// is a lower bound, the pages some process has mapped (ResidentKnown
	// false, Note says why).
	Resident       uint64 `json:"resident_bytes"`
	ResidentKnown  bool   `json:"resident_known"`
	ResidentSource string `json:"resident_source"`
	Swap           uint64 `json:"swap_bytes,omitempty"` // System V only: the kernel counts it apart
	// Mapped is the sum of the mappers' PSS shares: the pages mapped by at
	// least one process. Resident minus Mapped is held by the object with
	// no process mapping it (e.g. written by processes that have exited).
	Mapped   uint64   `json:"mapped_bytes"`
	PageSize uint64   `json:"page_size_bytes,omitempty"`
	PIDs     []int    `json:"pids"`
	Mappers  []Mapper `json:"mappers,omitempty"`
	// Orphaned: no process maps it, its memory is still held (a System V
	// segment with nattch 0, a file in /dev/shm nobody maps).
	Orphaned bool   `json:"orphaned"`
	Instance string `json:"instance,omitempty"`
	Note     string `json:"note,omitempty"`

	key       objKey
	mapStart  []mapRef // mappings through which map_files can be stat'ed
	maxMapped uint64   // largest mapped size in one process
	runs      []mapperRuns
	unscanned bool // a mapping's present pages are unknown: keep smaps' shares
}

type mapRef struct {
	pid        int
	start, end uint64
}

// Mapper is one process's use of a region.
type Mapper struct {
	PID  int    `json:"pid"`
	Comm string `json:"comm"`
	RSS  uint64 `json:"rss_bytes"`
	PSS  uint64 `json:"pss_bytes"`
	USS  uint64 `json:"uss_bytes"`
	Swap uint64 `json:"swap_bytes"` // where smaps was read
	// Hugetlb is the process's resident hugetlb pages of the region (PSS
	// does not count hugetlb pages).
	Hugetlb uint64 `json:"hugetlb_bytes,omitempty"`
	Size    uint64 `json:"mapped_size_bytes"`
}

// Instance is one database server: its main process and descendants.
type Instance struct {
	Name    string `json:"name"` // "postgres :5432"
	Engine  string `json:"engine"`
	PID     int    `json:"pid"`
	Port    int    `json:"port,omitempty"`
	DataDir string `json:"data_dir,omitempty"`
	PIDs    []int  `json:"pids"`
	// Regions are the shared regions charged to the instance (mapped by its
	// processes, or a System V segment it created); their apparent and
	// resident sizes, counted once.
	Regions         []string `json:"regions,omitempty"`
	RegionsSize     uint64   `json:"regions_size_bytes"`
	RegionsResident uint64   `json:"regions_resident_bytes"`
	// Private is the processes' USS outside the regions; Own their PSS
	// outside the regions (Private plus their share of libraries and of
	// copy-on-write pages) plus hugetlb pages outside regions.
	Private uint64 `json:"private_bytes"`
	Own     uint64 `json:"own_bytes"`
	// Total = RegionsResident + Own: every page the instance holds, once.
	Total uint64 `json:"total_bytes"`
	// Unreadable counts its processes whose memory could not be read (not
	// root): the sums above leave them out.
	Unreadable int `json:"unreadable,omitempty"`
}

// HostView reconciles the processes and regions with /proc/meminfo.
type HostView struct {
	MemTotal     uint64 `json:"mem_total_bytes"`
	MemFree      uint64 `json:"mem_free_bytes"`
	MemAvailable uint64 `json:"mem_available_bytes"`
	// ProcessesOwn + RegionsResident = Accounted: what every readable
	// process and every region hold, each page once.
	ProcessesOwn    uint64 `json:"processes_own_bytes"`
	RegionsResident uint64 `json:"regions_resident_bytes"`
	Accounted       uint64 `json:"accounted_bytes"`
	// Lines compare kernel counters with what explains them.
	Lines []Line `json:"lines"`
	// Kernel lists the kernel and cache counters, with Unitemised: the part
	// of MemTotal - MemFree that no /proc/meminfo counter names.
	Kernel     []Item       `json:"kernel"`
	Unitemised int64        `json:"unitemised_bytes"`
	Tmpfs      []TmpfsUsage `json:"tmpfs"`
	Err        string       `json:"error,omitempty"`
}

// Line is one /proc/meminfo counter and what explains it.
type Line struct {
	Name        string `json:"name"`
	Kernel      uint64 `json:"kernel_bytes"`
	ExplainedBy []Item `json:"explained_by"`
	Explained   uint64 `json:"explained_bytes"`
	// Unexplained = Kernel - Explained; negative when the parts overlap
	// or moved between the reads.
	Unexplained int64  `json:"unexplained_bytes"`
	Note        string `json:"note,omitempty"`
}

// Item is a named size.
type Item struct {
	Name  string `json:"name"`
	Bytes uint64 `json:"bytes"`
}

// TmpfsUsage is one tmpfs (or devtmpfs) filesystem: its used blocks, and
// how much of that the regions listed on it account for.
type TmpfsUsage struct {
	Mount   string `json:"mount"`
	Dev     string `json:"dev"`
	Used    uint64 `json:"used_bytes"`
	Regions uint64 `json:"regions_bytes"`
	Err     string `json:"error,omitempty"`
}

// NUMAView holds the memory nodes and what was read per process.
type NUMAView struct {
	Nodes []Node `json:"nodes"`
	// Read says which processes' numa_maps were read: "all selected"
	// (--numa), "instance main processes", or "none" (one node).
	Read string `json:"read"`
	Err  string `json:"error,omitempty"`
}

// Node is one memory node.
type Node struct {
	ID       int    `json:"id"`
	MemTotal uint64 `json:"mem_total_bytes"`
	MemFree  uint64 `json:"mem_free_bytes"`
}

// ProcNUMA is where a process's pages live.
type ProcNUMA struct {
	// Policy is the policy of the process's largest mapping (by resident
	// pages): default, interleave:0-1, bind:0, prefer:1 ...
	Policy string         `json:"policy,omitempty"`
	Nodes  map[int]uint64 `json:"node_bytes,omitempty"`
	// Imbalanced: see docs/mem.md (more than 80% of at least 1 GiB on one
	// node of a multi-node host under the default or interleave policy).
	Imbalanced bool   `json:"imbalanced"`
	Err        string `json:"error,omitempty"`
}

// Unreadable counts processes whose memory could not be read for one
// reason.
type Unreadable struct {
	Count  int    `json:"count"`
	Reason string `json:"reason"`
}
