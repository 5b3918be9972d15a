package apply

// Database settings: a finding's fix.Config changes applied to the running
// server the audit discovered, persistently and at run time in one step
// (PostgreSQL: ALTER SYSTEM, then pg_reload_conf()), journaled with the
// entry they replace so that rollback and recovery put it back.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path"
	"sync"
	"time"

	"github.com/dbhost/dbhost/internal/engine"
	"github.com/dbhost/dbhost/internal/facts"
	"github.com/dbhost/dbhost/internal/fix"
	"github.com/dbhost/dbhost/internal/host"
	"github.com/dbhost/dbhost/internal/journal"
)

// KindSetting is the journal kind of a database setting apply changes.
const KindSetting = "db-setting"

func init() { journal.RegisterKind(KindSetting, undoSetting) }

// SettingPlan is one database setting changed on a running server.
type SettingPlan struct {
	Server ServerRef `json:"server"`
	Key    string    `json:"key"`
	// Old is the value the server runs with; New the fix's.
	Old string `json:"old"`
	New string `json:"new"`
	// Saved is the setting's ALTER SYSTEM entry before the apply (nil:
	// none): what verify compares and rollback puts back.
	Saved *string `json:"saved"`
	// Restart: the server takes the value only when it restarts.
	Restart   bool     `json:"restart,omitempty"`
	Unchanged bool     `json:"unchanged,omitempty"`
	Findings  []string `json:"findings"`
	// OptionOnly: a MySQL option that is no server variable (it cannot
	// be read back at run time); only the option file sets it.
	OptionOnly bool `json:"option_only,omitempty"`
}

// How says how the setting is changed, for people.
func (s SettingPlan) How() string {
	if s.Server.Engine == string(engine.Postgres) {
		if s.Restart {
			return "ALTER SYSTEM; takes effect at the next restart"
		}
		return "ALTER SYSTEM + pg_reload_conf()"
	}
	if s.Restart {
		return "the option file in its included directory; takes effect at the next restart"
	}
	return "SET GLOBAL, kept by the option file in its included directory"
}

// ServerRef names a discovered server so that a later process (rollback,
// recovery) finds the same one again. It holds no credentials.
type ServerRef struct {
	Engine  string `json:"engine"`
	Name    string `json:"name"`
	DataDir string `json:"data_dir"`
	Port    int    `json:"port"`
	// Unit is the systemd unit the server runs under ("" none): the only
	// way --allow-restart restarts it.
	Unit string `json:"unit,omitempty"`
	// PID is the main process when planned: where to look first (it is
	// described again and must match; a restart changes it).
	PID int `json:"pid,omitempty"`
}

func (r ServerRef) String() string { return r.Name }

// Servers are the running servers a plan may change settings of.
type Servers struct {
	Instances []*facts.Instance
	// Conn says how to log in (the --pg/--mysql strings, the timeout).
	Conn engine.Options
}

// savedSetting is a setting as a server holds it.
type savedSetting struct {
	Value   string  // what the server runs with
	Saved   *string // the ALTER SYSTEM entry, nil when none
	Restart bool    // takes a new value only at a restart
	Pending bool    // a changed value waits for a restart
	// Overridden says why a saved value would not be used, or "".
	Overridden string
}

// server is a connection to one database server's settings.
type server interface {
	get(ctx context.Context, key string) (savedSetting, error)
	// change makes the server run with sp.New (and, PostgreSQL, saves it).
	change(ctx context.Context, sp SettingPlan) error
	// restore puts back what u recorded.
	restore(ctx context.Context, u settingUndo) error
	// applied reports whether the server runs with sp.New, or waits for a
	// restart to do so.
	applied(ctx context.Context, sp SettingPlan) (inEffect, pending bool, err error)
	close()
}

var (
	connMu sync.Mutex
	conn   engine.Options
)

