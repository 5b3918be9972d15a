package apply

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/dbhost/dbhost/internal/journal"
	"github.com/dbhost/dbhost/internal/safefile"
)

// KindFile is the journal kind of a persistent file apply writes.
const KindFile = "file"

func init() { journal.RegisterKind(KindFile, undoFile) }

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
	// NewSum is the SHA-256 of what apply writes: the undo replaces or
	// removes only that (or the old content), never someone else's edit.
	NewSum string `json:"new_sum"`
	// IncludeDir: the file is an option file in this directory, which a
	// server includes (checked again before the undo writes there).
	IncludeDir string `json:"include_dir,omitempty"`
	// MadeDirs are directories the write creates, deepest last.
	MadeDirs []string `json:"made_dirs,omitempty"`
}

// undoFile restores one file. It is idempotent: run again after a crash
// it finds the old content (or no file) and leaves it.
func undoFile(data json.RawMessage) error {
	var u fileUndo
	if err := json.Unmarshal(data, &u); err != nil {
		return err
	}
	if u.IncludeDir != "" {
		if err := trustedDir(u.IncludeDir); err != nil {
			return err
		}
	}
	if err := allowedIn(u.Path, []string{u.IncludeDir}); err != nil {
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
	b, info, err := d.ReadFileInfo(rel, maxFile)
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
