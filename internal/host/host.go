// Package host is dbhost's single view of a machine. Every read of /proc,
// /sys and /etc, every external command and every system call whose result a
// check depends on goes through a *Host, whose root is either the live system
// or an unpacked snapshot. While collecting, a Host records what it read, so a
// snapshot holds exactly what the checks need and nothing else.
package host

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"runtime"
	"sort"
	"strings"
	"sync"
	"syscall"
	"time"
	"unicode/utf8"

	"github.com/prometheus/procfs"
	"golang.org/x/sys/unix"
)

// MaxFileSize caps a single read. Config files beyond it are reported as
// unreadable rather than loaded: no database ships a legitimate 64 MiB config.
const MaxFileSize = 64 << 20

// ErrTooLarge is returned when a file exceeds MaxFileSize.
var ErrTooLarge = errors.New("file larger than 64 MiB")

// ErrNotLive is returned when an observation that needs the running system
// (a command, a system call, a database query) was not recorded in a snapshot.
var ErrNotLive = errors.New("not recorded in this snapshot")

// Host reads one machine, live or recorded. A Host that For made is a
// view of another, which reads paths as a process would (see claim.go).
type Host struct {
	*state            // shared with the Host's views
	view   *claimView // nil but on a view
}

// state is what a Host shares with its views.
type state struct {
	root     string // directory that holds proc/, sys/, etc/ ...
	rootFD   int    // the root, when it is not "/": paths resolve inside it
	shadow   string // live root other than "/": private copies procfs reads
	live     bool
	snapshot string // archive path when opened from a snapshot
	tmpdir   string // unpacked snapshot
	// procFD and sysFD are /proc and /sys of the live system rooted at
	// "/", or -1: see openPseudo.
	procFD, sysFD int
	// area holds tmpdir or shadow, locked while open and removed by Close
	// (see unpackdir.go).
	area        *privateArea
	areaCleanup runtime.Cleanup

	proc procfs.FS

	rec  *recording // non-nil while collecting (live only)
	snap *recording // recorded probes and errors of an opened snapshot

	manifest   Manifest
	cmdTimeout time.Duration

	mountsMu sync.Mutex
	mounts   map[[sha256.Size]byte][]*procfs.MountInfo // parsed mountinfo by content

	cmdsMu sync.Mutex
	cmds   map[string]*cmdRun // commands run, by user, group and command line
}

// Open returns a Host over the live system mounted at root (usually "/").
// Commands and system calls are only run when root is "/": against any other
// root they would describe the wrong machine.
func Open(root string) (*Host, error) {
	if root == "" {
		root = "/"
	}
	st, err := os.Stat(root)
	if err != nil {
		return nil, fmt.Errorf("host root: %w", err)
	}
	if !st.IsDir() {
		return nil, fmt.Errorf("host root %s is not a directory", root)
	}
	h := &Host{state: &state{root: root, rootFD: -1, procFD: -1, sysFD: -1, live: true, cmdTimeout: 10 * time.Second}}
	if filepath.Clean(root) == "/" {
		h.proc, _ = procfs.NewFS("/proc") // errors surface on each read
		h.procFD = openPseudoFS("/proc", unix.PROC_SUPER_MAGIC)
		h.sysFD = openPseudoFS("/sys", unix.SYSFS_MAGIC)
	} else {
		if h.rootFD, err = openRoot(root); err != nil {
			return nil, fmt.Errorf("host root: %w", err)
		}
		// procfs reads files by path; under another root it reads the
		// confined copies Touch makes (see shadowTouched).
		if h.shadow, err = h.makePrivateDir("root-"); err != nil {
			unix.Close(h.rootFD)
			return nil, err
		}
		os.Mkdir(filepath.Join(h.shadow, "proc"), 0o700)
		h.proc, _ = procfs.NewFS(filepath.Join(h.shadow, "proc"))
	}
	h.manifest = liveManifest(h)
	return h, nil
}

// Live reports whether the host is the running system (not a snapshot).
func (h *Host) Live() bool { return h.live }

// System reports whether commands and system calls describe this host: it is
// live and rooted at "/".
func (h *Host) System() bool { return h.live && filepath.Clean(h.root) == "/" }

// Source names where facts come from: "live" or the snapshot path.
func (h *Host) Source() string {
	if h.live {
		if h.System() {
			return "live"
		}
		return "live:" + h.root
	}
	return h.snapshot
}

