package change_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/dbhost/dbhost/internal/change"
	"github.com/dbhost/dbhost/internal/host"
	"github.com/dbhost/dbhost/internal/journal"
	"github.com/dbhost/dbhost/internal/testdb"
)

func current(t *testing.T, p string) string {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return journal.Current(string(b))
}

// TestKernelAndSysfs changes a /proc/sys value and a /sys selector file
// through the change layer, reads them back through the host, and puts
// them back; the journal says which kind each is.
func TestKernelAndSysfs(t *testing.T) {
	testdb.Journal(t) // root, the host lock, a safety net
	const sysctl = "/proc/sys/vm/swappiness"
	const thp = "/sys/kernel/mm/transparent_hugepage/defrag"
	if _, err := os.Stat(thp); err != nil {
		testdb.Need(t, thp, false)
	}
	oldSysctl, oldTHP := current(t, sysctl), current(t, thp)
	newSysctl, newTHP := "13", "never"
	if oldTHP == newTHP {
		newTHP = "madvise"
	}
	h, err := host.Open("/")
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	c, err := change.Open(filepath.Join(t.TempDir(), "j"), change.Config{Host: h})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Restore() })
	if got, err := c.Kernel(sysctl, newSysctl); err != nil || got != newSysctl {
		t.Fatalf("Kernel(%s) = %q, %v", sysctl, got, err)
	}
	if got, err := c.Kernel(thp, newTHP); err != nil || got != newTHP {
		t.Fatalf("Kernel(%s) = %q, %v", thp, got, err)
	}
	cs := c.Journal().Changes()
	if len(cs) != 2 || cs[0].Kind != change.KindKernel || cs[1].Kind != change.KindSysfs {
		t.Fatalf("journaled %+v", cs)
	}
	if err := c.Restore(); err != nil {
		t.Fatal(err)
	}
	if current(t, sysctl) != oldSysctl || current(t, thp) != oldTHP {
		t.Errorf("after restore: %s %s, want %s %s", current(t, sysctl), current(t, thp), oldSysctl, oldTHP)
	}
}

// TestKernelRefusesOtherPaths: only values under /proc/sys and /sys, one
// line each, and only on the live system.
func TestKernelRefusesOtherPaths(t *testing.T) {
	c, err := change.Open(filepath.Join(t.TempDir(), "j"), change.Config{})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range [][2]string{{"/etc/passwd", "x"}, {"/proc/sys/vm/../../../etc/passwd", "x"}, {"/proc/sys/vm/swappiness", "1\n2"}, {"proc/sys/vm/swappiness", "1"}} {
		if _, err := c.Kernel(tc[0], tc[1]); err == nil || !strings.Contains(err.Error(), "refusing") {
			t.Errorf("Kernel(%q, %q): %v", tc[0], tc[1], err)
		}
	}
	h, err := host.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	c2, err := change.Open(filepath.Join(t.TempDir(), "j"), change.Config{Host: h})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c2.Kernel("/proc/sys/vm/swappiness", "1"); err == nil || !strings.Contains(err.Error(), "live system") {
		t.Errorf("Kernel on a copy tree: %v", err)
	}
	if len(c.Journal().Changes())+len(c2.Journal().Changes()) != 0 {
		t.Error("a refused value was journaled")
	}
}
