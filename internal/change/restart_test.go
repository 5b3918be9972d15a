package change

import (
	"context"
	"os"
	"path/filepath"
	"testing"
)

// TestSystemctlByAbsolutePathOnly: the systemctl a restart runs is named
// by absolute path (Config.Systemctl, set by code); a bare name, which
// PATH would resolve, is never run. Catches a lookup through PATH.
func TestSystemctlByAbsolutePathOnly(t *testing.T) {
	if _, err := (Config{Systemctl: []string{"systemctl", "bin/systemctl"}}).findSystemctl(); err == nil {
		t.Fatal("a relative systemctl was accepted")
	}
}

// TestRestartOnUndo: a restart journaled before the changes it is for
// runs when they have been put back; a restart itself is not undone.
func TestRestartOnUndo(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("a command only root can change runs as root")
	}
	dir := t.TempDir()
	c, err := Open(filepath.Join(dir, "j"), Config{})
	if err != nil {
		t.Fatal(err)
	}
	now, again := filepath.Join(dir, "now"), filepath.Join(dir, "again")
	if err := c.Restart(context.Background(), UserCommand{Argv: []string{"/usr/bin/touch", now}}); err != nil {
		t.Fatal(err)
	}
	if err := c.RestartOnUndo(UserCommand{Argv: []string{"/usr/bin/touch", again}}); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(now); err != nil || len(c.Journal().Changes()) != 1 {
		t.Fatalf("restart not run (%v), or journaled: %+v", err, c.Journal().Changes())
	}
	if _, err := os.Stat(again); err == nil {
		t.Fatal("the undo's restart ran before the undo")
	}
	if err := c.Restore(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(again); err != nil {
		t.Fatalf("the undo did not restart: %v", err)
	}
	for _, r := range []Restarter{Unit{Name: "x.service"}, Unit{Allowed: true}, UserCommand{Argv: []string{"touch", again}}} {
		if err := c.Restart(context.Background(), r); err == nil {
			t.Errorf("%s restarted", r)
		}
	}
}
