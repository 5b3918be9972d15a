package host

import (
	"archive/tar"
	"compress/gzip"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/dbhost/dbhost/internal/fixture/ttar"
	"github.com/dbhost/dbhost/internal/testdb"
	"golang.org/x/sys/unix"
)

// baseline is the baseline recording's archive, built from its text form
// (the fixture package, which would build it too, imports this one).
func baseline(t testing.TB) string {
	t.Helper()
	p, err := ttar.Archive("../../testdata/hosts", "baseline")
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// privateTmp points TMPDIR (and so the unpack area) at a directory of the
// test's own and returns the per-user unpack directory.
func privateTmp(t *testing.T) string {
	t.Helper()
	tmp := t.TempDir()
	t.Setenv("TMPDIR", tmp)
	return filepath.Join(tmp, fmt.Sprintf("dbhost-unpack-%d", os.Geteuid()))
}

func unpacked(t *testing.T, base string) []string {
	t.Helper()
	ents, _ := os.ReadDir(base)
	var out []string
	for _, e := range ents {
		out = append(out, e.Name())
	}
	return out
}

// writeArchive streams a snapshot-shaped archive: a manifest, files of
// size bytes each, and probes only when withProbes.
func writeArchive(w io.Writer, files, size int, withProbes bool) error {
	gz := gzip.NewWriter(w)
	tw := tar.NewWriter(gz)
	add := func(name string, b []byte) error {
		if err := tw.WriteHeader(&tar.Header{Name: name, Mode: 0o600, Size: int64(len(b)), Typeflag: tar.TypeReg}); err != nil {
			return err
		}
		_, err := tw.Write(b)
		return err
	}
	if err := add("manifest.json", []byte(`{"format":"`+SnapshotFormat+`"}`)); err != nil {
		return err
	}
	if withProbes {
		if err := add("probes.json", []byte(`{"readdir:proc":{"out":"MQ=="}}`)); err != nil {
			return err
		}
	}
	for i := range files {
		if err := add(fmt.Sprintf("fs/var/f%d", i), make([]byte, size)); err != nil {
			return err
		}
	}
	if err := tw.Close(); err != nil {
		return err
	}
	return gz.Close()
}

// bytesUnder sums the sizes of the regular files below dir.
func bytesUnder(dir string) int64 {
	var n int64
	filepath.Walk(dir, func(_ string, fi os.FileInfo, err error) error {
		if err == nil && fi.Mode().IsRegular() {
			n += fi.Size()
		}
		return nil
	})
	return n
}

// TestRejectedArchiveLeavesNothing: an archive refused late (after its
// files, for lack of a process table) leaves nothing in the temporary
// directory.
func TestRejectedArchiveLeavesNothing(t *testing.T) {
	privateTmp(t)
	tmp := os.Getenv("TMPDIR")
	file := filepath.Join(t.TempDir(), "late.tar.gz")
	f, _ := os.Create(file)
	writeArchive(f, 20, 1<<20, false) // 20 MB unpacked, then no process table
	f.Close()
	if _, err := OpenSnapshot(file); err == nil || !strings.Contains(err.Error(), "no process table") {
		t.Fatalf("accepted, or refused for another reason: %v", err)
	}
	if n := bytesUnder(tmp); n != 0 {
		t.Errorf("a refused archive left %d bytes in %s", n, tmp)
	}
}

// TestRefusedArchiveFillsLittle: while an archive that will be refused is
// unpacked (it is fed through a pipe held open), it never takes more room
// than the size limit of a snapshot.
func TestRefusedArchiveFillsLittle(t *testing.T) {
	privateTmp(t)
	tmp := os.Getenv("TMPDIR")
	child, w := unpackChild(t)
	defer func() { child.Process.Kill(); child.Wait() }()
	defer w.Close()
	// A small pipe keeps the child close behind the feed: 4 KB of
	// compressed zeros is about 4 MB of files.
	if _, err := unix.FcntlInt(w.Fd(), unix.F_SETPIPE_SZ, 4096); err != nil {
		t.Fatal(err)
	}
	pr, pw := io.Pipe()
	go func() { pw.CloseWithError(writeArchive(pw, 100, 1<<20, false)) }() // 100 MB of files
	defer pr.Close()
	var most int64
	for {
		if _, err := io.CopyN(w, pr, 4096); err != nil {
			break // refused (the child closed the pipe), or all fed
		}
		most = max(most, bytesUnder(tmp))
	}
	// All fed: wait until the child has written what it read.
	for range 50 {
		time.Sleep(20 * time.Millisecond)
		most = max(most, bytesUnder(tmp))
	}
	t.Logf("at most %.1f MiB in %s", float64(most)/(1<<20), tmp)
	if most > 64<<20 { // the documented limit
		t.Errorf("an archive being refused took %d MiB, more than the 64 MiB limit", most>>20)
	}
}

// unpackChild starts TestUnpackChild in a new process, reading its archive
// from a FIFO, and returns the process and the FIFO's writing end.
func unpackChild(t *testing.T) (*exec.Cmd, *os.File) {
	t.Helper()
	fifo := filepath.Join(t.TempDir(), "feed")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	child := exec.Command(os.Args[0], "-test.run", "^TestUnpackChild$")
	child.Env = append(os.Environ(), "DBHOST_UNPACK="+fifo)
	if err := child.Start(); err != nil {
		t.Fatal(err)
	}
	w, err := os.OpenFile(fifo, os.O_WRONLY, 0)
	if err != nil {
		child.Process.Kill()
		child.Wait()
		t.Fatal(err)
	}
	return child, w
}

// TestUnpackChild unpacks the archive named by DBHOST_UNPACK (a FIFO the
// parent feeds and then kills this process during). Nothing otherwise.
func TestUnpackChild(t *testing.T) {
	if f := os.Getenv("DBHOST_UNPACK"); f != "" {
		OpenSnapshot(f)
	}
}

// TestKilledUnpackCleanedUp: kill -9 in the middle of unpacking leaves a
// directory behind; the next OpenSnapshot removes it.
func TestKilledUnpackCleanedUp(t *testing.T) {
	base := privateTmp(t)
	child, w := unpackChild(t)
	// Feed part of an archive, keep the pipe open, and wait until the
	// child has unpacked some of it.
	pr, pw := io.Pipe()
	go func() { pw.CloseWithError(writeArchive(pw, 40, 1<<20, true)) }()
	io.CopyN(w, pr, 2<<20)
	deadline := time.Now().Add(10 * time.Second)
	for len(unpacked(t, base)) == 0 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	child.Process.Kill()
	child.Wait()
	w.Close()
	pr.Close()
	left := unpacked(t, base)
	if len(left) != 1 || !strings.HasPrefix(left[0], fmt.Sprintf("snapshot-%d-", child.Process.Pid)) {
		t.Fatalf("want the killed child's directory, have %v", left)
	}
	h, err := OpenSnapshot(baseline(t))
	if err != nil {
		t.Fatal(err)
	}
	if now := unpacked(t, base); len(now) != 1 || now[0] == left[0] {
		t.Errorf("the dead child's directory %s is still there: %v", left[0], now)
	}
	h.Close()
	if now := unpacked(t, base); len(now) != 0 {
		t.Errorf("Close left %v", now)
	}
}

// TestUnpackBaseOfAnotherUser: the per-user directory, made first by
// someone else (or as a link), is not used.
func TestUnpackBaseOfAnotherUser(t *testing.T) {
	testdb.Need(t, "root (a directory owned by another user)", os.Geteuid() == 0)
	for _, plant := range []func(string) error{
		func(base string) error { return os.Symlink(t.TempDir(), base) },
		func(base string) error {
			if err := os.Mkdir(base, 0o700); err != nil {
				return err
			}
			return os.Chown(base, 65534, 65534)
		},
		func(base string) error { return os.Mkdir(base, 0o777) },
	} {
		base := privateTmp(t)
		if err := plant(base); err != nil {
			t.Fatal(err)
		}
		os.Chmod(base, 0o777)
		h, err := OpenSnapshot(baseline(t))
		if err != nil {
			t.Fatal(err)
		}
		if strings.HasPrefix(h.tmpdir, base+"/") {
			t.Errorf("unpacked into %s, which another user controls", h.tmpdir)
		}
		h.Close()
	}
}

// TestRefusedBeforeWriting feeds, through a pipe held open, an archive
// whose first entry is a large file and not the manifest: it must be
// refused before any of it is written out.
func TestRefusedBeforeWriting(t *testing.T) {
	tmp := t.TempDir()
	t.Setenv("TMPDIR", tmp)
	child, w := unpackChild(t)
	defer func() { child.Process.Kill(); child.Wait() }()
	defer w.Close()
	pr, pw := io.Pipe()
	go func() {
		gz := gzip.NewWriter(pw)
		tw := tar.NewWriter(gz)
		tw.WriteHeader(&tar.Header{Name: "fs/var/big", Mode: 0o600, Size: 32 << 20, Typeflag: tar.TypeReg})
		tw.Write(make([]byte, 32<<20))
		pw.CloseWithError(gz.Close())
	}()
	defer pr.Close()
	io.CopyN(w, pr, 1<<20) // the first MB of the stream; the pipe stays open
	exited := make(chan struct{})
	go func() { child.Process.Wait(); close(exited) }()
	select {
	case <-exited:
	case <-time.After(2 * time.Second):
	}
	var written int64
	filepath.Walk(tmp, func(p string, fi os.FileInfo, err error) error {
		if err == nil && fi.Mode().IsRegular() {
			written += fi.Size()
		}
		return nil
	})
	if written > 0 {
		t.Errorf("%d bytes of a refused archive were written to %s", written, tmp)
	}
}
