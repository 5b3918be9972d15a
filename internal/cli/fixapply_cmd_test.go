package cli

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/dbhost/dbhost/internal/apply"
	"github.com/dbhost/dbhost/internal/fixture"
	"github.com/dbhost/dbhost/internal/journal"
	"github.com/dbhost/dbhost/internal/testdb"
)

// copyTree is a temporary root standing in for /, holding an earlier
// dbhost sysctl file (mode 0640).
func copyTree(t *testing.T) string {
	t.Helper()
	testdb.Need(t, "root (a tree owned by root)", os.Geteuid() == 0)
	root := t.TempDir()
	p := filepath.Join(root, "etc/sysctl.d/60-dbhost.conf")
	os.MkdirAll(filepath.Dir(p), 0o755)
	if err := os.WriteFile(p, []byte("vm.swappiness = 10\n"), 0o640); err != nil {
		t.Fatal(err)
	}
	return root
}

func treeListing(t *testing.T, root string) string {
	t.Helper()
	var out []string
	filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		info, _ := os.Lstat(p)
		st := info.Sys().(*syscall.Stat_t)
		rel, _ := filepath.Rel(root, p)
		if rel == "var" || strings.HasPrefix(rel, "var/") {
			return nil // the change sets, kept under ROOT/var/lib/dbhost
		}
		line := fmt.Sprintf("%s %v %d:%d", rel, info.Mode(), st.Uid, st.Gid)
		if info.Mode().IsRegular() {
			b, _ := os.ReadFile(p)
			s := sha256.Sum256(b)
			line += " " + hex.EncodeToString(s[:])
		}
		out = append(out, line)
		return nil
	})
	sort.Strings(out)
	return strings.Join(out, "\n")
}

// changesShown is the part of the output that says what changes (--apply
// adds the change set and the re-audit after it).
func changesShown(out string) string {
	out, _, _ = strings.Cut(out, "\napplied change set ")
	return out
}

// TestFixPlanApplyRollback: --plan and --apply show the same changes,
// --apply writes them, --history lists the change set, --rollback puts the
// tree back as it was.
func TestFixPlanApplyRollback(t *testing.T) {
	root := copyTree(t)
	before := treeListing(t, root)
	snap := fixture.Path("baseline")
	code, plan, stderr := runCLI(t, "fix", "--plan", "--from", snap, "--root", root)
	// Exit 1: changes are pending.
	if code != ExitFindings || !strings.Contains(plan, "file /etc/sysctl.d/60-dbhost.conf (mode 0644, replaces sha256 ") ||
		!strings.Contains(plan, "-vm.swappiness = 10") || !strings.Contains(plan, "/etc/default/grub.d/60-dbhost.cfg is not written") {
		t.Fatalf("--plan: exit %d\n%s\n%s", code, plan, stderr)
	}
	if treeListing(t, root) != before {
		t.Fatal("--plan changed the tree")
	}
	code, out, stderr := runCLI(t, "fix", "--apply", "--from", snap, "--root", root)
	if code == ExitError {
		t.Fatalf("--apply: exit %d\n%s\n%s", code, out, stderr)
	}
	if got := changesShown(out); got != plan {
		t.Errorf("--apply showed other changes than --plan:\n--plan:\n%s\n--apply:\n%s", plan, got)
	}
	if !strings.Contains(out, "applied change set ") {
		t.Fatalf("--apply output: %s", out)
	}
	b, err := os.ReadFile(filepath.Join(root, "etc/udev/rules.d/60-dbhost.rules"))
	if err != nil || !strings.Contains(string(b), "storage.read_ahead") {
		t.Fatalf("udev rule not written: %v", err)
	}
	_, hist, _ := runCLI(t, "fix", "--history", "--root", root)
	if !strings.Contains(hist, " applied ") || !strings.Contains(hist, "4 files") || !strings.Contains(hist, "storage.read_ahead (device:vda)") {
		t.Errorf("--history: %s", hist)
	}
	if code, out, stderr := runCLI(t, "fix", "--rollback", "--root", root); code != ExitOK {
		t.Fatalf("--rollback: exit %d\n%s\n%s", code, out, stderr)
	}
	if after := treeListing(t, root); after != before {
		t.Fatalf("--rollback did not restore the tree:\nbefore:\n%s\nafter:\n%s", before, after)
	}
	_, hist, _ = runCLI(t, "fix", "--history", "--root", root)
	if !strings.Contains(hist, "rolled-back") || !strings.Contains(hist, "rolled back 20") {
		t.Errorf("--history after rollback: %s", hist)
	}
}

