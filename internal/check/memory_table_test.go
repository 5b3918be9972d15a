package check_test

import (
	"strconv"

	"github.com/dbhost/dbhost/internal/check"
	"github.com/dbhost/dbhost/internal/facts"
	"github.com/dbhost/dbhost/internal/host"
)

// meminfo sets /proc/meminfo fields (kB).
func meminfo(fields map[string]uint64) func(*facts.Facts) {
	return func(f *facts.Facts) {
		mi := &f.Memory.Meminfo
		for k, v := range fields {
			v := v
			switch k {
			case "MemTotal":
				mi.MemTotal = &v
			case "CommitLimit":
				mi.CommitLimit = &v
			case "Committed_AS":
				mi.CommittedAS = &v
			case "SwapTotal":
				mi.SwapTotal = &v
			default:
				panic("meminfo field " + k)
			}
		}
	}
}

// strictHost is a host in mode 2 with ratio 50, 20000000 kB of RAM, no
// swap and no huge page pool.
func strictHost() func(*facts.Facts) {
	return all(meminfo(map[string]uint64{"MemTotal": 20_000_000, "SwapTotal": 0}), sysctl("vm.overcommit_memory", "2"), sysctl("vm.overcommit_ratio", "50"), sysctl("vm.overcommit_kbytes", "0"),
		func(f *facts.Facts) { f.Memory.HugePages = nil })
}

// keepOnly keeps the instances of one engine ("": none).
func keepOnly(e string) func(*facts.Facts) {
	return func(f *facts.Facts) {
		var keep []*facts.Instance
		for _, in := range f.Instances {
			if string(in.Engine) == e {
				keep = append(keep, in)
			}
		}
		f.Instances = keep
	}
}

func reading(path, value string) host.Reading { return host.Reading{Value: value, Source: path} }

