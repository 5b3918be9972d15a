package host

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/dbhost/dbhost/internal/testdb"
	"golang.org/x/sys/unix"
)

// needRoot skips a test that needs root under -short, and fails it when
// not root under DBHOST_INTEGRATION=require.
func needRoot(t *testing.T, why string) {
	t.Helper()
	if testing.Short() {
		t.Skip("needs root: not under -short")
	}
	testdb.Need(t, "root ("+why+")", os.Geteuid() == 0)
}

// watchOpens reports, when called, whether anything opened p since
// watchOpens was: inotify sees every open but an O_PATH one.
func watchOpens(t *testing.T, p string) func() bool {
	t.Helper()
	in, err := unix.InotifyInit1(unix.IN_NONBLOCK | unix.IN_CLOEXEC)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { unix.Close(in) })
	if _, err := unix.InotifyAddWatch(in, p, unix.IN_OPEN|unix.IN_DONT_FOLLOW); err != nil {
		t.Fatal(err)
	}
	return func() bool {
		n, _ := unix.Read(in, make([]byte, 4096))
		return n > 0
	}
}

// TestNoDeviceOpened: a FIFO, a device, or a link to one, is refused
// before it is opened for reading, by every read of a file, on the live
// system and under another root; reading neither blocks nor opens it.
func TestNoDeviceOpened(t *testing.T) {
	needRoot(t, "mknod")
	root := t.TempDir()
	for _, d := range []string{"etc", "proc"} {
		os.Mkdir(filepath.Join(root, d), 0o755)
	}
	fifo, dev := filepath.Join(root, "etc", "fifo"), filepath.Join(root, "etc", "null")
	if err := unix.Mkfifo(fifo, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := unix.Mknod(dev, unix.S_IFCHR|0o666, int(unix.Mkdev(1, 3))); err != nil {
		t.Fatal(err)
	}
	os.Symlink("null", filepath.Join(root, "etc", "link"))
	os.Symlink("/etc/null", filepath.Join(root, "proc", "loadavg"))
	held, err := os.OpenFile(fifo, os.O_RDWR, 0) // a FIFO open in dbhost, as /proc/self/fd/N
	if err != nil {
		t.Fatal(err)
	}
	defer held.Close()
	live := liveHost(t)
	confined, err := Open(root)
	if err != nil {
		t.Fatal(err)
	}
	defer confined.Close()
	heldPath := "/proc/self/fd/" + strconv.Itoa(int(held.Fd()))
	for _, c := range []struct {
		h       *Host
		p, want string
	}{
		{live, fifo, "not a regular file (FIFO)"},
		{live, dev, "not a regular file (character device)"},
		{live, filepath.Join(root, "etc", "link"), "not a regular file (character device)"},
		{live, heldPath, "not a regular file (FIFO)"},
		{confined, "/etc/fifo", "not a regular file (FIFO)"},
		{confined, "/etc/link", "not a regular file (character device)"},
		{confined, "/proc/loadavg", "not a regular file (character device)"},
	} {
		target := dev
		if strings.HasSuffix(c.want, "(FIFO)") {
			target = fifo
		}
		opened := watchOpens(t, target)
		done := make(chan []error, 1)
		go func() {
			_, e1 := c.h.ReadFile(c.p)
			_, e2 := c.h.ReadConfig(c.p)
			_, e3 := c.h.ReadSecret(c.p)
			e4 := c.h.Touch(c.p)
			if c.h == live {
				_, e4 = live.ReadFileInto(c.p, nil)
			}
			done <- []error{e1, e2, e3, e4}
		}()
		select {
		case errs := <-done:
			for i, err := range errs {
				if err == nil || !strings.Contains(err.Error(), c.want) {
					t.Errorf("%s (read %d): %v; want %q", c.p, i, err, c.want)
				}
			}
		case <-time.After(3 * time.Second):
			t.Fatalf("reading %s hangs", c.p)
		}
		if opened() {
			t.Errorf("reading %s opened %s", c.p, target)
		}
	}
}
