package fix

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/dbhost/dbhost/internal/safefile"
	"github.com/dbhost/dbhost/internal/testdb"
)

const nobody = 65534

// victim makes a directory outside the output tree holding files a hostile
// user would like root to overwrite or delete.
func victim(t *testing.T) (dir string, check func()) {
	t.Helper()
	dir = t.TempDir()
	files := map[string]string{"passwd": "root:x:0:0\n", "shadow": "root:$6$secret\n"}
	for n, c := range files {
		if err := os.WriteFile(filepath.Join(dir, n), []byte(c), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir, func() {
		t.Helper()
		ents, _ := os.ReadDir(dir)
		if len(ents) != len(files) {
			t.Errorf("victim directory now holds %d entries", len(ents))
		}
		for n, c := range files {
			b, err := os.ReadFile(filepath.Join(dir, n))
			if err != nil || string(b) != c {
				t.Errorf("victim %s: %q, %v", n, b, err)
			}
		}
	}
}

var sample = []File{
	{Path: "/etc/sysctl.d/60-dbhost.conf", Content: "vm.swappiness = 1\n"},
	{Path: "/etc/udev/rules.d/60-dbhost.rules", Content: "ACTION==\"add\"\n"},
}

func needRoot(t *testing.T) {
	testdb.Need(t, "root (files owned by another user)", os.Geteuid() == 0)
}

func TestWriteTreeRefusesDirOfAnotherUser(t *testing.T) {
	needRoot(t)
	parent := t.TempDir()
	out := filepath.Join(parent, "fixes")
	os.Mkdir(out, 0o755)
	os.Chown(out, nobody, nobody)
	if _, _, err := WriteTree(out, sample, nil, nil); err == nil || !strings.Contains(err.Error(), "owned by uid 65534") {
		t.Fatalf("WriteTree into a directory owned by nobody: %v", err)
	}
	if ents, _ := os.ReadDir(out); len(ents) != 0 {
		t.Errorf("wrote %v", ents)
	}
}

func TestWriteTreeRefusesUnsafeAncestors(t *testing.T) {
	needRoot(t)
	base := t.TempDir()
	open := filepath.Join(base, "open")
	os.Mkdir(open, 0o777)
	os.Chmod(open, 0o777) // world-writable, no sticky bit
	foreign := filepath.Join(base, "foreign")
	os.Mkdir(foreign, 0o755)
	os.Chown(foreign, nobody, nobody)
	sticky := filepath.Join(base, "sticky")
	os.Mkdir(sticky, 0o777)
	os.Chmod(sticky, 0o777|os.ModeSticky)
	for _, c := range []struct{ out, why string }{
		{filepath.Join(open, "fixes"), "no sticky bit"},
		{filepath.Join(foreign, "fixes"), "owned by uid 65534"},
	} {
		if _, _, err := WriteTree(c.out, sample, nil, nil); err == nil || !strings.Contains(err.Error(), c.why) {
			t.Errorf("%s: %v, want %q", c.out, err, c.why)
		}
		if _, err := os.Lstat(c.out); !os.IsNotExist(err) {
			t.Errorf("%s was created", c.out)
		}
	}
	// A sticky world-writable directory (/tmp) is a safe parent.
	if _, _, err := WriteTree(filepath.Join(sticky, "fixes"), sample, nil, nil); err != nil {
		t.Errorf("below a sticky directory: %v", err)
	}
}

func TestWriteTreeFollowsNoLink(t *testing.T) {
	needRoot(t)
	vdir, check := victim(t)
	out := filepath.Join(t.TempDir(), "fixes")
	os.Mkdir(out, 0o755)
	// A link inside the output directory where dbhost writes etc/...
	if err := os.Symlink(vdir, filepath.Join(out, "etc")); err != nil {
		t.Fatal(err)
	}
	if _, _, err := WriteTree(out, []File{{Path: "/etc/passwd", Content: "pwned\n"}}, nil, nil); err == nil {
		t.Error("wrote through etc -> victim")
	}
	check()

	// A link in place of the file itself is replaced, not followed.
	os.Remove(filepath.Join(out, "etc"))
	os.MkdirAll(filepath.Join(out, "etc"), 0o755)
	os.Symlink(filepath.Join(vdir, "passwd"), filepath.Join(out, "etc", "passwd"))
	if _, _, err := WriteTree(out, []File{{Path: "/etc/passwd", Content: "mine\n"}}, nil, nil); err != nil {
		t.Fatal(err)
	}
	check()
	if fi, err := os.Lstat(filepath.Join(out, "etc", "passwd")); err != nil || !fi.Mode().IsRegular() {
		t.Errorf("etc/passwd: %v %v", fi, err)
	}

	// A link to a directory as the output directory itself is followed
	// only when its owner is trusted.
	link := filepath.Join(t.TempDir(), "out-link")
	os.Symlink(out, link)
	os.Lchown(link, nobody, nobody)
	if _, _, err := WriteTree(link, sample, nil, nil); err == nil || !strings.Contains(err.Error(), "symbolic link owned by uid 65534") {
		t.Errorf("through a link owned by nobody: %v", err)
	}
}

func TestWriteTreeDeletesOnlyWhatItWrote(t *testing.T) {
	needRoot(t)
	vdir, check := victim(t)
	out := filepath.Join(t.TempDir(), "fixes")
	if _, _, err := WriteTree(out, sample, nil, nil); err != nil {
		t.Fatal(err)
	}
	// Someone edits one of dbhost's files; a link and escapes are planted
	// in the state file with the victims' true checksums.
	edited := filepath.Join(out, "etc/udev/rules.d/60-dbhost.rules")
	os.WriteFile(edited, []byte("# mine now\n"), 0o644)
	passwd, _ := os.ReadFile(filepath.Join(vdir, "passwd"))
	shadow, _ := os.ReadFile(filepath.Join(vdir, "shadow"))
	os.Symlink(filepath.Join(vdir, "shadow"), filepath.Join(out, "shadow-link"))
	os.Symlink(vdir, filepath.Join(out, "etc2"))
	rel, _ := filepath.Rel(out, filepath.Join(vdir, "passwd"))
	state := stateHeader + "\n" +
		safefile.Sum([]byte(sample[0].Content)) + "  etc/sysctl.d/60-dbhost.conf\n" +
		safefile.Sum([]byte(sample[1].Content)) + "  etc/udev/rules.d/60-dbhost.rules\n" +
		safefile.Sum(passwd) + "  " + rel + "\n" +
		safefile.Sum(passwd) + "  " + filepath.Join(vdir, "passwd") + "\n" +
		safefile.Sum(shadow) + "  shadow-link\n" +
		safefile.Sum(passwd) + "  etc2/passwd\n"
	os.WriteFile(filepath.Join(out, stateFile), []byte(state), 0o644)

	// This run produces neither sample file.
	_, kept, err := WriteTree(out, nil, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	check()
	if _, err := os.Stat(filepath.Join(out, "etc/sysctl.d/60-dbhost.conf")); !os.IsNotExist(err) {
		t.Errorf("unchanged file dbhost wrote was not removed: %v", err)
	}
	if b, _ := os.ReadFile(edited); string(b) != "# mine now\n" {
		t.Error("an edited file was removed")
	}
	if _, err := os.Lstat(filepath.Join(out, "shadow-link")); err != nil {
		t.Error("the planted link was removed")
	}
	if len(kept) != 3 {
		t.Errorf("kept notes %q, want the edited file and the two links", kept)
	}
}

func TestWriteTreeOldStateDeletesNothing(t *testing.T) {
	needRoot(t)
	vdir, check := victim(t)
	out := filepath.Join(t.TempDir(), "fixes")
	if _, _, err := WriteTree(out, sample, nil, nil); err != nil {
		t.Fatal(err)
	}
	// The first format lists bare paths: one dbhost wrote, and one that
	// reaches the victim through a planted directory link.
	os.Symlink(vdir, filepath.Join(out, "etc2"))
	os.WriteFile(filepath.Join(out, stateFile), []byte("etc/sysctl.d/60-dbhost.conf\netc2/passwd\nREADME.txt\n"), 0o644)
	_, kept, err := WriteTree(out, nil, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	check()
	if _, err := os.Stat(filepath.Join(out, "etc/sysctl.d/60-dbhost.conf")); err != nil {
		t.Errorf("a path from a state file without checksums was deleted: %v", err)
	}
	if len(kept) != 1 || !strings.Contains(kept[0], "no checksums") {
		t.Errorf("kept %q, want a note that the old state file deletes nothing", kept)
	}
}

// tree lists every entry under dir with its type, mode, owner and content,
// to show that a refused run changed nothing.
func tree(t *testing.T, dir string) string {
	t.Helper()
	var b strings.Builder
	filepath.Walk(dir, func(p string, fi os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		st := fi.Sys().(*syscall.Stat_t)
		var content []byte
		if fi.Mode().IsRegular() {
			content, _ = os.ReadFile(p)
		}
		fmt.Fprintf(&b, "%s %v %d %q\n", strings.TrimPrefix(p, dir), fi.Mode(), st.Uid, content)
		return nil
	})
	return b.String()
}

// TestWriteTreeRefusesUnsafeSubdirectory: a directory inside the output
// that is someone else's, writable by others, or a link refuses the whole
// tree before the first file is written.
func TestWriteTreeRefusesUnsafeSubdirectory(t *testing.T) {
	needRoot(t)
	vdir, check := victim(t)
	for _, c := range []struct {
		name, why string
		plant     func(udev string)
	}{
		{"owned by nobody", "owned by uid 65534", func(udev string) {
			os.Mkdir(udev, 0o755)
			os.Chown(udev, nobody, nobody)
		}},
		{"group-writable", "mode 0775", func(udev string) {
			os.Mkdir(udev, 0o755)
			os.Chmod(udev, 0o775)
		}},
		{"a link", "symbolic link", func(udev string) {
			os.Symlink(vdir, udev)
		}},
	} {
		out := filepath.Join(t.TempDir(), "fixes")
		os.MkdirAll(filepath.Join(out, "etc"), 0o755)
		c.plant(filepath.Join(out, "etc", "udev"))
		before := tree(t, out)
		// sample writes etc/sysctl.d first, then etc/udev/rules.d.
		_, _, err := WriteTree(out, sample, nil, nil)
		if err == nil || !strings.Contains(err.Error(), filepath.Join(out, "etc", "udev")) || !strings.Contains(err.Error(), c.why) {
			t.Errorf("%s: %v, want a refusal naming etc/udev and %q", c.name, err, c.why)
		}
		if after := tree(t, out); after != before {
			t.Errorf("%s: the refused run changed the output:\nbefore\n%s\nafter\n%s", c.name, before, after)
		}
		check()
	}
}

// TestWriteTreeChecksTheDirectoryReached: a trusted link whose target ends
// in ".." must not smuggle in a directory others can write to (here a
// sticky, world-writable one like /tmp) as the output directory.
func TestWriteTreeChecksTheDirectoryReached(t *testing.T) {
	needRoot(t)
	base := t.TempDir()
	sticky := filepath.Join(base, "sticky")
	os.MkdirAll(filepath.Join(sticky, "sub"), 0o755)
	os.Chmod(sticky, 0o777|os.ModeSticky)
	link := filepath.Join(base, "out")
	os.Symlink(sticky+"/sub/..", link) // uncleaned; owned by root: followed
	_, _, err := WriteTree(link, sample, nil, nil)
	if err == nil || !strings.Contains(err.Error(), "refusing "+sticky+":") {
		t.Errorf("output reached through sub/..: %v", err)
	}
	if _, err := os.Lstat(filepath.Join(sticky, "etc")); !os.IsNotExist(err) {
		t.Errorf("wrote into the sticky directory: %v", err)
	}
}

// TestWriteTreeCreatesMissingParents keeps what MkdirAll did: --out may
// name a directory whose parents do not exist yet; dbhost makes them.
func TestWriteTreeCreatesMissingParents(t *testing.T) {
	needRoot(t)
	out := filepath.Join(t.TempDir(), "a", "b", "fixes")
	written, _, err := WriteTree(out, sample, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(written) != 3 {
		t.Errorf("written %v", written)
	}
	b, err := os.ReadFile(filepath.Join(out, "etc/sysctl.d/60-dbhost.conf"))
	if err != nil || string(b) != sample[0].Content {
		t.Errorf("sysctl file: %q, %v", b, err)
	}
	// A rerun gives the same files.
	before := tree(t, out)
	if _, kept, err := WriteTree(out, sample, nil, nil); err != nil || len(kept) != 0 {
		t.Fatalf("rerun: %v, kept %q", err, kept)
	}
	if after := tree(t, out); after != before {
		t.Errorf("rerun changed the tree:\n%s\n%s", before, after)
	}
}
