// Package safefile writes files atomically: a reader sees the old content or
// the new one, never half of it, and a crash leaves no partial file.
package safefile

import (
	"io"
	"os"
	"path/filepath"
)

// Write creates or replaces name with what fill writes, with the given mode.
// The content goes to a temporary file in the same directory, is synced, and
// is renamed over name.
func Write(name string, mode os.FileMode, fill func(io.Writer) error) (err error) {
	dir := filepath.Dir(name)
	tmp, err := os.CreateTemp(dir, "."+filepath.Base(name)+".tmp-*")
	if err != nil {
		return err
	}
	defer func() {
		if err != nil {
			tmp.Close()
			os.Remove(tmp.Name())
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
