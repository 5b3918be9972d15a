package experiment

import (
	"fmt"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/dbhost/dbhost/internal/fixture/ttar"
	"github.com/dbhost/dbhost/internal/host"
	"github.com/dbhost/dbhost/internal/host/hosttest"
)

// direct is what HostFacts should find on a host, parsed from its files
// here without facts' gatherers.
func direct(t *testing.T, h *host.Host) Facts {
	t.Helper()
	var f Facts
	b, err := h.ReadFile("/proc/meminfo")
	if err != nil {
		t.Fatalf("meminfo: %v", err)
	}
	for _, ln := range strings.Split(string(b), "\n") {
		fields := strings.Fields(ln)
		if len(fields) < 2 {
			continue
		}
		dst := map[string]*uint64{"MemTotal:": &f.MemTotal, "MemAvailable:": &f.MemAvailable}[fields[0]]
		if dst == nil {
			continue
		}
		kb, err := strconv.ParseUint(fields[1], 10, 64)
		if err != nil {
			t.Fatalf("meminfo line %q", ln)
		}
		*dst = kb << 10
	}
	dirs, _ := h.ReadDir("/sys/kernel/mm/hugepages")
	for _, d := range dirs {
		var kb uint64
		if n, _ := fmt.Sscanf(d, "hugepages-%dkB", &kb); n == 1 {
			f.HugePageSizes = append(f.HugePageSizes, kb<<10)
		}
	}
	slices.Sort(f.HugePageSizes)
	read := func(p string) string {
		b, _ := h.ReadFile(p)
		return strings.TrimSpace(string(b))
	}
	f.DirtyBytes, _ = strconv.ParseUint(read("/proc/sys/vm/dirty_bytes"), 10, 64)
	f.DirtyBackgroundBytes, _ = strconv.ParseUint(read("/proc/sys/vm/dirty_background_bytes"), 10, 64)
	f.Kernel, f.Hostname = read("/proc/sys/kernel/osrelease"), read("/proc/sys/kernel/hostname")
	return f
}

// recordedHosts are the snapshots in testdata/hosts, found without the
// fixture package: it links the checks, whose declarations would hide a
// kernel parameter HostFacts fails to name.
func recordedHosts(t *testing.T) []string {
	t.Helper()
	const dir = "../../testdata/hosts"
	names, err := ttar.Names(dir)
	if err != nil || len(names) == 0 {
		t.Fatalf("no recorded hosts: %v", err)
	}
	files := make([]string, len(names))
	for i, n := range names {
		if files[i], err = ttar.Archive(dir, n); err != nil {
			t.Fatal(err)
		}
	}
	return files
}

