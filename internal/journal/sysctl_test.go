package journal_test

import (
	"os"
	"testing"

	"github.com/dbhost/dbhost/internal/journal"
	"github.com/dbhost/dbhost/internal/testdb"
)

// TestRealSysctlRoundTrip changes a real sysctl through a journal and
// restores it. It is an external test because testdb, which takes the host
// lock and journals for tests, imports journal.
func TestRealSysctlRoundTrip(t *testing.T) {
	j := testdb.Journal(t)
	const p = "/proc/sys/vm/swappiness"
	read := func() string {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		return journal.Current(string(b))
	}
	orig := read()
	next := "7"
	if orig == next {
		next = "8"
	}
	if err := j.Set(p, next); err != nil {
		t.Fatal(err)
	}
	if read() != next {
		t.Fatalf("swappiness %q", read())
	}
	if err := j.Restore(); err != nil {
		t.Fatal(err)
	}
	if read() != orig {
		t.Errorf("swappiness %q, want %q", read(), orig)
	}
}