// Manifest describes the host (and, for snapshots, when and how it was taken).
func (h *Host) Manifest() Manifest { return h.manifest }

// Root is the directory that procfs-style readers, which need a real
// directory, read after declaring their files with Touch: the host's root,
// or under a root other than "/" the confined copies Touch made (a reader
// that opened ROOT/proc/... itself would follow links out of the root).
// Everything else uses Host methods.
func (h *Host) Root() string {
	if h.shadow != "" {
		return h.shadow
	}
	return h.root
}

// Close releases the root and an unpacked snapshot. On a view it does
// nothing: they are its host's.
func (h *Host) Close() error {
	if h.view != nil {
		return nil
	}
	for _, fd := range []*int{&h.rootFD, &h.procFD, &h.sysFD} {
		if *fd >= 0 {
			unix.Close(*fd)
			*fd = -1
		}
	}
	h.tmpdir, h.shadow = "", ""
	return h.removePrivateDir()
}

// rel turns "/proc/meminfo" or "proc/meminfo" into the clean, root-relative
// form "proc/meminfo" used as a key in recordings and archives.
func rel(p string) string {
	p = path.Clean("/" + p)
	return strings.TrimPrefix(p, "/")
}

func (h *Host) abs(p string) string { return filepath.Join(h.root, filepath.FromSlash(rel(p))) }

// MaxConfigSize caps a configuration file (ReadConfig): real ones are a few
// hundred KB, and the parsers need about ten times a file's size.
const MaxConfigSize = 4 << 20

// ErrConfigTooLarge is returned for a configuration file over
// MaxConfigSize; errors.Is(err, ErrTooLarge) holds for it too.
var ErrConfigTooLarge error = tooLargeError("configuration file larger than 4 MiB: not read")

// tooLargeError is a file or output refused for its size; it is an
// ErrTooLarge.
type tooLargeError string

func (e tooLargeError) Error() string        { return string(e) }
func (e tooLargeError) Is(target error) bool { return target == ErrTooLarge }

// ReadFile reads a file below the host root. Reads larger than MaxFileSize
// fail with ErrTooLarge.
func (h *Host) ReadFile(p string) ([]byte, error) { return h.readFile(p, false) }

// ReadConfig reads a configuration file. Its content is returned as is, but a
// snapshot stores it with password-bearing values redacted.
func (h *Host) ReadConfig(p string) ([]byte, error) { return h.readFile(p, true) }

// ReadSecret reads a credentials file (~/.pgpass, ~/.my.cnf) on the live
// system only. It is never recorded, and a snapshot never has one.
func (h *Host) ReadSecret(p string) ([]byte, error) {
	if !h.live {
		return nil, &fs.PathError{Op: "open", Path: "/" + rel(p), Err: ErrNotLive}
	}
	return h.readKey(rel(p), MaxFileSize)
}

func (h *Host) readFile(p string, redact bool) ([]byte, error) {
	if h.claimed() {
		return h.readClaimed(p, redact)
	}
	key := rel(p)
	if err := h.recordedErr(key); err != nil {
		return nil, err
	}
	// A collection is one observation: a file two gatherers read (a
	// process's status while it exits) must read the same both times, or
	// the snapshot would disagree with the facts judged live.
	if h.rec != nil {
		if b, err, ok := h.rec.seen(key, redact); ok {
			return b, err
		}
	}
	limit := int64(MaxFileSize)
	if redact {
		limit = MaxConfigSize
	}
	b, err := h.readKey(key, limit)
	if errors.Is(err, ErrTooLarge) && redact {
		err = ErrConfigTooLarge
	}
	if h.rec != nil {
		h.rec.file(key, b, err, redact)
	}
	if err != nil {
		return nil, pathErr("open", key, err)
	}
	return b, nil
}

// pathErr normalises errors so that a recorded error and a live one read the
// same: "open /proc/1/maps: permission denied".
func pathErr(op, key string, err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return &fs.PathError{Op: op, Path: "/" + key, Err: pe.Err}
	}
	return &fs.PathError{Op: op, Path: "/" + key, Err: err}
}

// maxMountinfo caps /proc/PID/mountinfo: procfs reads it whole, without a
// limit, and its parse costs some 45 bytes of memory per byte. 2 MiB is
// some 15 000 mounts; a busy container host has a few thousand.
const maxMountinfo = 2 << 20

var errMountinfoTooLarge error = tooLargeError("mountinfo larger than 2 MiB (some 15 000 mounts): not parsed")

