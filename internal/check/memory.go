package check

import (
	"fmt"

	"github.com/dbhost/dbhost/internal/facts"
)

func init() {
	Register(Check{
		ID:        "mem.swappiness",
		Title:     "vm.swappiness suits a database host",
		Severity:  Warning,
		AppliesTo: []string{"host"},
		Doc: `Reads vm.swappiness. Databases manage their own caches; the default 60 lets
the kernel swap out database memory to keep page cache, and a swapped-out
buffer pool stalls queries on disk reads. 1 keeps swapping for real memory
pressure only (10 where a little swapping is wanted). 0 is not safer: on
kernels since 3.5 it can make the OOM killer fire before any swapping.`,
		Refs: []string{"https://docs.kernel.org/admin-guide/sysctl/vm.html#swappiness"},
		Run:  checkSwappiness,
	})
}

func checkSwappiness(f *facts.Facts) []Result {
	r := f.SysctlReading("vm.swappiness")
	ev := EvReading("vm.swappiness", r)
	v, ok := r.Int()
	if !ok {
		return []Result{UnknownR(SubjectHost, "cannot read vm.swappiness: "+r.Err, ev)}
	}
	switch {
	case v >= 1 && v <= 10:
		return []Result{PassR(SubjectHost, fmt.Sprintf("vm.swappiness is %d: the kernel swaps only under real memory pressure.", v), ev)}
	case v == 0:
		return []Result{FailR(SubjectHost,
			"vm.swappiness is 0: on kernels since 3.5 this can invoke the OOM killer instead of swapping, which kills the database rather than slowing it. Use 1.",
			sysctlFix(f, "Set vm.swappiness to 1", "vm.swappiness", "1"), ev)}
	}
	return []Result{FailR(SubjectHost,
		fmt.Sprintf("vm.swappiness is %d: the kernel will swap out database memory to keep page cache; a swapped-out buffer pool turns memory reads into disk reads and stalls the server. Use 1 (or 10 if some swapping is wanted).", v),
		sysctlFix(f, "Set vm.swappiness to 1", "vm.swappiness", "1"), ev)}
}
