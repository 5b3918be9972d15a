package change

// Kinds that version 1 journals of `dbhost experiment` used for database
// knobs before they went through db-setting, file and restart. Only their
// undos remain: a journal a crashed earlier release left is still put back.

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/dbhost/dbhost/internal/engine"
	"github.com/dbhost/dbhost/internal/host"
	"github.com/dbhost/dbhost/internal/journal"
	"github.com/dbhost/dbhost/internal/safefile"
)

// Version 1 kinds of `dbhost experiment`'s database knobs.
const (
	// LegacyPGAutoconf: a PostgreSQL parameter; the data directory's
	// postgresql.auto.conf as it was before ALTER SYSTEM.
	LegacyPGAutoconf = "pg.autoconf"
	// LegacyMySQLGlobal: a SET GLOBAL; the variable's old value.
	LegacyMySQLGlobal = "mysql.global"
	// LegacyMySQLOptionFile: the option file added to the server's
	// !includedir for variables that are not dynamic.
	LegacyMySQLOptionFile = "mysql.optfile"
)

// legacyOptionFile is the only option file a version 1 entry may name.
const legacyOptionFile = "zz-dbhost-experiment.cnf"

var mysqlComms = []string{"mariadbd", "mysqld"}

func legacyKnobKinds(cfg Config) journal.Kinds {
	return journal.Kinds{
		LegacyPGAutoconf:      func(d json.RawMessage) error { return undoLegacyPGAutoconf(cfg, d) },
		LegacyMySQLGlobal:     func(d json.RawMessage) error { return undoLegacyMySQLGlobal(cfg, d) },
		LegacyMySQLOptionFile: func(d json.RawMessage) error { return undoLegacyMySQLOptionFile(cfg, d) },
	}
}

// legacyMySQLOptionFile is the data of LegacyMySQLOptionFile.
type legacyMySQLOptionFile struct {
	DataDir     string     `json:"data_dir"`
	PIDFile     string     `json:"pid_file"`
	File        legacyFile `json:"file"`
	RestartArgv []string   `json:"restart_argv,omitempty"`
	RestartUser string     `json:"restart_user,omitempty"`
}

// undoLegacyMySQLOptionFile puts dbhost's option file back (removes it)
// and restarts the server unless it has been started since.
func undoLegacyMySQLOptionFile(cfg Config, raw json.RawMessage) error {
	var d legacyMySQLOptionFile
	if err := json.Unmarshal(raw, &d); err != nil {
		return err
	}
	if filepath.Base(d.File.Path) != legacyOptionFile || !filepath.IsAbs(d.File.Path) {
		return fmt.Errorf("journal entry names %q: not dbhost's option file", d.File.Path)
	}
	if err := cfg.TrustedDir(filepath.Dir(d.File.Path)); err != nil {
		return err
	}
	srv := legacyServer{dataDir: d.DataDir, pidFile: d.PIDFile, comms: mysqlComms, restart: legacyRestarter(d.RestartArgv, d.RestartUser)}
	return srv.restore(cfg, d.File, true)
}

// legacyMySQLGlobal is the data of LegacyMySQLGlobal.
type legacyMySQLGlobal struct {
	Net      string `json:"net"`
	Addr     string `json:"addr"`
	DataDir  string `json:"data_dir"`
	Variable string `json:"variable"`
	Old      string `json:"old"`
	// Started is when the server started (Unix seconds): a server started
	// later has lost the SET GLOBAL.
	Started int64 `json:"started"`
}

