package change

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/dbhost/dbhost/internal/safefile"
)

// WorkDirPrefix starts the name of every scratch directory; the undo
// removes nothing else.
const WorkDirPrefix = "dbhost-experiment-"

// WorkDirRecord is the journaled data of a scratch directory.
type WorkDirRecord struct {
	Path string `json:"path"`
}

// WorkDir journals, then makes, a scratch directory at path (absolute,
// named WorkDirPrefix*). It is 0711: the tools run as the database's user
// and make their own private directories inside it.
func (c *Changer) WorkDir(p string) error {
	if err := workDirAllowed(p); err != nil {
		return err
	}
	if err := c.j.Record(KindWorkDir, "scratch directory "+p, WorkDirRecord{Path: p}); err != nil {
		return err
	}
	if err := os.Mkdir(p, 0o700); err != nil {
		return err
	}
	return os.Chmod(p, 0o711)
}

func workDirAllowed(p string) error {
	if !filepath.IsAbs(p) || filepath.Clean(p) != p || !strings.HasPrefix(filepath.Base(p), WorkDirPrefix) {
		return fmt.Errorf("refusing to remove %q: not an experiment scratch directory", p)
	}
	return nil
}

// undoWorkDir removes a scratch directory; gone already is done. Only an
// absolute path named like one is removed, whatever the journal says.
func undoWorkDir(data json.RawMessage) error {
	var d WorkDirRecord
	if err := json.Unmarshal(data, &d); err != nil {
		return err
	}
	if err := workDirAllowed(d.Path); err != nil {
		return err
	}
	if there, err := safefile.DirToRemove(d.Path); !there {
		return err
	}
	return os.RemoveAll(d.Path)
}
