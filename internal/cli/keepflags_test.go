package cli

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/dbhost/dbhost/internal/fixture"
)

// TestKeepFlags: vm.swappiness=1 set at runtime only. Unasked, fix --out
// persists nothing for it and audit asks; --keep-running persists 1;
// --keep-file persists nothing and the README sets 60 now. A name given to
// both flags, or no kernel parameter dbhost compares, is refused before
// anything is read.
func TestKeepFlags(t *testing.T) {
	snap := fixture.Path("persist-swappiness-runtime")
	render := func(args ...string) (sysctl, readme string) {
		t.Helper()
		out := filepath.Join(t.TempDir(), "fixes")
		os.Mkdir(out, 0o700)
		code, _, stderr := runCLI(t, append([]string{"fix", "--out", out, "--from", snap, "--only", "sysctl.drift"}, args...)...)
		if code != ExitOK {
			t.Fatalf("fix %v: exit %d: %s", args, code, stderr)
		}
		b, _ := os.ReadFile(filepath.Join(out, "etc/sysctl.d/60-dbhost.conf"))
		r, _ := os.ReadFile(filepath.Join(out, "README.txt"))
		return string(b), string(r)
	}
	if s, r := render(); strings.Contains(s, "vm.swappiness") || !strings.Contains(r, "--keep-running NAME") {
		t.Errorf("unasked: sysctl.d %q, README:\n%s", s, r)
	}
	if s, _ := render("--keep-running", "vm.swappiness"); !strings.Contains(s, "vm.swappiness = 1\n") {
		t.Errorf("--keep-running: sysctl.d %q", s)
	}
	if s, r := render("--keep-file", "vm.swappiness"); strings.Contains(s, "vm.swappiness") || !strings.Contains(r, "sysctl -w vm.swappiness=60  # sysctl.drift") {
		t.Errorf("--keep-file: sysctl.d %q, README:\n%s", s, r)
	}
	code, stdout, _ := runCLI(t, "audit", "--from", snap, "--only", "sysctl.drift", "--keep-running", "vm.swappiness", "-v")
	if code == ExitError || !strings.Contains(strings.Join(strings.Fields(stdout), " "), "(--keep-running: the fix persists 1)") {
		t.Errorf("audit --keep-running: exit %d:\n%s", code, stdout)
	}
	for _, bad := range [][]string{
		{"--keep-running", "vm.swappiness,kernel.sem", "--keep-file", "vm.swappiness"},
		{"--keep-file", "vm.no_such_thing"},
	} {
		code, _, stderr := runCLI(t, append([]string{"fix", "--out", t.TempDir(), "--from", snap}, bad...)...)
		if code != ExitError || !strings.Contains(stderr, "dbhost fix: ") {
			t.Errorf("%v: exit %d: %s", bad, code, stderr)
		}
	}
}
