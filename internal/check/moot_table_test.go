package check_test

import (
	"github.com/dbhost/dbhost/internal/check"
	"github.com/dbhost/dbhost/internal/facts"
)

// Settings made moot by another (issue 10 item 2): storage.barrier's
// barrier options change nothing on a device that reports no volatile write
// cache. storage-nobarrier-writethrough is ext4 mounted barrier=0 on loop0,
// whose queue/write_cache was set to "write through"; baseline's / is on
// vda, which reports "write back".
func init() {
	const wt, pgm = "storage-nobarrier-writethrough", "mount:/srv/dbhost/pg"
	addCases(
		tcase{name: "recorded moot: write through", base: wt, id: "storage.barrier", subject: pgm, want: check.Pass, says: []string{"nobarrier is moot", "(loop0)"}},
		tcase{name: "write back", base: wt, mutate: queue("loop0", "write_cache", "write back"), id: "storage.barrier", subject: pgm, want: check.Fail},
		tcase{name: "write cache unread: judged", base: wt, mutate: queue("loop0", "write_cache", ""), id: "storage.barrier", subject: pgm, want: check.Fail},
		tcase{name: "write through, data=writeback still judged", base: wt, mutate: mountAt("/srv/dbhost/pg", func(m *facts.Mount) { m.SuperOptions["data"] = "writeback" }),
			id: "storage.barrier", subject: pgm, want: check.Fail, says: []string{"mounted with data=writeback", "nobarrier is moot"}},
		tcase{name: "baseline write back, nobarrier", base: "baseline", mutate: mountAt("/", func(m *facts.Mount) { m.SuperOptions["nobarrier"] = "" }), id: "storage.barrier", subject: "mount:/", want: check.Fail},
		tcase{name: "baseline write through, nobarrier", base: "baseline", mutate: all(queue("vda", "write_cache", "write through"), mountAt("/", func(m *facts.Mount) { m.SuperOptions["nobarrier"] = "" })), id: "storage.barrier", subject: "mount:/", want: check.Pass, says: []string{"(vda)"}},
	)
}
