package apply

// Database settings: a finding's fix.Config changes applied to the running
// server the audit discovered, through its engine's live connection
// (engine.SettingsConn: PostgreSQL ALTER SYSTEM and a reload, MySQL SET
// GLOBAL, Redis CONFIG SET), journaled with the state they replace so
// that rollback and recovery put it back. A server that does not keep a change itself is
// planned only when the option file written into a directory it includes
// keeps it; Redis includes none, so its settings are left to a person.

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
	// Saved is the entry the server kept itself before the apply
	// (PostgreSQL's ALTER SYSTEM; nil: none): what verify compares and
	// rollback puts back.
	Saved *string `json:"saved"`
	// Restart: the server takes the value only when it restarts.
	Restart bool `json:"restart,omitempty"`
	// Unchanged: nothing to change at run time (the value is saved
	// already, or, kept by an option file, it waits for a restart).
	Unchanged bool `json:"unchanged,omitempty"`
	// SavedByServer: the server keeps the change itself; otherwise the
	// option file written into its included directory does.
	SavedByServer bool `json:"saved_by_server,omitempty"`
	// OptionOnly: an option the server shows no variable for; only the
	// option file sets it, and nothing can be read back.
	OptionOnly bool `json:"option_only,omitempty"`
	// RuntimeOnly: nothing dbhost writes keeps the change across a
	// restart; the rendered configuration line is left to a person.
	RuntimeOnly bool `json:"runtime_only,omitempty"`
	// Method says how the change is made, for people.
	Method   string   `json:"method"`
	Findings []string `json:"findings"`
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
	// described again and must match; a restart changes it). Start is its
	// start time (clock ticks after boot): the same PID with another start
	// is another process.
	PID   int    `json:"pid,omitempty"`
	Start uint64 `json:"start,omitempty"`
}

func (r ServerRef) String() string { return r.Name }

