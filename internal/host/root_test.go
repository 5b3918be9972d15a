package host

import (
	"bytes"
	"compress/gzip"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// hostileRoot builds a root whose links point at absolute paths and climb
// with "..". Each absolute target exists twice: outside the root, holding
// a secret, and inside it (ROOT/abs/path), holding what a chroot would see.
func hostileRoot(t *testing.T) (root string, outside func(string) string) {
	t.Helper()
	root = t.TempDir()
	out := t.TempDir()
	write := func(p, c string) {
		os.MkdirAll(filepath.Dir(p), 0o755)
		if err := os.WriteFile(p, []byte(c), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	link := func(target, at string) {
		p := filepath.Join(root, at)
		os.MkdirAll(filepath.Dir(p), 0o755)
		if err := os.Symlink(target, p); err != nil {
			t.Fatal(err)
		}
	}
	// Files outside the root, and their in-root twins.
	for name, c := range map[string]string{
		"shadow":       "root:$6$OUTSIDE-SECRET:19000\n",
		"meminfo":      "MemTotal:       99999 kB\nOUTSIDE-SECRET\n",
		"conf.d/a.cnf": "[mysqld]\nOUTSIDE-SECRET\n",
	} {
		write(filepath.Join(out, name), c)
		write(filepath.Join(root, out, name), strings.ReplaceAll(c, "OUTSIDE-SECRET", "in-root"))
	}
	os.WriteFile(filepath.Join(root, out, "meminfo"), []byte("MemTotal:       12345 kB\n"), 0o644)
	link(filepath.Join(out, "shadow"), "etc/mysql/my.cnf")
	link(strings.Repeat("../", 12)+strings.TrimPrefix(filepath.Join(out, "shadow"), "/"), "etc/postgresql/postgresql.conf")
	link(filepath.Join(out, "conf.d"), "etc/mysql/conf.d")
	link(filepath.Join(out, "meminfo"), "proc/meminfo")
	return root, func(name string) string { return filepath.Join(out, name) }
}

func TestRootConfinesLinks(t *testing.T) { testRootConfinesLinks(t) }

// TestRootConfinesLinksWithoutOpenat2 takes the walk kernels before 5.6
// get.
func TestRootConfinesLinksWithoutOpenat2(t *testing.T) {
	openat2 = func(int, string, *unix.OpenHow) (int, error) { return -1, unix.ENOSYS }
	defer func() { openat2 = unix.Openat2 }()
	testRootConfinesLinks(t)
}

func testRootConfinesLinks(t *testing.T) {
	root, outside := hostileRoot(t)
	h, err := Open(root)
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	if err := h.StartRecording(); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{"/etc/mysql/my.cnf", "/etc/postgresql/postgresql.conf", "/etc/mysql/conf.d/a.cnf"} {
		b, err := h.ReadConfig(p)
		if err != nil || !strings.Contains(string(b), "in-root") {
			t.Errorf("ReadConfig(%s) = %q, %v; want the file inside the root", p, b, err)
		}
	}
	if names, err := h.ReadDir("/etc/mysql/conf.d"); err != nil || len(names) != 1 || names[0] != "a.cnf" {
		t.Errorf("ReadDir: %v %v", names, err)
	}
	if r, err := h.Realpath("/etc/mysql/my.cnf"); err != nil || r != outside("shadow") {
		t.Errorf("Realpath = %q, %v; want %s inside the root", r, err, outside("shadow"))
	}
	if fi, err := h.Stat("/etc/mysql/my.cnf"); err != nil || fi.Size != int64(len("root:$6$in-root:19000\n")) {
		t.Errorf("Stat: %+v %v", fi, err)
	}
	if fi, err := h.Lstat("/etc/mysql/my.cnf"); err != nil || fi.Mode&os.ModeSymlink == 0 {
		t.Errorf("Lstat: %+v %v", fi, err)
	}
	if l, err := h.Readlink("/etc/mysql/conf.d"); err != nil || l != outside("conf.d") {
		t.Errorf("Readlink: %q %v", l, err)
	}
	mi, err := h.Meminfo()
	if err != nil || mi.MemTotal == nil || *mi.MemTotal != 12345 {
		t.Errorf("Meminfo through a link out of the root: %+v %v", mi.MemTotal, err)
	}
	var buf bytes.Buffer
	if err := h.WriteSnapshot(&buf, ""); err != nil {
		t.Fatal(err)
	}
	gz, err := gzip.NewReader(&buf)
	if err != nil {
		t.Fatal(err)
	}
	all, _ := io.ReadAll(gz)
	if bytes.Contains(all, []byte("OUTSIDE-SECRET")) || bytes.Contains(all, []byte("99999")) {
		t.Error("the snapshot holds a file from outside the root")
	}
}
