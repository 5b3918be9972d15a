package knob

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/dbhost/dbhost/internal/host"
	"github.com/dbhost/dbhost/internal/safefile"

	"github.com/dbhost/dbhost/internal/textio"
)

// The undo functions run from the journal's data alone. Within the process
// that made the changes they can do better: restart the server the way the
// caller does (Target.Restart keeps track of the process it starts) and log
// in with the password the caller gave. These live only in memory, keyed by
// data directory.
var inproc = struct {
	sync.Mutex
	restart  map[string]func(context.Context) error
	password map[string]string
}{restart: map[string]func(context.Context) error{}, password: map[string]string{}}

func registerDirRestart(dataDir string, fn func(context.Context) error) {
	inproc.Lock()
	defer inproc.Unlock()
	inproc.restart[realDir(dataDir)] = fn
}

func restarterFor(dataDir string) func(context.Context) error {
	inproc.Lock()
	defer inproc.Unlock()
	return inproc.restart[realDir(dataDir)]
}

// realDir is a directory with symbolic links resolved, when it exists.
func realDir(p string) string {
	if r, err := filepath.EvalSymlinks(p); err == nil {
		return r
	}
	return filepath.Clean(p)
}

func registerPassword(key, pw string) {
	if pw == "" {
		return
	}
	inproc.Lock()
	defer inproc.Unlock()
	inproc.password[key] = pw
}

func passwordFor(key string) string {
	inproc.Lock()
	defer inproc.Unlock()
	return inproc.password[key]
}

// restartTimeout bounds a restart run by an undo: shutting down a busy
// server checkpoints first.
const restartTimeout = 5 * time.Minute

// restartServer restarts the server of dataDir for an undo: with the
// in-process restart when this process registered one, else with argv as
// OS user runAs.
func restartServer(dataDir string, argv []string, runAs string) error {
	ctx, cancel := context.WithTimeout(context.Background(), restartTimeout)
	defer cancel()
	if fn := restarterFor(dataDir); fn != nil {
		return fn(ctx)
	}
	if len(argv) == 0 {
		return errors.New("no restart command is known")
	}
	return runAsUser(ctx, argv, runAs)
}

// runAsUser runs argv as an OS user, in its own process group (a Ctrl-C
// meant for dbhost must not reach a server it starts). Its output goes to a
// file rather than a pipe: a server the command leaves running inherits
// the descriptors, and a pipe would never close.
func runAsUser(ctx context.Context, argv []string, runAs string) error {
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	cmd.Dir = "/"
	attr := &syscall.SysProcAttr{Setpgid: true}
	if runAs != "" {
		u, err := user.Lookup(runAs)
		if err != nil {
			return fmt.Errorf("restart as %s: %w", runAs, err)
		}
		uid, _ := strconv.Atoi(u.Uid)
		gid, _ := strconv.Atoi(u.Gid)
		if uid != os.Geteuid() {
			attr.Credential = &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}
			cmd.Env = append(os.Environ(), "HOME="+u.HomeDir, "USER="+runAs, "LOGNAME="+runAs)
		}
	}
	cmd.SysProcAttr = attr
	out, err := os.CreateTemp("", "dbhost-restart-*.log")
	if err != nil {
		return err
	}
	defer os.Remove(out.Name())
	defer out.Close()
	cmd.Stdout, cmd.Stderr = out, out
	cmd.WaitDelay = 10 * time.Second
	if err := cmd.Run(); err != nil {
		b, _ := os.ReadFile(out.Name())
		return fmt.Errorf("%s: %w: %s", strings.Join(argv, " "), err, textio.LastLines(string(b), 5))
	}
	return nil
}

// serverProcess returns the PID of the live server process whose working
// directory is dataDir (PostgreSQL and MySQL both change into their data
// directory) and whose command name is one of comms, or 0 when none runs:
// a stale PID file, or a PID reused by another process, is no server.
func serverProcess(h *host.Host, pid int, dataDir string, comms ...string) int {
	if pid <= 0 {
		return 0
	}
	comm, err := h.Comm(pid)
	if err != nil || !contains(comms, comm) {
		return 0
	}
	cwd, err := h.Readlink(fmt.Sprintf("/proc/%d/cwd", pid))
	if err != nil {
		return 0
	}
	want, err := filepath.EvalSymlinks(dataDir)
	if err != nil {
		want = filepath.Clean(dataDir)
	}
	if filepath.Clean(cwd) != want {
		return 0
	}
	return pid
}

