package cli

import (
	"path/filepath"
	"testing"

	"github.com/dbhost/dbhost/internal/facts"
	"github.com/dbhost/dbhost/internal/fixture/derive"
	"github.com/dbhost/dbhost/internal/host"
)

// TestCollectKeepsEverySysctl: a snapshot holds every kernel parameter a
// check declares (the gatherer's list), so `audit --from` judges what a
// live audit would.
func TestCollectKeepsEverySysctl(t *testing.T) {
	snap := filepath.Join(t.TempDir(), "snap.tar.gz")
	if code, _, stderr := runCLI(t, "collect", "-o", snap); code != ExitOK {
		t.Fatalf("collect: %d %s", code, stderr)
	}
	a, err := derive.Read(snap)
	if err != nil {
		t.Fatal(err)
	}
	h, err := host.Open("/")
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	names := facts.SysctlNames()
	if len(names) == 0 {
		t.Fatal("no kernel parameter is gathered")
	}
	kept := 0
	for _, n := range names {
		p := host.SysctlPath(n)
		if _, ok := a.Files["fs"+p]; ok {
			kept++
			continue
		}
		// A parameter this kernel lacks (kernel.numa_balancing without
		// NUMA) cannot be recorded.
		if h.ReadSysctl(n).OK() {
			t.Errorf("snapshot lacks %s (%s)", n, p)
		}
	}
	t.Logf("%d of %d gathered kernel parameters in the snapshot", kept, len(names))
}
