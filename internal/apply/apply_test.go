package apply

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"testing"

	"github.com/dbhost/dbhost/internal/check"
	"github.com/dbhost/dbhost/internal/fix"
	"github.com/dbhost/dbhost/internal/fixture"
	"github.com/dbhost/dbhost/internal/testdb"
)

// listing describes every entry under root: type, mode, owner and, for
// files, the SHA-256 of the content; for links, the target.
func listing(t *testing.T, root string) string {
	t.Helper()
	var out []string
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		info, err := os.Lstat(p)
		if err != nil {
			return err
		}
		st := info.Sys().(*syscall.Stat_t)
		rel, _ := filepath.Rel(root, p)
		line := fmt.Sprintf("%s %v %d:%d", rel, info.Mode(), st.Uid, st.Gid)
		switch {
		case info.Mode().IsRegular():
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			s := sha256.Sum256(b)
			line += " " + hex.EncodeToString(s[:])
		case info.Mode()&fs.ModeSymlink != 0:
			target, _ := os.Readlink(p)
			line += " -> " + target
		}
		out = append(out, line)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	sort.Strings(out)
	return strings.Join(out, "\n")
}

// tree makes a temporary root standing in for /, with an existing dbhost
// sysctl file (mode 0600, owned by 7:8, to see both put back), a file of
// someone else's, and a link that apply must leave alone.
func tree(t *testing.T) string {
	t.Helper()
	testdb.Need(t, "root (files owned by other users)", os.Geteuid() == 0)
	root := t.TempDir()
	write := func(rel, content string, mode os.FileMode) {
		p := filepath.Join(root, rel)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), mode); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(p, mode); err != nil {
			t.Fatal(err)
		}
	}
	write("etc/sysctl.d/60-dbhost.conf", "# an older file\nvm.swappiness = 10\n", 0o600)
	if err := os.Chown(filepath.Join(root, "etc/sysctl.d/60-dbhost.conf"), 7, 8); err != nil {
		t.Fatal(err)
	}
	write("etc/sysctl.d/10-other.conf", "kernel.foo = 1\n", 0o644)
	write("etc/sysctl.conf", "# main\n", 0o644)
	if err := os.Symlink("../sysctl.conf", filepath.Join(root, "etc/sysctl.d/99-sysctl.conf")); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(root, "etc/udev/rules.d"), 0o755); err != nil {
		t.Fatal(err)
	}
	return root
}

