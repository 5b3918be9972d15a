package check_test

import (
	"context"
	"path/filepath"
	"strings"
	"testing"

	"github.com/dbhost/dbhost/internal/check"
	"github.com/dbhost/dbhost/internal/engine"
	"github.com/dbhost/dbhost/internal/facts"
	"github.com/dbhost/dbhost/internal/fixture"
	"github.com/dbhost/dbhost/internal/fixture/derive"
	"github.com/dbhost/dbhost/internal/host"
)

// garbage is what a corrupt snapshot or an odd kernel file may hold where a
// value belongs: nothing, text, a negative number, one beyond 64 bits, a
// number in another base.
var garbage = []string{"", "junk\n", "-1\n", "99999999999999999999999\n", "0x10\n"}

func judge(t *testing.T, file string) map[string]check.Finding {
	t.Helper()
	h, err := host.OpenSnapshot(file)
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	f := facts.Gather(context.Background(), h, check.GatherOptions(engine.Options{}))
	out := map[string]check.Finding{}
	for _, fd := range check.Run(f, check.Selector{}) {
		out[fd.ID+" "+fd.Subject] = fd
	}
	return out
}

// TestGarbageIsUnknown replaces every kernel value a recorded host holds
// (/proc/sys and /sys) with garbage: no check may reach a verdict the real
// values did not give, nor quote the garbage as the value it judged. What
// does not parse is unknown, with the reason.
func TestGarbageIsUnknown(t *testing.T) {
	for _, name := range []string{"baseline", "numa-2node", "mem-hugepages-pg-on", "storage-nfs-hard", "mem-thp-always"} {
		clean := judge(t, fixture.Path(name))
		for _, g := range garbage {
			a, err := derive.Read(fixture.Path(name))
			if err != nil {
				t.Fatal(err)
			}
			n := 0
			for file := range a.Files {
				if strings.HasPrefix(file, "fs/proc/sys/") || strings.HasPrefix(file, "fs/sys/") {
					a.Files[file] = []byte(g)
					n++
				}
			}
			if n < 50 {
				t.Fatalf("%s: only %d kernel files to garble", name, n)
			}
			p := filepath.Join(t.TempDir(), "garbled.tar.gz")
			if err := a.Write(p); err != nil {
				t.Fatal(err)
			}
			token := strings.TrimSpace(g)
			for k, fd := range judge(t, p) {
				if fd.Status == check.Unknown {
					if strings.TrimSpace(fd.Reason) == "" {
						t.Errorf("%s with %q: %s is unknown without a reason", name, g, k)
					}
					continue
				}
				if was := clean[k].Status; fd.Status != was {
					t.Errorf("%s with every kernel file %q: %s is %s (it is %s with the real values): %s", name, g, k, fd.Status, was, fd.Reason)
				}
				if len(token) > 2 && strings.Contains(fd.Reason, token) {
					t.Errorf("%s with %q: %s judged the garbage: %s", name, g, k, fd.Reason)
				}
			}
		}
	}
}