func isMountinfo(key string) bool { return strings.HasSuffix(key, "/mountinfo") }

// Touch declares files a procfs reader is about to read, so that collection
// records them and a snapshot reproduces their errors. It returns the recorded
// error of the first path that has one, or the reason a file must not be
// parsed (too large; under --root, unreadable).
func (h *Host) Touch(paths ...string) error {
	for _, p := range paths {
		key := rel(p)
		if err := h.recordedErr(key); err != nil {
			return err
		}
		if h.rec != nil {
			if _, _, ok := h.rec.seen(key, false); ok {
				continue
			}
		}
		limit := int64(MaxFileSize)
		if isMountinfo(key) {
			limit = maxMountinfo
		} else if h.rec == nil && h.shadow == "" {
			continue // procfs reads it, capped, where it is
		}
		b, err := h.readKey(key, limit)
		if errors.Is(err, ErrTooLarge) && isMountinfo(key) {
			err = errMountinfoTooLarge
		}
		if h.rec != nil {
			h.rec.file(key, b, err, false)
		}
		h.shadowTouched(key, b, err)
		// Under --root procfs reads the copy: a file that exists but
		// could not be read must not look absent to it.
		if err != nil && (errors.Is(err, ErrTooLarge) || h.shadow != "" && !errors.Is(err, fs.ErrNotExist)) {
			return pathErr("open", key, err)
		}
	}
	return nil
}

// ReadDir lists the names in a directory, sorted.
func (h *Host) ReadDir(p string) ([]string, error) {
	if h.claimed() {
		return h.readDirClaimed(p)
	}
	key := rel(p)
	return h.readDirProbe(key, func() ([]string, error) { return h.readDirKey(key) })
}

// readDirProbe records, under "readdir:key", the names list gives.
func (h *Host) readDirProbe(key string, list func() ([]string, error)) ([]string, error) {
	v, err := h.probe("readdir:"+key, func() ([]byte, error) {
		names, err := list()
		if err != nil {
			return nil, pathErr("open", key, err)
		}
		sort.Strings(names)
		return []byte(strings.Join(names, "\n")), nil
	})
	if err != nil {
		return nil, err
	}
	if len(v) == 0 {
		return nil, nil
	}
	return strings.Split(string(v), "\n"), nil
}

// Readlink returns the target of a symbolic link, unfollowed.
func (h *Host) Readlink(p string) (string, error) {
	if h.claimed() {
		w, err := h.view.walk("readlink", rel(p), false)
		if err != nil {
			return "", err
		}
		t, err := h.view.parent.Readlink(w.key)
		return t, walkErr("readlink", rel(p), err)
	}
	return h.probePath("readlink", p, h.readlinkKey)
}

// Realpath resolves every symbolic link in an absolute path on the host, the
// way the kernel would for a process in the host's root.
func (h *Host) Realpath(p string) (string, error) {
	if h.claimed() {
		w, err := h.view.walk("realpath", rel(p), true)
		if err != nil {
			return "", err
		}
		return "/" + w.key, nil
	}
	return h.probePath("realpath", p, h.realpathKey)
}

// probePath records, under "op:path", the path that resolve gives for p; a
// failure is reported as op's on p.
func (h *Host) probePath(op, p string, resolve func(key string) (string, error)) (string, error) {
	key := rel(p)
	v, err := h.probe(op+":"+key, func() ([]byte, error) {
		t, err := resolve(key)
		if err != nil {
			return nil, pathErr(op, key, err)
		}
		return []byte(t), nil
	})
	return string(v), err
}

// FileInfo is the part of stat(2) checks use.
type FileInfo struct {
	Mode  fs.FileMode `json:"mode"`
	UID   int         `json:"uid"`
	GID   int         `json:"gid"`
	Size  int64       `json:"size"`
	Dev   uint64      `json:"dev"` // st_dev, to find the mount a path lives on
	Ino   uint64      `json:"ino,omitempty"`
	IsDir bool        `json:"is_dir"`
}

// Stat stats a path (following symlinks).
func (h *Host) Stat(p string) (FileInfo, error) { return h.statInfo("stat", p, true) }

// statInfo is Stat or (op "lstat", not following a final link) Lstat.
func (h *Host) statInfo(op, p string, follow bool) (FileInfo, error) {
	if h.claimed() {
		w, err := h.view.walk(op, rel(p), follow)
		return w.fi, err
	}
	key := rel(p)
	return probeValue(h, op+":"+key, func() (FileInfo, error) {
		st, err := h.statKey(key, follow)
		if err != nil {
			return FileInfo{}, pathErr(op, key, err)
		}
		return fileInfo(st), nil
	})
}

