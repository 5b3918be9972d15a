package cli

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/dbhost/dbhost/internal/fixture"
)

// TestBudgetFlag: a share naming no instance of the host is an error that
// names it; a bad unit is refused at parse time; a good share reaches
// mem.db_budget; the flag beats DBHOST_BUDGET.
func TestBudgetFlag(t *testing.T) {
	snap := fixture.Path("mem-redis-big")
	code, _, stderr := runCLI(t, "audit", "--from", snap, "--only", "mem.db_budget", "--budget", "redis:9999=1GiB")
	if code != ExitError || !strings.Contains(stderr, "redis:9999: no such instance on this host") {
		t.Errorf("unknown instance: exit %d, stderr %q", code, stderr)
	}
	code, _, stderr = runCLI(t, "audit", "--from", snap, "--only", "mem.db_budget", "--budget", "redis:6379=4GB/s")
	if code != ExitError || !strings.Contains(stderr, "unknown unit") {
		t.Errorf("bad unit: exit %d, stderr %q", code, stderr)
	}
	t.Setenv("DBHOST_BUDGET", "redis:9999=1GiB")
	code, stdout, stderr := runCLI(t, "audit", "--from", snap, "--only", "mem.db_budget", "-v", "--budget", "redis:39037=4GiB")
	if code == ExitError || !strings.Contains(stdout, "as --budget sets it (redis:39037=4GiB)") {
		t.Errorf("share: exit %d, stdout %q, stderr %q", code, stdout, stderr)
	}
	code, _, stderr = runCLI(t, "audit", "--from", snap, "--only", "mem.db_budget")
	if code != ExitError || !strings.Contains(stderr, "DBHOST_BUDGET (environment): budget: redis:9999") {
		t.Errorf("environment: exit %d, stderr %q", code, stderr)
	}
}

// TestBudgetDefaultFile: /etc/default/dbhost is read only when root owns it
// and nobody else can write it.
func TestBudgetDefaultFile(t *testing.T) {
	root := t.TempDir()
	p := filepath.Join(root, "etc", "default", "dbhost")
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte("ARGS=\"\"\nDBHOST_BUDGET=\"redis:6379=4GiB\"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	var b budgetFlag
	os.Unsetenv("DBHOST_BUDGET")
	spec, _, err := b.resolve(root, true)
	if os.Geteuid() != 0 {
		// The temporary tree is the test user's: not trusted.
		if err == nil || spec != "" {
			t.Errorf("a file root does not own was read: %q %v", spec, err)
		}
		return
	}
	if err != nil || spec != "redis:6379=4GiB" {
		t.Errorf("root's file: %q %v", spec, err)
	}
	if err := os.Chmod(p, 0o666); err != nil {
		t.Fatal(err)
	}
	if spec, _, err := b.resolve(root, true); err == nil || spec != "" {
		t.Errorf("a world-writable file was read: %q %v", spec, err)
	}
}
