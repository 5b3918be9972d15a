package host_test

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/dbhost/dbhost/internal/host"
	"github.com/dbhost/dbhost/internal/testdb"
)

// A directory root writes into must be root's alone, as a program root
// runs must be: not writable by others, no foreign link on the way, and a
// directory.
func TestCheckTrustedDir(t *testing.T) {
	testdb.Need(t, "root (the directories must be owned by root)", os.Geteuid() == 0)
	h, err := host.Open("/")
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	if err := h.CheckTrustedDir("/etc"); err != nil {
		t.Errorf("/etc: %v", err)
	}
	if err := h.CheckTrustedDir("/etc/passwd"); !errors.Is(err, host.ErrUntrusted) {
		t.Errorf("/etc/passwd as a directory: %v", err)
	}
	if err := h.CheckTrustedDir("/tmp"); !errors.Is(err, host.ErrUntrusted) {
		t.Errorf("/tmp (world-writable): %v", err)
	}
	own, err := os.MkdirTemp("/run", "dbhost-trustdir-")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(own)
	os.Chmod(own, 0o755)
	sub := filepath.Join(own, "conf.d")
	os.Mkdir(sub, 0o755)
	if err := h.CheckTrustedDir(sub); err != nil {
		t.Errorf("%s: %v", sub, err)
	}
	os.Chown(sub, 65534, 65534)
	if err := h.CheckTrustedDir(sub); !errors.Is(err, host.ErrUntrusted) {
		t.Errorf("%s owned by nobody: %v", sub, err)
	}
	link := filepath.Join(own, "link")
	os.Symlink("/tmp", link)
	if err := h.CheckTrustedDir(link); !errors.Is(err, host.ErrUntrusted) {
		t.Errorf("root's link to /tmp: %v", err)
	}
}