// undoLegacyMySQLGlobal sets a variable back on the server discovered at
// the journaled address, which must be the one of the journaled data
// directory; logged in as Config.Engine says (no password was kept). A
// server that is down, restarted since, or replaced lost the change.
func undoLegacyMySQLGlobal(cfg Config, raw json.RawMessage) error {
	var d legacyMySQLGlobal
	if err := json.Unmarshal(raw, &d); err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	h, done, err := cfg.host()
	if err != nil {
		return err
	}
	defer done()
	ep := engine.Endpoint{Engine: engine.MySQL, Host: d.Addr}
	if d.Net != "unix" {
		hostName, port, err := net.SplitHostPort(d.Addr)
		if err != nil {
			return fmt.Errorf("journal entry names address %q: %w", d.Addr, err)
		}
		ep.Host = hostName
		ep.Port, _ = strconv.Atoi(port)
	} else if _, err := os.Stat(d.Addr); errors.Is(err, os.ErrNotExist) {
		return nil // the server is down
	}
	ep, err = engine.Locate(ctx, h, ep)
	var wrong *engine.WrongServerError
	switch {
	case errors.As(err, &wrong), errors.Is(err, syscall.ECONNREFUSED), errors.Is(err, syscall.ENOENT):
		return nil
	case err != nil:
		return fmt.Errorf("set %s back to %q at %s: %w", d.Variable, d.Old, d.Addr, err)
	}
	in := ep.Instance()
	if !sameDir(in.DataDir, d.DataDir) || startedAfter(h, in.PID, time.Unix(d.Started+2, 0)) {
		return nil // another server now answers there, or it restarted
	}
	conn, err := engine.OpenSettings(ctx, h, in, cfg.Engine)
	if err != nil {
		return fmt.Errorf("set %s back to %q on %s: %w", d.Variable, d.Old, in.Name(), err)
	}
	defer conn.Close()
	if err := conn.Restore(ctx, d.Variable, engine.SettingState{Value: d.Old}, false); err != nil {
		return fmt.Errorf("set %s back to %q on %s: %w", d.Variable, d.Old, in.Name(), err)
	}
	return nil
}

func sameDir(a, b string) bool {
	if a == "" || b == "" {
		return true
	}
	ra, err1 := filepath.EvalSymlinks(a)
	rb, err2 := filepath.EvalSymlinks(b)
	if err1 != nil || err2 != nil {
		return filepath.Clean(a) == filepath.Clean(b)
	}
	return ra == rb
}

// legacyFile is a file as a version 1 knob entry recorded it.
type legacyFile struct {
	Path    string `json:"path"`
	Exists  bool   `json:"exists"`
	Content string `json:"content,omitempty"`
	UID     int    `json:"uid"`
	GID     int    `json:"gid"`
	Mode    uint32 `json:"mode"`
}

// legacyPGAutoconf is the data of LegacyPGAutoconf.
type legacyPGAutoconf struct {
	DataDir     string     `json:"data_dir"`
	File        legacyFile `json:"file"`
	Restart     bool       `json:"restart"`
	RestartArgv []string   `json:"restart_argv,omitempty"`
	RestartUser string     `json:"restart_user,omitempty"`
}

// undoLegacyPGAutoconf puts postgresql.auto.conf back and makes the server
// use it again: a restart when a start-time parameter was changed and the
// server has not been started since, else a SIGHUP. A server that is not
// running needs neither.
func undoLegacyPGAutoconf(cfg Config, raw json.RawMessage) error {
	var d legacyPGAutoconf
	if err := json.Unmarshal(raw, &d); err != nil {
		return err
	}
	if !filepath.IsAbs(d.DataDir) || d.File.Path != filepath.Join(d.DataDir, "postgresql.auto.conf") {
		return fmt.Errorf("journal entry names %q in %q: not a data directory's postgresql.auto.conf", d.File.Path, d.DataDir)
	}
	if _, err := os.Stat(d.DataDir); errors.Is(err, os.ErrNotExist) {
		return nil // the cluster is gone: nothing to restore
	}
	srv := legacyServer{dataDir: d.DataDir, pidFile: filepath.Join(d.DataDir, "postmaster.pid"),
		comms: []string{"postgres", "postmaster"}, restart: legacyRestarter(d.RestartArgv, d.RestartUser)}
	return srv.restore(cfg, d.File, d.Restart)
}

