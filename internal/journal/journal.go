// Package journal changes kernel knobs (files under /proc/sys and /sys) so
// that every change can be undone: before a value is written, the old one is
// saved to a journal file on disk; Restore writes the old values back in
// reverse order. A journal left behind by a crash is restored by Recover.
//
// Changes that are not written with Set are recorded with Record under a
// kind whose undo the opener passes in (Kinds: internal/change builds the
// set); Restore and Recover call it with the recorded data, newest change
// first. A journal file is versioned ({"version":2,"changes":[...]}); a
// bare array is version 1, which earlier releases wrote.
package journal

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"sync"
	"syscall"

	"github.com/dbhost/dbhost/internal/safefile"
)

// Change is one knob write and the value it replaced, or (Kind set) one
// recorded action and the data its undo needs.
type Change struct {
	Path string `json:"path,omitempty"`
	Old  string `json:"old,omitempty"`
	New  string `json:"new,omitempty"`
	// Kind names an undo of the journal's Kinds; empty for a kernel knob
	// written with Set.
	Kind string          `json:"kind,omitempty"`
	What string          `json:"what,omitempty"` // for people reading the journal
	Data json.RawMessage `json:"data,omitempty"`
}

// Undo reverts one recorded action. It must be idempotent: a crash during
// Restore runs it again at the next Recover.
type Undo func(data json.RawMessage) error

// Kinds maps each journal kind to its undo. They go in when a journal is
// opened or recovered, so that 'recover' in a new process knows every kind
// its opener knows, and nothing depends on which package's init ran.
type Kinds map[string]Undo

// Version is the journal format this code writes.
const Version = 2

// file is a version 2 journal on disk.
type file struct {
	Version int      `json:"version"`
	Changes []Change `json:"changes"`
}

// Record journals an action before the caller performs it: data is what
// kind's undo needs. The journal is on disk (fsynced) when Record returns.
func (j *Journal) Record(kind, what string, data any) error {
	if _, ok := j.kinds[kind]; !ok || kind == "" {
		return fmt.Errorf("journal: no undo known for kind %q", kind)
	}
	b, err := json.Marshal(data)
	if err != nil {
		return err
	}
	j.mu.Lock()
	defer j.mu.Unlock()
	j.changes = append(j.changes, Change{Kind: kind, What: what, Data: b})
	if err := j.save(); err != nil {
		j.changes = j.changes[:len(j.changes)-1]
		return err
	}
	return nil
}

// File is the journal's path.
func (j *Journal) File() string { return j.file }

// Journal records changes in a file.
type Journal struct {
	mu      sync.Mutex
	file    string
	kinds   Kinds
	changes []Change
}

// Open starts a journal at file, restoring first whatever an earlier,
// interrupted run left there. kinds are the undos of what it may record.
func Open(file string, kinds Kinds) (*Journal, error) {
	if err := Recover(file, kinds); err != nil {
		return nil, fmt.Errorf("journal %s: restoring an earlier run: %w", file, err)
	}
	if err := os.MkdirAll(filepath.Dir(file), 0o700); err != nil {
		return nil, err
	}
	return &Journal{file: file, kinds: kinds}, nil
}

// Recover restores the changes recorded in a leftover journal file and
// removes it. A missing file is not an error.
func Recover(file string, kinds Kinds) error {
	changes, err := Pending(file)
	if err != nil || changes == nil {
		return err
	}
	j := &Journal{file: file, kinds: kinds, changes: changes}
	return j.Restore()
}

// Pending returns what a journal file still holds, oldest first (nil: no
// file). It reads version 1 (a bare array) and 2, and refuses any other
// version by name, leaving the file for the program that wrote it.
func Pending(name string) ([]Change, error) {
	b, err := os.ReadFile(name)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	return parse(b)
}

func parse(b []byte) ([]Change, error) {
	changes := []Change{}
	if t := bytes.TrimSpace(b); len(t) > 0 && t[0] == '[' {
		if err := json.Unmarshal(t, &changes); err != nil {
			return nil, fmt.Errorf("unreadable journal (version 1, kept for inspection): %w", err)
		}
		return changes, nil
	}
	var f file
	if err := json.Unmarshal(b, &f); err != nil {
		return nil, fmt.Errorf("unreadable journal (kept for inspection): %w", err)
	}
	if f.Version != Version {
		return nil, fmt.Errorf("journal version %d is not known to this dbhost, which reads versions 1 and %d (kept for the dbhost that wrote it)", f.Version, Version)
	}
	if f.Changes != nil {
		changes = f.Changes
	}
	return changes, nil
}

