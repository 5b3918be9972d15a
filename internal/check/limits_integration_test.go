package check_test

import (
	"context"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/dbhost/dbhost/internal/check"
	"github.com/dbhost/dbhost/internal/engine"
	"github.com/dbhost/dbhost/internal/facts"
	"github.com/dbhost/dbhost/internal/host"
	"github.com/dbhost/dbhost/internal/testdb"
)

// liveFinding audits this host live and returns check id's finding for the
// instance whose main process is pid.
func liveFinding(t *testing.T, id string, pid int) check.Finding {
	t.Helper()
	h, err := host.Open("/")
	if err != nil {
		t.Fatal(err)
	}
	f := facts.Gather(context.Background(), h, check.GatherOptions(engine.Options{}))
	for _, in := range f.Instances {
		if in.PID != pid {
			continue
		}
		for _, fd := range check.Run(f, check.Selector{Only: []string{id}}) {
			if fd.Subject == in.Name() {
				return fd
			}
		}
		t.Fatalf("no %s finding for %s", id, in.Name())
	}
	t.Fatalf("the private server (pid %d) was not discovered", pid)
	return check.Finding{}
}

// TestLimitsNofileLive1024 starts private PostgreSQL servers under
// prlimit --nofile=1024 and audits the live host: with
// max_files_per_process 4000 limits.nofile fails, with the default 1000 it
// passes (the limit is judged by what the server's configuration needs).
func TestLimitsNofileLive1024(t *testing.T) {
	if testing.Short() {
		t.Skip("integration test: starts PostgreSQL")
	}
	s := testdb.Postgres(t, testdb.Options{Nofile: 1024, Settings: map[string]string{"max_files_per_process": "4000"}})
	fd := liveFinding(t, "limits.nofile", s.PID)
	if fd.Status != check.Fail {
		t.Fatalf("nofile 1024, max_files_per_process 4000: %s: %s", fd.Status, fd.Reason)
	}
	hxHas(t, "reason", fd.Reason, "soft limit 1024 is below 4000", "max_files_per_process 4000")
	s = testdb.Postgres(t, testdb.Options{Nofile: 1024})
	fd = liveFinding(t, "limits.nofile", s.PID)
	if fd.Status != check.Pass {
		t.Fatalf("nofile 1024, max_files_per_process 1000: %s: %s", fd.Status, fd.Reason)
	}
}

// TestLimitsNofileLive65536 starts one under prlimit --nofile=65536: it
// passes. prlimit runs as postgres and may only set up to the hard limit
// it inherits; raising that needs CAP_SYS_RESOURCE, which some hosts' root
// lacks (this project's test VM's does, with a hard limit of 20000).
func TestLimitsNofileLive65536(t *testing.T) {
	if testing.Short() {
		t.Skip("integration test: starts PostgreSQL")
	}
	var rl unix.Rlimit
	if err := unix.Getrlimit(unix.RLIMIT_NOFILE, &rl); err != nil {
		t.Fatal(err)
	}
	if rl.Max < 65536 {
		old := rl
		rl.Max = 65536
		if err := unix.Setrlimit(unix.RLIMIT_NOFILE, &rl); err != nil {
			t.Skipf("cannot grant a server 65536 open files here: the hard limit is %d and raising it failed (%v; CAP_SYS_RESOURCE missing)", old.Max, err)
		}
		t.Cleanup(func() { unix.Setrlimit(unix.RLIMIT_NOFILE, &old) })
	}
	s := testdb.Postgres(t, testdb.Options{Nofile: 65536})
	fd := liveFinding(t, "limits.nofile", s.PID)
	if fd.Status != check.Pass {
		t.Fatalf("nofile 65536: %s: %s", fd.Status, fd.Reason)
	}
}
