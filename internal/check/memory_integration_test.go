package check_test

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/dbhost/dbhost/internal/check"
	"github.com/dbhost/dbhost/internal/testdb"
)

const nrHugepages = "/proc/sys/vm/nr_hugepages"

// TestMemHugePagesPostgresLive starts a private PostgreSQL with
// shared_buffers=512MB and huge_pages=try while no huge pages are reserved:
// it runs on 4 kB pages and the check fails. Then it reserves the pages the
// finding's fix asks for (through a journal, restored at the end, on
// Ctrl-C, and by the next run after a crash), restarts the server with
// huge_pages=on, and the check passes: the fix is exact.
func TestMemHugePagesPostgresLive(t *testing.T) {
	j := testdb.Journal(t)
	if err := j.Set(nrHugepages, "0"); err != nil {
		t.Fatal(err)
	}

	s := testdb.Postgres(t, testdb.Options{Settings: map[string]string{"shared_buffers": "512MB", "huge_pages": "try"}})
	fd := liveFinding(t, "mem.hugepages.postgres", s.PID)
	if fd.Status != check.Fail || !strings.Contains(fd.Reason, "huge_pages = try") || !strings.Contains(fd.Reason, "4 kB pages") {
		t.Fatalf("try without pages: %s: %s", fd.Status, fd.Reason)
	}
	want := ""
	for _, kv := range fd.Fix.Sysctl {
		if kv.Key == "vm.nr_hugepages" {
			want = kv.Value
		}
	}
	n, err := strconv.Atoi(want)
	if err != nil || n < 256 { // 512 MB of shared_buffers alone is 256 pages
		t.Fatalf("fix proposes vm.nr_hugepages=%q: %+v", want, fd.Fix)
	}
	s.Stop(t)

	// Apply the fix by hand: reserve the pages, restart with huge_pages=on.
	// Compacting first gives the kernel contiguous 2 MB blocks to reserve
	// (an action, not a setting: nothing to restore).
	os.WriteFile("/proc/sys/vm/compact_memory", []byte("1"), 0)
	if err := j.Set(nrHugepages, want); err != nil {
		t.Fatal(err)
	}
	got, _ := os.ReadFile(nrHugepages)
	testdb.Need(t, fmt.Sprintf("the kernel reserving %s huge pages (it reserved %s: memory fragmented)", want, strings.TrimSpace(string(got))),
		strings.TrimSpace(string(got)) == want)
	s2 := testdb.Postgres(t, testdb.Options{Settings: map[string]string{"shared_buffers": "512MB", "huge_pages": "on"}})
	fd = liveFinding(t, "mem.hugepages.postgres", s2.PID)
	if fd.Status != check.Pass || !strings.Contains(fd.Reason, "runs with huge pages") {
		t.Fatalf("on with %s pages: %s: %s", want, fd.Status, fd.Reason)
	}
}
