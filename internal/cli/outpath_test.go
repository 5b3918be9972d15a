package cli

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/dbhost/dbhost/internal/fixture"
)

// TestOutputPathErrors: a command told to write into a directory that does
// not exist, or through a file, says so with the path the user gave, and
// never names the temporary file it writes first; it leaves nothing behind.
func TestOutputPathErrors(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "plain")
	if err := os.WriteFile(file, []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	missing := filepath.Join(dir, "missing")
	snap := fixture.Path("baseline")
	db, id := storeExperiment(t)
	for _, c := range []struct {
		name string
		args func(out string) []string
	}{
		{"collect -o", func(out string) []string { return []string{"collect", "--no-connect", "-o", out} }},
		{"audit -o", func(out string) []string { return []string{"audit", "--from", snap, "--fail-on", "none", "-o", out} }},
		{"fleet report -o", func(out string) []string { return []string{"fleet", "report", "-o", out, snap} }},
		{"results report -o", func(out string) []string { return []string{"results", "report", id, "--db", db, "-o", out} }},
	} {
		for _, tc := range []struct{ out, want string }{
			{filepath.Join(missing, "out.x"), filepath.Join(missing, "out.x") + ": directory " + missing + " does not exist"},
			{filepath.Join(missing, "deeper", "out.x"), filepath.Join(missing, "deeper", "out.x") + ": directory " + filepath.Join(missing, "deeper") + " does not exist"},
			{filepath.Join(file, "out.x"), filepath.Join(file, "out.x") + ": " + file + " is not a directory"},
		} {
			code, _, stderr := runCLI(t, c.args(tc.out)...)
			if code != ExitError || !strings.Contains(stderr, tc.want) || strings.Contains(stderr, ".tmp-") {
				t.Errorf("%s %s: exit %d, stderr %q; want exit %d and %q", c.name, tc.out, code, stderr, ExitError, tc.want)
			}
		}
	}
	// fix --out and man write a directory, which they create (as mkdir -p
	// would); through a file they fail, naming what the user gave.
	out := filepath.Join(file, "fixes")
	if code, _, stderr := runCLI(t, "fix", "--from", snap, "--out", out); code != ExitError || !strings.Contains(stderr, "dbhost fix: "+out+": ") {
		t.Errorf("fix --out %s: exit %d, stderr %q", out, code, stderr)
	}
	if code, _, stderr := runCLI(t, "man", filepath.Join(missing, "man")); code != ExitOK {
		t.Errorf("man into a new directory: exit %d, %s", code, stderr)
	}
	if code, _, stderr := runCLI(t, "man", filepath.Join(file, "man")); code != ExitError || !strings.Contains(stderr, file) {
		t.Errorf("man through a file: exit %d, stderr %q", code, stderr)
	}
	ents, _ := os.ReadDir(dir)
	if len(ents) != 2 {
		t.Errorf("left in %s: %v (want plain and the man pages only)", dir, ents)
	}
}
