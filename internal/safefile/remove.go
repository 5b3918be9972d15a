package safefile

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
)

// DirToRemove is the first check of an undo that removes a directory
// dbhost made: false when the path is gone already (an undo that runs
// twice is done), an error when something other than a directory stands
// there (a link or file put in its place is neither followed nor removed).
func DirToRemove(path string) (bool, error) {
	fi, err := os.Lstat(path)
	if errors.Is(err, fs.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	if !fi.IsDir() {
		return false, fmt.Errorf("%s is not a directory (%s): not removing it", path, fi.Mode().Type())
	}
	return true, nil
}
