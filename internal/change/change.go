// Package change is the one way dbhost changes a host. Each kind of change
// (a kernel or sysfs value, a file, a database setting, a process limit, a
// restart, a scratch directory) is journaled with what its undo needs
// before it is made, then made, then read back through the rooted host;
// its undo is bound to the same Config, so that a rollback or a recovery
// in a later process reconnects the same way.
package change

import (
	"encoding/json"
	"fmt"
	"maps"
	"strings"

	"github.com/dbhost/dbhost/internal/engine"
	"github.com/dbhost/dbhost/internal/host"
	"github.com/dbhost/dbhost/internal/journal"
)

// Journal kinds: exactly one per change kind.
const (
	KindKernel  = "kernel"     // a value under /proc/sys
	KindSysfs   = "sysfs"      // a value under /sys
	KindFile    = "file"       // a file through the allow-list (Allowed)
	KindSetting = "db-setting" // a database setting through the engine profile's SettingsConn
	KindRlimit  = "rlimit"     // a running process's limit (prlimit)
	KindRestart = "restart"    // a server restarted (through its unit, or its own control command)
	KindWorkDir = "workdir"    // the experiment's scratch directory
	// The throwaway PostgreSQL cluster keeps its own kind, pgcluster.Kind,
	// and its undo in internal/pgcluster (passed in with Config.More): it
	// stops the postmaster whatever started it and removes the directory
	// only when it holds the run's marker, which neither a workdir nor a
	// restart expresses.
)

// Config is everything the kinds need.
type Config struct {
	// Host is the rooted host every read goes through, read-backs
	// included (nil: the live system at /, opened when needed). Not a
	// recording host: a recording answers a second read with the first.
	Host *host.Host
	// Engine says how an undo reconnects to a server.
	Engine engine.Options
	// Systemctl lists where systemctl is looked for, first trusted one
	// wins (empty: /usr/bin/systemctl, /bin/systemctl). Code sets it (a
	// test's stand-in), never a flag: root must not run a binary others
	// chose.
	Systemctl []string
	// More are kinds of the caller's own (a test's stand-ins), recovered
	// with the rest.
	More journal.Kinds
	// Step, if set, runs after each step of a change ("recorded PATH",
	// "wrote PATH", "set PATH", "saved SERVER KEY"); tests kill the process
	// there.
	Step func(step string)
}

func (cfg Config) step(s string) {
	if cfg.Step != nil {
		cfg.Step(s)
	}
}

// host returns cfg.Host, or the live system opened for this use (close
// with the returned function).
func (cfg Config) host() (*host.Host, func(), error) {
	if cfg.Host != nil {
		return cfg.Host, func() {}, nil
	}
	h, err := host.Open("/")
	if err != nil {
		return nil, nil, err
	}
	return h, func() { h.Close() }, nil
}

// Kinds returns every kind's undo bound to cfg, with the kinds earlier
// journals used (legacy.go) and cfg.More.
func Kinds(cfg Config) journal.Kinds {
	k := journal.Kinds{
		KindKernel:  func(d json.RawMessage) error { return undoKernel(cfg, d) },
		KindSysfs:   func(d json.RawMessage) error { return undoKernel(cfg, d) },
		KindFile:    func(d json.RawMessage) error { return undoFile(cfg, d) },
		KindSetting: func(d json.RawMessage) error { return undoSetting(cfg, d) },
		KindRlimit:  func(d json.RawMessage) error { return undoRlimit(cfg, d) },
		KindRestart: func(d json.RawMessage) error { return undoRestart(cfg, d) },
		KindWorkDir: func(d json.RawMessage) error { return undoWorkDir(d) },
	}
	maps.Copy(k, legacyKinds(cfg))
	maps.Copy(k, legacyKnobKinds(cfg))
	maps.Copy(k, cfg.More)
	return k
}

// Open opens the journal at file (recovering first what an interrupted run
// left there) for changes bound to cfg.
func Open(file string, cfg Config) (*Changer, error) {
	j, err := journal.Open(file, Kinds(cfg))
	if err != nil {
		return nil, err
	}
	return &Changer{cfg: cfg, j: j}, nil
}

// Recover puts back what a journal file left behind holds, and removes it.
func Recover(file string, cfg Config) error { return journal.Recover(file, Kinds(cfg)) }

// Changer makes changes through one journal.
type Changer struct {
	cfg Config
	j   *journal.Journal
}

// Journal is the changer's journal.
func (c *Changer) Journal() *journal.Journal { return c.j }

// Config is what the changer was opened with.
func (c *Changer) Config() Config { return c.cfg }

// Restore undoes every change, newest first, and removes the journal when
// all succeeded.
func (c *Changer) Restore() error { return c.j.Restore() }

func oneLine(s string) bool { return !strings.ContainsAny(s, "\n\x00") }

func refuse(format string, a ...any) error { return fmt.Errorf("refusing "+format, a...) }
