package safefile

import (
	"errors"
	"os"
	"path/filepath"
	"strings"

	"golang.org/x/sys/unix"
)

// RemoveTemps removes what a WriteFile of rel that was killed before its
// rename left beside it: temporary files named ".NAME.tmp-" and 16
// hexadecimal digits, regular files of the effective user. It returns
// their paths. A missing directory is not an error.
func (d *Dir) RemoveTemps(rel string) ([]string, error) {
	dir, name, err := d.openParent(rel, false)
	if errors.Is(err, unix.ENOENT) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	defer unix.Close(dir)
	rd, err := unix.Dup(dir)
	if err != nil {
		return nil, err
	}
	f := os.NewFile(uintptr(rd), filepath.Dir(filepath.Join(d.path, rel)))
	names, err := f.Readdirnames(-1)
	f.Close()
	if err != nil {
		return nil, err
	}
	var removed []string
	prefix := "." + name + ".tmp-"
	for _, n := range names {
		rest, ok := strings.CutPrefix(n, prefix)
		if !ok || len(rest) != 16 || strings.Trim(rest, "0123456789abcdef") != "" {
			continue
		}
		var st unix.Stat_t
		if unix.Fstatat(dir, n, &st, unix.AT_SYMLINK_NOFOLLOW) != nil || st.Mode&unix.S_IFMT != unix.S_IFREG || int(st.Uid) != d.euid {
			continue
		}
		if err := unix.Unlinkat(dir, n, 0); err != nil && !errors.Is(err, unix.ENOENT) {
			return removed, &os.PathError{Op: "remove", Path: filepath.Join(filepath.Dir(filepath.Join(d.path, rel)), n), Err: err}
		}
		removed = append(removed, filepath.Join(filepath.Dir(filepath.Join(d.path, rel)), n))
	}
	return removed, nil
}
