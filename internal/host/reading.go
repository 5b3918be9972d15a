package host

import (
	"errors"
	"fmt"
	"io/fs"
	"math"
	"strconv"
	"strings"
	"syscall"
)

// Reading is one observed value with where it came from, or why it could not
// be observed. Checks quote Source as evidence and Err as the reason for an
// "unknown" verdict.
type Reading struct {
	Value  string `json:"value,omitempty"`
	Source string `json:"source"`
	Err    string `json:"error,omitempty"`
}

// OK reports whether the value was read.
func (r Reading) OK() bool { return r.Err == "" }

// Int parses the value as an integer (the first field, for "4096 8192").
func (r Reading) Int() (int64, bool) {
	if !r.OK() {
		return 0, false
	}
	f := strings.Fields(r.Value)
	if len(f) == 0 {
		return 0, false
	}
	v, err := strconv.ParseInt(f[0], 10, 64)
	return v, err == nil
}

// IntIn parses the value (its first field) as an integer in [min, max].
// When it cannot, why says so: the read error, or the value and where it
// was read, so that an "unknown" verdict names what was wrong. A kernel
// file that is empty or holds text where a number belongs is garbage, not
// zero.
func (r Reading) IntIn(min, max int64) (v int64, why string) {
	if !r.OK() {
		return 0, r.Err
	}
	f := strings.Fields(r.Value)
	if len(f) == 0 {
		return 0, r.Source + " is empty"
	}
	v, err := strconv.ParseInt(f[0], 10, 64)
	switch {
	case err != nil:
		return 0, fmt.Sprintf("%s holds %q, not a number", r.Source, clip(f[0]))
	case v < min || v > max:
		return 0, fmt.Sprintf("%s holds %d, outside %d..%d", r.Source, v, min, max)
	}
	return v, ""
}

// Count parses the value as a non-negative integer (a size, a count, a
// time), saying why when it cannot (see IntIn).
func (r Reading) Count() (int64, string) { return r.IntIn(0, math.MaxInt64) }

// clip keeps a quoted bad value short.
func clip(s string) string {
	if len(s) > 40 {
		return s[:40] + "..."
	}
	return s
}

// Fields splits the value on white space.
func (r Reading) Fields() []string { return strings.Fields(r.Value) }

// Read returns a file's trimmed content as a Reading.
func (h *Host) Read(p string) Reading {
	v, err := h.ReadString(p)
	return reading("/"+rel(p), v, err)
}

// ReadSysctl returns a kernel parameter as a Reading whose source names both
// the parameter and its file.
func (h *Host) ReadSysctl(name string) Reading {
	v, err := h.Sysctl(name)
	return reading(SysctlPath(name), v, err)
}

// reading is the Reading of a value read from source: its failure,
// explained, when err is set.
func reading(source, v string, err error) Reading {
	if err != nil {
		return Reading{Source: source, Err: Explain(err)}
	}
	return Reading{Source: source, Value: v}
}

// Missing builds a Reading that could not be made, with a reason.
func Missing(source, why string) Reading { return Reading{Source: source, Err: why} }

// Explain turns an error into the short reason a user reads next to an
// "unknown" verdict.
func Explain(err error) string {
	if err == nil {
		return ""
	}
	var pe *fs.PathError
	p := ""
	if errors.As(err, &pe) {
		p = pe.Path + ": "
	}
	switch {
	case errors.Is(err, fs.ErrPermission), errors.Is(err, syscall.EACCES), errors.Is(err, syscall.EPERM):
		return p + "permission denied (run dbhost as root)"
	case errors.Is(err, fs.ErrNotExist), errors.Is(err, syscall.ESRCH):
		return p + "not present on this host"
	case errors.Is(err, ErrNotLive):
		return err.Error()
	case errors.Is(err, ErrTooLarge) && pe != nil:
		return p + pe.Err.Error()
	}
	return err.Error()
}

// IsNotExist reports whether err means the thing observed is absent.
func IsNotExist(err error) bool {
	return errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ESRCH)
}

// IsPermission reports whether err means the observation needs privileges.
func IsPermission(err error) bool {
	return errors.Is(err, fs.ErrPermission) || errors.Is(err, syscall.EACCES) || errors.Is(err, syscall.EPERM)
}
