package change

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/dbhost/dbhost/internal/safefile"
	"github.com/dbhost/dbhost/internal/textio"
)

// MaxFile bounds a file read back (dbhost's are a few KB).
const MaxFile = 4 << 20

var (
	nameRe = textio.LazyRegexp(`^[A-Za-z0-9][A-Za-z0-9_.@:+-]*$`)
	unitRe = textio.LazyRegexp(`^/etc/systemd/system/([A-Za-z0-9][A-Za-z0-9_.@:\\-]*\.(service|socket|mount|target|slice|scope|timer))\.d/$`)
)

// safeDirs are the directories files are written into, with the suffix
// the file name must have.
var safeDirs = map[string]string{
	"/etc/sysctl.d/":          ".conf",
	"/etc/udev/rules.d/":      ".rules",
	"/etc/security/limits.d/": ".conf",
	"/etc/tmpfiles.d/":        ".conf",
}

// Allowed says why dbhost must not write the file at p (absolute, on the
// host), or nil: only the drop-in directories of sysctl, udev, pam_limits,
// systemd-tmpfiles and systemd units, one level deep, with a plain name.
func Allowed(p string) error {
	if path.Clean(p) != p || !path.IsAbs(p) {
		return fmt.Errorf("refusing %s: not a clean absolute path", p)
	}
	dir, base := path.Split(p)
	if !nameRe.MatchString(base) {
		return fmt.Errorf("refusing %s: not a plain file name", p)
	}
	suffix, ok := safeDirs[dir]
	if !ok && unitRe.MatchString(dir) {
		suffix, ok = ".conf", true
	}
	if !ok {
		return fmt.Errorf("refusing %s: apply writes only into /etc/sysctl.d, /etc/udev/rules.d, /etc/security/limits.d, /etc/tmpfiles.d and /etc/systemd/system/UNIT.d", p)
	}
	if !strings.HasSuffix(base, suffix) {
		return fmt.Errorf("refusing %s: files there must end in %s", p, suffix)
	}
	return nil
}

// AllowedIn is Allowed, and also a plain file name ending in .cnf directly
// in one of dirs (a server's included directory of option files).
func AllowedIn(p string, dirs []string) error {
	err := Allowed(p)
	if err == nil {
		return nil
	}
	dir, base := path.Split(p)
	for _, d := range dirs {
		if d != "" && path.Clean(dir) == d && nameRe.MatchString(base) && strings.HasSuffix(base, ".cnf") {
			return nil
		}
	}
	return err
}

// TrustedDir refuses a directory others than root could change (it, or a
// directory or link on its path): root writes option files there.
func (cfg Config) TrustedDir(d string) error {
	h, done, err := cfg.host()
	if err != nil {
		return err
	}
	defer done()
	if err := h.CheckTrustedDir(d); err != nil {
		return fmt.Errorf("refusing to write into %s: %w", d, err)
	}
	return nil
}

// FileWrite is one file to write below Root.
type FileWrite struct {
	Root string
	Path string // absolute on the host
	// Exists and Sum: what the caller read there (Sum "" for no file);
	// the file must still be that.
	Exists bool
	Sum    string
	// Content, Mode and NewSum (the SHA-256 of Content) are what is
	// written.
	Content string
	Mode    uint32
	NewSum  string
	// IncludeDirs are servers' included directories of option files
	// (checked trusted by the caller) the file may be in.
	IncludeDirs []string
	// Backup, if set, is a directory that gets a copy of the replaced
	// file for people (the journal holds the same bytes).
	Backup string
}

// fileUndo is what the journal keeps before a file is written: enough to
// put back the previous content byte for byte with its mode and owner, or
// to remove a file (and the directories made for it) that did not exist.
type fileUndo struct {
	Root    string      `json:"root"`
	Path    string      `json:"path"`
	Existed bool        `json:"existed"`
	Content []byte      `json:"content,omitempty"`
	Mode    os.FileMode `json:"mode,omitempty"`
	UID     int         `json:"uid"`
	GID     int         `json:"gid"`
	// NewSum is the SHA-256 of what is written: the undo replaces or
	// removes only that (or the old content), never someone else's edit.
	NewSum string `json:"new_sum"`
	// IncludeDir: the file is an option file in this directory, which a
	// server includes (checked again before the undo writes there).
	IncludeDir string `json:"include_dir,omitempty"`
	// MadeDirs are directories the write creates, deepest last.
	MadeDirs []string `json:"made_dirs,omitempty"`
}