// TestHostFactsRecorded: on every recorded host, HostFacts (through facts'
// gatherers) gives what the snapshot's files say.
func TestHostFactsRecorded(t *testing.T) {
	var dirtyRead, hugeSeen bool
	for _, file := range recordedHosts(t) {
		name := strings.TrimSuffix(filepath.Base(file), ".tar.gz")
		t.Run(name, func(t *testing.T) {
			h, err := host.OpenSnapshot(file)
			if err != nil {
				t.Fatal(err)
			}
			defer h.Close()
			got, err := HostFacts(h)
			if name == "mem-denied" {
				// Recorded without permission to read /proc/meminfo.
				if want := "memory: /proc/meminfo: permission denied (run dbhost as root)"; err == nil || err.Error() != want {
					t.Errorf("error %v, want %q", err, want)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			want := direct(t, h)
			if want.MemTotal == 0 || got.MemTotal != want.MemTotal || got.MemAvailable != want.MemAvailable {
				t.Errorf("memory %d/%d, want %d/%d", got.MemTotal, got.MemAvailable, want.MemTotal, want.MemAvailable)
			}
			if !slices.Equal(got.HugePageSizes, want.HugePageSizes) {
				t.Errorf("huge page sizes %v, want %v", got.HugePageSizes, want.HugePageSizes)
			}
			if got.DirtyBytes != want.DirtyBytes || got.DirtyBackgroundBytes != want.DirtyBackgroundBytes {
				t.Errorf("dirty bytes %d/%d, want %d/%d", got.DirtyBytes, got.DirtyBackgroundBytes, want.DirtyBytes, want.DirtyBackgroundBytes)
			}
			if got.Kernel != want.Kernel || got.Hostname != want.Hostname || got.Kernel == "" {
				t.Errorf("kernel %q hostname %q, want %q %q", got.Kernel, got.Hostname, want.Kernel, want.Hostname)
			}
			if got.CPUs < 1 {
				t.Errorf("CPUs %d", got.CPUs)
			}
			_, err = h.ReadFile("/proc/sys/vm/dirty_bytes")
			dirtyRead = dirtyRead || err == nil
			hugeSeen = hugeSeen || len(want.HugePageSizes) > 0
		})
	}
	// The comparisons above held something to compare.
	if !dirtyRead || !hugeSeen {
		t.Errorf("no recorded host has vm.dirty_bytes (%v) or huge page sizes (%v)", dirtyRead, hugeSeen)
	}
}

// TestHostFactsOddInputs: what HostFacts makes of missing and odd files,
// as it did when it read them itself: only unreadable meminfo is an error.
func TestHostFactsOddInputs(t *testing.T) {
	tree := func(files map[string]string) *host.Host { return hosttest.Tree(t, files) }
	for _, c := range []struct {
		name  string
		files map[string]string
		err   string
	}{
		{"no meminfo", map[string]string{"etc/hostname": "x\n"}, "memory: /proc/meminfo: not present on this host"},
		{"garbage meminfo", map[string]string{"proc/meminfo": "garbage\n"}, `memory: error parsing file: error parsing file: Malformed line "garbage"`},
	} {
		if _, err := HostFacts(tree(c.files)); err == nil || err.Error() != c.err {
			t.Errorf("%s: error %v, want %q", c.name, err, c.err)
		}
	}

	f, err := HostFacts(tree(map[string]string{
		"proc/meminfo":                                             "MemTotal: 100 kB\nMemAvailable: 50 kB\n",
		"proc/sys/vm/dirty_bytes":                                  "abc\n",
		"proc/sys/vm/dirty_background_bytes":                       " 42 \n",
		"sys/devices/system/cpu/online":                            "0-3,8\n",
		"sys/kernel/mm/hugepages/hugepages-1048576kB/nr_hugepages": "0\n",
		"sys/kernel/mm/hugepages/hugepages-2048kB/nr_hugepages":    "0\n",
		"sys/kernel/mm/hugepages/junk/nr_hugepages":                "0\n",
		"proc/sys/kernel/osrelease":                                " 6.1.0 \n",
		"proc/sys/kernel/hostname":                                 "h1\n",
	}))
	if err != nil {
		t.Fatal(err)
	}
	want := Facts{CPUs: 5, MemTotal: 100 << 10, MemAvailable: 50 << 10, HugePageSizes: []uint64{2 << 20, 1 << 30},
		DirtyBackgroundBytes: 42, Kernel: "6.1.0", Hostname: "h1"}
	if fmt.Sprint(f) != fmt.Sprint(want) {
		t.Errorf("got  %+v\nwant %+v", f, want)
	}

	// No CPU list, no MemTotal: this process's CPUs, no memory figure.
	f, err = HostFacts(tree(map[string]string{"proc/meminfo": "MemFree: 10 kB\n", "sys/devices/system/cpu/online": "x\n"}))
	if err != nil || f.CPUs != numCPU() || f.MemTotal != 0 || f.HugePageSizes != nil {
		t.Errorf("sparse host: %+v, %v", f, err)
	}
}

// HostFacts' kernel parameters are gathered because it names them, not
// because a check declares them.
func TestHostFactsSysctlsDeclared(t *testing.T) {
	f, err := HostFacts(hosttest.Tree(t, map[string]string{"proc/meminfo": "MemTotal: 1024 kB\n",
		"proc/sys/vm/dirty_bytes": "4096\n", "proc/sys/vm/dirty_background_bytes": "2048\n"}))
	if err != nil || f.DirtyBytes != 4096 || f.DirtyBackgroundBytes != 2048 {
		t.Errorf("dirty bytes %d, background %d (want 4096, 2048): %v", f.DirtyBytes, f.DirtyBackgroundBytes, err)
	}
}
