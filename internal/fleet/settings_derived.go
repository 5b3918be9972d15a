package fleet

import (
	"math/bits"
	"path/filepath"
	"strconv"
	"strings"
)

// Compared forms of kernel parameters whose value is the kernel's boot
// default for the host's RAM or CPUs: two hosts with a little more or less
// RAM hold different numbers that mean the same thing ("left alone").
const (
	DerivedFromRAM  = "default (derived from RAM)"
	DerivedFromCPUs = "default (derived from CPUs)"
)

// A derivation is a kernel parameter that the kernel computes at boot from
// the RAM (MemTotal, kB) or the CPUs of the host. fits reports whether a
// value is that default. The kernel computes it from what it sees at boot
// (free pages while it is still setting up, the managed lowmem), which is a
// little below the MemTotal a snapshot records: bootShare is the share of
// MemTotal that input may be, and the formulas take the range.
type derivation struct {
	from string // DerivedFromRAM or DerivedFromCPUs
	fits func(v, memKB uint64, cpus int) bool
}

// bootShareLow: the least share of MemTotal a boot-time input is taken to
// be (the boot reserve, memmap and kernel image stay well under 10%).
const bootShareLow = 0.9

// derivations are the kernel parameters the checks gather whose default
// is derived from the host. Formulas from torvalds/linux (4 KiB pages,
// 16 KiB kernel stacks as on x86-64 and arm64).
var derivations = map[string]derivation{
	// fs/file_table.c files_maxfiles_init: n = (totalram_pages -
	// memreserve) * (PAGE_SIZE/1024) / 10 with memreserve = 3/2 of the
	// pages in use at that point of the boot; at least NR_FILE (8192).
	"fs.file-max": {DerivedFromRAM, func(v, memKB uint64, _ int) bool {
		lo, hi := max(low(memKB)/10, 8192), max(memKB/10+memKB/1000, 8192)
		return v >= lo && v <= hi
	}},
	// kernel/fork.c set_max_threads: nr_pages * PAGE_SIZE / (THREAD_SIZE *
	// 8), clamped to [MIN_THREADS 20, FUTEX_TID_MASK].
	"kernel.threads-max": {DerivedFromRAM, func(v, memKB uint64, _ int) bool {
		th := func(kb uint64) uint64 { return min(max(kb/128, 20), 0x3fffffff) }
		return v >= th(low(memKB)) && v <= th(memKB+memKB/100)
	}},
	// mm/page_alloc.c calculate_min_free_kbytes: int_sqrt(lowmem_kbytes *
	// 16) clamped to [128, 262144] (65536 before Linux 5.7); and
	// mm/khugepaged.c set_recommended_min_free_kbytes, with THP enabled:
	// pageblock_nr_pages * nr_zones * (2 + MIGRATE_PCPTYPES^2) pages
	// (22528 kB a zone with 2 MiB pageblocks), at most 5% of lowmem.
	"vm.min_free_kbytes": {DerivedFromRAM, func(v, memKB uint64, _ int) bool {
		sq := func(kb uint64) uint64 { return min(max(isqrt(kb*16), 128), 262144) }
		if (v >= sq(low(memKB)) && v <= sq(memKB)) || (v == 65536 && isqrt(low(memKB)*16) >= 65536) {
			return true
		}
		for zones := uint64(1); zones <= 4; zones++ {
			rec := 22528 * zones
			if rec <= low(memKB)/20 && v == rec {
				return true
			}
			if rec > low(memKB)/20 && v >= low(memKB)/20 && v <= memKB/20 {
				return true // capped at 5% of lowmem
			}
		}
		return false
	}},
	// kernel/pid.c pid_idr_init: max(PID_MAX_DEFAULT 32768,
	// PIDS_PER_CPU_DEFAULT 1024 * num_possible_cpus()), at most
	// PID_MAX_LIMIT (4194304 on 64-bit). The CPUs counted stand for the
	// possible ones; a host with more possible CPUs than present ones
	// compares as a value.
	"kernel.pid_max": {DerivedFromCPUs, func(v, _ uint64, cpus int) bool {
		return cpus > 0 && v == min(max(32768, 1024*uint64(cpus)), 4194304)
	}},
	// net/ipv4/tcp_ipv4.c tcp_set_hashinfo: max(128, ehash_entries / 128)
	// (/ 256 in older kernels); net/ipv4/tcp.c tcp_init sizes the
	// established hash with alloc_large_system_hash(..., 17 /* one slot
	// per 128 KB of memory */), rounded up to a power of two.
	"net.ipv4.tcp_max_syn_backlog": {DerivedFromRAM, func(v, memKB uint64, _ int) bool {
		for _, kb := range []uint64{low(memKB), memKB} {
			e := pow2ceil(max(kb/128, 1))
			if v == max(128, e/128) || v == max(128, e/256) {
				return true
			}
		}
		return false
	}},
}

// derived returns the compared form of a kernel parameter: DerivedFromRAM
// or DerivedFromCPUs when value is the kernel's default for this host, else
// "" (the value is compared as it is). memKB or cpus is 0 when unknown.
func derived(name, value string, memKB uint64, cpus int) string {
	d, ok := derivations[name]
	if !ok {
		return ""
	}
	if (d.from == DerivedFromRAM && memKB == 0) || (d.from == DerivedFromCPUs && cpus <= 0) {
		return ""
	}
	v, err := strconv.ParseUint(value, 10, 64)
	if err != nil || !d.fits(v, memKB, cpus) {
		return ""
	}
	return d.from
}

// IsDerived reports a compared value that stands for a kernel default
// derived from the host (see DerivedFromRAM).
func IsDerived(v string) bool { return v == DerivedFromRAM || v == DerivedFromCPUs }

func low(kb uint64) uint64 { return uint64(float64(kb) * bootShareLow) }

func isqrt(n uint64) uint64 {
	if n == 0 {
		return 0
	}
	x := uint64(1) << ((bits.Len64(n) + 1) / 2)
	for {
		y := (x + n/x) / 2
		if y >= x {
			return x
		}
		x = y
	}
}

func pow2ceil(n uint64) uint64 {
	if n <= 1 {
		return 1
	}
	return 1 << bits.Len64(n-1)
}

// cleanPath is the compared form of a database setting that is one
// absolute path: the server reads "/var/lib/mysql/" and "/var/lib/mysql"
// alike (one is what the live server reports, the other its file). Other
// values are returned as they are.
func cleanPath(v string) string {
	if len(v) < 2 || v[0] != '/' || strings.ContainsAny(v, " \t\n,;") {
		return v
	}
	return filepath.Clean(v)
}
