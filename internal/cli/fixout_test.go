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
	code, _, stderr := runCLI(t, "fix", "--out", owned, "--from", fixture.Path("mem-swappiness-0"))
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
	runCLI(t, "fix", "--out", out, "--from", fixture.Path("mem-swappiness-0"), "--only", "mem.swappiness")
	intact()
}
