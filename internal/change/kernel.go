package change

import (
	"encoding/json"
	"fmt"
	"path"
	"strings"

	"github.com/dbhost/dbhost/internal/journal"
)

// kernelUndo is what the journal keeps before a kernel or sysfs value is
// written.
type kernelUndo struct {
	Path string `json:"path"`
	Old  string `json:"old"`
	New  string `json:"new"`
}

// kernelKind is the journal kind of path ("" when it is neither under
// /proc/sys nor /sys).
func kernelKind(p string) string {
	switch {
	case path.Clean(p) != p || strings.Contains(p, "/../"):
		return ""
	case strings.HasPrefix(p, "/proc/sys/"):
		return KindKernel
	case strings.HasPrefix(p, "/sys/"):
		return KindSysfs
	}
	return ""
}

// KernelAllowed says why value must not be written to path, or nil: only
// a single-line value under /proc/sys or /sys.
func KernelAllowed(p, value string) error {
	if kernelKind(p) == "" {
		return refuse("to write %s: not a kernel knob", p)
	}
	if !oneLine(value) {
		return refuse("to write %q to %s", value, p)
	}
	return nil
}

// Kernel journals the value path holds, writes value and reads it back
// through the host: what it returns is the active value (a selector
// file's bracketed choice). The caller compares it with what it wanted.
func (c *Changer) Kernel(p, value string) (got string, err error) {
	if err := KernelAllowed(p, value); err != nil {
		return "", err
	}
	h, done, err := c.cfg.host()
	if err != nil {
		return "", err
	}
	defer done()
	if !h.System() {
		return "", refuse("%s: kernel values are set only on the live system at /", p)
	}
	b, err := h.ReadFile(p)
	if err != nil {
		return "", err
	}
	old := journal.Current(string(b))
	if err := c.j.Record(kernelKind(p), p+" = "+value, kernelUndo{Path: p, Old: old, New: value}); err != nil {
		return "", err
	}
	if err := journal.WriteKnob(p, value); err != nil {
		return "", err
	}
	c.cfg.step("set " + p)
	b, err = h.ReadFile(p)
	if err != nil {
		return "", err
	}
	return journal.Current(string(b)), nil
}

// undoKernel writes the old value back (again after a crash: writing a
// value twice is harmless).
func undoKernel(_ Config, data json.RawMessage) error {
	var u kernelUndo
	if err := json.Unmarshal(data, &u); err != nil {
		return err
	}
	if err := KernelAllowed(u.Path, u.Old); err != nil {
		return err
	}
	if err := journal.WriteKnob(u.Path, u.Old); err != nil {
		return fmt.Errorf("restore %s to %q: %w", u.Path, u.Old, err)
	}
	return nil
}
