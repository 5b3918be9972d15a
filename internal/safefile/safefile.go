// Package safefile writes files atomically: a reader sees the old content or
// the new one, never half of it, and a crash leaves no partial file.
package safefile

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"
)

// Write creates or replaces name with what fill writes, with the given mode.
// The content goes to a temporary file in the same directory, is synced, and
// is renamed over name. An error names name as the caller gave it (and the
// directory that is missing or not one), never the temporary file.
func Write(name string, mode os.FileMode, fill func(io.Writer) error) (err error) {
	dir := filepath.Dir(name)
	tmp, err := os.CreateTemp(dir, "."+filepath.Base(name)+".tmp-*")
	if err != nil {
		return createError(name, dir, err)
	}
	defer func() {
		if err != nil {
			tmp.Close()
			os.Remove(tmp.Name())
			err = renamed(err, tmp.Name(), name)
		}
	}()
	if err = tmp.Chmod(mode); err != nil {
		return err
	}
	if err = fill(tmp); err != nil {
		return err
	}
	if err = tmp.Sync(); err != nil {
		return err
	}
	if err = tmp.Close(); err != nil {
		return err
	}
	if err = os.Rename(tmp.Name(), name); err != nil {
		return err
	}
	// Make the rename itself durable.
	if d, derr := os.Open(dir); derr == nil {
		d.Sync()
		d.Close()
	}
	return nil
}

// WriteBytes is Write for a byte slice.
func WriteBytes(name string, mode os.FileMode, b []byte) error {
	return Write(name, mode, func(w io.Writer) error {
		_, err := w.Write(b)
		return err
	})
}

// Error is a failed Write, worded with the path the caller gave; Unwrap
// gives the system's error (fs.ErrNotExist, ...).
type Error struct {
	msg string
	err error
}

func (e *Error) Error() string { return e.msg }
func (e *Error) Unwrap() error { return e.err }

// createError says why no file can be created as name in dir: the first
// directory on the way that is missing, or not a directory, or the reason
// the system gave.
func createError(name, dir string, err error) error {
	cause := err
	var pe *os.PathError
	if errors.As(err, &pe) {
		cause = pe.Err
	}
	switch {
	case errors.Is(err, fs.ErrNotExist), errors.Is(err, unix.ENOTDIR):
		for d := dir; ; d = filepath.Dir(d) {
			st, serr := os.Stat(d)
			switch {
			case serr == nil && !st.IsDir():
				return &Error{fmt.Sprintf("%s: %s is not a directory", name, d), cause}
			case serr == nil:
				return &Error{fmt.Sprintf("%s: directory %s does not exist", name, dir), cause}
			case filepath.Dir(d) == d:
				return &Error{fmt.Sprintf("%s: directory %s does not exist", name, dir), cause}
			}
		}
	case errors.Is(err, fs.ErrPermission):
		return &Error{fmt.Sprintf("%s: cannot create a file in directory %s: permission denied", name, dir), cause}
	}
	return &Error{fmt.Sprintf("%s: %v", name, cause), cause}
}

// renamed words an error of the temporary file's as one of name's.
func renamed(err error, tmp, name string) error {
	var pe *os.PathError
	var le *os.LinkError
	switch {
	case errors.As(err, &le) && le.Old == tmp:
		return &Error{fmt.Sprintf("%s: %s", name, le.Err), err}
	case errors.As(err, &pe) && pe.Path == tmp:
		return &Error{fmt.Sprintf("%s: %s: %s", name, pe.Op, pe.Err), err}
	}
	return err
}
