package pgcluster

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/dbhost/dbhost/internal/host"
	"github.com/dbhost/dbhost/internal/journal"
	"github.com/dbhost/dbhost/internal/safefile"
)

// Kind is the journal kind of a throwaway cluster.
const Kind = "pgcluster"

// MarkerName is the file in a cluster's directory that proves dbhost made
// it; its content is a random token also kept in the journal.
const MarkerName = ".dbhost-pgcluster"

// dirPrefix starts the name of every cluster directory; the undo refuses
// directories without it.
const dirPrefix = "dbhost-pgcluster-"

// Kinds is the cluster's undo, for whoever opens or recovers a journal
// that may hold one. The cluster keeps its own kind: its undo stops the
// postmaster whatever started it and removes the directory only when it
// holds the run's marker, which neither change's workdir nor its restart
// kind expresses.
func Kinds() journal.Kinds { return journal.Kinds{Kind: undo} }

// Record is the journal entry of a cluster: everything its undo needs, in a
// new process after a crash. It holds no password (the cluster has none).
type Record struct {
	Dir    string `json:"dir"`    // the cluster's private directory
	Marker string `json:"marker"` // marker file name inside Dir
	Token  string `json:"token"`  // the marker's expected content
	Port   int    `json:"port"`
	Bin    string `json:"bin"` // PostgreSQL's bin directory
}

func (r Record) dataDir() string { return filepath.Join(r.Dir, "data") }

// check refuses a record that could point the undo at something that is not
// a cluster directory (a corrupted or hand-edited journal).
func (r Record) check() error {
	switch {
	case !filepath.IsAbs(r.Dir) || filepath.Clean(r.Dir) != r.Dir:
		return fmt.Errorf("pgcluster: directory %q is not a clean absolute path", r.Dir)
	case !strings.HasPrefix(filepath.Base(r.Dir), dirPrefix):
		return fmt.Errorf("pgcluster: directory %q is not named %s*", r.Dir, dirPrefix)
	case r.Marker == "" || r.Marker == "." || r.Marker == ".." || strings.ContainsRune(r.Marker, '/'):
		return fmt.Errorf("pgcluster: bad marker name %q", r.Marker)
	case len(r.Token) < 16:
		return errors.New("pgcluster: marker token missing or too short")
	}
	return nil
}

func undo(data json.RawMessage) error {
	var r Record
	if err := json.Unmarshal(data, &r); err != nil {
		return fmt.Errorf("pgcluster: journal entry: %w", err)
	}
	return r.undo(defaultStop)
}

// undo stops the cluster's postmaster and removes its directory. It is
// idempotent: a cluster already gone is success.
func (r Record) undo(t stopTimes) error {
	if err := r.check(); err != nil {
		return err
	}
	h, err := host.Open("/")
	if err != nil {
		return err
	}
	if err := stopPostmaster(h, r.dataDir(), t); err != nil {
		return fmt.Errorf("stopping the PostgreSQL cluster in %s: %w", r.Dir, err)
	}
	return r.removeDir()
}

// removeDir deletes the cluster directory, but only when it holds the
// marker with the expected token.
func (r Record) removeDir() error {
	if there, err := safefile.DirToRemove(r.Dir); !there {
		return err
	}
	mk := filepath.Join(r.Dir, r.Marker)
	mfi, err := os.Lstat(mk)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		// Made but not yet marked (a crash right after mkdir): an empty
		// directory holds nothing to lose. os.Remove refuses non-empty ones.
		if err := os.Remove(r.Dir); err == nil || errors.Is(err, fs.ErrNotExist) {
			return nil
		}
		return fmt.Errorf("%s has no dbhost marker (%s) and is not empty: not removing it; delete it by hand if it is a leftover", r.Dir, r.Marker)
	case err != nil:
		return err
	case !mfi.Mode().IsRegular():
		return fmt.Errorf("%s: marker %s is not a regular file: not removing the directory", r.Dir, r.Marker)
	}
	b, err := os.ReadFile(mk)
	if err != nil {
		return err
	}
	if strings.TrimSpace(string(b)) != r.Token {
		return fmt.Errorf("%s: marker %s does not hold this run's token: not removing the directory", r.Dir, r.Marker)
	}
	return os.RemoveAll(r.Dir)
}

// stopTimes bound each stage of a stop.
type stopTimes struct {
	fast time.Duration // SIGINT: fast shutdown (aborts sessions, writes a shutdown checkpoint)
	quit time.Duration // SIGQUIT: immediate shutdown (crash recovery at next start)
	kill time.Duration // SIGKILL
}

// defaultStop allows a shutdown checkpoint of a few GB of dirty buffers
// with fsync on.
var defaultStop = stopTimes{fast: 90 * time.Second, quit: 10 * time.Second, kill: 10 * time.Second}

// pidFile is what postmaster.pid says (PostgreSQL 10+ layout).
type pidFile struct {
	PID       int
	DataDir   string
	Port      int
	SocketDir string
	Status    string // "starting", "stopping", "ready", "standby"; "" early in startup
}