// Exists reports whether a path exists (a cheap Stat).
func (h *Host) Exists(p string) bool {
	_, err := h.Stat(p)
	return err == nil
}

// Getxattr reads an extended attribute (e.g. security.selinux) of a path.
func (h *Host) Getxattr(p, attr string) (string, error) {
	key := rel(p)
	v, err := h.probe("xattr:"+attr+":"+key, func() ([]byte, error) {
		if !h.System() {
			return nil, ErrNotLive
		}
		buf := make([]byte, 1024)
		n, err := syscall.Getxattr(h.abs(p), attr, buf)
		if err != nil {
			return nil, pathErr("getxattr", key, err)
		}
		return bytes.TrimRight(buf[:n], "\x00"), nil
	})
	return string(v), err
}

// Run executes a command (argument list, never a shell string) with a
// timeout, a clean environment and standard output capped, and returns its
// standard output. Only a program root alone can change is run (see
// CheckTrusted); a bare name is looked up in a fixed PATH. On a snapshot it
// replays the recorded output. Commands only run on the live system rooted
// at "/".
func (h *Host) Run(ctx context.Context, name string, args ...string) ([]byte, error) {
	return h.run(ctx, 0, 0, name, args...)
}

// Probe runs fn on the live system and records its result under key; on a
// snapshot it returns the recorded result. Use it for observations that are
// not files: system calls, database queries. The key must be stable for the
// same observation and must never contain a secret.
func (h *Host) Probe(key string, fn func() ([]byte, error)) ([]byte, error) {
	return h.probe("probe:"+key, func() ([]byte, error) {
		if !h.System() {
			return nil, ErrNotLive
		}
		return fn()
	})
}

func (h *Host) probe(key string, fn func() ([]byte, error)) ([]byte, error) {
	if !h.live {
		return h.snap.replay(key)
	}
	if h.rec != nil {
		if v, err, ok := h.rec.cached(key); ok {
			return v, err
		}
	}
	v, err := fn()
	if h.rec != nil {
		h.rec.probe(key, v, err)
	}
	return v, err
}

// probeValue is probe for a value that is recorded as JSON: live, fn gives
// it; from a snapshot, it is decoded from what was recorded. The live value
// goes through JSON too, so that both return the same, except on a live
// host that records nothing when JSON would give the value back unchanged:
// there the round trip was a tenth of an audit's CPU.
func probeValue[T any](h *Host, key string, fn func() (T, error)) (T, error) {
	var v T
	if h.live && h.rec == nil {
		x, err := fn()
		if err != nil {
			return v, err
		}
		if jsonIdentity(x) {
			return x, nil
		}
		b, err := marshal(x)
		if err != nil {
			return v, err
		}
		return v, unmarshal(b, &v)
	}
	b, err := h.probe(key, func() ([]byte, error) {
		x, err := fn()
		if err != nil {
			return nil, err
		}
		return marshal(x)
	})
	if err != nil {
		return v, err
	}
	return v, unmarshal(b, &v)
}

// jsonIdentity reports whether x comes back from a JSON round trip as it
// went in: structs of numbers and booleans, slices of numbers, and strings
// that are valid UTF-8 (JSON replaces invalid bytes). nil and empty slices
// keep their difference (null and []).
func jsonIdentity(x any) bool {
	switch x := x.(type) {
	case FileInfo, FileStat, FSStat, []uint64:
		return true
	case []string:
		for _, s := range x {
			if !utf8.ValidString(s) {
				return false
			}
		}
		return true
	}
	return false
}

func (h *Host) recordedErr(key string) error {
	if h.live || h.snap == nil {
		return nil
	}
	return h.snap.fileErr(key)
}

type limitedWriter struct {
	w io.Writer
	n int64
}

func (l *limitedWriter) Write(p []byte) (int, error) {
	if l.n <= 0 {
		return len(p), nil
	}
	q := p
	if int64(len(q)) > l.n {
		q = q[:l.n]
	}
	n, err := l.w.Write(q)
	l.n -= int64(n)
	if err != nil {
		return n, err
	}
	return len(p), nil
}

func firstLine(s string) string {
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		return s[:i]
	}
	return s
}

