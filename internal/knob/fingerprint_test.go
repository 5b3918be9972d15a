package knob

import (
	"context"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"

	"github.com/dbhost/dbhost/internal/host"
)

// fixture opens the files recorded from this machine by
// testdata/record.sh as a host.
func fixture(t *testing.T, dir string) *host.Host {
	t.Helper()
	h, err := host.Open(filepath.Join("testdata", dir))
	if err != nil {
		t.Fatal(err)
	}
	return h
}

func readFixture(t *testing.T, p string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata/host", p))
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(string(b))
}

// bracketed is the active choice of a selector file, read independently
// of the code under test.
func bracketed(s string) string {
	for _, w := range strings.Fields(s) {
		if strings.HasPrefix(w, "[") {
			return strings.Trim(w, "[]")
		}
	}
	return ""
}

func TestFingerprintFixture(t *testing.T) {
	a := NewApplier(fixture(t, "host"), nil, Target{})
	fp, err := a.Fingerprint(context.Background(), []string{"vm.swappiness", "hugepages", "thp.enabled"})
	if err != nil {
		t.Fatal(err)
	}
	load := strings.Fields(readFixture(t, "/proc/loadavg"))
	want := map[string]string{
		"vm.swappiness":      readFixture(t, "/proc/sys/vm/swappiness"),
		"hugepages.2M":       readFixture(t, "/sys/kernel/mm/hugepages/hugepages-2048kB/nr_hugepages"),
		"hugepages.2M.total": readFixture(t, "/sys/kernel/mm/hugepages/hugepages-2048kB/nr_hugepages"),
		"hugepages.2M.free":  readFixture(t, "/sys/kernel/mm/hugepages/hugepages-2048kB/free_hugepages"),
		"hugepages.1G.rsvd":  readFixture(t, "/sys/kernel/mm/hugepages/hugepages-1048576kB/resv_hugepages"),
		"hugepages.1G.surp":  readFixture(t, "/sys/kernel/mm/hugepages/hugepages-1048576kB/surplus_hugepages"),
		"thp.enabled":        bracketed(readFixture(t, "/sys/kernel/mm/transparent_hugepage/enabled")),
		"thp.defrag":         bracketed(readFixture(t, "/sys/kernel/mm/transparent_hugepage/defrag")),
		"cpu.governor":       "none", // this VM has no cpufreq
		"cpu.online":         readFixture(t, "/sys/devices/system/cpu/online"),
		"kernel.release":     readFixture(t, "/proc/sys/kernel/osrelease"),
		"load.1":             load[0],
		"load.15":            load[2],
	}
	for k, v := range want {
		if fp[k] != v {
			t.Errorf("fingerprint %s = %q, want %q", k, fp[k], v)
		}
	}
	if _, ok := fp["disk.devices"]; ok {
		t.Error("disk devices fingerprinted without a data directory")
	}
}

func TestCurrentFixture(t *testing.T) {
	a := NewApplier(fixture(t, "host"), nil, Target{})
	got, err := a.Current(context.Background(), []string{"vm.dirty_ratio", "thp.defrag", "hugepages.1G"})
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{
		"vm.dirty_ratio": readFixture(t, "/proc/sys/vm/dirty_ratio"),
		"thp.defrag":     bracketed(readFixture(t, "/sys/kernel/mm/transparent_hugepage/defrag")),
		"hugepages.1G":   readFixture(t, "/sys/kernel/mm/hugepages/hugepages-1048576kB/nr_hugepages"),
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("Current = %v, want %v", got, want)
	}
	_, err = a.Current(context.Background(), []string{"hugepages.16G", "vm.no_such_knob"})
	if err == nil || !strings.Contains(err.Error(), "no 16G huge pages (it offers hugepages.1G, hugepages.2M)") ||
		!strings.Contains(err.Error(), "vm.no_such_knob") {
		t.Errorf("Current of missing knobs: %v", err)
	}
	_, err = a.Current(context.Background(), []string{"disk.scheduler", "pg.work_mem"})
	if err == nil || !strings.Contains(err.Error(), "no data directory") || !strings.Contains(err.Error(), "not a PostgreSQL server") {
		t.Errorf("Current without a target: %v", err)
	}
}

// Nothing is changed, or even checked, on a host that is not the live
// system.
func TestCheckNeedsLiveSystem(t *testing.T) {
	a := NewApplier(fixture(t, "host"), nil, Target{})
	err := a.Check(context.Background(), []Setting{{"vm.swappiness", "1"}})
	if err == nil || !strings.Contains(err.Error(), "live system") {
		t.Errorf("Check on a fixture: %v", err)
	}
}

