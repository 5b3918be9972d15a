// Package hosttest builds small host trees for tests: the files a test
// needs below a temporary root, opened as a host.Host.
package hosttest

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/dbhost/dbhost/internal/host"
)

// Tree writes files below a temporary root ("etc/x" → content; a content
// starting with "->" makes a symbolic link to the rest) and opens a Host
// over it.
func Tree(t testing.TB, files map[string]string) *host.Host {
	t.Helper()
	root := t.TempDir()
	for p, c := range files {
		full := filepath.Join(root, p)
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			t.Fatal(err)
		}
		if target, ok := strings.CutPrefix(c, "->"); ok {
			if err := os.Symlink(target, full); err != nil {
				t.Fatal(err)
			}
			continue
		}
		if err := os.WriteFile(full, []byte(c), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	h, err := host.Open(root)
	if err != nil {
		t.Fatal(err)
	}
	return h
}
