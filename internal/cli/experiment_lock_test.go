package cli

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/dbhost/dbhost/internal/fixture"
	"github.com/dbhost/dbhost/internal/journal"
	"github.com/dbhost/dbhost/internal/results"
)

// lockWait is how long the commands below are given to wait for the host
// lock before their context ends the wait.
const lockWait = 3 * time.Second

// runFor runs dbhost in-process for at most d (as Ctrl-C after d would)
// and says how long it ran.
func runFor(d time.Duration, args ...string) (code int, stdout, stderr string, took time.Duration) {
	return runForEnv(d, Env{}, args...)
}

// runForEnv is runFor with env's HostLock (a test's lent hold).
func runForEnv(d time.Duration, env Env, args ...string) (code int, stdout, stderr string, took time.Duration) {
	// The clock starts before the deadline is set: a command that waits
	// until its context ends then runs at least d (started after, it
	// measured 2.99989 s of a 3 s wait once).
	start := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	var out, errb bytes.Buffer
	env.Stdout, env.Stderr = &out, &errb
	code = run(ctx, env, args)
	return code, out.String(), errb.String(), time.Since(start)
}

// One lock for everything that changes the host: an experiment started
// while another holds the host lock says it waits and changes nothing
// (Ctrl-C ends the wait); fix --apply waits while an experiment holds it
// (the test lends its hold to the experiment, so that no other test takes
// the lock in between), and applies once the lock is lent to it.
func TestExperimentHostLock(t *testing.T) {
	const orig = "30"
	cmd, jfile, _, log, hj := swappinessRun(t, orig)

	// The test holds the lock: an in-process experiment waits.
	dir := t.TempDir()
	ejournal, edb := filepath.Join(dir, "experiment.journal"), filepath.Join(dir, "results.db")
	code, _, errs, took := runFor(lockWait, "experiment", "--preset", "swappiness", "--shared-buffers", "128MB",
		"--duration", "2s", "--warmup", "1s", "--trials", "8", "--journal", ejournal, "--db", edb)
	if code != ExitInterrupted || took < lockWait ||
		!strings.Contains(errs, "dbhost experiment: waiting for the host lock") || !strings.Contains(errs, "nothing changed") {
		t.Errorf("experiment while the lock is held: exit %d after %s\n%s", code, took, errs)
	}
	if v := swappiness(t); v != orig {
		t.Errorf("vm.swappiness is %s after an experiment that waited for the lock, want %s", v, orig)
	}
	if _, err := os.Stat(ejournal); !os.IsNotExist(err) {
		t.Errorf("an experiment that waited for the lock opened its journal (%v)", err)
	}
	if st, err := results.Open(edb); err != nil {
		t.Error(err)
	} else {
		list, err := st.List(context.Background())
		st.Close()
		if err != nil || len(list) != 0 {
			t.Errorf("an experiment that waited for the lock stored %+v (%v)", list, err)
		}
	}

	// An experiment holds the lock: fix --apply (on a copy tree) waits and
	// applies nothing, then applies once the experiment has ended.
	root := copyTree(t)
	before := treeListing(t, root)
	snap := fixture.Path("baseline")
	defer func() { // before the test's journal is restored
		if cmd.Process != nil {
			cmd.Process.Kill()
		}
	}()
	startLent(t, hj, cmd)
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	deadline := time.Now().Add(90 * time.Second)
	for {
		if time.Now().After(deadline) {
			t.Fatalf("the experiment changed nothing within 90s; output:\n%s", log.String())
		}
		time.Sleep(200 * time.Millisecond)
		if cs, err := journal.Pending(jfile); err == nil && hasKnob(cs, "/proc/sys/vm/swappiness") {
			break
		}
	}
	code, out, errs, took := runFor(lockWait, "fix", "--apply", "--from", snap, "--root", root)
	if code != ExitError || took < lockWait || !strings.Contains(errs, "dbhost fix: waiting for the host lock") ||
		!strings.Contains(errs, "host lock: context deadline exceeded") {
		t.Errorf("fix --apply while an experiment runs: exit %d after %s\n%s%s", code, took, out, errs)
	}
	if treeListing(t, root) != before {
		t.Error("fix --apply changed the tree while an experiment held the host lock")
	}
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case <-done:
	case <-time.After(60 * time.Second):
		t.Fatalf("experiment still running 60s after SIGTERM:\n%s", log.String())
	}
	code, out, errs, _ = runForEnv(time.Minute, Env{HostLock: hj.HostLock}, "fix", "--apply", "--from", snap, "--root", root)
	if code == ExitError || !strings.Contains(out, "applied change set ") {
		t.Errorf("fix --apply after the experiment: exit %d\n%s%s", code, out, errs)
	}
	if v := swappiness(t); v != orig {
		t.Errorf("vm.swappiness is %s after the experiment, want %s\n%s", v, orig, log.String())
	}
}