// SetConnection sets how rollback and recovery, which may run in a later
// process, log in to the servers whose settings they put back.
func SetConnection(o engine.Options) {
	connMu.Lock()
	conn = o
	connMu.Unlock()
}

func connection() engine.Options {
	connMu.Lock()
	defer connMu.Unlock()
	return conn
}

// dialServer finds the server ref names among the running processes again
// (same engine, data directory and port) and logs in to it; the engine's
// connect verifies that the answering process is that server.
func dialServer(ctx context.Context, ref ServerRef, opts engine.Options) (server, error) {
	h, err := host.Open("/")
	if err != nil {
		return nil, err
	}
	defer h.Close()
	find := func(t *engine.Table) *engine.Instance {
		insts, _ := engine.Discover(ctx, h, t, engine.Options{NoConnect: true, Timeout: opts.Timeout})
		for _, in := range insts {
			if string(in.Engine) == ref.Engine && in.DataDir == ref.DataDir && in.Port == ref.Port {
				return in
			}
		}
		return nil
	}
	// The planned process first: describing one process is much cheaper
	// than the whole table.
	if p, err := process(h, ref.PID); err == nil {
		if in := find(engine.TableFrom(h, []engine.Process{p})); in != nil {
			return connect(ctx, h, in, opts)
		}
	}
	t, err := engine.ReadTable(h)
	if err != nil {
		return nil, err
	}
	if in := find(t); in != nil {
		return connect(ctx, h, in, opts)
	}
	return nil, fmt.Errorf("%s (data directory %s) is not running", ref.Name, ref.DataDir)
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

func connect(ctx context.Context, h *host.Host, in *engine.Instance, opts engine.Options) (server, error) {
	switch in.Engine {
	case engine.Postgres:
		return connectPG(ctx, h, in, opts)
	case engine.MySQL:
		return connectMySQL(ctx, h, in, opts)
	}
	return nil, fmt.Errorf("settings of %s are not applied by this version", in.Engine)
}

// settingsEngines are the engines whose settings apply changes.
var settingsEngines = map[engine.Engine]bool{engine.Postgres: true, engine.MySQL: true}

// planSettings reads the current state of every Config change of the
// selected findings on the servers it reaches. Changes it cannot plan are
// returned as reasons, per instance and key.
func planSettings(srv *Servers, fc fix.Context, selected []fix.Item) (plans []SettingPlan, skipped map[string]string) {
	skipped = map[string]string{}
	byName := map[string]*facts.Instance{}
	for _, in := range srv.Instances {
		byName[in.Name()] = in
	}
	conns := map[string]server{}
	defer func() {
		for _, c := range conns {
			c.close()
		}
	}()
	seen := map[string]int{}
	for _, it := range selected {
		t := Target{ID: it.ID, Subject: it.Subject}.String()
		for _, c := range it.Fix.Config {
			id := c.Instance + " " + c.Key
			if i, ok := seen[id]; ok {
				plans[i].Findings = append(plans[i].Findings, t)
				continue
			}
			in := byName[c.Instance]
			switch {
			case in == nil:
				skipped[id] = "the server is not running"
				continue
			case !settingsEngines[in.Engine]:
				skipped[id] = fmt.Sprintf("%s settings are not applied by this version", in.Engine)
				continue
			case in.DataDir == "":
				skipped[id] = "its data directory is unknown, so a later rollback could not find it again"
				continue
			case in.Engine == engine.MySQL:
				if why := includeDirRefused(in, fc); why != "" {
					skipped[id] = why
					continue
				}
			}
			s, ok := conns[c.Instance]
			if !ok {
				h, err := host.Open("/")
				if err != nil {
					skipped[id] = err.Error()
					continue
				}
				ctx, cancel := context.WithTimeout(context.Background(), timeout(srv.Conn))
				s, err = connect(ctx, h, in.Instance, srv.Conn)
				cancel()
				h.Close()
				if err != nil {
					skipped[id] = "cannot log in: " + err.Error()
					continue
				}
				conns[c.Instance] = s
			}
			ctx, cancel := context.WithTimeout(context.Background(), timeout(srv.Conn))
			cur, err := s.get(ctx, c.Key)
			cancel()
			optionOnly := false
			if err != nil && in.Engine == engine.MySQL && c.Restart {
				// e.g. symbolic_links: an option without a variable.
				cur, err, optionOnly = savedSetting{}, nil, true
			}
			if err == nil && cur.Overridden != "" {
				err = errors.New(cur.Overridden)
			}
			if err != nil {
				skipped[id] = err.Error()
				continue
			}
			ref := ServerRef{Engine: string(in.Engine), Name: in.Name(), DataDir: in.DataDir, Port: in.Port, PID: in.PID}
			if in.Unit != nil && in.Unit.How == "cgroup" {
				ref.Unit = in.Unit.Name
			}
			sp := SettingPlan{Server: ref, Key: c.Key, Old: cur.Value, New: c.Value, Saved: cur.Saved,
				Restart: cur.Restart || c.Restart, Findings: []string{t}, OptionOnly: optionOnly}
			switch in.Engine {
			case engine.Postgres:
				sp.Unchanged = cur.Saved != nil && *cur.Saved == c.Value
			case engine.MySQL:
				sp.Unchanged = sp.Restart || sameMySQLValue(cur.Value, c.Value)
			}
			seen[id] = len(plans)
			plans = append(plans, sp)
		}
	}
	return plans, skipped
}

func timeout(o engine.Options) time.Duration {
	if o.Timeout > 0 {
		return o.Timeout
	}
	return 5 * time.Second
}

// settingUndo is what the journal keeps before a setting is saved.
type settingUndo struct {
	Server ServerRef `json:"server"`
	Key    string    `json:"key"`
	// Saved: PostgreSQL's ALTER SYSTEM entry; Old: the running value
	// (MySQL's SET GLOBAL).
	Saved *string `json:"saved"`
	Old   string  `json:"old"`
}

// undoSetting puts a setting's previous ALTER SYSTEM entry back (or
// removes the entry) and reloads. Idempotent.
func undoSetting(data json.RawMessage) error {
	var u settingUndo
	if err := json.Unmarshal(data, &u); err != nil {
		return err
	}
	opts := connection()
	ctx, cancel := context.WithTimeout(context.Background(), 3*timeout(opts))
	defer cancel()
	s, err := dialServer(ctx, u.Server, opts)
	if err != nil {
		return fmt.Errorf("setting %s of %s not put back: %w", u.Key, u.Server, err)
	}
	defer s.close()
	if err := s.restore(ctx, u); err != nil {
		return fmt.Errorf("setting %s of %s not put back: %w", u.Key, u.Server, err)
	}
	return nil
}

// applySettings journals and saves each setting, then waits until the
// server runs with it (or, for a restart setting, until it says a restart
// is pending).
func applySettings(j *journal.Journal, settings []SettingPlan, opts Options) error {
	conns := map[ServerRef]server{}
	defer func() {
		for _, c := range conns {
			c.close()
		}
	}()
	co := connection()
	for _, sp := range settings {
		ctx, cancel := context.WithTimeout(context.Background(), 3*timeout(co))
		err := applySetting(ctx, j, conns, sp, co, opts)
		cancel()
		if err != nil {
			return fmt.Errorf("setting %s of %s: %w", sp.Key, sp.Server, err)
		}
	}
	return nil
}

func applySetting(ctx context.Context, j *journal.Journal, conns map[ServerRef]server, sp SettingPlan, co engine.Options, opts Options) error {
	s, ok := conns[sp.Server]
	if !ok {
		var err error
		if s, err = dialServer(ctx, sp.Server, co); err != nil {
			return err
		}
		conns[sp.Server] = s
	}
	cur, err := s.get(ctx, sp.Key)
	if err != nil {
		return err
	}
	if why := changedSince(cur, sp); why != "" {
		return errors.New("refusing to apply: " + why)
	}
	if err := j.Record(KindSetting, sp.Server.Name+" "+sp.Key, settingUndo{Server: sp.Server, Key: sp.Key, Saved: sp.Saved, Old: sp.Old}); err != nil {
		return err
	}
	if err := s.change(ctx, sp); err != nil {
		return err
	}
	opts.step("saved " + sp.Server.Name + " " + sp.Key)
	// The server applies a reload asynchronously: wait for it.
	for {
		in, pending, err := s.applied(ctx, sp)
		switch {
		case err != nil:
			return err
		case in && !sp.Restart, pending && sp.Restart, in && sp.Restart:
			return nil
		}
		select {
		case <-ctx.Done():
			return errors.New("the server did not take the new value after the reload (is it set on its command line, or in a file read after postgresql.auto.conf?)")
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// changedSince says how a setting differs from what the plan read, or "":
// PostgreSQL's saved entry, MySQL's running value.
func changedSince(cur savedSetting, sp SettingPlan) string {
	if sp.Server.Engine == string(engine.MySQL) {
		if cur.Value != sp.Old {
			return fmt.Sprintf("changed since the plan (it runs with %q, the plan read %q)", cur.Value, sp.Old)
		}
		return ""
	}
	if !sameSaved(cur.Saved, sp.Saved) {
		return fmt.Sprintf("changed since the plan (its saved entry is %s, the plan read %s)", showSaved(cur.Saved), showSaved(sp.Saved))
	}
	return ""
}

func sameSaved(a, b *string) bool {
	if a == nil || b == nil {
		return a == nil && b == nil
	}
	return *a == *b
}

func showSaved(s *string) string {
	if s == nil {
		return "no entry"
	}
	return fmt.Sprintf("%q", *s)
}

// verifySettings refuses an apply over a setting someone changed since the
// plan read it.
func verifySettings(settings []SettingPlan) error {
	co := connection()
	conns := map[ServerRef]server{}
	defer func() {
		for _, c := range conns {
			c.close()
		}
	}()
	for _, sp := range settings {
		ctx, cancel := context.WithTimeout(context.Background(), 3*timeout(co))
		err := func() error {
			s, ok := conns[sp.Server]
			if !ok {
				var err error
				if s, err = dialServer(ctx, sp.Server, co); err != nil {
					return err
				}
				conns[sp.Server] = s
			}
			cur, err := s.get(ctx, sp.Key)
			if err != nil {
				return err
			}
			if why := changedSince(cur, sp); why != "" {
				return errors.New(why)
			}
			return nil
		}()
		cancel()
		if err != nil {
			return fmt.Errorf("refusing to apply: setting %s of %s: %w", sp.Key, sp.Server, err)
		}
	}
	return nil
}

// trustedDir refuses a directory others than root could change (it, or a
// directory or link on its path): root writes option files there.
func trustedDir(d string) error {
	h, err := host.Open("/")
	if err != nil {
		return err
	}
	defer h.Close()
	if err := h.CheckTrustedDir(d); err != nil {
		return fmt.Errorf("refusing to write into %s: %w", d, err)
	}
	return nil
}

// includeDirRefused says why the option file of a MySQL server cannot be
// written into its included directory, or "".
func includeDirRefused(in *facts.Instance, fc fix.Context) string {
	info, ok := fc.Instances[in.Name()]
	switch {
	case !ok || in.IncludeDir == "" || info.ConfDir != in.IncludeDir:
		return "the server includes no directory of option files, so a SET GLOBAL would not survive a restart"
	case !path.IsAbs(in.IncludeDir):
		return "its included directory " + in.IncludeDir + " is not an absolute path"
	}
	if err := trustedDir(in.IncludeDir); err != nil {
		return err.Error()
	}
	return ""
}