// recording holds what a collection read, or what a snapshot replays.
type recording struct {
	mu     sync.Mutex
	files  map[string][]byte // regular file contents, by root-relative path
	errs   map[string]string // read errors other than "does not exist"
	probes map[string]probeResult
	// redact marks files that hold configuration: the snapshot stores them
	// redacted, whichever reader asked first.
	redact map[string]bool
	// absent marks files found missing, so a second read agrees.
	absent map[string]bool
}

type probeResult struct {
	Out []byte `json:"out,omitempty"`
	Err string `json:"err,omitempty"`
	// Errno keeps the kind of error, so that errors.Is(err, fs.ErrNotExist)
	// and permission checks behave the same on a snapshot.
	Errno int `json:"errno,omitempty"`
}

func newRecording() *recording {
	return &recording{files: map[string][]byte{}, errs: map[string]string{}, probes: map[string]probeResult{},
		redact: map[string]bool{}, absent: map[string]bool{}}
}

func (r *recording) file(key string, b []byte, err error, redact bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if redact {
		r.redact[key] = true
	}
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			r.absent[key] = true
		} else {
			r.errs[key] = errString(err)
		}
		return
	}
	r.files[key] = b
}

// seen returns the first observation of a file in this collection.
func (r *recording) seen(key string, redact bool) ([]byte, error, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if redact {
		r.redact[key] = true
	}
	if b, ok := r.files[key]; ok {
		return b, nil, true
	}
	if msg, ok := r.errs[key]; ok {
		return nil, &fs.PathError{Op: "open", Path: "/" + key, Err: errnoFromString(msg)}, true
	}
	if r.absent[key] {
		return nil, &fs.PathError{Op: "open", Path: "/" + key, Err: fs.ErrNotExist}, true
	}
	return nil, nil, false
}

func (r *recording) probe(key string, v []byte, err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	pr := probeResult{Out: v}
	if err != nil {
		pr.Err = err.Error()
		var errno syscall.Errno
		if errors.As(err, &errno) {
			pr.Errno = int(errno)
		}
		if errors.Is(err, ErrNotLive) {
			pr.Errno = -1
		}
	}
	r.probes[key] = pr
}

func (r *recording) cached(key string) ([]byte, error, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	pr, ok := r.probes[key]
	if !ok {
		return nil, nil, false
	}
	return pr.Out, pr.err(), true
}

func (r *recording) replay(key string) ([]byte, error) {
	if r == nil {
		return nil, ErrNotLive
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	pr, ok := r.probes[key]
	if !ok {
		return nil, fmt.Errorf("%s: %w", describeKey(key), ErrNotLive)
	}
	return pr.Out, pr.err()
}

func (r *recording) fileErr(key string) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if msg, ok := r.errs[key]; ok {
		return &fs.PathError{Op: "open", Path: "/" + key, Err: errnoFromString(msg)}
	}
	return nil
}

func (pr probeResult) err() error {
	if pr.Err == "" {
		return nil
	}
	switch {
	case pr.Errno == -1:
		return fmt.Errorf("%s: %w", strings.TrimSuffix(pr.Err, ": "+ErrNotLive.Error()), ErrNotLive)
	case pr.Errno > 0:
		return &recordedError{msg: pr.Err, errno: syscall.Errno(pr.Errno)}
	}
	return &recordedError{msg: pr.Err}
}

// recordedError replays an error message and, where known, its errno.
type recordedError struct {
	msg   string
	errno syscall.Errno
}

func (e *recordedError) Error() string { return e.msg }
func (e *recordedError) Unwrap() error {
	if e.errno != 0 {
		return e.errno
	}
	return nil
}

func errString(err error) string {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err.Error()
	}
	return err.Error()
}

func errnoFromString(msg string) error {
	switch msg {
	case syscall.EACCES.Error():
		return syscall.EACCES
	case syscall.EPERM.Error():
		return syscall.EPERM
	case syscall.ESRCH.Error():
		return syscall.ESRCH
	case ErrTooLarge.Error():
		return ErrTooLarge
	case ErrConfigTooLarge.Error():
		return ErrConfigTooLarge
	case errNotKept.Error():
		return errNotKept
	case errMountinfoTooLarge.Error():
		return errMountinfoTooLarge
	case errChanged.Error():
		return errChanged
	}
	return errors.New(msg)
}

func describeKey(key string) string {
	k, v, _ := strings.Cut(key, ":")
	if k == "cmd" {
		return "command " + strings.ReplaceAll(v, "\x00", " ")
	}
	return key
}