// basePlan is the plan for every failing finding of the recorded baseline
// host: a sysctl.d file, a unit drop-in, a tmpfiles.d file, a udev rule.
func basePlan(t *testing.T, root string) *Plan {
	t.Helper()
	f := fixture.Facts(t, "baseline")
	p, err := Build(root, fix.ContextFrom(f), Select(check.Run(f, check.Selector{})))
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func paths(p *Plan) []string {
	var out []string
	for _, f := range p.Files {
		out = append(out, f.Path)
	}
	return out
}

func TestPlanOnRecordedHost(t *testing.T) {
	root := tree(t)
	p := basePlan(t, root)
	want := []string{"/etc/sysctl.d/60-dbhost.conf", "/etc/systemd/system/postgresql@15-main.service.d/60-dbhost.conf",
		"/etc/tmpfiles.d/60-dbhost.conf", "/etc/udev/rules.d/60-dbhost.rules"}
	if got := paths(p); strings.Join(got, " ") != strings.Join(want, " ") {
		t.Fatalf("planned files %v, want %v", got, want)
	}
	sys := p.Files[0]
	b, _ := os.ReadFile(filepath.Join(root, sys.Path))
	if !sys.Exists || sys.Sum != sum(b) || sys.OldMode != 0o600 || sys.UID != 7 || sys.Mode != 0o644 {
		t.Errorf("sysctl file plan %+v does not describe the existing file", sys)
	}
	if !strings.Contains(sys.Diff, "-vm.swappiness = 10") || !strings.Contains(sys.Diff, "+vm.overcommit_memory") {
		t.Errorf("diff does not show the change:\n%s", sys.Diff)
	}
	if p.Files[1].Exists || p.Files[1].Sum != "" || !strings.HasPrefix(p.Files[1].Diff, "--- /dev/null") {
		t.Errorf("new drop-in planned as %+v", p.Files[1])
	}
	if len(p.Values) != 0 {
		t.Errorf("a temporary root planned kernel values: %+v", p.Values)
	}
	var grub, config bool
	for _, n := range p.NotApplied {
		grub = grub || strings.Contains(n, "/etc/default/grub.d/60-dbhost.cfg is not written")
		config = config || strings.Contains(n, "shared_buffers = 2089MB on postgres:5432 not applied")
	}
	if !grub || !config {
		t.Errorf("not-applied list misses the GRUB file (%v) or a database setting (%v): %q", grub, config, p.NotApplied)
	}
	if d := Same(p, basePlan(t, root)); d != "" {
		t.Errorf("two plans of the same host differ: %s", d)
	}
}

func sum(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

func TestApplyThenRollbackRestoresTree(t *testing.T) {
	root := tree(t)
	before := listing(t, root)
	p := basePlan(t, root)
	state := filepath.Join(t.TempDir(), "changes")
	cs, err := Apply(p, Options{StateDir: state})
	if err != nil {
		t.Fatal(err)
	}
	if cs.Status != StatusApplied || len(cs.Files) != 4 {
		t.Fatalf("change set %s %s with %d files, want applied with 4", cs.ID, cs.Status, len(cs.Files))
	}
	for _, f := range p.Files {
		b, err := os.ReadFile(filepath.Join(root, f.Path))
		if err != nil || string(b) != f.Content {
			t.Errorf("%s not written as planned: %v", f.Path, err)
		}
		st, _ := os.Stat(filepath.Join(root, f.Path))
		if st.Mode().Perm() != 0o644 || st.Sys().(*syscall.Stat_t).Uid != 0 {
			t.Errorf("%s has mode %v uid %d, want 0644 root", f.Path, st.Mode(), st.Sys().(*syscall.Stat_t).Uid)
		}
	}
	if listing(t, root) == before {
		t.Fatal("apply changed nothing")
	}
	// The change set is private: directory 0700, files 0600.
	for _, rel := range []string{cs.ID, cs.ID + "/meta.json", cs.ID + "/journal.json", cs.ID + "/backup/etc/sysctl.d/60-dbhost.conf"} {
		st, err := os.Stat(filepath.Join(state, rel))
		if err != nil {
			t.Fatal(err)
		}
		if want := os.FileMode(0o600); st.IsDir() && st.Mode().Perm() != 0o700 || !st.IsDir() && st.Mode().Perm() != want {
			t.Errorf("%s has mode %v", rel, st.Mode())
		}
	}
	rb, err := Rollback(state, "", Options{})
	if err != nil {
		t.Fatal(err)
	}
	if rb.ID != cs.ID {
		t.Errorf("rolled back %s, want %s", rb.ID, cs.ID)
	}
	if after := listing(t, root); after != before {
		t.Fatalf("rollback did not restore the tree:\nbefore:\n%s\nafter:\n%s", before, after)
	}
	h, err := History(state)
	if err != nil || len(h) != 1 || h[0].Status != StatusRolledBack || h[0].RolledBack.IsZero() {
		t.Fatalf("history after rollback: %+v %v", h, err)
	}
	if _, err := Rollback(state, "", Options{}); err == nil {
		t.Error("a second rollback found something to roll back")
	}
	// Rolling back is idempotent at the journal level too: the undo of
	// each file run again changes nothing.
	if after := listing(t, root); after != before {
		t.Fatal("tree changed after the second rollback attempt")
	}
}

func TestApplyRefusesFileEditedSincePlan(t *testing.T) {
	root := tree(t)
	p := basePlan(t, root)
	edited := filepath.Join(root, "etc/sysctl.d/60-dbhost.conf")
	if err := os.WriteFile(edited, []byte("# edited by someone\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	before := listing(t, root)
	_, err := Apply(p, Options{StateDir: filepath.Join(t.TempDir(), "changes")})
	if err == nil || !strings.Contains(err.Error(), "/etc/sysctl.d/60-dbhost.conf changed since the plan") {
		t.Fatalf("apply over an edited file: %v, want a refusal naming it", err)
	}
	if listing(t, root) != before {
		t.Fatal("a refused apply changed the tree")
	}
	// A file created since the plan is refused the same way.
	p = basePlan(t, root)
	os.MkdirAll(filepath.Join(root, "etc/tmpfiles.d"), 0o755)
	if err := os.WriteFile(filepath.Join(root, "etc/tmpfiles.d/60-dbhost.conf"), []byte("w /x - - - - 1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := Apply(p, Options{StateDir: filepath.Join(t.TempDir(), "changes")}); err == nil || !strings.Contains(err.Error(), "/etc/tmpfiles.d/60-dbhost.conf changed since the plan") {
		t.Fatalf("apply over a new file: %v", err)
	}
}

// TestApplyRefusesFileEditedDuringApply: someone writes a destination
// after the apply checked the plan and wrote the first file; the write
// refuses it, names it, and what was already written is put back.
func TestApplyRefusesFileEditedDuringApply(t *testing.T) {
	root := tree(t)
	p := basePlan(t, root)
	theirs := filepath.Join(root, "etc/tmpfiles.d/60-dbhost.conf")
	_, err := Apply(p, Options{StateDir: filepath.Join(t.TempDir(), "changes"), hook: func(step string) {
		if step == "wrote /etc/sysctl.d/60-dbhost.conf" {
			os.MkdirAll(filepath.Dir(theirs), 0o755)
			os.WriteFile(theirs, []byte("w /x - - - - 1\n"), 0o644)
		}
	}})
	if err == nil || !strings.Contains(err.Error(), "refusing /etc/tmpfiles.d/60-dbhost.conf: it changed since the plan") {
		t.Fatalf("apply over a file written during it: %v", err)
	}
	if b, _ := os.ReadFile(theirs); string(b) != "w /x - - - - 1\n" {
		t.Fatalf("their file was overwritten: %q", b)
	}
	b, err := os.ReadFile(filepath.Join(root, "etc/sysctl.d/60-dbhost.conf"))
	if err != nil || string(b) != "# an older file\nvm.swappiness = 10\n" {
		t.Fatalf("the file written first was not put back: %q %v", b, err)
	}
}

func TestApplyRefusesLinks(t *testing.T) {
	root := tree(t)
	victim := filepath.Join(t.TempDir(), "victim")
	if err := os.WriteFile(victim, []byte("keep\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	// A link at the destination file, and a linked directory on the way.
	if err := os.Symlink(victim, filepath.Join(root, "etc/udev/rules.d/60-dbhost.rules")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(t.TempDir(), filepath.Join(root, "etc/tmpfiles.d")); err != nil {
		t.Fatal(err)
	}
	before := listing(t, root)
	p := basePlan(t, root)
	why := strings.Join(p.Refusals(), "\n")
	if !strings.Contains(why, "/etc/udev/rules.d/60-dbhost.rules is not a regular file") || !strings.Contains(why, "etc/tmpfiles.d is a symbolic link") {
		t.Fatalf("plan refusals %q do not name both links", why)
	}
	if _, err := Apply(p, Options{StateDir: filepath.Join(t.TempDir(), "changes")}); err == nil || !strings.Contains(err.Error(), "60-dbhost.rules") {
		t.Fatalf("apply through a link: %v", err)
	}
	if b, _ := os.ReadFile(victim); string(b) != "keep\n" || listing(t, root) != before {
		t.Fatal("a refused apply changed something")
	}
	// A link planted after the plan is refused at write time.
	root = tree(t)
	p = basePlan(t, root)
	os.Remove(filepath.Join(root, "etc/sysctl.d/60-dbhost.conf"))
	if err := os.Symlink(victim, filepath.Join(root, "etc/sysctl.d/60-dbhost.conf")); err != nil {
		t.Fatal(err)
	}
	if _, err := Apply(p, Options{StateDir: filepath.Join(t.TempDir(), "changes")}); err == nil {
		t.Fatal("apply wrote through a link planted after the plan")
	}
	if b, _ := os.ReadFile(victim); string(b) != "keep\n" {
		t.Fatal("the link's target was written")
	}
}

func TestAllowed(t *testing.T) {
	for p, ok := range map[string]bool{
		"/etc/sysctl.d/60-dbhost.conf":                                    true,
		"/etc/udev/rules.d/60-dbhost.rules":                               true,
		"/etc/security/limits.d/60-dbhost.conf":                           true,
		"/etc/tmpfiles.d/60-dbhost.conf":                                  true,
		"/etc/systemd/system/postgresql@15-main.service.d/60-dbhost.conf": true,
		"/etc/sysctl.d/60-dbhost.rules":                                   false,
		"/etc/sysctl.d/../passwd":                                         false,
		"/etc/sysctl.d/sub/60-dbhost.conf":                                false,
		"/etc/sysctl.d/.hidden.conf":                                      false,
		"etc/sysctl.d/60-dbhost.conf":                                     false,
		"/etc/default/grub.d/60-dbhost.cfg":                               false,
		"/etc/fstab":                                                      false,
		"/etc/postgresql/15/main/conf.d/zz-dbhost.conf":                   false,
		"/etc/systemd/system/../../passwd.d/60-dbhost.conf":               false,
		"/etc/systemd/system/x.service.d/../../../shadow.conf":            false,
		"/etc/systemd/system/.service.d/60-dbhost.conf":                   false,
	} {
		if err := Allowed(p); (err == nil) != ok {
			t.Errorf("Allowed(%q) = %v, want allowed %v", p, err, ok)
		}
	}
	// A plan is data: one naming a path outside the list is refused whole.
	root := tree(t)
	p := basePlan(t, root)
	p.Files[1].Path = "/etc/sysctl.d/../shadow"
	before := listing(t, root)
	if _, err := Apply(p, Options{StateDir: filepath.Join(t.TempDir(), "changes")}); err == nil || !strings.Contains(err.Error(), "/etc/sysctl.d/../shadow") {
		t.Fatalf("apply of a plan outside the allow-list: %v", err)
	}
	if listing(t, root) != before {
		t.Fatal("a refused plan changed the tree")
	}
}

// TestKilledApplyIsRecovered kills (SIGKILL) an apply in a child process
// right after the journal records its second file, so the first is
// written and the second recorded; Recover then puts the tree back.
func TestKilledApplyIsRecovered(t *testing.T) {
	if dir := os.Getenv("DBHOST_TEST_APPLY_CHILD"); dir != "" {
		root, state := filepath.Join(dir, "root"), filepath.Join(dir, "changes")
		n := 0
		p := basePlan(t, root)
		Apply(p, Options{StateDir: state, hook: func(step string) {
			if n++; strings.HasPrefix(step, "recorded ") && n > 2 {
				syscall.Kill(os.Getpid(), syscall.SIGKILL)
			}
		}})
		t.Fatal("the child was not killed")
	}
	root := tree(t)
	dir := filepath.Dir(root)
	if err := os.Rename(root, filepath.Join(dir, "root")); err != nil {
		t.Fatal(err)
	}
	root = filepath.Join(dir, "root")
	before := listing(t, root)
	cmd := exec.Command(os.Args[0], "-test.run=^TestKilledApplyIsRecovered$", "-test.count=1")
	cmd.Env = append(os.Environ(), "DBHOST_TEST_APPLY_CHILD="+dir)
	out, err := cmd.CombinedOutput()
	if ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus); !ok || !ws.Signaled() || ws.Signal() != syscall.SIGKILL {
		t.Fatalf("child did not die of SIGKILL: %v\n%s", err, out)
	}
	if listing(t, root) == before {
		t.Fatal("the child changed nothing before it was killed")
	}
	state := filepath.Join(dir, "changes")
	h, err := History(state)
	if err != nil || len(h) != 1 || h[0].Status != StatusApplying {
		t.Fatalf("after the kill: %+v %v, want one set still applying", h, err)
	}
	ids, err := Recover(state, Options{})
	if err != nil || len(ids) != 1 || ids[0] != h[0].ID {
		t.Fatalf("Recover = %v, %v", ids, err)
	}
	if after := listing(t, root); after != before {
		t.Fatalf("recover did not restore the tree:\nbefore:\n%s\nafter:\n%s", before, after)
	}
	h, _ = History(state)
	if h[0].Status != StatusRolledBack || h[0].RolledBackBy != "recover" {
		t.Fatalf("recovered set is %s by %q", h[0].Status, h[0].RolledBackBy)
	}
}