// The baseline host has 24684092 kB of RAM (23.5 GiB): the kernel's
// min_free_kbytes formula is 4 x isqrt(24684092) = 19872 kB, 80 % of it
// 15897 kB, and 5 % of RAM 1234204 kB; 20 % of RAM is 5055302041 bytes.
func init() {
	const h = check.SubjectHost
	const b = "baseline"
	addCases(
		// mem.swappiness (mem-swapfile has a 1 GiB swap file): 1 to 10 swaps only under pressure; 0 risks the OOM
		// killer; above 10 (the Debian default 60) swaps database memory.
		tcase{name: "0", base: "mem-swapfile", mutate: sysctl("vm.swappiness", "0"), id: "mem.swappiness", subject: h, want: check.Fail, says: []string{"OOM killer"}},
		tcase{name: "1", base: "mem-swapfile", mutate: sysctl("vm.swappiness", "1"), id: "mem.swappiness", subject: h, want: check.Pass},
		tcase{name: "10", base: "mem-swapfile", mutate: sysctl("vm.swappiness", "10"), id: "mem.swappiness", subject: h, want: check.Pass},
		tcase{name: "11", base: "mem-swapfile", mutate: sysctl("vm.swappiness", "11"), id: "mem.swappiness", subject: h, want: check.Fail},
		tcase{name: "Debian's 60", base: "mem-swapfile", mutate: sysctl("vm.swappiness", "60"), id: "mem.swappiness", subject: h, want: check.Fail},
		tcase{name: "200, the kernel's maximum", base: "mem-swapfile", mutate: sysctl("vm.swappiness", "200"), id: "mem.swappiness", subject: h, want: check.Fail},
		tcase{name: "201 is no value", base: "mem-swapfile", mutate: sysctl("vm.swappiness", "201"), id: "mem.swappiness", subject: h, want: check.Unknown},
		tcase{name: "-1 is no value", base: "mem-swapfile", mutate: sysctl("vm.swappiness", "-1"), id: "mem.swappiness", subject: h, want: check.Unknown},
		// Without swap the value is moot: baseline has none.
		tcase{name: "no swap, 60", base: b, mutate: sysctl("vm.swappiness", "60"), id: "mem.swappiness", subject: h, want: check.Pass, says: []string{"no swap is active", "moot"}},
		tcase{name: "no swap, 0", base: b, mutate: sysctl("vm.swappiness", "0"), id: "mem.swappiness", subject: h, want: check.Pass, says: []string{"moot"}},
		tcase{name: "no swap, 201 is still no value", base: b, mutate: sysctl("vm.swappiness", "201"), id: "mem.swappiness", subject: h, want: check.Unknown},
		tcase{name: "swap list unreadable: judged", base: b, mutate: all(sysctl("vm.swappiness", "60"), func(f *facts.Facts) { f.Memory.SwapsErr = "permission denied" }), id: "mem.swappiness", subject: h, want: check.Fail},

		// mem.dirty below 64 GiB: dirty at most 20 %, background at most
		// 10 % and below dirty.
		tcase{name: "20 and 10", base: b, mutate: all(sysctl("vm.dirty_ratio", "20"), sysctl("vm.dirty_background_ratio", "10")), id: "mem.dirty", subject: h, want: check.Pass},
		tcase{name: "21", base: b, mutate: all(sysctl("vm.dirty_ratio", "21"), sysctl("vm.dirty_background_ratio", "10")), id: "mem.dirty", subject: h, want: check.Fail, says: []string{"above 20 %"}},
		tcase{name: "background 11", base: b, mutate: all(sysctl("vm.dirty_ratio", "20"), sysctl("vm.dirty_background_ratio", "11")), id: "mem.dirty", subject: h, want: check.Fail, says: []string{"above 10 %"}},
		tcase{name: "background equal", base: b, mutate: all(sysctl("vm.dirty_ratio", "10"), sysctl("vm.dirty_background_ratio", "10")), id: "mem.dirty", subject: h, want: check.Fail, says: []string{"not below"}},
		tcase{name: "background just below", base: b, mutate: all(sysctl("vm.dirty_ratio", "10"), sysctl("vm.dirty_background_ratio", "9")), id: "mem.dirty", subject: h, want: check.Pass},
		tcase{name: "bytes at 20 %", base: b, mutate: all(sysctl("vm.dirty_ratio", "0"), sysctl("vm.dirty_bytes", "5055302041"), sysctl("vm.dirty_background_ratio", "5")), id: "mem.dirty", subject: h, want: check.Pass},
		tcase{name: "bytes over 20 %", base: b, mutate: all(sysctl("vm.dirty_ratio", "0"), sysctl("vm.dirty_bytes", "5055302042"), sysctl("vm.dirty_background_ratio", "5")), id: "mem.dirty", subject: h, want: check.Fail},
		tcase{name: "ratio over 100", base: b, mutate: sysctl("vm.dirty_ratio", "101"), id: "mem.dirty", subject: h, want: check.Unknown},
		// From 64 GiB: 15 and 5.
		tcase{name: "64 GiB, 15 and 5", base: b, mutate: all(meminfo(map[string]uint64{"MemTotal": 64 << 20}), sysctl("vm.dirty_ratio", "15"), sysctl("vm.dirty_background_ratio", "5")), id: "mem.dirty", subject: h, want: check.Pass},
		tcase{name: "64 GiB, 16", base: b, mutate: all(meminfo(map[string]uint64{"MemTotal": 64 << 20}), sysctl("vm.dirty_ratio", "16"), sysctl("vm.dirty_background_ratio", "5")), id: "mem.dirty", subject: h, want: check.Fail, says: []string{"above 15 %"}},
		tcase{name: "64 GiB, background 6", base: b, mutate: all(meminfo(map[string]uint64{"MemTotal": 64 << 20}), sysctl("vm.dirty_ratio", "15"), sysctl("vm.dirty_background_ratio", "6")), id: "mem.dirty", subject: h, want: check.Fail, says: []string{"above 5 %"}},
		tcase{name: "just under 64 GiB, 20 and 10", base: b, mutate: all(meminfo(map[string]uint64{"MemTotal": 64<<20 - 1}), sysctl("vm.dirty_ratio", "20"), sysctl("vm.dirty_background_ratio", "10")), id: "mem.dirty", subject: h, want: check.Pass},

		// mem.zone_reclaim: 0, or a reclaim mode.
		tcase{name: "0", base: b, mutate: sysctl("vm.zone_reclaim_mode", "0"), id: "mem.zone_reclaim", subject: h, want: check.Pass},
		tcase{name: "1", base: b, mutate: sysctl("vm.zone_reclaim_mode", "1"), id: "mem.zone_reclaim", subject: h, want: check.Fail},
		tcase{name: "8 is no mode", base: b, mutate: sysctl("vm.zone_reclaim_mode", "8"), id: "mem.zone_reclaim", subject: h, want: check.Unknown},

		// mem.min_free_kbytes between 80 % of the formula and 5 % of RAM.
		tcase{name: "below 80 % of the formula", base: b, mutate: sysctl("vm.min_free_kbytes", "15896"), id: "mem.min_free_kbytes", subject: h, want: check.Fail},
		tcase{name: "80 % of the formula", base: b, mutate: sysctl("vm.min_free_kbytes", "15897"), id: "mem.min_free_kbytes", subject: h, want: check.Pass},
		tcase{name: "5 % of RAM", base: b, mutate: sysctl("vm.min_free_kbytes", "1234204"), id: "mem.min_free_kbytes", subject: h, want: check.Pass},
		tcase{name: "above 5 % of RAM", base: b, mutate: sysctl("vm.min_free_kbytes", "1234205"), id: "mem.min_free_kbytes", subject: h, want: check.Fail},

		// mem.swap: any active swap area.
		tcase{name: "no swap", base: b, mutate: func(f *facts.Facts) { f.Memory.Swaps = nil }, id: "mem.swap", subject: h, want: check.Fail},
		tcase{name: "a swap file", base: b, mutate: func(f *facts.Facts) {
			f.Memory.Swaps = []facts.Swap{{Filename: "/swapfile", Type: "file", SizeKB: 1 << 20, Priority: -2}}
		}, id: "mem.swap", subject: h, want: check.Pass},

		// mem.commit_limit under strict overcommit: the commitment below 90 %
		// of CommitLimit, computed from the settings: (20000000 kB - no
		// pool) x 50 % + no swap = 10000000 kB. Without databases the
		// commitment is Committed_AS.
		tcase{name: "89.9999 %", base: "mem-commit-near", mutate: all(strictHost(), keepOnly(""), meminfo(map[string]uint64{"Committed_AS": 8_999_999})), id: "mem.commit_limit", subject: h, want: check.Pass},
		tcase{name: "90 %", base: "mem-commit-near", mutate: all(strictHost(), keepOnly(""), meminfo(map[string]uint64{"Committed_AS": 9_000_000})), id: "mem.commit_limit", subject: h, want: check.Fail},
		// A planned shared_buffers commits beyond what PostgreSQL holds now.
		tcase{name: "the plan commits more", base: "mem-commit-near", mutate: all(strictHost(), meminfo(map[string]uint64{"Committed_AS": 5_000_000}), keepOnly("postgres"), setting("postgres:5432", "huge_pages", "off"), setting("postgres:5432", "shared_buffers", "6GB")), id: "mem.commit_limit", subject: h, want: check.Fail, says: []string{"postgres:5432 "}},
		tcase{name: "heuristic mode", base: "mem-commit-near", mutate: sysctl("vm.overcommit_memory", "0"), id: "mem.commit_limit", subject: h, want: check.Pass},
		tcase{name: "mode 3 is none", base: "mem-commit-near", mutate: sysctl("vm.overcommit_memory", "3"), id: "mem.commit_limit", subject: h, want: check.Unknown},

		// mem.max_map_count for MongoDB: twice its connections (80 % of
		// nofile 20000 = 16000 here).
		tcase{name: "2 x connections", base: "mem-mongo-maxmap", mutate: sysctl("vm.max_map_count", "32000"), id: "mem.max_map_count", subject: "mongodb:36061", want: check.Pass},
		tcase{name: "one below", base: "mem-mongo-maxmap", mutate: sysctl("vm.max_map_count", "31999"), id: "mem.max_map_count", subject: "mongodb:36061", want: check.Fail},

		// mem.thp.khugepaged for MongoDB 8: max_ptes_none 0.
		tcase{name: "0", base: "mem-mongo-maxmap", mutate: func(f *facts.Facts) {
			f.Memory.THP.MaxPtesNone = reading(facts.THPDir+"/khugepaged/max_ptes_none", "0")
		}, id: "mem.thp.khugepaged", subject: h, want: check.Pass},
		tcase{name: "1", base: "mem-mongo-maxmap", mutate: func(f *facts.Facts) {
			f.Memory.THP.MaxPtesNone = reading(facts.THPDir+"/khugepaged/max_ptes_none", "1")
		}, id: "mem.thp.khugepaged", subject: h, want: check.Fail},

		// mem.thp.enabled and defrag for PostgreSQL: never.
		tcase{name: "never", base: b, mutate: func(f *facts.Facts) {
			f.Memory.THP.Enabled = reading(facts.THPDir+"/enabled", "always madvise [never]")
		}, id: "mem.thp.enabled", subject: h, want: check.Pass},
		tcase{name: "always", base: b, mutate: func(f *facts.Facts) {
			f.Memory.THP.Enabled = reading(facts.THPDir+"/enabled", "[always] madvise never")
		}, id: "mem.thp.enabled", subject: h, want: check.Fail},
		// defrag acts only while enabled is "always" for them: with
		// "never" or "madvise" it is moot and passes whatever it is.
		tcase{name: "never", base: b, mutate: func(f *facts.Facts) {
			f.Memory.THP.Enabled = reading(facts.THPDir+"/enabled", "[always] madvise never")
			f.Memory.THP.Defrag = reading(facts.THPDir+"/defrag", "always defer defer+madvise madvise [never]")
		}, id: "mem.thp.defrag", subject: h, want: check.Pass},
		tcase{name: "always", base: b, mutate: func(f *facts.Facts) {
			f.Memory.THP.Enabled = reading(facts.THPDir+"/enabled", "[always] madvise never")
			f.Memory.THP.Defrag = reading(facts.THPDir+"/defrag", "[always] defer defer+madvise madvise never")
		}, id: "mem.thp.defrag", subject: h, want: check.Fail},
		tcase{name: "always, moot under enabled never", base: b, mutate: func(f *facts.Facts) {
			f.Memory.THP.Enabled = reading(facts.THPDir+"/enabled", "always madvise [never]")
			f.Memory.THP.Defrag = reading(facts.THPDir+"/defrag", "[always] defer defer+madvise madvise never")
		}, id: "mem.thp.defrag", subject: h, want: check.Pass},
		tcase{name: "always, moot under enabled madvise", base: b, mutate: func(f *facts.Facts) {
			f.Memory.THP.Enabled = reading(facts.THPDir+"/enabled", "always [madvise] never")
			f.Memory.THP.Defrag = reading(facts.THPDir+"/defrag", "[always] defer defer+madvise madvise never")
		}, id: "mem.thp.defrag", subject: h, want: check.Pass},

		// mem.numa_balancing on two nodes: off.
		tcase{name: "off", base: "numa-2node", mutate: sysctl("kernel.numa_balancing", "0"), id: "mem.numa_balancing", subject: h, want: check.Pass},
		tcase{name: "on", base: "numa-2node", mutate: sysctl("kernel.numa_balancing", "1"), id: "mem.numa_balancing", subject: h, want: check.Fail},
		tcase{name: "on, one node", base: b, mutate: sysctl("kernel.numa_balancing", "1"), id: "mem.numa_balancing", subject: h, want: check.Pass},

		// mem.shm_limits: shmmax at least the largest segment (56 bytes).
		tcase{name: "shmmax = segment", base: "mem-shmmax-small", mutate: sysctl("kernel.shmmax", "56"), id: "mem.shm_limits", subject: "postgres:5432", want: check.Pass},
		tcase{name: "shmmax one below", base: "mem-shmmax-small", mutate: sysctl("kernel.shmmax", "55"), id: "mem.shm_limits", subject: "postgres:5432", want: check.Fail},
	)
	// container.limits: a cache above 75 % of the group's limit; here
	// shared_buffers is 256 MiB (268435456 bytes).
	limit := func(bytes uint64) func(*facts.Facts) {
		return func(f *facts.Facts) {
			in := instance(f, "postgres:38703")
			in.Cgroup.MemoryMax.Value = strconv.FormatUint(bytes, 10)
		}
	}
	addCases(
		tcase{name: "cache 75 % of the limit", base: "container-memlimit", mutate: limit(357913942), id: "container.limits", subject: "postgres:38703", want: check.Pass},
		tcase{name: "cache just over 75 %", base: "container-memlimit", mutate: limit(357913941), id: "container.limits", subject: "postgres:38703", want: check.Fail},
		tcase{name: "no limit", base: "container-memlimit", mutate: func(f *facts.Facts) { instance(f, "postgres:38703").Cgroup.MemoryMax.Value = "max" }, id: "container.limits", subject: "postgres:38703", want: check.Pass},
	)
}
