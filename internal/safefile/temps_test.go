package safefile

import (
	"os"
	"path/filepath"
	"sort"
	"testing"
)

// TestRemoveTemps removes only the temporary files a killed WriteFile of
// that name leaves, not other files, links or other names' temporaries.
func TestRemoveTemps(t *testing.T) {
	root := t.TempDir()
	sub := filepath.Join(root, "etc", "sysctl.d")
	os.MkdirAll(sub, 0o755)
	for _, n := range []string{"60-dbhost.conf", ".60-dbhost.conf.tmp-0123456789abcdef", ".60-dbhost.conf.tmp-short",
		".other.conf.tmp-0123456789abcdef", ".60-dbhost.conf.tmp-fedcba9876543210"} {
		os.WriteFile(filepath.Join(sub, n), []byte("x"), 0o644)
	}
	os.Symlink("/etc/passwd", filepath.Join(sub, ".60-dbhost.conf.tmp-00000000000000aa"))
	d, err := OpenDir(root)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	removed, err := d.RemoveTemps("etc/sysctl.d/60-dbhost.conf")
	if err != nil {
		t.Fatal(err)
	}
	sort.Strings(removed)
	if len(removed) != 2 || filepath.Base(removed[0]) != ".60-dbhost.conf.tmp-0123456789abcdef" || filepath.Base(removed[1]) != ".60-dbhost.conf.tmp-fedcba9876543210" {
		t.Fatalf("removed %v", removed)
	}
	ents, _ := os.ReadDir(sub)
	var left []string
	for _, e := range ents {
		left = append(left, e.Name())
	}
	if len(left) != 4 {
		t.Fatalf("left %v", left)
	}
	if r, err := d.RemoveTemps("etc/missing/x.conf"); err != nil || len(r) != 0 {
		t.Fatalf("missing directory: %v %v", r, err)
	}
}
