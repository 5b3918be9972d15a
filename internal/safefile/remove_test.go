package safefile_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/dbhost/dbhost/internal/safefile"
)

func TestDirToRemove(t *testing.T) {
	tmp := t.TempDir()
	link := filepath.Join(tmp, "link")
	if err := os.Symlink(tmp, link); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		path  string
		there bool
		err   string
	}{
		{tmp, true, ""},
		{filepath.Join(tmp, "gone"), false, ""},
		{link, false, "not a directory"},
	} {
		there, err := safefile.DirToRemove(c.path)
		if there != c.there || (err == nil) != (c.err == "") || err != nil && !strings.Contains(err.Error(), c.err) {
			t.Errorf("DirToRemove(%s) = %v, %v; want %v, %q", c.path, there, err, c.there, c.err)
		}
	}
}
