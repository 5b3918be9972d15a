package safefile_test

import (
	"errors"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/dbhost/dbhost/internal/safefile"
)

// TestWriteErrorsNameTheGivenPath: a Write that cannot start names the
// path it was given and the directory at fault, never its temporary file,
// and still unwraps to the system's error.
func TestWriteErrorsNameTheGivenPath(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "plain")
	if err := os.WriteFile(file, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	none := func(io.Writer) error { return nil }
	for _, c := range []struct {
		name, want string
		is         error
	}{
		{filepath.Join(dir, "a", "b", "out"), filepath.Join(dir, "a", "b", "out") + ": directory " + filepath.Join(dir, "a", "b") + " does not exist", fs.ErrNotExist},
		{filepath.Join(file, "x", "out"), filepath.Join(file, "x", "out") + ": " + file + " is not a directory", nil},
	} {
		err := safefile.Write(c.name, 0o600, none)
		if err == nil || err.Error() != c.want || strings.Contains(err.Error(), ".tmp-") {
			t.Errorf("Write(%s): %v; want %q", c.name, err, c.want)
		}
		if c.is != nil && !errors.Is(err, c.is) {
			t.Errorf("Write(%s): %v is not %v", c.name, err, c.is)
		}
	}
	// A failing fill leaves no temporary file and keeps its own error.
	boom := errors.New("boom")
	out := filepath.Join(dir, "out")
	if err := safefile.Write(out, 0o600, func(io.Writer) error { return boom }); !errors.Is(err, boom) {
		t.Errorf("fill error: %v", err)
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 1 {
		t.Errorf("left behind: %v", ents)
	}
}
