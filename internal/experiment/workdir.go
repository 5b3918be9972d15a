package experiment

import (
	"crypto/rand"
	"encoding/hex"
	"os"
	"path/filepath"

	"github.com/dbhost/dbhost/internal/change"
)

// newWorkDir journals, then makes, a scratch directory under the system's
// temporary directory: the benchmark tools' private directories (pgbench's
// per-transaction logs can be large) live in it, so a killed run's files go
// with 'recover'.
func newWorkDir(c *change.Changer) (string, error) {
	var b [6]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", err
	}
	path := filepath.Join(os.TempDir(), change.WorkDirPrefix+hex.EncodeToString(b[:]))
	return path, c.WorkDir(path)
}
