package apply

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/dbhost/dbhost/internal/check"
	"github.com/dbhost/dbhost/internal/engine"
	"github.com/dbhost/dbhost/internal/facts"
	"github.com/dbhost/dbhost/internal/fix"
	"github.com/dbhost/dbhost/internal/host"
	"github.com/dbhost/dbhost/internal/journal"
	"github.com/dbhost/dbhost/internal/testdb"
)

const (
	liveFile  = "/etc/sysctl.d/60-dbhost.conf"
	liveKnob  = "/proc/sys/vm/dirty_ratio"
	liveCheck = "mem.dirty"
)

// liveFacts gathers the live host.
func liveFacts(t *testing.T) *facts.Facts {
	t.Helper()
	h, err := host.Open("/")
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	return facts.Gather(context.Background(), h, check.GatherOptions(engine.Options{}))
}

func liveFindings(t *testing.T, only ...string) ([]check.Finding, fix.Context) {
	t.Helper()
	f := liveFacts(t)
	return check.Run(f, check.Selector{Only: only}), fix.ContextFrom(f)
}

func livePlan(t *testing.T) *Plan {
	t.Helper()
	fds, fc := liveFindings(t, liveCheck)
	p, err := Build("/", fc, Select(fds))
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func knob(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile(liveKnob)
	if err != nil {
		t.Fatal(err)
	}
	return journal.Current(string(b))
}

// prepareLive takes the host lock (testdb.Journal), makes mem.dirty fail
// (dirty_ratio 40, put back by the journal) and makes sure that
// /etc/sysctl.d/60-dbhost.conf is put back byte for byte, with its mode
// and owner, whatever happens to the test.
func prepareLive(t *testing.T) (sysctlDir string) {
	t.Helper()
	j := testdb.Journal(t)
	old, oldErr := os.ReadFile(liveFile)
	var oldSt os.FileInfo
	if oldErr == nil {
		oldSt, _ = os.Lstat(liveFile)
	} else if !errors.Is(oldErr, fs.ErrNotExist) {
		t.Fatal(oldErr)
	}
	t.Cleanup(func() {
		if oldErr != nil {
			os.Remove(liveFile)
			return
		}
		if now, err := os.ReadFile(liveFile); err != nil || string(now) != string(old) {
			os.WriteFile(liveFile, old, oldSt.Mode().Perm())
		}
		st := oldSt.Sys().(*syscall.Stat_t)
		os.Chown(liveFile, int(st.Uid), int(st.Gid))
		os.Chmod(liveFile, oldSt.Mode().Perm())
	})
	if err := j.Set(liveKnob, "40"); err != nil {
		t.Fatal(err)
	}
	return filepath.Dir(liveFile)
}

// TestLiveApplyAndRollback applies mem.dirty's fix for real: the sysctl.d
// file and the running value; audits again (pass); rolls back and finds
// /etc/sysctl.d and the value exactly as before.
func TestLiveApplyAndRollback(t *testing.T) {
	dir := prepareLive(t)
	before, beforeKnob := listing(t, dir), knob(t)
	fds, _ := liveFindings(t, liveCheck)
	if len(Select(fds)) != 1 {
		t.Fatalf("%s does not fail with dirty_ratio 40: %+v", liveCheck, fds)
	}
	p := livePlan(t)
	if len(p.Files) != 1 || p.Files[0].Path != liveFile || len(p.Values) == 0 {
		t.Fatalf("plan: files %v values %+v", paths(p), p.Values)
	}
	state := t.TempDir()
	cs, err := Apply(p, Options{StateDir: state, Reaudit: func() []check.Finding {
		fds, _ := liveFindings(t, liveCheck)
		return fds
	}})
	if err != nil {
		t.Fatal(err)
	}
	st, err := os.Lstat(liveFile)
	if err != nil || st.Mode().Perm() != 0o644 || !st.Mode().IsRegular() {
		t.Fatalf("%s after apply: %v %v", liveFile, st, err)
	}
	if b, _ := os.ReadFile(liveFile); string(b) != p.Files[0].Content {
		t.Fatalf("%s has not the planned content", liveFile)
	}
	if k := knob(t); k == beforeKnob {
		t.Fatalf("%s still %s after apply", liveKnob, k)
	}
	if len(cs.After) != 1 || cs.After[0].Status != string(check.Pass) {
		t.Fatalf("re-audit after apply: %+v", cs.After)
	}
	if _, err := Rollback(state, cs.ID, Options{}); err != nil {
		t.Fatal(err)
	}
	if after := listing(t, dir); after != before {
		t.Fatalf("rollback did not restore %s:\nbefore:\n%s\nafter:\n%s", dir, before, after)
	}
	if k := knob(t); k != beforeKnob {
		t.Fatalf("%s is %s after rollback, was %s", liveKnob, k, beforeKnob)
	}
}

// TestLiveKilledApplyIsRecovered kills an apply on the live host after it
// wrote the file and set the value, before it finished; Recover puts both
// back.
func TestLiveKilledApplyIsRecovered(t *testing.T) {
	if state := os.Getenv("DBHOST_TEST_LIVE_CHILD"); state != "" {
		// The parent holds the host lock for this child.
		Apply(livePlan(t), Options{StateDir: state, hook: func(step string) {
			if strings.HasPrefix(step, "set ") {
				syscall.Kill(os.Getpid(), syscall.SIGKILL)
			}
		}})
		t.Fatal("the child was not killed")
	}
	dir := prepareLive(t)
	before, beforeKnob := listing(t, dir), knob(t)
	state := t.TempDir()
	cmd := exec.Command(os.Args[0], "-test.run=^TestLiveKilledApplyIsRecovered$", "-test.count=1")
	cmd.Env = append(os.Environ(), "DBHOST_TEST_LIVE_CHILD="+state)
	out, err := cmd.CombinedOutput()
	if ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus); !ok || !ws.Signaled() || ws.Signal() != syscall.SIGKILL {
		t.Fatalf("child did not die of SIGKILL: %v\n%s", err, out)
	}
	if listing(t, dir) == before || knob(t) == beforeKnob {
		t.Fatal("the killed apply had not changed both the file and the value")
	}
	ids, err := Recover(state, Options{})
	if err != nil || len(ids) != 1 {
		t.Fatalf("Recover = %v, %v", ids, err)
	}
	if after := listing(t, dir); after != before {
		t.Fatalf("recover did not restore %s:\nbefore:\n%s\nafter:\n%s", dir, before, after)
	}
	if k := knob(t); k != beforeKnob {
		t.Fatalf("%s is %s after recover, was %s", liveKnob, k, beforeKnob)
	}
}