// Servers are the running servers a plan may change settings of.
type Servers struct {
	Instances []*facts.Instance
	// Conn says how to log in (the --pg/--mysql strings, the timeout).
	Conn engine.Options
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
// connection verifies that the answering process is that server.
func dialServer(ctx context.Context, ref ServerRef, opts engine.Options) (engine.SettingsConn, error) {
	h, err := host.Open("/")
	if err != nil {
		return nil, err
	}
	defer h.Close()
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
			if in.PID == ref.PID && ref.Start != 0 && startTime(h, in.PID) != ref.Start {
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

// startTime is the start of a process in clock ticks after boot (0:
// unknown).
func startTime(h *host.Host, pid int) uint64 {
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

// planSettings reads the current state of every Config change of the
// selected findings on the servers it reaches. Changes it cannot plan are
// returned as reasons, per instance and key.
func planSettings(srv *Servers, fc fix.Context, selected []fix.Item) (plans []SettingPlan, skipped map[string]string) {
	skipped = map[string]string{}
	// The planned process's start time tells it from a later one with
	// the same PID.
	h0, _ := host.Open("/")
	if h0 != nil {
		defer h0.Close()
	}
	byName := map[string]*facts.Instance{}
	for _, in := range srv.Instances {
		byName[in.Name()] = in
	}
	conns := map[string]engine.SettingsConn{}
	defer func() {
		for _, c := range conns {
			c.Close()
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
			case !engine.ChangesSettings(in.Instance):
				skipped[id] = fmt.Sprintf("%s settings are not changed by this version", in.Engine)
				continue
			case !in.Trusted():
				skipped[id] = "the instance is not trusted (" + in.Trust.Why + "): dbhost changes only the settings of a server it trusts"
				continue
			case in.DataDir == "":
				skipped[id] = "its data directory is unknown, so a later rollback could not find it again"
				continue
			}
			s, ok := conns[c.Instance]
			if !ok {
				h, err := host.Open("/")
				if err != nil {
					skipped[id] = err.Error()
					continue
				}
				ctx, cancel := context.WithTimeout(context.Background(), timeout(srv.Conn))
				s, err = engine.OpenSettings(ctx, h, in.Instance, srv.Conn)
				cancel()
				h.Close()
				if err != nil {
					skipped[id] = "cannot log in: " + err.Error()
					continue
				}
				conns[c.Instance] = s
			}
			runtimeOnly := false
			if !s.SavesItself() {
				if why := includeDirRefused(in, fc); why != "" {
					ro, ok := s.(engine.RuntimeOnly)
					if !ok || !ro.RuntimeOnly() || c.Restart {
						skipped[id] = why
						continue
					}
					// Set now; the rendered line, listed as not
					// written, is what keeps it.
					runtimeOnly = true
				}
			}
			ctx, cancel := context.WithTimeout(context.Background(), timeout(srv.Conn))
			cur, err := s.Get(ctx, c.Key)
			cancel()
			restart := cur.Restart || c.Restart
			switch {
			case err != nil:
				skipped[id] = err.Error()
				continue
			case cur.Overridden != "":
				skipped[id] = cur.Overridden
				continue
			case cur.OptionOnly && !restart:
				skipped[id] = "the server shows no variable " + c.Key + " to set at run time"
				continue
			}
			ref := ServerRef{Engine: string(in.Engine), Name: in.Name(), DataDir: in.DataDir, Port: in.Port, PID: in.PID, Start: startTime(h0, in.PID)}
			if in.Unit != nil && in.Unit.How == "cgroup" {
				ref.Unit = in.Unit.Name
			}
			seen[id] = len(plans)
			plans = append(plans, SettingPlan{Server: ref, Key: c.Key, Old: cur.Value, New: c.Value, Saved: cur.Saved,
				Restart: restart, Unchanged: s.Unchanged(cur, c.Value, restart), SavedByServer: s.SavesItself(),
				OptionOnly: cur.OptionOnly, Method: s.Method(restart), RuntimeOnly: runtimeOnly, Findings: []string{t}})
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

// undoSetting puts a setting back as the plan read it. Idempotent.
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
	defer s.Close()
	before := engine.SettingState{Value: u.Old, Saved: u.Saved, Restart: u.Restart, OptionOnly: u.OptionOnly}
	if err := s.Restore(ctx, u.Key, before, u.Restart); err != nil {
		return fmt.Errorf("setting %s of %s not put back: %w", u.Key, u.Server, err)
	}
	return nil
}

// liveServers are the connections one apply holds, one per server, for
// its check against the plan and its changes alike.
type liveServers struct {
	co    engine.Options
	conns map[ServerRef]engine.SettingsConn
}

func newLiveServers() *liveServers {
	return &liveServers{co: connection(), conns: map[ServerRef]engine.SettingsConn{}}
}

func (l *liveServers) close() {
	for _, c := range l.conns {
		c.Close()
	}
}

func (l *liveServers) open(ctx context.Context, ref ServerRef) (engine.SettingsConn, error) {
	if s, ok := l.conns[ref]; ok {
		return s, nil
	}
	s, err := dialServer(ctx, ref, l.co)
	if err != nil {
		return nil, err
	}
	l.conns[ref] = s
	return s, nil
}

// each runs fn for every setting, each with its own time limit.
func (l *liveServers) each(settings []SettingPlan, fn func(ctx context.Context, sp SettingPlan) error) error {
	for _, sp := range settings {
		ctx, cancel := context.WithTimeout(context.Background(), 3*timeout(l.co))
		err := fn(ctx, sp)
		cancel()
		if err != nil {
			return fmt.Errorf("setting %s of %s: %w", sp.Key, sp.Server, err)
		}
	}
	return nil
}

// current logs in to sp's server and checks that the setting is still as
// the plan read it.
func (l *liveServers) current(ctx context.Context, sp SettingPlan) (engine.SettingsConn, error) {
	s, err := l.open(ctx, sp.Server)
	if err != nil {
		return nil, err
	}
	cur, err := s.Get(ctx, sp.Key)
	if err != nil {
		return nil, err
	}
	if why := changedSince(cur, sp); why != "" {
		return nil, errors.New("refusing to apply: " + why)
	}
	return s, nil
}

// verify refuses an apply over a setting someone changed since the plan
// read it.
func (l *liveServers) verify(settings []SettingPlan) error {
	return l.each(settings, func(ctx context.Context, sp SettingPlan) error {
		_, err := l.current(ctx, sp)
		return err
	})
}

// apply journals and changes each setting, then waits until the server
// runs with it (or, for a restart setting, says a restart is pending).
func (l *liveServers) apply(j *journal.Journal, settings []SettingPlan, opts Options) error {
	return l.each(settings, func(ctx context.Context, sp SettingPlan) error {
		s, err := l.current(ctx, sp)
		if err != nil {
			return err
		}
		return applySetting(ctx, j, s, sp, opts)
	})
}

func applySetting(ctx context.Context, j *journal.Journal, s engine.SettingsConn, sp SettingPlan, opts Options) error {
	if err := j.Record(KindSetting, sp.Server.Name+" "+sp.Key, settingUndo{Server: sp.Server, Key: sp.Key, Restart: sp.Restart,
		Saved: sp.Saved, Old: sp.Old, OptionOnly: sp.OptionOnly}); err != nil {
		return err
	}
	if err := s.Change(ctx, sp.Key, sp.New, sp.Restart); err != nil {
		return err
	}
	opts.step("saved " + sp.Server.Name + " " + sp.Key)
	// A server may apply a reload asynchronously: wait for it.
	for {
		in, pending, err := s.Applied(ctx, sp.Key, sp.New, sp.Restart)
		switch {
		case err != nil:
			return err
		case in, pending && sp.Restart:
			return nil
		}
		select {
		case <-ctx.Done():
			return errors.New("the server does not run with the new value after the change (is it set where the server reads it later, on its command line or in a later file?)")
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// changedSince says how a setting differs from what the plan read, or "".
func changedSince(cur engine.SettingState, sp SettingPlan) string {
	if !sameSaved(cur.Saved, sp.Saved) {
		return fmt.Sprintf("changed since the plan (its saved entry is %s, the plan read %s)", showSaved(cur.Saved), showSaved(sp.Saved))
	}
	if cur.Value != sp.Old {
		return fmt.Sprintf("changed since the plan (it runs with %q, the plan read %q)", cur.Value, sp.Old)
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

// includeDirRefused says why the option file of a server that does not
// keep its own settings cannot be written into its included directory,
// or "".
func includeDirRefused(in *facts.Instance, fc fix.Context) string {
	info, ok := fc.Instances[in.Name()]
	switch {
	case !ok || in.IncludeDir == "" || info.ConfDir != in.IncludeDir:
		return "the server includes no directory of option files, so a change would not survive a restart"
	case !path.IsAbs(in.IncludeDir):
		return "its included directory " + in.IncludeDir + " is not an absolute path"
	}
	if err := trustedDir(in.IncludeDir); err != nil {
		return err.Error()
	}
	return ""
}
