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
	"errors"
	"fmt"
	"path"

	"github.com/dbhost/dbhost/internal/change"
	"github.com/dbhost/dbhost/internal/engine"
	"github.com/dbhost/dbhost/internal/facts"
	"github.com/dbhost/dbhost/internal/fix"
	"github.com/dbhost/dbhost/internal/host"
)

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
// recovery) finds the same one again.
type ServerRef = change.ServerRef

// Servers are the running servers a plan may change settings of.
type Servers struct {
	Instances []*facts.Instance
	// Conn says how to log in (the --pg/--mysql strings, the timeout).
	Conn engine.Options
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
				ctx, cancel := context.WithTimeout(context.Background(), change.Timeout(srv.Conn))
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
			ctx, cancel := context.WithTimeout(context.Background(), change.Timeout(srv.Conn))
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
			ref := ServerRef{Engine: string(in.Engine), Name: in.Name(), DataDir: in.DataDir, Port: in.Port, PID: in.PID, Start: change.StartTime(h0, in.PID)}
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

// liveServers are the connections one apply holds, one per server, for
// its check against the plan and its changes alike.
type liveServers struct {
	cfg   change.Config
	conns map[ServerRef]engine.SettingsConn
}

func newLiveServers(cfg change.Config) *liveServers {
	return &liveServers{cfg: cfg, conns: map[ServerRef]engine.SettingsConn{}}
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
	s, err := l.cfg.Dial(ctx, ref)
	if err != nil {
		return nil, err
	}
	l.conns[ref] = s
	return s, nil
}

// each runs fn for every setting, each with its own time limit.
func (l *liveServers) each(settings []SettingPlan, fn func(ctx context.Context, sp SettingPlan) error) error {
	for _, sp := range settings {
		ctx, cancel := context.WithTimeout(context.Background(), 3*change.Timeout(l.cfg.Engine))
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
func (l *liveServers) apply(c *change.Changer, settings []SettingPlan) error {
	return l.each(settings, func(ctx context.Context, sp SettingPlan) error {
		s, err := l.current(ctx, sp)
		if err != nil {
			return err
		}
		_, err = c.Setting(ctx, s, sp.Server, sp.Key, sp.New, sp.Restart)
		return err
	})
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
	if err := (change.Config{}).TrustedDir(in.IncludeDir); err != nil {
		return err.Error()
	}
	return ""
}
