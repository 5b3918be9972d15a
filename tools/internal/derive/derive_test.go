package derive

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"testing"

	"github.com/dbhost/dbhost/internal/host"
)

// TestDeriveReplays derives a fixture from the baseline recording and opens
// it as dbhost does: the edits replay, the rest is as recorded, and the
// same derivation written twice gives the same bytes.
func TestDeriveReplays(t *testing.T) {
	src := filepath.Join("..", "..", "..", "testdata", "hosts")
	dir := t.TempDir()
	b, err := os.ReadFile(filepath.Join(src, "baseline.tar.gz"))
	if err != nil {
		t.Skipf("no baseline fixture: %v", err)
	}
	if err := os.WriteFile(filepath.Join(dir, "baseline.tar.gz"), b, 0o644); err != nil {
		t.Fatal(err)
	}
	d := Derivation{Name: "derived", Base: "baseline", Note: "derived from baseline: test", Edit: func(a *Archive) error {
		if _, ok := a.File("proc/meminfo"); !ok {
			return errors.New("baseline has no /proc/meminfo")
		}
		a.Deny("proc/meminfo")
		a.SetFile("etc/dbhost-test", "x\n")
		a.SetProbe("readdir:nowhere", nil, "open /nowhere: permission denied", 13)
		return nil
	}}
	if err := Derive(dir, d); err != nil {
		t.Fatal(err)
	}
	first, err := os.ReadFile(filepath.Join(dir, "derived.tar.gz"))
	if err != nil {
		t.Fatal(err)
	}
	if err := Derive(dir, d); err != nil {
		t.Fatal(err)
	}
	if second, _ := os.ReadFile(filepath.Join(dir, "derived.tar.gz")); string(second) != string(first) {
		t.Error("the same derivation wrote different bytes")
	}

	h, err := host.OpenSnapshot(filepath.Join(dir, "derived.tar.gz"))
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	if h.Manifest().Note != d.Note {
		t.Errorf("note %q", h.Manifest().Note)
	}
	if _, err := h.ReadFile("/proc/meminfo"); !errors.Is(err, fs.ErrPermission) {
		t.Errorf("denied /proc/meminfo: %v", err)
	}
	if b, err := h.ReadFile("/etc/dbhost-test"); err != nil || string(b) != "x\n" {
		t.Errorf("added file: %q, %v", b, err)
	}
	if _, err := h.ReadDir("/nowhere"); !errors.Is(err, fs.ErrPermission) {
		t.Errorf("denied directory: %v", err)
	}
	if _, err := h.ReadFile("/proc/sys/vm/swappiness"); err != nil {
		t.Errorf("untouched file: %v", err)
	}
}