// A pool the kernel filled only in part is an error naming wanted and got.
func TestReadBackHugePagesShort(t *testing.T) {
	f := "/sys/kernel/mm/hugepages/hugepages-1048576kB/nr_hugepages"
	have := readFixture(t, f) // what the write read back
	n, _ := strconv.Atoi(have)
	it := &item{Setting: Setting{"hugepages.1G", strconv.Itoa(n + 2)}, class: hugepages, files: []string{f}, wants: []string{strconv.Itoa(n + 2)}, got: []string{have}}
	_, err := kernelResult(it)
	if err == nil || !strings.Contains(err.Error(), "wanted "+strconv.Itoa(n+2)+" pages, the kernel allocated "+have) {
		t.Errorf("short pool: %v", err)
	}
	it.wants = []string{have}
	if v, err := kernelResult(it); err != nil || v != have {
		t.Errorf("full pool: %q, %v", v, err)
	}
}

// The steal share over the recorded interval, against the counters read
// here by hand (fields 2-9 of the cpu line: user .. steal).
func TestStealSince(t *testing.T) {
	ta, err := ReadCPUTimes(fixture(t, "stat-a"))
	if err != nil {
		t.Fatal(err)
	}
	tb, err := ReadCPUTimes(fixture(t, "stat-b"))
	if err != nil {
		t.Fatal(err)
	}
	fields := func(dir string) []float64 {
		b, err := os.ReadFile(filepath.Join("testdata", dir, "proc/stat"))
		if err != nil {
			t.Fatal(err)
		}
		f := strings.Fields(strings.SplitN(string(b), "\n", 2)[0])[1:9]
		out := make([]float64, len(f))
		for i, s := range f {
			out[i], _ = strconv.ParseFloat(s, 64)
		}
		return out
	}
	fa, fb := fields("stat-a"), fields("stat-b")
	var total float64
	for i := range fa {
		total += fb[i] - fa[i]
	}
	want := 100 * (fb[7] - fa[7]) / total
	if got := tb.StealSince(ta); math.Abs(got-want) > 1e-9 {
		t.Errorf("StealSince = %v, want %v", got, want)
	}
	if want == 0 {
		t.Log("the recorded interval has no steal; the test still checks the arithmetic")
	}
	if got := tb.StealSince(tb); got != 0 {
		t.Errorf("empty interval: %v", got)
	}
	fp := Fingerprint{}
	a := NewApplier(fixture(t, "stat-b"), nil, Target{})
	if err := a.Interval(fp, ta); err != nil {
		t.Fatal(err)
	}
	if fp["interval.steal_percent"] != strconv.FormatFloat(want, 'f', 2, 64) {
		t.Errorf("Interval: %v", fp)
	}
}

func TestDrift(t *testing.T) {
	was := Fingerprint{"vm.swappiness": "1", "thp.enabled": "never", "hugepages.2M.total": "64", "hugepages.2M.free": "64",
		"load.1": "0.10", "pg.shared_buffers": "128MB", "interval.steal_percent": "0.00", "cpu.governor": "none"}
	now := Fingerprint{"vm.swappiness": "1", "thp.enabled": "always", "hugepages.2M.total": "32", "hugepages.2M.free": "3",
		"load.1": "3.50", "pg.shared_buffers": "128MB", "interval.steal_percent": "9.00", "disk.vda.scheduler": "none"}
	got := Drift(was, now)
	want := []string{
		"cpu.governor: was none, now (absent)",
		"disk.vda.scheduler: was (absent), now none",
		"hugepages.2M.total: was 64, now 32",
		"thp.enabled: was never, now always",
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("Drift = %q\nwant %q", got, want)
	}
	if d := Drift(was, was); len(d) != 0 {
		t.Errorf("no drift expected: %v", d)
	}
}

// BenchmarkFingerprint times the host part of a fingerprint (no knobs, no
// database), which is taken before and after every trial: on this package's
// recorded host and, read-only, on the machine running the benchmark.
func BenchmarkFingerprint(b *testing.B) {
	for _, c := range []struct{ name, root string }{{"recorded", "testdata/host"}, {"live", "/"}} {
		b.Run(c.name, func(b *testing.B) {
			h, err := host.Open(c.root)
			if err != nil {
				b.Fatal(err)
			}
			a := NewApplier(h, nil, Target{})
			for b.Loop() {
				if _, err := a.Fingerprint(context.Background(), nil); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
