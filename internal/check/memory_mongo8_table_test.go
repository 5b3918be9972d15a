package check_test

import (
	"github.com/dbhost/dbhost/internal/check"
	"github.com/dbhost/dbhost/internal/facts"
)

// arch sets the architecture the host was recorded on (Go's or uname's name).
func arch(a string) func(*facts.Facts) { return func(f *facts.Facts) { f.Manifest.Arch = a } }

// MongoDB 8's THP wish depends on the architecture, and its documented setup
// comes with companion settings (issue 10 item 9). mem-mongo8-thp is a
// MongoDB 8.0.4 with enabled always, defrag defer+madvise, max_ptes_none 0
// and vm.overcommit_memory 0; the recording also holds the VM's shared
// PostgreSQL, MariaDB and Redis, whose THP and overcommit wishes conflict
// with MongoDB 8's, so most cases keep MongoDB alone (only).
func init() {
	const h, b, m = check.SubjectHost, "mem-mongo8-thp", "mongodb:38667"
	thpAlways := func(f *facts.Facts) {
		f.Memory.THP.Enabled = reading(facts.THPDir+"/enabled", "[always] madvise never")
	}
	addCases(
		// enabled: always on x86_64 and ARM64, never on ppc64le and
		// s390x (the legacy TCMalloc), unknown elsewhere.
		tcase{name: "mongo 8 x86_64 always", base: b, mutate: all(only(m), thpAlways), id: "mem.thp.enabled", subject: h, want: check.Pass},
		tcase{name: "mongo 8 arm64 always", base: b, mutate: all(only(m), thpAlways, arch("arm64")), id: "mem.thp.enabled", subject: h, want: check.Pass},
		tcase{name: "mongo 8 aarch64 (uname name) always", base: b, mutate: all(only(m), thpAlways, arch("aarch64")), id: "mem.thp.enabled", subject: h, want: check.Pass},
		tcase{name: "mongo 8 x86_64 never", base: b, mutate: all(only(m), func(f *facts.Facts) {
			f.Memory.THP.Enabled = reading(facts.THPDir+"/enabled", "always madvise [never]")
		}), id: "mem.thp.enabled", subject: h, want: check.Fail, says: []string{"x86_64 and ARM64"}},
		tcase{name: "mongo 8 ppc64le always", base: b, mutate: all(only(m), thpAlways, arch("ppc64le")), id: "mem.thp.enabled", subject: h, want: check.Fail, says: []string{"legacy TCMalloc on ppc64le"}},
		tcase{name: "mongo 8 s390x never", base: b, mutate: all(only(m), arch("s390x"), func(f *facts.Facts) {
			f.Memory.THP.Enabled = reading(facts.THPDir+"/enabled", "always madvise [never]")
		}), id: "mem.thp.enabled", subject: h, want: check.Pass},
		tcase{name: "mongo 8 riscv64", base: b, mutate: all(only(m), thpAlways, arch("riscv64")), id: "mem.thp.enabled", subject: h, want: check.Unknown, says: []string{"not for riscv64"}},
		tcase{name: "mongo 8 arch not recorded", base: b, mutate: all(only(m), thpAlways, arch("")), id: "mem.thp.enabled", subject: h, want: check.Unknown},

		// Companions: defrag defer+madvise (only on x86_64/ARM64).
		tcase{name: "mongo 8 defrag defer+madvise", base: b, mutate: all(only(m), thpAlways), id: "mem.thp.defrag", subject: h, want: check.Pass},
		tcase{name: "mongo 8 defrag madvise", base: b, mutate: all(only(m), thpAlways, func(f *facts.Facts) {
			f.Memory.THP.Defrag = reading(facts.THPDir+"/defrag", "always defer defer+madvise [madvise] never")
		}), id: "mem.thp.defrag", subject: h, want: check.Fail},

		// Companions: vm.overcommit_memory 1 on x86_64/ARM64; no wish
		// where the legacy TCMalloc runs (ppc64le: no result).
		tcase{name: "mongo 8 overcommit 0", base: b, mutate: all(only(m), sysctl("vm.overcommit_memory", "0")), id: "mem.overcommit", subject: h, want: check.Fail, says: []string{"MongoDB 8 (" + m + ")", "upgraded TCMalloc"}},
		tcase{name: "mongo 8 overcommit 1", base: b, mutate: all(only(m), sysctl("vm.overcommit_memory", "1")), id: "mem.overcommit", subject: h, want: check.Pass},
		// Beside PostgreSQL (and Redis) the documented PostgreSQL mode is
		// kept and MongoDB's wish is named.
		tcase{name: "mongo 8 beside postgres", base: b, mutate: sysctl("vm.overcommit_memory", "0"), id: "mem.overcommit", subject: h, want: check.Fail, says: []string{"MongoDB 8 (" + m + ") asks for mode 1"}},
	)
}