func parsePIDFile(b []byte) (pidFile, error) {
	lines := strings.Split(string(b), "\n")
	var p pidFile
	if len(lines) < 2 {
		return p, errors.New("postmaster.pid: truncated")
	}
	pid, err := strconv.Atoi(strings.TrimSpace(lines[0]))
	if err != nil || pid <= 0 {
		return p, fmt.Errorf("postmaster.pid: bad PID %q", lines[0])
	}
	p.PID, p.DataDir = pid, lines[1]
	if len(lines) > 3 {
		p.Port, _ = strconv.Atoi(strings.TrimSpace(lines[3]))
	}
	if len(lines) > 4 {
		p.SocketDir = lines[4]
	}
	if len(lines) > 7 {
		p.Status = strings.TrimSpace(lines[7])
	}
	return p, nil
}

func readPIDFile(dataDir string) (pidFile, error) {
	b, err := os.ReadFile(filepath.Join(dataDir, "postmaster.pid"))
	if err != nil {
		return pidFile{}, err
	}
	return parsePIDFile(b)
}

// proc identifies a process across PID reuse.
type proc struct {
	pid, ppid int
	start     uint64 // start time in clock ticks since boot
}

// serverOf reports whether pid is a live PostgreSQL process (postmaster or
// child) of the cluster in dataDir: its executable is a postgres binary and
// its working directory is dataDir (the postmaster changes into its data
// directory at startup; its children inherit it). realData is dataDir with
// symbolic links resolved, or the recorded path when it no longer exists.
func serverOf(h *host.Host, pid int, realData string) (proc, bool) {
	st, err := h.ProcStat(pid)
	if err != nil || st.State == "Z" || st.State == "X" {
		return proc{}, false
	}
	exe, err := h.Exe(pid)
	if err != nil || filepath.Base(exe) != "postgres" {
		return proc{}, false
	}
	cwd, err := h.Readlink(fmt.Sprintf("/proc/%d/cwd", pid))
	if err != nil || (cwd != realData && cwd != realData+" (deleted)") {
		return proc{}, false
	}
	return proc{pid: pid, ppid: st.PPID, start: st.Starttime}, true
}

// alive reports whether p still runs (not exited, not a zombie awaiting
// its parent, not a new process that reused the PID).
func alive(h *host.Host, p proc) bool {
	st, err := h.ProcStat(p.pid)
	return err == nil && st.State != "Z" && st.State != "X" && st.Starttime == p.start
}

func waitGone(h *host.Host, p proc, d time.Duration) bool {
	deadline := time.Now().Add(d)
	for alive(h, p) {
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(50 * time.Millisecond)
	}
	return true
}

// scan finds every process of the cluster in realData.
func scan(h *host.Host, realData string) []proc {
	pids, err := h.PIDs()
	if err != nil {
		return nil
	}
	self := os.Getpid()
	var out []proc
	for _, pid := range pids {
		if pid == self {
			continue
		}
		if p, ok := serverOf(h, pid, realData); ok {
			out = append(out, p)
		}
	}
	return out
}

func realDir(p string) string {
	if r, err := filepath.EvalSymlinks(p); err == nil {
		return r
	}
	return p
}

// stopPostmaster stops the cluster in dataDir if it runs, and waits until
// none of its processes is left. Only processes that /proc shows to be
// PostgreSQL servers working in dataDir are signalled: a stale
// postmaster.pid naming a reused PID is ignored.
func stopPostmaster(h *host.Host, dataDir string, t stopTimes) error {
	realData := realDir(dataDir)
	var roots []proc
	if pf, err := readPIDFile(dataDir); err == nil {
		if p, ok := serverOf(h, pf.PID, realData); ok {
			roots = []proc{p}
		}
	}
	if len(roots) == 0 {
		// No usable postmaster.pid (missing, garbled, stale): whatever of
		// the cluster still runs — a postmaster, or children that outlived
		// a killed one — is found by scanning.
		all := scan(h, realData)
		in := map[int]bool{}
		for _, p := range all {
			in[p.pid] = true
		}
		for _, p := range all {
			if !in[p.ppid] {
				roots = append(roots, p)
			}
		}
	}
	var errs []error
	for _, p := range roots {
		if err := stopProc(h, p, t); err != nil {
			errs = append(errs, err)
		}
	}
	if len(errs) > 0 {
		return errors.Join(errs...)
	}
	// Backends notice their postmaster's death and exit on their own; any
	// left after an escalated stop are killed.
	if left := scan(h, realData); len(left) > 0 {
		for _, p := range left {
			syscall.Kill(p.pid, syscall.SIGKILL)
		}
		for _, p := range left {
			if !waitGone(h, p, t.kill) {
				errs = append(errs, fmt.Errorf("PostgreSQL process %d survived SIGKILL", p.pid))
			}
		}
	}
	return errors.Join(errs...)
}

// stopProc asks a postmaster for a fast shutdown, then an immediate one,
// then kills it.
func stopProc(h *host.Host, p proc, t stopTimes) error {
	stages := []struct {
		sig  syscall.Signal
		wait time.Duration
	}{{syscall.SIGINT, t.fast}, {syscall.SIGQUIT, t.quit}, {syscall.SIGKILL, t.kill}}
	for _, s := range stages {
		if !alive(h, p) {
			return nil
		}
		if err := syscall.Kill(p.pid, s.sig); err != nil {
			if errors.Is(err, syscall.ESRCH) {
				return nil
			}
			return fmt.Errorf("signal postmaster %d: %w", p.pid, err)
		}
		if waitGone(h, p, s.wait) {
			return nil
		}
	}
	return fmt.Errorf("postmaster %d did not exit", p.pid)
}
