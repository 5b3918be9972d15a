package testdb

import (
	"os"
	"testing"
)

// RootOnlyDir makes a temporary directory whose every ancestor only root
// can change (under /run, not the world-writable /tmp), mode 0755, removed
// when the test ends. A binary installed there is one dbhost may run (see
// host.CheckTrusted), as a packaged server's binary is.
func RootOnlyDir(t testing.TB, prefix string) string {
	t.Helper()
	Need(t, "root (a directory under /run)", os.Geteuid() == 0)
	dir := tempDir(t, "/run", prefix)
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	return dir
}
