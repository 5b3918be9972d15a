package check_test

import (
	"context"
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/dbhost/dbhost/internal/check"
	"github.com/dbhost/dbhost/internal/facts"
	"github.com/dbhost/dbhost/internal/fix"
	"github.com/dbhost/dbhost/internal/host"
	"github.com/dbhost/dbhost/internal/journal"
	"github.com/dbhost/dbhost/internal/testdb"
)

// memJournal is where the huge pages test journals vm.nr_hugepages; a run
// killed hard leaves it behind and the next run restores it first.
const memJournal = "/var/tmp/dbhost-test-mem.journal"

const nrHugepages = "/proc/sys/vm/nr_hugepages"

// liveHugePages audits this host live and returns mem.hugepages.postgres
// for the instance whose postmaster is pid.
func liveHugePages(t *testing.T, pid int) check.Finding {
	t.Helper()
	h, err := host.Open("/")
	if err != nil {
		t.Fatal(err)
	}
	f := facts.Gather(context.Background(), h, facts.Options{})
	for _, in := range f.Instances {
		if in.PID != pid {
			continue
		}
		for _, fd := range check.Run(f, check.Selector{Only: []string{"mem.hugepages.postgres"}}, fix.ContextFrom(f)) {
			if fd.Subject == in.Name() {
				return fd
			}
		}
		t.Fatalf("no mem.hugepages.postgres finding for %s", in.Name())
	}
	t.Fatalf("the private PostgreSQL (pid %d) was not discovered", pid)
	return check.Finding{}
}

// TestMemHugePagesPostgresLive starts a private PostgreSQL with
// shared_buffers=512MB and huge_pages=try while no huge pages are reserved:
// it runs on 4 kB pages and the check fails. Then it reserves the pages the
// finding's fix asks for (through a journal, restored at the end, on
// Ctrl-C, and by the next run after a crash), restarts the server with
// huge_pages=on, and the check passes: the fix is exact.
func TestMemHugePagesPostgresLive(t *testing.T) {
	if testing.Short() {
		t.Skip("integration test: changes vm.nr_hugepages and starts PostgreSQL")
	}
	testdb.Need(t, "root (changes vm.nr_hugepages)", os.Geteuid() == 0)
	unlock, err := journal.Lock(journal.HostLock)
	if err != nil {
		t.Fatal(err)
	}
	defer unlock()
	j, err := journal.Open(memJournal)
	if err != nil {
		t.Fatal(err)
	}
	stop := j.RestoreOnSignal()
	defer func() {
		if err := j.Restore(); err != nil {
			t.Errorf("restore: %v", err)
		}
		stop()
	}()
	if err := j.Set(nrHugepages, "0"); err != nil {
		t.Fatal(err)
	}

	s := testdb.Postgres(t, testdb.Options{Settings: map[string]string{"shared_buffers": "512MB", "huge_pages": "try"}})
	fd := liveHugePages(t, s.PID)
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
	if err := j.Set(nrHugepages, want); err != nil {
		t.Fatal(err)
	}
	if got, _ := os.ReadFile(nrHugepages); strings.TrimSpace(string(got)) != want {
		t.Skipf("the kernel reserved only %s of %s huge pages (memory fragmented)", strings.TrimSpace(string(got)), want)
	}
	s2 := testdb.Postgres(t, testdb.Options{Settings: map[string]string{"shared_buffers": "512MB", "huge_pages": "on"}})
	fd = liveHugePages(t, s2.PID)
	if fd.Status != check.Pass || !strings.Contains(fd.Reason, "runs with huge pages") {
		t.Fatalf("on with %s pages: %s: %s", want, fd.Status, fd.Reason)
	}
}
