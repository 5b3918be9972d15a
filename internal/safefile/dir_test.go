package safefile_test

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/dbhost/dbhost/internal/safefile"
	"github.com/dbhost/dbhost/internal/testdb"
)

// openTemp opens a fresh directory of the test's own for confined writes.
func openTemp(t *testing.T) *safefile.Dir {
	t.Helper()
	testdb.Need(t, "root (directories owned by another user)", os.Geteuid() == 0)
	d, err := safefile.OpenDir(filepath.Join(t.TempDir(), "out"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Close() })
	return d
}

// outside is a file beyond the directory that must keep its content.
func outside(t *testing.T) (name string, intact func()) {
	t.Helper()
	name = filepath.Join(t.TempDir(), "victim")
	if err := os.WriteFile(name, []byte("precious\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	return name, func() {
		t.Helper()
		if b, err := os.ReadFile(name); err != nil || string(b) != "precious\n" {
			t.Errorf("the file outside: %q, %v", b, err)
		}
	}
}

func TestWriteFileReplacesLinkNotTarget(t *testing.T) {
	d := openTemp(t)
	victim, intact := outside(t)
	os.Mkdir(filepath.Join(d.Path(), "etc"), 0o755)
	if err := os.Symlink(victim, filepath.Join(d.Path(), "etc", "f")); err != nil {
		t.Fatal(err)
	}
	if err := d.WriteFile("etc/f", 0o640, []byte("new\n")); err != nil {
		t.Fatal(err)
	}
	intact()
	fi, err := os.Lstat(filepath.Join(d.Path(), "etc", "f"))
	if err != nil || !fi.Mode().IsRegular() || fi.Mode().Perm() != 0o640 {
		t.Errorf("etc/f: %v, %v", fi.Mode(), err)
	}
	if ents, _ := os.ReadDir(filepath.Join(d.Path(), "etc")); len(ents) != 1 {
		t.Errorf("left behind: %v", ents)
	}
}

func TestWriteFileRefusesLinkedDirectory(t *testing.T) {
	d := openTemp(t)
	victim, intact := outside(t)
	os.Symlink(filepath.Dir(victim), filepath.Join(d.Path(), "etc"))
	err := d.WriteFile("etc/victim", 0o644, []byte("pwned\n"))
	if err == nil || !strings.Contains(err.Error(), "symbolic link") {
		t.Errorf("write through etc -> outside: %v", err)
	}
	if err := d.Check("etc/victim"); err == nil || !strings.Contains(err.Error(), "symbolic link") {
		t.Errorf("Check: %v", err)
	}
	intact()
}

func TestCheckCreatesNothing(t *testing.T) {
	d := openTemp(t)
	if err := d.Check("etc/sysctl.d/60-dbhost.conf"); err != nil {
		t.Fatal(err)
	}
	if ents, _ := os.ReadDir(d.Path()); len(ents) != 0 {
		t.Errorf("Check created %v", ents)
	}
	os.MkdirAll(filepath.Join(d.Path(), "etc", "sysctl.d", "60-dbhost.conf"), 0o755)
	if err := d.Check("etc/sysctl.d/60-dbhost.conf"); err == nil || !strings.Contains(err.Error(), "is a directory") {
		t.Errorf("a directory where the file goes: %v", err)
	}
	for _, rel := range []string{"../x", "/etc/passwd", "", "a/../../x"} {
		if err := d.Check(rel); err == nil {
			t.Errorf("Check(%q) accepted", rel)
		}
	}
}

func TestReadFileOpensOnlyRegularFiles(t *testing.T) {
	d := openTemp(t)
	victim, _ := outside(t)
	os.Symlink(victim, filepath.Join(d.Path(), "link"))
	// Opening a FIFO for reading would block until a writer came.
	if err := syscall.Mkfifo(filepath.Join(d.Path(), "fifo"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, rel := range []string{"link", "fifo"} {
		if _, err := d.ReadFile(rel, 1<<10); err == nil || !strings.Contains(err.Error(), "not a regular file") {
			t.Errorf("ReadFile(%s): %v", rel, err)
		}
	}
	os.WriteFile(filepath.Join(d.Path(), "big"), make([]byte, 11), 0o644)
	if _, err := d.ReadFile("big", 10); err == nil {
		t.Error("read past the limit")
	}
}

func TestRemoveIfUnchanged(t *testing.T) {
	d := openTemp(t)
	victim, intact := outside(t)
	mine := []byte("written by dbhost\n")
	if err := d.WriteFile("etc/mine", 0o644, mine); err != nil {
		t.Fatal(err)
	}
	d.WriteFile("etc/edited", 0o644, mine)
	os.WriteFile(filepath.Join(d.Path(), "etc", "edited"), []byte("edited\n"), 0o644)
	os.Symlink(victim, filepath.Join(d.Path(), "etc", "link"))
	syscall.Mkfifo(filepath.Join(d.Path(), "etc", "fifo"), 0o644)
	precious := safefile.Sum([]byte("precious\n"))
	for _, c := range []struct {
		rel, sum string
		removed  bool
		why      string
	}{
		{"etc/edited", safefile.Sum(mine), false, "changed since dbhost wrote it"},
		{"etc/link", precious, false, "not a regular file"},
		{"etc/fifo", safefile.Sum(nil), false, "not a regular file"},
		{"../victim", precious, false, "not a path beneath"},
		{victim, precious, false, "not a path beneath"},
		{"etc/missing", safefile.Sum(mine), false, ""},
		{"etc/mine", safefile.Sum(mine), true, ""},
	} {
		removed, err := d.RemoveIfUnchanged(c.rel, c.sum)
		if removed != c.removed || (c.why == "") != (err == nil) || (err != nil && !strings.Contains(err.Error(), c.why)) {
			t.Errorf("RemoveIfUnchanged(%s): %v, %v; want %v, %q", c.rel, removed, err, c.removed, c.why)
		}
	}
	intact()
	if _, err := os.Lstat(filepath.Join(d.Path(), "etc", "mine")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("etc/mine still there: %v", err)
	}
	for _, n := range []string{"edited", "link", "fifo"} {
		if _, err := os.Lstat(filepath.Join(d.Path(), "etc", n)); err != nil {
			t.Errorf("etc/%s was removed", n)
		}
	}
}

func TestOpenDirRefusesWhatOthersCanChange(t *testing.T) {
	testdb.Need(t, "root (directories owned by another user)", os.Geteuid() == 0)
	base := t.TempDir()
	group := filepath.Join(base, "group")
	os.Mkdir(group, 0o755)
	os.Chmod(group, 0o770)
	if _, err := safefile.OpenDir(group); err == nil || !strings.Contains(err.Error(), "mode 0770") || !strings.Contains(err.Error(), group) {
		t.Errorf("group-writable output directory: %v", err)
	}
	// Missing parents below a safe directory are made, like mkdir -p.
	d, err := safefile.OpenDir(filepath.Join(base, "x", "y"))
	if err != nil {
		t.Fatal(err)
	}
	d.Close()
	if fi, err := os.Stat(filepath.Join(base, "x", "y")); err != nil || !fi.IsDir() {
		t.Errorf("x/y: %v", err)
	}
}

func TestWriteFileOwnedSetsOwnerAndMode(t *testing.T) {
	d := openTemp(t)
	if err := d.WriteFileOwned("a/f.conf", 0o640, 12345, 54321, []byte("x\n")); err != nil {
		t.Fatal(err)
	}
	b, info, err := d.ReadFileInfo("a/f.conf", 100)
	if err != nil {
		t.Fatal(err)
	}
	if string(b) != "x\n" || info.Mode != 0o640 || info.UID != 12345 || info.GID != 54321 {
		t.Fatalf("got %q %+v, want \"x\\n\" mode 0640 owner 12345:54321", b, info)
	}
	if err := os.Symlink("f.conf", filepath.Join(d.Path(), "a", "l")); err != nil {
		t.Fatal(err)
	}
	if _, _, err := d.ReadFileInfo("a/l", 100); err == nil {
		t.Fatal("ReadFileInfo followed a symbolic link")
	}
}
