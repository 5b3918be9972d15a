package cli

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/dbhost/dbhost/internal/fixture"
	"github.com/dbhost/dbhost/internal/testdb"
)

// TestFixOutHostileDirectory plays the user who prepares root's --out
// directory: one they own, and one holding a link to a directory they want
// written into or emptied, with a state file listing the file to delete.
func TestFixOutHostileDirectory(t *testing.T) {
	testdb.Need(t, "root (a directory owned by another user)", os.Geteuid() == 0)
	victim := t.TempDir()
	target := filepath.Join(victim, "passwd")
	os.WriteFile(target, []byte("root:x:0:0\n"), 0o644)
	intact := func() {
		t.Helper()
		if b, err := os.ReadFile(target); err != nil || string(b) != "root:x:0:0\n" {
			t.Errorf("victim file: %q, %v", b, err)
		}
		if ents, _ := os.ReadDir(victim); len(ents) != 1 {
			t.Errorf("victim directory holds %d entries", len(ents))
		}
	}

	// A directory owned by nobody is refused, and nothing is written.
	owned := filepath.Join(t.TempDir(), "fixes")
	os.Mkdir(owned, 0o755)
	os.Chown(owned, 65534, 65534)
	code, _, stderr := runCLI(t, "fix", "--out", owned, "--from", fixture.Path("mem-swapfile"))
	if code != ExitError || !strings.Contains(stderr, "owned by uid 65534") {
		t.Errorf("fix into a directory owned by nobody: exit %d, %s", code, stderr)
	}
	if ents, _ := os.ReadDir(owned); len(ents) != 0 {
		t.Errorf("wrote %v into it", ents)
	}

	// A root-owned directory with etc -> victim and a state file naming
	// etc/passwd: a run that produces no file there must not delete it.
	out := filepath.Join(t.TempDir(), "fixes")
	os.Mkdir(out, 0o755)
	os.Symlink(victim, filepath.Join(out, "etc"))
	os.WriteFile(filepath.Join(out, ".dbhost-fix-files"), []byte("etc/passwd\n"), 0o644)
	runCLI(t, "fix", "--out", out, "--from", fixture.Path("mem-swappiness-1"), "--only", "mem.swappiness")
	intact()

	// The same directory, now asked to write the sysctl fix into etc/.
	runCLI(t, "fix", "--out", out, "--from", fixture.Path("mem-swapfile"), "--only", "mem.swappiness")
	intact()
}

// TestFixOutRemovesOnlyUnchanged: a rerun whose finding is gone removes the
// file dbhost wrote for it, but keeps one the user edited since and says
// so on stderr.
func TestFixOutRemovesOnlyUnchanged(t *testing.T) {
	testdb.Need(t, "root (dbhost fix as root)", os.Geteuid() == 0)
	out := filepath.Join(t.TempDir(), "fixes")
	conf := filepath.Join(out, "etc", "sysctl.d", "60-dbhost.conf")
	render := func(name string) string {
		t.Helper()
		code, _, stderr := runCLI(t, "fix", "--out", out, "--from", fixture.Path(name), "--only", "mem.swappiness")
		if code != ExitOK {
			t.Fatalf("fix from %s: exit %d, %s", name, code, stderr)
		}
		return stderr
	}
	render("mem-swapfile")
	if _, err := os.Stat(conf); err != nil {
		t.Fatalf("the sysctl fix was not written: %v", err)
	}
	render("mem-swappiness-1")
	if _, err := os.Stat(conf); !os.IsNotExist(err) {
		t.Errorf("the unchanged file of the earlier run is still there: %v", err)
	}

	render("mem-swapfile")
	os.WriteFile(conf, []byte("vm.swappiness = 5 # mine\n"), 0o644)
	stderr := render("mem-swappiness-1")
	if b, err := os.ReadFile(conf); err != nil || string(b) != "vm.swappiness = 5 # mine\n" {
		t.Errorf("the edited file: %q, %v", b, err)
	}
	if !strings.Contains(stderr, "not removed: "+conf+" changed since dbhost wrote it") {
		t.Errorf("stderr does not say the edited file was kept: %s", stderr)
	}
}
