package change

// Database settings change through the engine profile's live connection
// (engine.SettingsConn: PostgreSQL ALTER SYSTEM and a reload, MySQL SET
// GLOBAL, Redis CONFIG SET), journaled with the state they replace and the
// server they were made on, so that an undo in a later process finds the
// same, verified, server again and logs in with Config.Engine.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/dbhost/dbhost/internal/engine"
	"github.com/dbhost/dbhost/internal/host"
)

// ServerRef names a discovered server so that a later process (rollback,
// recovery) finds the same one again. It holds no credentials.
type ServerRef struct {
	Engine  string `json:"engine"`
	Name    string `json:"name"`
	DataDir string `json:"data_dir"`
	Port    int    `json:"port"`
	// Unit is the systemd unit the server runs under ("" none): the only
	// way a restart of a discovered server is made.
	Unit string `json:"unit,omitempty"`
	// PID is the main process when planned: where to look first (it is
	// described again and must match; a restart changes it). Start is its
	// start time (clock ticks after boot): the same PID with another start
	// is another process.
	PID   int    `json:"pid,omitempty"`
	Start uint64 `json:"start,omitempty"`
}

func (r ServerRef) String() string { return r.Name }

// settingUndo is what the journal keeps before a setting is changed.
type settingUndo struct {
	Server  ServerRef `json:"server"`
	Key     string    `json:"key"`
	Restart bool      `json:"restart,omitempty"`
	// Saved: the entry the server kept itself; Old: the value it ran with.
	Saved      *string `json:"saved"`
	Old        string  `json:"old"`
	OptionOnly bool    `json:"option_only,omitempty"`
}

// Timeout bounds one exchange with a server (o.Timeout, else 5s).
func Timeout(o engine.Options) time.Duration {
	if o.Timeout > 0 {
		return o.Timeout
	}
	return 5 * time.Second
}

// Setting journals srv and key with the state conn's Get reads, changes
// the setting, and waits until the server runs with value; for a restart
// setting it returns as soon as the server says a restart is pending
// (pending true). conn must be a connection to srv.
func (c *Changer) Setting(ctx context.Context, conn engine.SettingsConn, srv ServerRef, key, value string, restart bool) (pending bool, err error) {
	cur, err := conn.Get(ctx, key)
	if err != nil {
		return false, err
	}
	if err := c.j.Record(KindSetting, srv.Name+" "+key, settingUndo{Server: srv, Key: key, Restart: restart,
		Saved: cur.Saved, Old: cur.Value, OptionOnly: cur.OptionOnly}); err != nil {
		return false, err
	}
	if err := conn.Change(ctx, key, value, restart); err != nil {
		return false, err
	}
	c.cfg.step("saved " + srv.Name + " " + key)
	// A server may apply a reload asynchronously: wait for it.
	for {
		in, pending, err := conn.Applied(ctx, key, value, restart)
		switch {
		case err != nil:
			return false, err
		case in:
			return false, nil
		case pending && restart:
			return true, nil
		}
		select {
		case <-ctx.Done():
			return false, errors.New("the server does not run with the new value after the change (is it set where the server reads it later, on its command line or in a later file?)")
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// undoSetting puts a setting back as it was read. Idempotent.
func undoSetting(cfg Config, data json.RawMessage) error {
	var u settingUndo
	if err := json.Unmarshal(data, &u); err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*Timeout(cfg.Engine))
	defer cancel()
	s, err := cfg.Dial(ctx, u.Server)
	if err != nil {
		return fmt.Errorf("setting %s of %s not put back: %w", u.Key, u.Server, err)
	}
	defer s.Close()
	before := engine.SettingState{Value: u.Old, Saved: u.Saved, Restart: u.Restart, OptionOnly: u.OptionOnly}
	if err := s.Restore(ctx, u.Key, before, u.Restart); err != nil {
		return fmt.Errorf("setting %s of %s not put back: %w", u.Key, u.Server, err)
	}
	return nil
}

// Dial finds the server ref names among the running processes again (same
// engine, data directory and port, trusted) and logs in to it with
// cfg.Engine; the engine's connection verifies that the answering process
// is that server.
func (cfg Config) Dial(ctx context.Context, ref ServerRef) (engine.SettingsConn, error) {
	h, done, err := cfg.host()
	if err != nil {
		return nil, err
	}
	defer done()
	opts := cfg.Engine
	// Only a trusted server is the one a plan was made for: a look-alike
	// that names the same data directory and port is not.
	find := func(t *engine.Table) *engine.Instance {
		o := opts
		o.NoConnect = true
		insts, _ := engine.Discover(ctx, h, t, o)
		for _, in := range insts {
			if string(in.Engine) != ref.Engine || in.DataDir != ref.DataDir || in.Port != ref.Port || !in.Trusted() {
				continue
			}
			if in.PID == ref.PID && ref.Start != 0 && StartTime(h, in.PID) != ref.Start {
				continue // the PID was reused
			}
			return in
		}
		return nil
	}
	// The planned process first: describing one process is much cheaper
	// than the whole table.
	if p, err := process(h, ref.PID); err == nil {
		if in := find(engine.TableFrom(h, []engine.Process{p})); in != nil {
			return engine.OpenSettings(ctx, h, in, opts)
		}
	}
	t, err := engine.ReadTable(h)
	if err != nil {
		return nil, err
	}
	if in := find(t); in != nil {
		return engine.OpenSettings(ctx, h, in, opts)
	}
	return nil, fmt.Errorf("%s (data directory %s) is not running", ref.Name, ref.DataDir)
}

// StartTime is the start of a process in clock ticks after boot (0:
// unknown).
func StartTime(h *host.Host, pid int) uint64 {
	if h == nil {
		return 0
	}
	st, err := h.ProcStat(pid)
	if err != nil {
		return 0
	}
	return st.Starttime
}

func process(h *host.Host, pid int) (engine.Process, error) {
	if pid <= 0 {
		return engine.Process{}, errors.New("no pid")
	}
	st, err := h.ProcStat(pid)
	if err != nil {
		return engine.Process{}, err
	}
	status, err := h.Status(pid)
	if err != nil {
		return engine.Process{}, err
	}
	return engine.Process{PID: pid, PPID: st.PPID, Comm: st.Comm, UID: int(status.UIDs[1]), GID: int(status.GIDs[1])}, nil
}
