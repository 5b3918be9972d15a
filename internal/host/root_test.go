package host

import (
	"bytes"
	"compress/gzip"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/procfs"
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
	withoutOpenat2(t)
	testRootConfinesLinks(t)
}

// withoutOpenat2 makes the test take the path of kernels before 5.6.
func withoutOpenat2(t *testing.T) {
	openat2 = func(int, string, *unix.OpenHow) (int, error) { return -1, unix.ENOSYS }
	t.Cleanup(func() { openat2 = unix.Openat2 })
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
	if err := h.WriteSnapshot(&buf, SnapshotInfo{}); err != nil {
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

// TestRootProcfsReadersConfined: readers that open files under Root()
// themselves (procfs, after Touch) read the confined copy, not what
// ROOT/proc/self -> /outside points at.
func TestRootProcfsReadersConfined(t *testing.T) {
	root, outside := hostileRoot(t)
	for dir, mnt := range map[string]string{outside("self"): "/OUTSIDE", filepath.Join(root, outside("self")): "/in-root"} {
		os.MkdirAll(dir, 0o755)
		line := "22 1 8:1 / " + mnt + " rw,relatime shared:1 - ext4 /dev/sda1 rw\n"
		if err := os.WriteFile(filepath.Join(dir, "mountinfo"), []byte(line), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Symlink(outside("self"), filepath.Join(root, "proc", "self")); err != nil {
		t.Fatal(err)
	}
	h, err := Open(root)
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	if err := h.Touch("/proc/self/mountinfo"); err != nil {
		t.Fatal(err)
	}
	fs, err := procfs.NewFS(filepath.Join(h.Root(), "proc"))
	if err != nil {
		t.Fatal(err)
	}
	mounts, err := fs.GetMounts()
	if err != nil || len(mounts) != 1 || mounts[0].MountPoint != "/in-root" {
		t.Errorf("procfs under Root() read %+v, %v; want the in-root mountinfo", mounts, err)
	}
}

// TestRootSpecialFilesNotRead: a FIFO where a file should be neither hangs
// the audit nor passes for a missing file.
func TestRootSpecialFilesNotRead(t *testing.T) {
	root := t.TempDir()
	for _, p := range []string{"proc/loadavg", "etc/mysql/my.cnf"} {
		os.MkdirAll(filepath.Join(root, filepath.Dir(p)), 0o755)
		if err := unix.Mkfifo(filepath.Join(root, p), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	h, err := Open(root)
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	done := make(chan [2]error, 1)
	go func() {
		_, e1 := h.LoadAvg()
		_, e2 := h.ReadConfig("/etc/mysql/my.cnf")
		done <- [2]error{e1, e2}
	}()
	select {
	case errs := <-done:
		for _, err := range errs {
			if err == nil || !strings.Contains(err.Error(), "not a regular file") {
				t.Errorf("a FIFO read as %v; want it refused as not a regular file", err)
			}
		}
	case <-time.After(3 * time.Second):
		t.Fatal("reading a FIFO in the root hangs")
	}
}

// TestRootCopiesRemoved: the confined copies live in a locked directory of
// the unpack area that Close removes, that the garbage collector removes
// for a Host dropped without Close, and that the next Host removes after
// its process died.
func TestRootCopiesRemoved(t *testing.T) {
	base := privateTmp(t)
	root, _ := hostileRoot(t)
	open := func() *Host {
		h, err := Open(root)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := h.Meminfo(); err != nil {
			t.Fatal(err)
		}
		return h
	}
	h := open()
	if left := unpacked(t, base); len(left) != 1 || !strings.HasPrefix(left[0], "root-") {
		t.Fatalf("want one root- directory while open, have %v", left)
	}
	h.Close()
	if left := unpacked(t, base); len(left) != 0 {
		t.Errorf("Close left %v", left)
	}
	open() // dropped
	for i := 0; i < 50 && len(unpacked(t, base)) > 0; i++ {
		runtime.GC()
		time.Sleep(10 * time.Millisecond)
	}
	if left := unpacked(t, base); len(left) != 0 {
		t.Errorf("a Host dropped without Close left %v", left)
	}
	// A process killed while open leaves its directory and lock file,
	// with the lock released.
	dead := filepath.Join(base, "root-1-dead")
	os.MkdirAll(filepath.Join(dead, "proc"), 0o700)
	os.WriteFile(filepath.Join(dead, ".lock"), nil, 0o600)
	h = open()
	defer h.Close()
	if _, err := os.Stat(dead); err == nil {
		t.Errorf("the directory of a dead process is still there: %v", unpacked(t, base))
	}
}

// TestCollectionStaysOpenable: what OpenSnapshot refuses is never written:
// a file over the per-file limit is kept as an error that says so, and an
// archive over the entry limit is not written at all.
func TestCollectionStaysOpenable(t *testing.T) {
	privateTmp(t)
	root := t.TempDir()
	os.MkdirAll(filepath.Join(root, "proc", "1"), 0o755)
	os.MkdirAll(filepath.Join(root, "var", "log"), 0o755)
	big := bytes.Repeat([]byte("log line\n"), (maxSnapshotFile+1<<20)/9)
	os.WriteFile(filepath.Join(root, "var", "log", "big"), big, 0o644)
	h, err := Open(root)
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	if err := h.StartRecording(); err != nil {
		t.Fatal(err)
	}
	h.ReadDir("/proc")
	if b, err := h.ReadFile("/var/log/big"); err != nil || len(b) != len(big) {
		t.Fatalf("live read: %d bytes, %v", len(b), err)
	}
	file := filepath.Join(t.TempDir(), "c.tar.gz")
	f, _ := os.Create(file)
	if err := h.WriteSnapshot(f, SnapshotInfo{}); err != nil {
		t.Fatal(err)
	}
	f.Close()
	s, err := OpenSnapshot(file)
	if err != nil {
		t.Fatalf("a collection does not open: %v", err)
	}
	defer s.Close()
	_, err = s.ReadFile("/var/log/big")
	if !errors.Is(err, ErrTooLarge) || !strings.Contains(Explain(err), "/var/log/big: file larger than 8 MiB: not kept in snapshots") {
		t.Errorf("the large file replays as %v (%s)", err, Explain(err))
	}
	files := map[string][]byte{}
	for i := range maxSnapshotFiles {
		files[fmt.Sprintf("proc/%d/comm", i)] = []byte("x\n")
	}
	err = WriteArchive(io.Discard, time.Now(), Manifest{Format: SnapshotFormat}, map[string]any{}, map[string]any{}, files)
	if err == nil || !strings.Contains(err.Error(), "entries") {
		t.Errorf("an archive over the entry limit: %v", err)
	}
}

// TestRootWalkRace: on kernels without openat2 a path is resolved, then
// opened; a directory swapped for a link in between must not lead out.
func TestRootWalkRace(t *testing.T) {
	root, out := t.TempDir(), t.TempDir()
	for _, d := range []string{filepath.Join(root, "a", "b"), filepath.Join(out, "b")} {
		os.MkdirAll(d, 0o755)
		os.WriteFile(filepath.Join(d, "f"), []byte(d), 0o644)
	}
	h, err := Open(root)
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	resolved, err := h.walkInRoot("a/b/f", true)
	if err != nil || resolved != "a/b/f" {
		t.Fatalf("walk: %q %v", resolved, err)
	}
	os.RemoveAll(filepath.Join(root, "a"))
	os.Symlink(out, filepath.Join(root, "a"))
	if fd, err := openNoLinks(h.rootFD, resolved, unix.O_RDONLY|unix.O_CLOEXEC); err == nil {
		unix.Close(fd)
		t.Error("opened a file through a directory swapped for a link out of the root")
	}
}
