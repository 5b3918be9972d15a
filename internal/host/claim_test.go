package host

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

const nobody = 65534

var (
	asNobody   = Claim{UID: nobody, GIDs: []int{nobody}}
	asRoot     = Claim{UID: 0, GIDs: []int{0}}
	asOwnLinks = Claim{UID: nobody, GIDs: []int{nobody}, OwnLinks: true}
)

// claimTree builds, below a directory everyone may search, files and
// links owned by root and by nobody. Modes are set after creation, as the
// umask would narrow them.
func claimTree(t *testing.T) string {
	t.Helper()
	b := t.TempDir()
	for _, d := range []string{filepath.Dir(b), b} {
		os.Chmod(d, 0o755) // t.TempDir's are root's alone
	}
	file := func(name string, uid, gid int, mode os.FileMode) {
		p := filepath.Join(b, name)
		if err := os.WriteFile(p, []byte(name), 0o600); err != nil {
			t.Fatal(err)
		}
		os.Chown(p, uid, gid)
		os.Chmod(p, mode)
	}
	dir := func(name string, uid int, mode os.FileMode) {
		p := filepath.Join(b, name)
		os.Mkdir(p, 0o700)
		os.Chown(p, uid, uid)
		os.Chmod(p, mode)
	}
	link := func(target, name string, uid int) {
		p := filepath.Join(b, name)
		if err := os.Symlink(target, p); err != nil {
			t.Fatal(err)
		}
		os.Lchown(p, uid, uid)
	}
	file("root644", 0, 0, 0o644)
	file("root640", 0, 0, 0o640)
	file("group640", 0, nobody, 0o640)
	file("root600", 0, 0, 0o600)
	file("nobody600", nobody, nobody, 0o600)
	dir("private", 0, 0o700)
	file("private/inside", 0, 0, 0o644)
	dir("home", nobody, 0o755)
	file("home/conf", nobody, nobody, 0o644)
	if err := unix.Mkfifo(filepath.Join(b, "fifo"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Link(filepath.Join(b, "root600"), filepath.Join(b, "home", "hard")); err != nil {
		t.Fatal(err)
	}
	link("/dev/kmsg", "kmsg", 0)
	link("/dev/null", "home/null", nobody)
	link("root644", "rootlink", 0)
	link("/etc/shadow", "rootshadow", 0)
	link("../root644", "home/up", nobody)
	link("/etc/shadow", "home/shadow", nobody)
	link("../private", "home/priv", nobody)
	return b
}

// liveHost opens the live system until the test ends.
func liveHost(t *testing.T) *Host {
	t.Helper()
	h, err := Open("/")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { h.Close() })
	return h
}

// TestClaimReads: what a claim for nobody, for root, and for nobody
// following its own links, may read, and why not.
func TestClaimReads(t *testing.T) {
	needRoot(t, "files owned by nobody")
	b, h := claimTree(t), liveHost(t)
	nob, root, own := h.For(asNobody), h.For(asRoot), h.For(asOwnLinks)
	shadow, err := os.ReadFile("/etc/shadow")
	if err != nil {
		t.Fatal(err)
	}
	const (
		ok            = ""
		noLink        = "a symbolic link owned by uid 65534"
		notNobodys    = "owned by uid 65534, not by root"
		shadowRefused = "/etc/shadow is owned by root, mode 0640, not readable by uid 65534"
	)
	// $ is the tree; a want of "" reads the file, whose content is its
	// name ($/name) or /etc/shadow's.
	for _, c := range []struct {
		p                 string
		nobody, root, own string
	}{
		{"root644", ok, ok, ok},
		{"root640", "owned by root, mode 0640, not readable by uid 65534", ok, "owned by root, mode 0640, not readable by uid 65534"},
		{"group640", ok, ok, ok},
		{"root600", "owned by root, mode 0600, not readable by uid 65534", ok, "owned by root, mode 0600, not readable by uid 65534"},
		{"nobody600", ok, notNobodys, ok},
		{"private/inside", "$/private is a directory owned by root, mode 0700, not searchable by uid 65534", ok, "$/private is a directory owned by root, mode 0700, not searchable by uid 65534"},
		{"fifo", "not a regular file (FIFO)", "not a regular file (FIFO)", "not a regular file (FIFO)"},
		{"kmsg", "/dev/kmsg is not a regular file (character device)", "/dev/kmsg is not a regular file (character device)", "/dev/kmsg is not a regular file (character device)"},
		{"home/null", noLink, noLink, "/dev/null is not a regular file (character device)"},
		{"rootlink", ok, ok, ok},
		{"rootshadow", shadowRefused, ok, shadowRefused},
		{"home/conf", ok, notNobodys, ok},
		{"home/hard", "owned by root, mode 0600, not readable by uid 65534", ok, "owned by root, mode 0600, not readable by uid 65534"},
		{"home/up", noLink, noLink, ok},
		{"home/shadow", noLink, noLink, shadowRefused},
		{"home/priv/inside", "$/home/priv is a symbolic link owned by uid 65534", "$/home/priv is a symbolic link owned by uid 65534", "$/private is a directory owned by root, mode 0700, not searchable by uid 65534"},
		{"/etc/shadow", "owned by root, mode 0640, not readable by uid 65534", ok, "owned by root, mode 0640, not readable by uid 65534"},
	} {
		p := c.p
		if !strings.HasPrefix(p, "/") {
			p = filepath.Join(b, p)
		}
		for _, v := range []struct {
			name string
			h    *Host
			uid  int
			want string
		}{{"nobody", nob, nobody, c.nobody}, {"root", root, 0, c.root}, {"own links", own, nobody, c.own}} {
			got, err := v.h.ReadConfig(p)
			if v.want == ok {
				want := []byte(strings.TrimPrefix(p, b+"/"))
				if strings.Contains(c.p, "shadow") {
					want = shadow
				} else if c.p == "rootlink" || c.p == "home/up" {
					want = []byte("root644")
				} else if c.p == "home/hard" {
					want = []byte("root600")
				}
				if err != nil || string(got) != string(want) {
					t.Errorf("%s as %s: %.20q, %v; want it read", c.p, v.name, got, err)
				}
				continue
			}
			want := p + ": not read for uid " + strconv.Itoa(v.uid) + ": " + strings.ReplaceAll(v.want, "$", b)
			var r *RefusedError
			if err == nil || err.Error() != want || !errors.Is(err, ErrRefused) || !errors.As(err, &r) || r.Path != p {
				t.Errorf("%s as %s: %v; want %q", c.p, v.name, err, want)
			}
		}
	}
	// The FIFO and the device were refused unopened.
	for _, p := range []string{filepath.Join(b, "fifo"), "/dev/kmsg"} {
		if _, err := root.ReadFile(p); err == nil {
			t.Errorf("%s read", p)
		}
	}
	if _, err := nob.ReadFile(filepath.Join(b, "missing")); !errors.Is(err, fs.ErrNotExist) || err.Error() != "open "+b+"/missing: no such file or directory" {
		t.Errorf("a missing file: %v", err)
	}
}

// TestClaimFIFONotOpened: a view refuses a FIFO, or a link to a device,
// from what the walk saw: it is never opened, so reading neither blocks
// nor has an effect.
func TestClaimFIFONotOpened(t *testing.T) {
	needRoot(t, "a device node")
	b := claimTree(t)
	dev := filepath.Join(b, "null")
	if err := unix.Mknod(dev, unix.S_IFCHR|0o666, int(unix.Mkdev(1, 3))); err != nil {
		t.Fatal(err)
	}
	os.Symlink(dev, filepath.Join(b, "devlink"))
	h := liveHost(t)
	for _, p := range []string{"fifo", "devlink"} {
		target := filepath.Join(b, "fifo")
		if p == "devlink" {
			target = dev
		}
		opened := watchOpens(t, target)
		done := make(chan error, 1)
		go func() {
			_, err := h.For(asRoot).ReadFile(filepath.Join(b, p))
			done <- err
		}()
		select {
		case err := <-done:
			if !errors.Is(err, ErrRefused) {
				t.Errorf("%s: %v", p, err)
			}
		case <-time.After(3 * time.Second):
			t.Fatalf("reading %s hangs", p)
		}
		if opened() {
			t.Errorf("reading %s opened %s", p, target)
		}
	}
}

// TestClaimMagicLinks: /proc/PID/fd/N and /proc/PID/cwd are followed as
// the text they show, never as the object behind them.
func TestClaimMagicLinks(t *testing.T) {
	needRoot(t, "a tree owned by root")
	b := claimTree(t)
	f, err := os.OpenFile(filepath.Join(b, "fifo"), os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	del := filepath.Join(b, "deleted")
	os.WriteFile(del, []byte("gone"), 0o644)
	g, err := os.Open(del)
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	os.Remove(del)
	h := liveHost(t)
	root := h.For(asRoot)
	fd := func(f *os.File) string { return "/proc/self/fd/" + strconv.Itoa(int(f.Fd())) }
	if _, err := root.ReadFile(fd(f)); err == nil || !strings.HasSuffix(err.Error(), b+"/fifo is not a regular file (FIFO)") {
		t.Errorf("a FIFO by its fd: %v", err)
	}
	// The object behind the link exists; its text names nothing.
	if _, err := root.ReadFile(fd(g)); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("a deleted file by its fd: %v", err)
	}
	if _, err := h.ReadFile(fd(g)); err != nil {
		t.Errorf("the host itself reads it: %v", err)
	}
	wd, _ := os.Getwd()
	if b, err := root.ReadFile("/proc/self/cwd/claim_test.go"); err != nil || !strings.Contains(string(b), "TestClaimMagicLinks") {
		t.Errorf("a file below cwd: %v", err)
	}
	if p, err := root.Realpath("/proc/self/cwd"); err != nil || p != wd {
		t.Errorf("Realpath(/proc/self/cwd) = %q, %v; want %s", p, err, wd)
	}
	// nobody may not search a root process's fd directory.
	if _, err := h.For(asNobody).ReadFile(fd(f)); !errors.Is(err, ErrRefused) || !strings.Contains(err.Error(), "/fd is a directory owned by root, mode 0500, not searchable by uid 65534") {
		t.Errorf("a root process's fd as nobody: %v", err)
	}
}

// TestClaimMetadata: Stat, Lstat, Readlink, Realpath and ReadDir through
// a view.
func TestClaimMetadata(t *testing.T) {
	needRoot(t, "files owned by nobody")
	b, h := claimTree(t), liveHost(t)
	nob, root, own := h.For(asNobody), h.For(asRoot), h.For(asOwnLinks)
	if fi, err := nob.Stat(b + "/fifo"); err != nil || fi.Mode.Type() != fs.ModeNamedPipe {
		t.Errorf("Stat of a FIFO: %+v, %v", fi, err) // stat opens nothing
	}
	if _, err := nob.Stat(b + "/private/inside"); !errors.Is(err, ErrRefused) {
		t.Errorf("Stat below a directory nobody may not search: %v", err)
	}
	if _, err := nob.Stat(b + "/home/up"); !errors.Is(err, ErrRefused) {
		t.Errorf("Stat through nobody's link: %v", err)
	}
	if fi, err := nob.Lstat(b + "/home/up"); err != nil || fi.Mode.Type() != fs.ModeSymlink {
		t.Errorf("Lstat of nobody's link: %+v, %v", fi, err)
	}
	if l, err := nob.Readlink(b + "/home/up"); err != nil || l != "../root644" {
		t.Errorf("Readlink of nobody's link: %q, %v", l, err)
	}
	if _, err := nob.Lstat(b + "/home/priv/inside"); !errors.Is(err, ErrRefused) {
		t.Errorf("Lstat through nobody's link: %v", err)
	}
	if p, err := own.Realpath(b + "/home/up"); err != nil || p != b+"/root644" {
		t.Errorf("Realpath with own links: %q, %v", p, err)
	}
	if !nob.Exists(b+"/root644") || nob.Exists(b+"/private/inside") {
		t.Error("Exists")
	}
	if names, err := nob.ReadDir(b + "/home"); err != nil || strings.Join(names, " ") != "conf hard null priv shadow up" {
		t.Errorf("ReadDir(home) as nobody: %q, %v", names, err)
	}
	if _, err := nob.ReadDir(b + "/private"); err == nil || err.Error() != b+"/private: not read for uid 65534: owned by root, mode 0700, not readable by uid 65534" {
		t.Errorf("ReadDir(private) as nobody: %v", err)
	}
	if _, err := root.ReadDir(b + "/home"); err == nil || err.Error() != b+"/home: not read for uid 0: owned by uid 65534, not by root" {
		t.Errorf("ReadDir(home) as root: %v", err)
	}
	// Reads that are not of paths a process names are the host's.
	if _, err := nob.Status(os.Getpid()); err != nil {
		t.Errorf("Status through a view: %v", err)
	}
	if _, err := nob.ReadSecret("/etc/shadow"); err != nil {
		t.Errorf("ReadSecret through a view: %v", err)
	}
	if err := nob.Close(); err != nil || nob.rootFD != h.rootFD {
		t.Error("closing a view closed its host")
	}
}

// TestClaimRace: a component swapped after the walk fails the read:
// a directory for a link (root's, which the walk would follow), or the
// file for another. Also on kernels without openat2.
func TestClaimRace(t *testing.T) {
	needRoot(t, "a tree owned by root")
	t.Run("openat2", testClaimRace)
	t.Run("walk", func(t *testing.T) {
		withoutOpenat2(t)
		testClaimRace(t)
	})
}

func testClaimRace(t *testing.T) {
	b := claimTree(t)
	for _, d := range []string{"d", "other"} {
		os.Mkdir(filepath.Join(b, d), 0o755)
		os.WriteFile(filepath.Join(b, d, "f"), []byte(d), 0o644)
	}
	for _, root := range []string{"/", b} {
		h, err := Open(root)
		if err != nil {
			t.Fatal(err)
		}
		defer h.Close()
		p := "/d/f"
		if root == "/" {
			p = b + p
		}
		for _, swap := range []func(){
			func() { // the directory for a link
				os.Rename(filepath.Join(b, "d"), filepath.Join(b, "d.old"))
				os.Symlink("other", filepath.Join(b, "d"))
			},
			func() { // the file for another
				os.Rename(filepath.Join(b, "other", "f"), filepath.Join(b, "d", "f"))
			},
		} {
			os.RemoveAll(filepath.Join(b, "d"))
			os.RemoveAll(filepath.Join(b, "d.old"))
			os.Mkdir(filepath.Join(b, "d"), 0o755)
			os.WriteFile(filepath.Join(b, "d", "f"), []byte("d"), 0o644)
			os.WriteFile(filepath.Join(b, "other", "f"), []byte("other"), 0o644)
			v := h.For(asRoot)
			if got, err := v.ReadFile(p); err != nil || string(got) != "d" {
				t.Fatalf("%s before the swap: %q, %v", p, got, err)
			}
			testHookWalked = func(string) { swap() }
			got, err := h.For(asRoot).ReadFile(p)
			testHookWalked = nil
			if err == nil || !errors.Is(err, ErrRefused) || !strings.HasSuffix(err.Error(), "replaced or changed while it was read") {
				t.Errorf("root %s: %s swapped while read: %q, %v", root, p, got, err)
			}
		}
	}
}

// TestClaimSnapshot: a collection records the walks of views, so that a
// replay reaches the same verdicts; what a view that does not record
// reads is not in the archive, and its reads do not replay.
func TestClaimSnapshot(t *testing.T) {
	needRoot(t, "files owned by nobody")
	b := claimTree(t)
	privateTmp(t)
	os.Mkdir(filepath.Join(b, "proc"), 0o555)
	os.WriteFile(filepath.Join(b, "untrusted.conf"), []byte("untrusted"), 0o644)
	os.Chown(filepath.Join(b, "untrusted.conf"), nobody, nobody)
	trusted := Claim{UID: nobody, GIDs: []int{nobody}, OwnLinks: true, Record: true}
	paths := []string{"/", "/root644", "/root640", "/group640", "/nobody600", "/home", "/home/conf", "/home/up", "/home/priv/inside",
		"/home/null", "/private", "/private/inside", "/fifo", "/kmsg", "/rootlink", "/missing", "/root644/x"}
	observe := func(h *Host) (out []string) {
		say := func(op, p string, v any, err error) {
			if err != nil {
				out = append(out, fmt.Sprintf("%s %s: %v", op, p, err))
				return
			}
			out = append(out, fmt.Sprintf("%s %s: ok %v", op, p, v))
		}
		for _, c := range []Claim{trusted, asNobody} {
			v := h.For(c)
			for _, p := range paths {
				b, err := v.ReadConfig(p)
				say("read", p, string(b), err)
				fi, err := v.Stat(p)
				say("stat", p, fi, err)
				fi, err = v.Lstat(p)
				say("lstat", p, fi, err)
				l, err := v.Readlink(p)
				say("readlink", p, l, err)
				r, err := v.Realpath(p)
				say("realpath", p, r, err)
				names, err := v.ReadDir(p)
				say("readdir", p, names, err)
			}
		}
		b, err := h.For(asNobody).ReadFile("/untrusted.conf")
		say("untrusted", "/untrusted.conf", string(b), err)
		return out
	}
	h, err := Open(b)
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	if err := h.StartRecording(); err != nil {
		t.Fatal(err)
	}
	h.PIDs()
	live := observe(h)
	s, archive := replayed(t, h)
	entries := map[string]bool{}
	gz, _ := gzip.NewReader(bytes.NewReader(archive))
	for tr := tar.NewReader(gz); ; {
		hdr, err := tr.Next()
		if err != nil {
			break
		}
		entries[hdr.Name] = true
	}
	if !entries["fs/home/conf"] || !entries["fs/root644"] || entries["fs/untrusted.conf"] || entries["fs/root640"] {
		t.Errorf("the archive holds %v; want the trusted reads only", entries)
	}
	if !s.Manifest().Claims {
		t.Error("the manifest does not say the snapshot was collected with claims")
	}
	replay := observe(s)
	// The untrusted view read these live; they were not collected.
	notKept := regexp.MustCompile(`^read (\S+): ok .*`)
	refused := 0
	for i := range live {
		want := live[i]
		if i >= len(live)/2 {
			want = notKept.ReplaceAllString(want, "read $1: open $1: not recorded in this snapshot")
		}
		if i == len(live)-1 {
			want = "untrusted /untrusted.conf: open /untrusted.conf: not recorded in this snapshot"
		}
		if replay[i] != want {
			t.Errorf("replayed %q\n          live %q", replay[i], want)
		}
		if strings.Contains(want, "not read for uid") {
			refused++
		}
	}
	if refused < 10 {
		t.Errorf("only %d refusals: %q", refused, live)
	}
}

// TestClaimOldSnapshot: in a snapshot collected before claims a view
// reads as its host does, and keeps the host's unpacked files while the
// host itself is no longer referenced.
func TestClaimOldSnapshot(t *testing.T) {
	privateTmp(t)
	s, err := OpenSnapshot(baseline(t))
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{}
	for _, p := range []string{"/etc/postgresql/15/main/postgresql.conf", "/etc/mysql/my.cnf"} {
		b, err := s.ReadConfig(p)
		if err != nil {
			t.Fatal(err)
		}
		want[p] = string(b)
	}
	v := s.For(Claim{UID: nobody, Record: false})
	s = nil
	for range 5 {
		runtime.GC()
		time.Sleep(5 * time.Millisecond)
	}
	for p, w := range want {
		if got, err := v.ReadConfig(p); err != nil || string(got) != w {
			t.Errorf("%s through a view: %v", p, err)
		}
	}
	v.plain().Close()
}
