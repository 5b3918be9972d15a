package apply

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/dbhost/dbhost/internal/change"
	"github.com/dbhost/dbhost/internal/check"
	"github.com/dbhost/dbhost/internal/fix"
	"github.com/dbhost/dbhost/internal/testdb"
)

// sleeper starts a process as user nobody under `prlimit --nproc=SOFT:`
// (the hard limit inherited), ended when the test ends.
func sleeper(t *testing.T, soft int) int {
	t.Helper()
	testdb.Need(t, "root (a process of another user)", os.Geteuid() == 0)
	u, err := user.Lookup("nobody")
	testdb.Need(t, "user nobody", err == nil)
	uid, _ := strconv.Atoi(u.Uid)
	gid, _ := strconv.Atoi(u.Gid)
	prlimit, err := exec.LookPath("prlimit")
	testdb.Need(t, "prlimit (util-linux)", err == nil)
	cmd := exec.Command(prlimit, fmt.Sprintf("--nproc=%d:", soft), "--", "sleep", "300")
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	// prlimit execs sleep in the same process once the limit is set.
	for i := 0; i < 200; i++ {
		if b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/comm", cmd.Process.Pid)); strings.TrimSpace(string(b)) == "sleep" {
			return cmd.Process.Pid
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatal("prlimit did not start sleep")
	return 0
}

func rlimitFinding(rl fix.Rlimit) check.Finding {
	return check.Finding{ID: "limits.nproc", Subject: "test", Status: check.Fail,
		Fix: &fix.Fix{Runtime: []string{rl.Command()}, Rlimits: []fix.Rlimit{rl}}}
}

// TestRlimitApplyAndUndo raises the soft process limit of a running
// process of another user through the journal, as apply does (from a
// thread with the process's IDs when this root lacks CAP_SYS_RESOURCE),
// and puts it back; a raise of the hard limit beyond what this process
// may grant is left out of the plan with the reason.
func TestRlimitApplyAndUndo(t *testing.T) {
	pid := sleeper(t, 40)
	var cfg change.Config
	old, err := cfg.ReadRlimit(pid, "nproc")
	if err != nil || old.Cur != 40 {
		t.Fatalf("nproc of the sleeper: %+v %v", old, err)
	}
	vals, notes := planRlimits(cfg, []check.Finding{rlimitFinding(fix.Rlimit{PID: pid, Item: "nproc", Soft: 1024, Hard: 1024})})
	if len(vals) != 1 || len(notes) != 0 {
		t.Fatalf("plan: %+v %v", vals, notes)
	}
	v := vals[0]
	wantHard := fix.FormatRlimit(old.Max) // kept, unless this root may lower and raise it back
	if cfg.HasSysResource() {
		wantHard = "1024"
	}
	if v.Path != fmt.Sprintf("/proc/%d/limits:nproc", pid) || v.Old != "40:"+fix.FormatRlimit(old.Max) || v.New != "1024:"+wantHard {
		t.Fatalf("planned %+v", v)
	}
	j, err := change.Open(filepath.Join(t.TempDir(), "journal.json"), cfg)
	if err != nil {
		t.Fatal(err)
	}
	note, err := j.Rlimit(pid, "nproc", v.Old, v.New)
	if err != nil || note != "" {
		t.Fatalf("Rlimit: %q %v", note, err)
	}
	if now, _ := cfg.ReadRlimit(pid, "nproc"); change.FormatLimitPair(now) != v.New {
		t.Fatalf("nproc after apply: %s, want %s", change.FormatLimitPair(now), v.New)
	}
	if err := j.Restore(); err != nil {
		t.Fatal(err)
	}
	if now, _ := cfg.ReadRlimit(pid, "nproc"); now != old {
		t.Fatalf("nproc after restore: %s, want %s", change.FormatLimitPair(now), change.FormatLimitPair(old))
	}

	if !cfg.HasSysResource() && old.Max != fix.Unlimited {
		vals, notes = planRlimits(cfg, []check.Finding{rlimitFinding(fix.Rlimit{PID: pid, Item: "nproc", Soft: old.Max + 1, Hard: old.Max + 1})})
		if len(vals) != 0 || len(notes) != 1 || !strings.Contains(notes[0], "needs CAP_SYS_RESOURCE") {
			t.Fatalf("raising the hard limit without CAP_SYS_RESOURCE: %+v %v", vals, notes)
		}
	}
}

// TestRlimitUndoLeavesOthers: the undo leaves a limit someone changed
// after the apply, and a process that ended.
func TestRlimitUndoLeavesOthers(t *testing.T) {
	pid := sleeper(t, 40)
	var cfg change.Config
	vals, _ := planRlimits(cfg, []check.Finding{rlimitFinding(fix.Rlimit{PID: pid, Item: "nproc", Soft: 50, Hard: 50})})
	j, err := change.Open(filepath.Join(t.TempDir(), "journal.json"), cfg)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := j.Rlimit(pid, "nproc", vals[0].Old, vals[0].New); err != nil {
		t.Fatal(err)
	}
	// Someone else's change, made the same way.
	other, err := change.Open(filepath.Join(t.TempDir(), "other.json"), cfg)
	if err != nil {
		t.Fatal(err)
	}
	cur, _ := cfg.ReadRlimit(pid, "nproc")
	cur.Cur = 45
	if note, err := other.Rlimit(pid, "nproc", vals[0].New, change.FormatLimitPair(cur)); err != nil || note != "" {
		t.Fatal(note, err)
	}
	if err := j.Restore(); err != nil {
		t.Fatal(err)
	}
	if now, _ := cfg.ReadRlimit(pid, "nproc"); now.Cur != 45 {
		t.Fatalf("the undo overwrote a limit changed since: %s", change.FormatLimitPair(now))
	}
}

// TestUdevTrigger runs a stand-in udevadm (root's, in a directory only root
// can change) when udevd's control socket exists, and says that udevd is
// not running when it does not.
func TestUdevTrigger(t *testing.T) {
	dir := testdb.RootOnlyDir(t, "udevadm")
	log := filepath.Join(dir, "calls")
	bin := filepath.Join(dir, "udevadm")
	if err := os.WriteFile(bin, []byte("#!/bin/sh\necho \"$*\" >> "+log+"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	oldPaths, oldControl := udevadmPaths, udevControl
	t.Cleanup(func() { udevadmPaths, udevControl = oldPaths, oldControl })
	udevadmPaths, udevControl = []string{bin}, filepath.Join(dir, "control")
	cs := &ChangeSet{Root: "/", Files: []FilePlan{{Path: "/etc/udev/rules.d/60-dbhost.rules",
		Content: "ACTION==\"add|change\", SUBSYSTEM==\"block\", KERNEL==\"loop0\", ATTR{queue/read_ahead_kb}=\"128\"\n"}}}

	notes := udevTrigger(cs)
	if len(notes) != 1 || !strings.Contains(notes[0], "udevd is not running here") {
		t.Fatalf("without udevd: %v", notes)
	}
	if _, err := os.Stat(log); err == nil {
		t.Fatal("udevadm ran without udevd")
	}
	p := &Plan{Root: "/", Files: cs.Files}
	if n := udevPlanNotes(p); len(n) != 1 || !strings.Contains(n[0], "not reloaded nor triggered") {
		t.Fatalf("plan notes without udevd: %v", n)
	}

	l, err := net.Listen("unix", udevControl)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	notes = udevTrigger(cs)
	b, _ := os.ReadFile(log)
	want := "control --reload\n"
	if _, err := os.Stat("/sys/class/block/loop0"); err == nil {
		want += "trigger --action=change --subsystem-match=block --sysname-match=loop0 --settle\n"
	}
	if string(b) != want {
		t.Fatalf("udevadm calls:\n%s\nwant:\n%s\nnotes %v", b, want, notes)
	}
	if n := udevPlanNotes(p); len(n) != 0 {
		t.Fatalf("plan notes with udevd: %v", n)
	}

	// A udevadm others can change is not run.
	if err := os.Chmod(bin, 0o757); err != nil {
		t.Fatal(err)
	}
	if notes := udevTrigger(cs); len(notes) != 1 || !strings.Contains(notes[0], "writable by group or others") {
		t.Fatalf("untrusted udevadm: %v", notes)
	}
}
