package change

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/dbhost/dbhost/internal/textio"
)

// RestartLimit bounds a server's restart: a large shared_buffers or buffer
// pool takes a checkpoint and a flush to stop.
var RestartLimit = 5 * time.Minute

// systemctlPaths are where systemctl is run from (by absolute path, only
// when root alone can change it) unless Config.Systemctl says otherwise.
var systemctlPaths = []string{"/usr/bin/systemctl", "/bin/systemctl"}

// A Restarter restarts one server: a systemd unit (only when allowed) or
// a control command run as the server's user (pg_ctl of a throwaway
// cluster).
type Restarter interface {
	restart(ctx context.Context, cfg Config) error
	record() restartUndo
	String() string
}

// Unit restarts a discovered server through the systemd unit it runs
// under: dbhost does not know how a server under no unit was started.
type Unit struct {
	Name string
	// Allowed: the user allowed the restart (--allow-restart).
	Allowed bool
	// Ready, if set, is polled after the restart until it returns nil
	// (the server serves with the values the restart was for).
	Ready func(ctx context.Context) error
}

func (u Unit) String() string { return "unit " + u.Name }

func (u Unit) record() restartUndo { return restartUndo{Unit: u.Name} }

// Run restarts the unit now, with systemctl found as cfg says (by
// absolute path, a binary only root can change); for a caller that
// restarts outside a change (an experiment's trial).
func (u Unit) Run(ctx context.Context, cfg Config) error { return u.restart(ctx, cfg) }

func (u Unit) restart(ctx context.Context, cfg Config) error {
	switch {
	case u.Name == "":
		return errors.New("not restarted: it runs under no systemd unit, so dbhost does not know how it was started; restart it yourself")
	case !u.Allowed:
		return fmt.Errorf("not restarted (give --allow-restart, or systemctl restart %s)", u.Name)
	}
	bin, err := cfg.findSystemctl()
	if err != nil {
		return fmt.Errorf("not restarted: %v", err)
	}
	cmd := exec.CommandContext(ctx, bin, "restart", u.Name)
	cmd.Env, cmd.Dir = []string{"PATH=/usr/sbin:/usr/bin:/sbin:/bin", "LC_ALL=C"}, "/"
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("restart failed: %v %s", err, firstLine(string(out)))
	}
	return waitReady(ctx, u.Ready)
}

// UserCommand restarts a server by running Argv (a binary only root can
// change, by absolute path, no shell) as User, in its own process group (a
// Ctrl-C meant for dbhost must not reach the server it starts).
type UserCommand struct {
	Argv  []string
	User  string // "" the caller's own
	Ready func(ctx context.Context) error
}

func (u UserCommand) String() string { return strings.Join(u.Argv, " ") }

func (u UserCommand) record() restartUndo { return restartUndo{Argv: u.Argv, User: u.User} }

func (u UserCommand) restart(ctx context.Context, cfg Config) error {
	if len(u.Argv) == 0 || !filepath.IsAbs(u.Argv[0]) {
		return errors.New("no restart command by absolute path is known")
	}
	h, done, err := cfg.host()
	if err != nil {
		return err
	}
	err = h.CheckTrusted(u.Argv[0])
	done()
	if err != nil {
		return fmt.Errorf("not running %s: %w", u.Argv[0], err)
	}
	cmd := exec.CommandContext(ctx, u.Argv[0], u.Argv[1:]...)
	cmd.Dir = "/"
	attr := &syscall.SysProcAttr{Setpgid: true}
	if u.User != "" {
		pw, err := user.Lookup(u.User)
		if err != nil {
			return fmt.Errorf("restart as %s: %w", u.User, err)
		}
		uid, _ := strconv.Atoi(pw.Uid)
		gid, _ := strconv.Atoi(pw.Gid)
		if uid != os.Geteuid() {
			attr.Credential = &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}
			cmd.Env = append(os.Environ(), "HOME="+pw.HomeDir, "USER="+u.User, "LOGNAME="+u.User)
		}
	}
	cmd.SysProcAttr = attr
	// A file rather than a pipe: a server the command leaves running
	// inherits the descriptors, and a pipe would never close.
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
		return fmt.Errorf("%s: %w: %s", u, err, textio.LastLines(string(b), 5))
	}
	return waitReady(ctx, u.Ready)
}

// Restart restarts the server r names, within RestartLimit, and waits
// until it is ready. A restart is not journaled: it is not undone, a
// rollback puts the values back and says the server must restart (or the
// caller journals RestartOnUndo first).
func (c *Changer) Restart(ctx context.Context, r Restarter) error {
	ctx, cancel := context.WithTimeout(ctx, RestartLimit)
	defer cancel()
	return r.restart(ctx, c.cfg)
}

// RestartOnUndo journals that r is restarted when the changes journaled
// after this one have been put back: record it before changing values
// that take effect only at a restart, so that the undo restarts the server
// with the old ones. Ready is not kept (a later process cannot run it).
func (c *Changer) RestartOnUndo(r Restarter) error {
	return c.j.Record(KindRestart, "restart "+r.String(), r.record())
}

// restartUndo is the journaled restarter.
type restartUndo struct {
	Unit string   `json:"unit,omitempty"`
	Argv []string `json:"argv,omitempty"`
	User string   `json:"user,omitempty"`
}

func undoRestart(cfg Config, data json.RawMessage) error {
	var u restartUndo
	if err := json.Unmarshal(data, &u); err != nil {
		return err
	}
	var r Restarter = UserCommand{Argv: u.Argv, User: u.User}
	if u.Unit != "" {
		r = Unit{Name: u.Unit, Allowed: true} // allowed when it was journaled
	}
	ctx, cancel := context.WithTimeout(context.Background(), RestartLimit)
	defer cancel()
	if err := r.restart(ctx, cfg); err != nil {
		return fmt.Errorf("restart %s: %w", r, err)
	}
	return nil
}

func waitReady(ctx context.Context, ready func(context.Context) error) error {
	if ready == nil {
		return nil
	}
	for {
		err := ready(ctx)
		if err == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("restarted, but: %v", err)
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// findSystemctl returns the first trusted systemctl of cfg.Systemctl (nil:
// systemctlPaths).
func (cfg Config) findSystemctl() (string, error) {
	paths := cfg.Systemctl
	if len(paths) == 0 {
		paths = systemctlPaths
	}
	h, done, err := cfg.host()
	if err != nil {
		return "", err
	}
	defer done()
	err = fmt.Errorf("no systemctl in %s", strings.Join(paths, ", "))
	for _, p := range paths {
		if !filepath.IsAbs(p) {
			continue // run by absolute path only, never looked up in PATH
		}
		if _, e := os.Lstat(p); e != nil {
			continue
		}
		if err = h.CheckTrusted(p); err == nil {
			return p, nil
		}
	}
	return "", err
}

func firstLine(s string) string {
	s, _, _ = strings.Cut(strings.TrimSpace(s), "\n")
	if len(s) > 300 {
		s = s[:300] + "..."
	}
	return s
}