// legacyServer is what a version 1 entry knew of the server whose
// configuration file it puts back.
type legacyServer struct {
	dataDir, pidFile string
	comms            []string // the server's command names
	restart          Restarter
}

// legacyRestarter is the restart a version 1 entry recorded: "systemctl
// restart UNIT" (run by name then) is the unit's restart, anything else
// the command as its user.
func legacyRestarter(argv []string, user string) Restarter {
	if len(argv) == 3 && argv[0] == "systemctl" && argv[1] == "restart" {
		return Unit{Name: argv[2], Allowed: true}
	}
	return UserCommand{Argv: argv, User: user}
}

// restore puts f back and, when the server runs, makes it read it again:
// with a restart when the change needed one (unless the server started
// after the file was put back), else with a SIGHUP.
func (s legacyServer) restore(cfg Config, f legacyFile, restart bool) error {
	if err := f.restore(); err != nil {
		return fmt.Errorf("restoring %s: %w", f.Path, err)
	}
	h, done, err := cfg.host()
	if err != nil {
		return err
	}
	defer done()
	pid := ServerPID(h, s.pidFile, s.dataDir, s.comms...)
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
	ctx, cancel := context.WithTimeout(context.Background(), RestartLimit)
	defer cancel()
	if err := s.restart.restart(ctx, cfg); err != nil {
		return fmt.Errorf("%s restored, but the server must restart to use it again: %w", f.Path, err)
	}
	return nil
}

// restore writes the file back as recorded (or removes it), atomically,
// owner first so that the server can read it at once. Idempotent.
func (f legacyFile) restore() error {
	if !filepath.IsAbs(f.Path) || filepath.Clean(f.Path) != f.Path {
		return fmt.Errorf("refusing to restore %q: not a clean absolute path", f.Path)
	}
	if !f.Exists {
		if err := os.Remove(f.Path); err != nil && !errors.Is(err, os.ErrNotExist) {
			return err
		}
		return nil
	}
	if b, err := os.ReadFile(f.Path); err == nil && string(b) == f.Content {
		var st syscall.Stat_t
		if syscall.Stat(f.Path, &st) == nil && int(st.Uid) == f.UID && int(st.Gid) == f.GID && st.Mode&0o777 == f.Mode {
			return nil
		}
	}
	return safefile.Write(f.Path, os.FileMode(f.Mode), func(w io.Writer) error {
		if file, ok := w.(*os.File); ok {
			if err := file.Chown(f.UID, f.GID); err != nil {
				return err
			}
		}
		_, err := io.Copy(w, bytes.NewReader([]byte(f.Content)))
		return err
	})
}

// ServerPID is the live server process named by pidFile whose command is
// one of comms and whose working directory is dataDir (PostgreSQL and
// MySQL both change into their data directory), or 0: a stale PID file,
// or a PID another process reused, is no server.
func ServerPID(h *host.Host, pidFile, dataDir string, comms ...string) int {
	b, err := h.ReadFile(pidFile)
	if err != nil {
		return 0
	}
	line, _, _ := strings.Cut(string(b), "\n")
	pid, _ := strconv.Atoi(strings.TrimSpace(line))
	if pid <= 0 {
		return 0
	}
	if comm, err := h.Comm(pid); err != nil || !slices.Contains(comms, comm) {
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

// startedAfter reports whether process pid started after t (boot time
// plus its start in clock ticks, both to 10 ms): a start within 50 ms
// after t counts as before, which costs at worst one restart too many.
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
	const userHZ = 100 // the unit of /proc/PID/stat's start time
	boot := now.Add(-time.Duration(secs * float64(time.Second)))
	start := boot.Add(time.Duration(st.Starttime) * time.Second / userHZ)
	return start.After(t.Add(50 * time.Millisecond))
}
