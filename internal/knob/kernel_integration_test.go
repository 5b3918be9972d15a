package knob_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/dbhost/dbhost/internal/change"
	"github.com/dbhost/dbhost/internal/host"
	"github.com/dbhost/dbhost/internal/journal"
	"github.com/dbhost/dbhost/internal/knob"
	"github.com/dbhost/dbhost/internal/testdb"
)

// recoverEnv makes the test binary a fresh `recover` process: it restores
// the journal named by the variable and exits, as dbhost experiment
// recover does after a crash.
const recoverEnv = "DBHOST_KNOB_TEST_RECOVER"

func TestMain(m *testing.M) {
	if file := os.Getenv(recoverEnv); file != "" {
		if err := change.Recover(file, changeConfig()); err != nil {
			fmt.Fprintln(os.Stderr, "recover:", err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// recoverInNewProcess restores a journal file in a new process, which
// knows nothing but the file.
func recoverInNewProcess(t *testing.T, file string) {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), recoverEnv+"="+file)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("recover in a new process: %v\n%s", err, out)
	}
	if _, err := os.Stat(file); !os.IsNotExist(err) {
		t.Fatalf("journal %s left after recover: %v", file, err)
	}
}

func liveHost(t *testing.T) *host.Host {
	t.Helper()
	h, err := host.Open("/")
	if err != nil {
		t.Fatal(err)
	}
	return h
}

func read(t *testing.T, p string) string {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return journal.Current(string(b))
}

const (
	swappiness = "/proc/sys/vm/swappiness"
	thpEnabled = "/sys/kernel/mm/transparent_hugepage/enabled"
	thpDefrag  = "/sys/kernel/mm/transparent_hugepage/defrag"
	huge2M     = "/sys/kernel/mm/hugepages/hugepages-2048kB/nr_hugepages"
	huge1G     = "/sys/kernel/mm/hugepages/hugepages-1048576kB/nr_hugepages"
)

// Kernel knobs are written, read back, and restored by the journal.
func TestKernelKnobs(t *testing.T) {
	j := hostChanger(t)
	ctx := context.Background()
	files := []string{swappiness, thpEnabled, thpDefrag, huge2M}
	before := map[string]string{}
	for _, f := range files {
		before[f] = read(t, f)
	}
	a := knob.NewApplier(liveHost(t), j, knob.Target{})
	// Values that differ from the present ones, whatever they are.
	swap := "13"
	if before[swappiness] == swap {
		swap = "14"
	}
	thp := "never"
	if before[thpEnabled] == thp {
		thp = "always"
	}
	defrag := "defer"
	if before[thpDefrag] == defrag {
		defrag = "madvise"
	}
	n, _ := strconv.Atoi(before[huge2M])
	pages := strconv.Itoa(n + 16)
	_, set, err := knob.ParseArm(fmt.Sprintf("a: vm.swappiness=%s thp.enabled=%s thp.defrag=%s hugepages=%s", swap, thp, defrag, pages))
	if err != nil {
		t.Fatal(err)
	}
	if err := a.Check(ctx, set); err != nil {
		t.Fatal(err)
	}
	res, err := a.Apply(ctx, set, false)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"vm.swappiness": swap, "thp.enabled": thp, "thp.defrag": defrag, "hugepages.2M": pages}
	for k, v := range want {
		if res.Values[k] != v {
			t.Errorf("Applied %s = %q, want %q", k, res.Values[k], v)
		}
	}
	if res.Restarted {
		t.Error("restarted without a database")
	}
	for f, v := range map[string]string{swappiness: swap, thpEnabled: thp, thpDefrag: defrag, huge2M: pages} {
		if got := read(t, f); got != v {
			t.Errorf("%s = %q, want %q", f, got, v)
		}
	}
	fp, err := a.Fingerprint(ctx, []string{"vm.swappiness"})
	if err != nil {
		t.Fatal(err)
	}
	if fp["vm.swappiness"] != swap || fp["thp.enabled"] != thp || fp["hugepages.2M.total"] != pages {
		t.Errorf("fingerprint after apply: %v", fp)
	}
	if err := j.Restore(); err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
		if got := read(t, f); got != before[f] {
			t.Errorf("after restore %s = %q, want %q", f, got, before[f])
		}
	}
}

