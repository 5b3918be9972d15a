package results

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestOpenReadOnlyMissing: no database means ErrNoDatabase and nothing
// created, not even the directory.
func TestOpenReadOnlyMissing(t *testing.T) {
	dir := t.TempDir()
	_, err := OpenReadOnly(filepath.Join(dir, "sub", "results.db"))
	if !errors.Is(err, ErrNoDatabase) {
		t.Errorf("OpenReadOnly of a missing database: %v", err)
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 0 {
		t.Errorf("created %v", ents)
	}
}

// TestOpenReadOnlyWAL reads a database the writer left in WAL mode: the
// reader sees the data, cannot write, and leaves the file and its
// directory as they were (no -wal or -shm appears).
func TestOpenReadOnlyWAL(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	p := filepath.Join(dir, "results.db")
	w, err := Open(p)
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Create(ctx, &Experiment{ID: "20261125-aaaa", Name: "stored", Created: time.Now(), Status: Done}); err != nil {
		t.Fatal(err)
	}
	w.Close()
	before, _ := os.ReadFile(p)
	if len(before) < 20 || before[18] != 2 || before[19] != 2 {
		t.Fatal("the writer did not leave the database in WAL mode")
	}
	fi0, _ := os.Stat(p)

	r, err := OpenReadOnly(p)
	if err != nil {
		t.Fatal(err)
	}
	list, err := r.List(ctx)
	if err != nil || len(list) != 1 || list[0].ID != "20261125-aaaa" {
		t.Errorf("List: %v, %v", list, err)
	}
	if err := r.Create(ctx, &Experiment{ID: "20261125-bbbb", Name: "x", Created: time.Now(), Status: Done}); err == nil || !strings.Contains(err.Error(), "readonly") {
		t.Errorf("a write through the read-only store: %v", err)
	}
	if err := r.Delete(ctx, "20261125-aaaa"); err == nil || !strings.Contains(err.Error(), "readonly") {
		t.Errorf("a delete through the read-only store: %v", err)
	}
	r.Close()

	after, _ := os.ReadFile(p)
	fi1, _ := os.Stat(p)
	if !bytes.Equal(before, after) || !fi1.ModTime().Equal(fi0.ModTime()) {
		t.Error("the database file changed")
	}
	ents, _ := os.ReadDir(dir)
	if len(ents) != 1 {
		var names []string
		for _, e := range ents {
			names = append(names, e.Name())
		}
		t.Errorf("files beside the database: %s", strings.Join(names, ", "))
	}
}
