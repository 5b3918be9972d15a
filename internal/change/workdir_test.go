package change

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestWorkDirJournaledAndRemoved(t *testing.T) {
	c, err := Open(filepath.Join(t.TempDir(), "j"), Config{})
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(t.TempDir(), WorkDirPrefix+"test")
	if err := c.WorkDir(dir); err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(dir)
	if err != nil || fi.Mode().Perm() != 0o711 {
		t.Fatalf("scratch directory %s: %v %v", dir, fi, err)
	}
	if err := os.WriteFile(filepath.Join(dir, "tx.log"), []byte("1 2 3\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	// What a new process does after kill -9.
	if err := Recover(c.Journal().File(), Config{}); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Fatalf("scratch directory left after recover: %v", err)
	}
	// Idempotent: already gone is done.
	b, _ := json.Marshal(WorkDirRecord{Path: dir})
	if err := undoWorkDir(b); err != nil {
		t.Fatal(err)
	}
}

func TestWorkDirUndoRefusesOtherPaths(t *testing.T) {
	other := t.TempDir()
	for _, p := range []string{other, "relative/" + WorkDirPrefix + "x", "/", filepath.Join(other, WorkDirPrefix+"x", "..")} {
		b, _ := json.Marshal(WorkDirRecord{Path: p})
		if err := undoWorkDir(b); err == nil || !strings.Contains(err.Error(), "refusing") {
			t.Errorf("undo of %q: %v", p, err)
		}
	}
	if _, err := os.Stat(other); err != nil {
		t.Fatalf("a foreign directory was removed: %v", err)
	}
}

func TestWorkDirUndoRefusesLink(t *testing.T) {
	tmp := t.TempDir()
	target := filepath.Join(tmp, "kept")
	if err := os.Mkdir(target, 0o700); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(tmp, WorkDirPrefix+"x")
	if err := os.Symlink(target, link); err != nil {
		t.Fatal(err)
	}
	b, _ := json.Marshal(WorkDirRecord{Path: link})
	if err := undoWorkDir(b); err == nil || !strings.Contains(err.Error(), "not a directory") {
		t.Errorf("undo of a link: %v", err)
	}
	if _, err := os.Stat(target); err != nil {
		t.Fatalf("the link's target was removed: %v", err)
	}
}