// Set writes value to a kernel knob after journaling its current value
// (kind "", which version 1 journals hold too). New code uses
// change.Changer.Kernel, which reads back through the host.
// For selector files (THP "always [madvise] never", I/O schedulers) the
// active choice in brackets is what is saved.
func (j *Journal) Set(path, value string) error {
	j.mu.Lock()
	defer j.mu.Unlock()
	b, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	old := Current(string(b))
	j.changes = append(j.changes, Change{Path: path, Old: old, New: value})
	if err := j.save(); err != nil {
		j.changes = j.changes[:len(j.changes)-1]
		return err
	}
	if err := WriteKnob(path, value); err != nil {
		j.changes = j.changes[:len(j.changes)-1]
		j.save()
		return err
	}
	return nil
}

// Restore writes back every journaled value, newest first, and removes the
// journal when all succeeded.
func (j *Journal) Restore() error {
	j.mu.Lock()
	defer j.mu.Unlock()
	var errs []error
	var failed []Change
	for i := len(j.changes) - 1; i >= 0; i-- {
		c := j.changes[i]
		if err := j.undo(c); err != nil {
			errs = append(errs, err)
			failed = append([]Change{c}, failed...)
		}
	}
	if len(errs) > 0 {
		// Keep only what is still to undo, so a later Recover retries it
		// and does not redo what already succeeded.
		j.changes = failed
		if err := j.save(); err != nil {
			errs = append(errs, err)
		}
		return errors.Join(errs...)
	}
	j.changes = nil
	err := os.Remove(j.file)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	return err
}

func (j *Journal) undo(c Change) error {
	if c.Kind == "" {
		if err := WriteKnob(c.Path, c.Old); err != nil {
			return fmt.Errorf("restore %s to %q: %w", c.Path, c.Old, err)
		}
		return nil
	}
	u, ok := j.kinds[c.Kind]
	if !ok {
		return fmt.Errorf("undo %s (%s): kind %q unknown to this program", c.What, c.Kind, c.Kind)
	}
	if err := u(c.Data); err != nil {
		return fmt.Errorf("undo %s: %w", c.What, err)
	}
	return nil
}

// Changes returns the journaled changes, oldest first.
func (j *Journal) Changes() []Change {
	j.mu.Lock()
	defer j.mu.Unlock()
	return append([]Change(nil), j.changes...)
}

func (j *Journal) save() error {
	changes := j.changes
	if changes == nil {
		changes = []Change{}
	}
	b, err := json.MarshalIndent(file{Version: Version, Changes: changes}, "", " ")
	if err != nil {
		return err
	}
	return safefile.WriteBytes(j.file, 0o600, b)
}

// RestoreOnSignal restores the journal when the process gets SIGINT or
// SIGTERM, then exits with status 130. Call the returned stop function
// once the journal has been restored normally.
func (j *Journal) RestoreOnSignal() (stop func()) {
	ctx, cancel := context.WithCancel(context.Background())
	ch := make(chan os.Signal, 1)
	signal.Notify(ch, os.Interrupt, syscall.SIGTERM, syscall.SIGHUP)
	go func() {
		select {
		case s := <-ch:
			if err := j.Restore(); err != nil {
				fmt.Fprintln(os.Stderr, "journal: restore after", s, "failed:", err)
			}
			os.Exit(130)
		case <-ctx.Done():
		}
	}()
	return func() {
		signal.Stop(ch)
		cancel()
	}
}

// Current returns the active value of a knob's content: the bracketed word
// of a selector file, else the trimmed content.
func Current(s string) string {
	s = strings.TrimSpace(s)
	if i := strings.IndexByte(s, '['); i >= 0 {
		if k := strings.IndexByte(s[i:], ']'); k > 0 {
			return s[i+1 : i+k]
		}
	}
	return strings.Join(strings.Fields(s), " ")
}

// WriteKnob writes a value the way `echo value > knob` does: one write of
// the value and a newline (procfs and sysfs ignore the truncation). It
// does not create a file.
func WriteKnob(path, value string) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_TRUNC, 0)
	if err != nil {
		return err
	}
	_, werr := f.WriteString(value + "\n")
	cerr := f.Close()
	if werr != nil {
		return werr
	}
	return cerr
}