// Values the kernel does not offer are refused before anything changes.
func TestKernelCheckRefuses(t *testing.T) {
	j := hostChanger(t)
	a := knob.NewApplier(liveHost(t), j, knob.Target{})
	// A pool far larger than memory, in the largest page size this kernel
	// offers (a CPU without pdpe1gb has no 1G pages).
	big := "hugepages.2M=100000000"
	if _, err := os.Stat(huge1G); err == nil {
		big = "hugepages.1G=100000"
	}
	for _, c := range []struct{ set, err string }{
		{"thp.enabled=sometimes", `offers always, madvise, never, not "sometimes"`},
		{"vm.no_such_knob=1", "no such sysctl"},
		{"vm.drop_caches=3", "an action, not a setting"},
		{"kernel.osrelease=1", "read-only"},
		{"hugepages.2M=lots", "not a page count"},
		{"hugepages.16G=1", "no 16G huge pages"},
		{big, "refused to keep the host alive"},
		{"pg.work_mem=64MB", "not a PostgreSQL server"},
		{"disk.read_ahead_kb=128", "no data directory"},
	} {
		_, set, err := knob.ParseArm("a: " + c.set)
		if err != nil {
			t.Fatal(err)
		}
		err = a.Check(context.Background(), set)
		if err == nil || !strings.Contains(err.Error(), c.err) {
			t.Errorf("Check(%s) = %v, want %q", c.set, err, c.err)
		}
		if _, err := a.Apply(context.Background(), set, false); err == nil {
			t.Errorf("Apply(%s) succeeded", c.set)
		}
	}
	if err := a.Check(context.Background(), []knob.Setting{{Name: "vm.swappiness", Value: " "}}); err == nil || !strings.Contains(err.Error(), "empty value") {
		t.Errorf("empty value: %v", err)
	}
	if ch := j.Journal().Changes(); len(ch) != 0 {
		t.Errorf("refused knobs were journaled: %v", ch)
	}
}

// 1 GB pages: the kernel may find no contiguous gigabyte. Whatever it
// does, Apply never reports success unless the pool holds every page. A
// CPU without 1 GB pages (no pdpe1gb) has no pool: the knob is refused
// with that reason and nothing is journaled.
func TestHugePages1G(t *testing.T) {
	j := hostChanger(t)
	if _, err := os.Stat(huge1G); errors.Is(err, os.ErrNotExist) {
		a := knob.NewApplier(liveHost(t), j, knob.Target{})
		_, err := a.Apply(context.Background(), []knob.Setting{{Name: "hugepages.1G", Value: "2"}}, false)
		if err == nil || !strings.Contains(err.Error(), "this kernel offers no 1G huge pages") {
			t.Errorf("Apply(hugepages.1G=2) on a kernel without 1G pages: %v", err)
		}
		if ch := j.Journal().Changes(); len(ch) != 0 {
			t.Errorf("a refused knob was journaled: %v", ch)
		}
		t.Log("this CPU has no 1 GB pages: checked the refusal")
		return
	}
	before := read(t, huge1G)
	n, _ := strconv.Atoi(before)
	want := n + 2
	a := knob.NewApplier(liveHost(t), j, knob.Target{})
	res, err := a.Apply(context.Background(), []knob.Setting{{Name: "hugepages.1G", Value: strconv.Itoa(want)}}, false)
	got := read(t, huge1G)
	switch {
	case err == nil && (got != strconv.Itoa(want) || res.Values["hugepages.1G"] != got):
		t.Errorf("Apply succeeded but the pool holds %s, read back %q (wanted %d)", got, res.Values["hugepages.1G"], want)
	case err != nil && !strings.Contains(err.Error(), fmt.Sprintf("wanted %d pages, the kernel allocated %s", want, got)):
		t.Errorf("error does not say wanted and got (%s): %v", got, err)
	case err != nil:
		t.Logf("the kernel refused: %v", err)
	default:
		t.Logf("the kernel allocated %d pages of 1 GB", want)
	}
	if err := j.Restore(); err != nil {
		t.Fatal(err)
	}
	if got := read(t, huge1G); got != before {
		t.Errorf("after restore: %s pages, want %s", got, before)
	}
}

// A kernel journal left by a killed run is restored by a new process.
func TestKernelRecoverNewProcess(t *testing.T) {
	testdb.Journal(t) // host lock, root, and a safety net
	file := filepath.Join(t.TempDir(), "experiment.journal")
	j, err := change.Open(file, changeConfig())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { j.Restore() })
	before := read(t, swappiness)
	swap := "7"
	if before == swap {
		swap = "8"
	}
	a := knob.NewApplier(liveHost(t), j, knob.Target{})
	if _, err := a.Apply(context.Background(), []knob.Setting{{Name: "vm.swappiness", Value: swap}}, false); err != nil {
		t.Fatal(err)
	}
	recoverInNewProcess(t, file)
	if got := read(t, swappiness); got != before {
		t.Errorf("after recover: swappiness %s, want %s", got, before)
	}
}
