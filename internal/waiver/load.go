package waiver

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"sync"

	"github.com/dbhost/dbhost/internal/host"
)

// Read reads a waiver file the user named (--waivers FILE) from this
// machine, whoever owns it: naming it is vouching for it.
func Read(path string) (*File, error) {
	fl, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer fl.Close()
	fi, err := fl.Stat()
	if err != nil {
		return nil, err
	}
	if !fi.Mode().IsRegular() {
		return nil, fmt.Errorf("%s: not a regular file", path)
	}
	data, err := io.ReadAll(io.LimitReader(fl, MaxSize+1))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return Parse(path, data)
}

// ReadHost reads the waiver file at path of a host, live or a snapshot's
// record of it: nil and no error when there is none (or the snapshot did not
// record one). It is read only when root owns it and every directory and
// link up to it, and nobody else can write any of them: the rule
// /etc/default/dbhost follows (host.CheckTrusted). Whoever else can write
// it could hide a finding.
func ReadHost(h *host.Host, path string) (*File, error) {
	if _, err := h.Lstat(path); err != nil {
		if errors.Is(err, fs.ErrNotExist) || errors.Is(err, host.ErrNotLive) {
			return nil, nil
		}
		return nil, err
	}
	if err := h.CheckTrusted(path); err != nil {
		var ue *host.UntrustedError
		if errors.As(err, &ue) {
			err = fmt.Errorf("%s %s", ue.Path, ue.Why)
		}
		return nil, fmt.Errorf("%s is not read: %v (root must own it and the directories above it, and nobody else write them; --waivers FILE names another file, --no-waivers reads none)", path, err)
	}
	fi, err := h.Stat(path)
	if err != nil {
		return nil, err
	}
	if fi.Size > MaxSize {
		return nil, fmt.Errorf("%s: %d bytes, more than a waiver file's %d", path, fi.Size, MaxSize)
	}
	data, err := h.ReadFile(path)
	if err != nil {
		return nil, err
	}
	return Parse(path, data)
}

// Status is the waiver file's state in one audit of a long-running process
// (dbhost serve), for the exporter.
type Status struct {
	// Valid: the file loaded as it is now (or there is none). False: it
	// does not, and the last file that did still applies.
	Valid bool
	// Error says why the file does not load ("" when Valid).
	Error string
	// Outcome is what the applied waivers did to the audit (nil: none).
	Outcome *Outcome
}

// Loader keeps the waivers of a long-running process: each Load reads the
// file again, so that a changed file applies without a restart, and a file
// that does not load keeps the last one that did.
type Loader struct {
	mu      sync.Mutex
	last    *File
	lastErr string
}

// Load reads the file with read and returns the waivers to apply, whether
// the file loaded, and changed: true when the file's state (valid, or why
// not) differs from the previous Load's, what is worth a log line.
func (l *Loader) Load(read func() (*File, error)) (f *File, st Status, changed bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	f, err := read()
	msg := ""
	if err != nil {
		msg = err.Error()
	}
	changed = msg != l.lastErr
	l.lastErr = msg
	if err != nil {
		return l.last, Status{Error: msg}, changed
	}
	l.last = f
	return f, Status{Valid: true}, changed
}
