package cli

import (
	"bytes"
	"context"
	"path/filepath"
	"slices"
	"testing"

	"github.com/dbhost/dbhost/internal/check"
	"github.com/dbhost/dbhost/internal/engine"
	"github.com/dbhost/dbhost/internal/experiment"
	"github.com/dbhost/dbhost/internal/fixture"
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
	names := gatherOptions(engine.Options{}).Sysctls
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

// TestGatheredSysctlsFromTheRegistry: the kernel parameters gathered are a
// function of the check registry, not of which package's init ran: a
// check's declared parameter is in the list, the command line (audit,
// collect, serve) and the fixtures (as fleet) gather the identical set on a
// recorded host, and what experiments read is among them.
func TestGatheredSysctlsFromTheRegistry(t *testing.T) {
	names := gatherOptions(engine.Options{}).Sysctls
	c, ok := check.Lookup("mem.swappiness")
	if !ok || !slices.Contains(c.Sysctls, "vm.swappiness") {
		t.Fatalf("mem.swappiness declares %v", c)
	}
	for _, c := range check.All() {
		for _, n := range c.Sysctls {
			if !slices.Contains(names, n) {
				t.Errorf("%s declares %s, which is not gathered", c.ID, n)
			}
		}
	}
	for _, n := range experiment.HostSysctls() {
		if !slices.Contains(names, n) {
			t.Errorf("experiments read %s, which snapshots do not record", n)
		}
	}
	const name = "baseline"
	src := sourceFlags{from: fixture.Path(name)}
	var errb bytes.Buffer
	f, done, ok := src.gather(context.Background(), Env{Stdout: &bytes.Buffer{}, Stderr: &errb}, "audit")
	if !ok {
		t.Fatalf("gather: %s", errb.String())
	}
	defer done()
	cli, fx := f.SysctlNames(), fixture.Facts(t, name).SysctlNames()
	if !slices.Equal(cli, names) || !slices.Equal(fx, names) {
		t.Errorf("gathered sysctls differ:\ncli     %v\nfixture %v\nlist    %v", cli, fx, names)
	}
}