// TestFixApplyPlanFile: a file edited after --plan-out is named and the
// apply refused; nothing changes.
func TestFixApplyPlanFile(t *testing.T) {
	root := copyTree(t)
	snap := fixture.Path("baseline")
	planFile := filepath.Join(t.TempDir(), "plan.json")
	if code, _, stderr := runCLI(t, "fix", "--plan", "--plan-out", planFile, "--from", snap, "--root", root); code != ExitFindings {
		t.Fatalf("--plan-out: %s", stderr)
	}
	if st, err := os.Stat(planFile); err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("plan file: %v %v", st, err)
	}
	edited := filepath.Join(root, "etc/sysctl.d/60-dbhost.conf")
	os.WriteFile(edited, []byte("vm.swappiness = 5\n"), 0o640)
	before := treeListing(t, root)
	code, _, stderr := runCLI(t, "fix", "--apply", "--plan-file", planFile, "--from", snap, "--root", root)
	if code != ExitError || !strings.Contains(stderr, "/etc/sysctl.d/60-dbhost.conf changed since the plan") {
		t.Fatalf("--apply --plan-file over an edited file: exit %d, %s", code, stderr)
	}
	if treeListing(t, root) != before {
		t.Fatal("a refused apply changed the tree")
	}
	// Unedited, the same plan file applies.
	os.WriteFile(edited, []byte("vm.swappiness = 10\n"), 0o640)
	if code, _, stderr := runCLI(t, "fix", "--apply", "--plan-file", planFile, "--from", snap, "--root", root); code == ExitError {
		t.Fatalf("--apply --plan-file: %s", stderr)
	}
	// A plan for other findings is refused: the changes differ.
	runCLI(t, "fix", "--rollback", "--root", root)
	if code, _, stderr := runCLI(t, "fix", "--apply", "--plan-file", planFile, "--only", "storage", "--from", snap, "--root", root); code != ExitError || !strings.Contains(stderr, "differ from the plan") {
		t.Fatalf("--apply with another selection than the plan: exit %d, %s", code, stderr)
	}
}

// TestFixApplyNeedsRoot: --apply, --rollback and --recover refuse a user
// who is not root (exit 2) before reading anything; --plan works.
func TestFixApplyNeedsRoot(t *testing.T) {
	old := geteuid
	geteuid = func() int { return 1000 }
	defer func() { geteuid = old }()
	root := t.TempDir()
	snap := fixture.Path("baseline")
	for _, mode := range []string{"--apply", "--rollback", "--recover"} {
		code, _, stderr := runCLI(t, "fix", mode, "--from", snap, "--root", root)
		if code != ExitError || !strings.Contains(stderr, "run it as root") {
			t.Errorf("%s as uid 1000: exit %d, %s", mode, code, stderr)
		}
	}
	if code, out, stderr := runCLI(t, "fix", "--plan", "--from", snap, "--root", root); code != ExitFindings || !strings.Contains(out, "Fixes for ") {
		t.Errorf("--plan as uid 1000: exit %d, %s %s", code, out, stderr)
	}
	if ents, _ := os.ReadDir(root); len(ents) != 0 {
		t.Errorf("refused modes left %v", ents)
	}
}