// startedAfter reports whether process pid started after t. The start
// time is the boot time (now less /proc/uptime) plus the process's start
// in clock ticks, both to 10 ms, so it is off by at most about 20 ms: a
// start within startMargin after t counts as before, which at worst costs
// an undo one restart more than needed, never one too few.
func startedAfter(h *host.Host, pid int, t time.Time) bool {
	st, err := h.ProcStat(pid)
	if err != nil {
		return false
	}
	up, err := h.ReadString("/proc/uptime")
	now := time.Now()
	if err != nil {
		return false
	}
	f := strings.Fields(up)
	if len(f) == 0 {
		return false
	}
	secs, err := strconv.ParseFloat(f[0], 64)
	if err != nil {
		return false
	}
	boot := now.Add(-time.Duration(secs * float64(time.Second)))
	start := boot.Add(time.Duration(st.Starttime) * time.Second / userHZ)
	return start.After(t.Add(startMargin))
}

// userHZ is the unit of /proc/PID/stat's start time (USER_HZ, 100 on
// every Linux architecture dbhost runs on).
const userHZ = 100

const startMargin = 50 * time.Millisecond

// serverFiles is what an undo knows of the server whose configuration
// file it puts back: where it runs and how a new process restarts it.
type serverFiles struct {
	dataDir, pidFile string
	comms            []string // the server's command names
	restartArgv      []string
	restartUser      string
}

// restore puts a configuration file of the server back and, when the
// server runs, makes it read the file again: with a restart when the
// change needed one — unless the server has been started since the file
// was restored — else with a SIGHUP. A server that is not running needs
// neither: it reads the file when it starts. It is the one restart of the
// undo kinds.
func (s serverFiles) restore(f fileState, restart bool) error {
	if _, err := f.restore(); err != nil {
		return fmt.Errorf("restoring %s: %w", f.Path, err)
	}
	h, err := host.Open("/")
	if err != nil {
		return err
	}
	pid := serverProcess(h, readPIDFile(h, s.pidFile), s.dataDir, s.comms...)
	if pid == 0 {
		return nil
	}
	if !restart {
		if err := syscall.Kill(pid, syscall.SIGHUP); err != nil && !errors.Is(err, syscall.ESRCH) {
			return fmt.Errorf("reloading the server (pid %d): %w", pid, err)
		}
		return nil
	}
	changedAt := f.Path
	if !f.Exists {
		changedAt = filepath.Dir(f.Path) // removing a file touches its directory
	}
	st, err := os.Stat(changedAt)
	if err != nil {
		return err
	}
	if startedAfter(h, pid, st.ModTime()) {
		return nil
	}
	if err := restartServer(s.dataDir, s.restartArgv, s.restartUser); err != nil {
		return fmt.Errorf("%s restored, but the server must restart to use it again: %w", f.Path, err)
	}
	return nil
}

// readPIDFile reads the first line of a PID file.
func readPIDFile(h *host.Host, p string) int {
	b, err := h.ReadFile(p)
	if err != nil {
		return 0
	}
	line, _, _ := strings.Cut(string(b), "\n")
	pid, _ := strconv.Atoi(strings.TrimSpace(line))
	return pid
}

// fileState is a file as an undo must put it back.
type fileState struct {
	Path    string `json:"path"`
	Exists  bool   `json:"exists"`
	Content string `json:"content,omitempty"`
	UID     int    `json:"uid"`
	GID     int    `json:"gid"`
	Mode    uint32 `json:"mode"`
}

// readFileState records a file's content, owner and mode.
func readFileState(p string) (fileState, error) {
	fs := fileState{Path: p}
	st, err := os.Stat(p)
	if errors.Is(err, os.ErrNotExist) {
		return fs, nil
	}
	if err != nil {
		return fs, err
	}
	b, err := os.ReadFile(p)
	if err != nil {
		return fs, err
	}
	fs.Exists, fs.Content, fs.Mode = true, string(b), uint32(st.Mode().Perm())
	if sys, ok := st.Sys().(*syscall.Stat_t); ok {
		fs.UID, fs.GID = int(sys.Uid), int(sys.Gid)
	}
	return fs, nil
}

// restore puts the file back as recorded, atomically, and reports whether
// it had to change anything. It is idempotent.
func (fs fileState) restore() (changed bool, err error) {
	if !filepath.IsAbs(fs.Path) || filepath.Clean(fs.Path) != fs.Path {
		return false, fmt.Errorf("refusing to restore %q: not a clean absolute path", fs.Path)
	}
	if !fs.Exists {
		err := os.Remove(fs.Path)
		if errors.Is(err, os.ErrNotExist) {
			return false, nil
		}
		return err == nil, err
	}
	if cur, err := readFileState(fs.Path); err == nil && cur.Exists && cur.Content == fs.Content &&
		cur.UID == fs.UID && cur.GID == fs.GID && cur.Mode == fs.Mode {
		return false, nil
	}
	err = safefile.Write(fs.Path, os.FileMode(fs.Mode), func(w io.Writer) error {
		// The temporary file gets its owner before it replaces the old
		// one: the server must be able to read it at once.
		if f, ok := w.(*os.File); ok {
			if err := f.Chown(fs.UID, fs.GID); err != nil {
				return err
			}
		}
		_, err := io.Copy(w, bytes.NewReader([]byte(fs.Content)))
		return err
	})
	return err == nil, err
}
