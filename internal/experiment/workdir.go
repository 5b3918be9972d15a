package experiment

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/dbhost/dbhost/internal/journal"
	"github.com/dbhost/dbhost/internal/safefile"
)

// KindWorkDir is the journal kind of an experiment's scratch directory:
// the benchmark tools' private directories (pgbench's per-transaction logs
// can be large) live in it, so a killed run's files go with 'recover'.
const KindWorkDir = "experiment.workdir"

const workDirPrefix = "dbhost-experiment-"

func init() { journal.RegisterKind(KindWorkDir, undoWorkDir) }

// WorkDirRecord is the journaled data of a scratch directory.
type WorkDirRecord struct {
	Path string `json:"path"`
}

// newWorkDir journals, then makes, a scratch directory under the system's
// temporary directory. It is 0711: the tools run as the database's user
// and make their own private directories inside it.
func newWorkDir(j *journal.Journal) (string, error) {
	var b [6]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", err
	}
	path := filepath.Join(os.TempDir(), workDirPrefix+hex.EncodeToString(b[:]))
	if err := j.Record(KindWorkDir, "scratch directory "+path, WorkDirRecord{Path: path}); err != nil {
		return "", err
	}
	if err := os.Mkdir(path, 0o700); err != nil {
		return "", err
	}
	return path, os.Chmod(path, 0o711)
}

// undoWorkDir removes a scratch directory; gone already is done. Only an
// absolute path named like one is removed, whatever the journal says.
func undoWorkDir(data json.RawMessage) error {
	var d WorkDirRecord
	if err := json.Unmarshal(data, &d); err != nil {
		return err
	}
	if !filepath.IsAbs(d.Path) || filepath.Clean(d.Path) != d.Path || !strings.HasPrefix(filepath.Base(d.Path), workDirPrefix) {
		return fmt.Errorf("refusing to remove %q: not an experiment scratch directory", d.Path)
	}
	if there, err := safefile.DirToRemove(d.Path); !there {
		return err
	}
	return os.RemoveAll(d.Path)
}