func TestFixApplyFlagErrors(t *testing.T) {
	snap := fixture.Path("baseline")
	for _, args := range [][]string{
		{"fix", "--plan", "--apply", "--from", snap, "--root", t.TempDir()},
		{"fix", "--apply", "--from", snap}, // a snapshot is not this host
		{"fix", "--apply", "--out", t.TempDir(), "--from", snap, "--root", t.TempDir()},
		{"fix", "--plan-file", "x.json", "--plan", "--from", snap, "--root", t.TempDir()},
		{"fix", "--allow-restart", "--plan", "--from", snap, "--root", t.TempDir()}, // restarts only with --apply
	} {
		if code, _, _ := runCLI(t, args...); code != ExitError {
			t.Errorf("%v: exit %d, want %d", args, code, ExitError)
		}
	}
}

// TestFixApplyTakesHostLock: while someone holds the host lock (an
// experiment, another apply), --apply waits and changes nothing.
func TestFixApplyTakesHostLock(t *testing.T) {
	root := copyTree(t)
	before := treeListing(t, root)
	release, err := journal.Lock(journal.HostLock)
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan int, 1)
	go func() {
		code, _, _ := runCLI(t, "fix", "--apply", "--only", "net", "--from", fixture.Path("baseline"), "--root", root)
		done <- code
	}()
	select {
	case code := <-done:
		release()
		t.Fatalf("--apply finished (exit %d) while the host lock was held", code)
	case <-time.After(500 * time.Millisecond):
	}
	if treeListing(t, root) != before {
		release()
		t.Fatal("--apply changed the tree while the host lock was held")
	}
	release()
	if code := <-done; code == ExitError {
		t.Fatalf("--apply after the lock was released: exit %d", code)
	}
	if treeListing(t, root) == before {
		t.Fatal("--apply changed nothing once the lock was free")
	}
}

// TestFixJSONChangeSets: --apply --format json and --history --format json
// name the change set a tool must roll back, with its status, without text
// to parse; json refuses the modes it does not describe.
func TestFixJSONChangeSets(t *testing.T) {
	root := copyTree(t)
	snap := fixture.Path("baseline")
	decode := func(out string) []apply.ChangeSet {
		t.Helper()
		var doc struct {
			Schema     string            `json:"schema"`
			ChangeSets []apply.ChangeSet `json:"change_sets"`
		}
		if err := json.Unmarshal([]byte(out), &doc); err != nil || doc.Schema != "dbhost.changes/1" {
			t.Fatalf("not dbhost.changes/1 JSON (%v):\n%s", err, out)
		}
		return doc.ChangeSets
	}
	if code, out, stderr := runCLI(t, "fix", "--history", "--format", "json", "--root", root); code != ExitOK || len(decode(out)) != 0 {
		t.Fatalf("--history of a new host: exit %d\n%s\n%s", code, out, stderr)
	}
	code, out, stderr := runCLI(t, "fix", "--apply", "--format", "json", "--from", snap, "--root", root)
	if code == ExitError {
		t.Fatalf("--apply: exit %d\n%s\n%s", code, out, stderr)
	}
	applied := decode(out)
	if len(applied) != 1 || applied[0].Status != apply.StatusApplied || len(applied[0].Files) != 4 || len(applied[0].After) == 0 {
		t.Fatalf("--apply --format json: %+v", applied)
	}
	id := applied[0].ID
	if code, out, _ := runCLI(t, "fix", "--rollback", id, "--root", root); code != ExitOK {
		t.Fatalf("--rollback %s: %s", id, out)
	}
	_, out, _ = runCLI(t, "fix", "--history", "--format", "json", "--root", root)
	if hist := decode(out); len(hist) != 1 || hist[0].ID != id || hist[0].Status != apply.StatusRolledBack || hist[0].RolledBack.IsZero() {
		t.Fatalf("--history after rollback: %+v", hist)
	}
	for _, args := range [][]string{{"--plan", "--format", "json"}, {"--rollback", "--format", "json"}, {"--history", "--format", "yaml"}, {"--out", t.TempDir(), "--format", "json"}} {
		if code, _, stderr := runCLI(t, append(append([]string{"fix"}, args...), "--from", snap, "--root", root)...); code != ExitError || !strings.Contains(stderr, "--format") {
			t.Errorf("fix %v: exit %d, %s", args, code, stderr)
		}
	}
}
