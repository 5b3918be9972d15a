package experiment

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/dbhost/dbhost/internal/change"
)

func TestWorkDirJournaledAndRemoved(t *testing.T) {
	c, err := change.Open(filepath.Join(t.TempDir(), "j"), change.Config{})
	if err != nil {
		t.Fatal(err)
	}
	dir, err := newWorkDir(c)
	if err != nil {
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
	if err := change.Recover(c.Journal().File(), change.Config{}); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Fatalf("scratch directory left after recover: %v", err)
	}
}