// File journals and writes one file atomically, then reads it back. The
// destination must still be what the caller read, just before the journal
// records it as the content to put back.
func (c *Changer) File(f FileWrite) error {
	if err := AllowedIn(f.Path, f.IncludeDirs); err != nil {
		return err
	}
	if safefile.Sum([]byte(f.Content)) != f.NewSum {
		return fmt.Errorf("refusing %s: content does not match its hash", f.Path)
	}
	d, err := safefile.OpenDir(f.Root)
	if err != nil {
		return err
	}
	defer d.Close()
	rel := strings.TrimPrefix(f.Path, "/")
	b, info, err := d.ReadFileInfo(rel, MaxFile)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		if f.Exists {
			return fmt.Errorf("refusing %s: it was removed since the plan", f.Path)
		}
	case err != nil:
		return fmt.Errorf("refusing %s: %w", f.Path, err)
	case !f.Exists || safefile.Sum(b) != f.Sum:
		return fmt.Errorf("refusing %s: it changed since the plan (sha256 %s, the plan read %s)", f.Path, safefile.Sum(b), OrAbsent(f.Sum))
	}
	u := fileUndo{Root: f.Root, Path: f.Path, Existed: f.Exists, NewSum: f.NewSum, MadeDirs: missingDirs(f.Root, f.Path)}
	if Allowed(f.Path) != nil {
		u.IncludeDir = path.Dir(f.Path) // allowed as a server's included directory
	}
	if f.Exists {
		u.Content, u.Mode, u.UID, u.GID = b, info.Mode, info.UID, info.GID
		if f.Backup != "" {
			backup := filepath.Join(f.Backup, rel)
			if err := os.MkdirAll(filepath.Dir(backup), 0o700); err != nil {
				return err
			}
			if err := safefile.WriteBytes(backup, 0o600, b); err != nil {
				return err
			}
		}
	}
	if err := c.j.Record(KindFile, "file "+f.Path, u); err != nil {
		return err
	}
	c.cfg.step("recorded " + f.Path)
	if err := d.WriteFile(rel, os.FileMode(f.Mode), []byte(f.Content)); err != nil {
		return err
	}
	got, info, err := d.ReadFileInfo(rel, MaxFile)
	if err != nil {
		return err
	}
	if safefile.Sum(got) != f.NewSum || uint32(info.Mode) != f.Mode {
		return fmt.Errorf("%s reads back different content or mode %04o", f.Path, info.Mode)
	}
	c.cfg.step("wrote " + f.Path)
	return nil
}

// OrAbsent shows a hash, or "no file" for none.
func OrAbsent(sum string) string {
	if sum == "" {
		return "no file"
	}
	return sum
}

// missingDirs lists the directories (relative to root) that writing p
// creates, outermost first.
func missingDirs(root, p string) []string {
	var out []string
	for dir := path.Dir(p); dir != "/"; dir = path.Dir(dir) {
		if _, err := os.Lstat(filepath.Join(root, dir)); errors.Is(err, fs.ErrNotExist) {
			out = append([]string{strings.TrimPrefix(dir, "/")}, out...)
		}
	}
	return out
}

// undoFile restores one file. It is idempotent: run again after a crash
// it finds the old content (or no file) and leaves it.
func undoFile(cfg Config, data json.RawMessage) error {
	var u fileUndo
	if err := json.Unmarshal(data, &u); err != nil {
		return err
	}
	if u.IncludeDir != "" {
		if err := cfg.TrustedDir(u.IncludeDir); err != nil {
			return err
		}
	}
	if err := AllowedIn(u.Path, []string{u.IncludeDir}); err != nil {
		return err
	}
	d, err := safefile.OpenDir(u.Root)
	if err != nil {
		return err
	}
	defer d.Close()
	rel := strings.TrimPrefix(u.Path, "/")
	// A write killed before its rename leaves its temporary file.
	if _, err := d.RemoveTemps(rel); err != nil {
		return err
	}
	if !u.Existed {
		if _, err := d.RemoveIfUnchanged(rel, u.NewSum); err != nil {
			return fmt.Errorf("%v: not removed", err)
		}
		for i := len(u.MadeDirs) - 1; i >= 0; i-- {
			err := unix.Rmdir(filepath.Join(u.Root, u.MadeDirs[i]))
			if err != nil && !errors.Is(err, unix.ENOENT) && !errors.Is(err, unix.ENOTEMPTY) && !errors.Is(err, unix.EEXIST) {
				return fmt.Errorf("remove %s: %w", u.MadeDirs[i], err)
			}
		}
		return nil
	}
	b, info, err := d.ReadFileInfo(rel, MaxFile)
	switch {
	case errors.Is(err, fs.ErrNotExist):
	case err != nil:
		return err
	case safefile.Sum(b) == safefile.Sum(u.Content) && info.Mode == u.Mode.Perm() && info.UID == u.UID && info.GID == u.GID:
		return nil // already restored
	case safefile.Sum(b) != u.NewSum && safefile.Sum(b) != safefile.Sum(u.Content):
		return fmt.Errorf("%s changed since dbhost wrote it: not restored (the previous content is in the journal)", u.Path)
	}
	return d.WriteFileOwned(rel, u.Mode.Perm(), u.UID, u.GID, u.Content)
}
