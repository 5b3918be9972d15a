package engine

import (
	"context"
	"fmt"

	"github.com/dbhost/dbhost/internal/host"
)

// SettingState is a server setting as a live connection reads it.
type SettingState struct {
	// Value is what the server runs with.
	Value string
	// Saved is the entry the server keeps itself (PostgreSQL's ALTER
	// SYSTEM), nil when none.
	Saved *string
	// Restart: the server takes a new value only when it restarts.
	Restart bool
	// OptionOnly: an option the server reads at start but shows no
	// variable for (MySQL's symbolic_links).
	OptionOnly bool
	// Overridden says why a changed value would not be used ("" none):
	// it is set where the server reads it last (its command line).
	Overridden string
}

// SettingsConn changes a running server's settings (dbhost fix --apply).
type SettingsConn interface {
	Get(ctx context.Context, key string) (SettingState, error)
	// Change makes the server run with value, and saves it when the
	// server keeps its own settings (SavesItself); for a restart setting
	// it only saves it.
	Change(ctx context.Context, key, value string, restart bool) error
	// Restore puts back the state Get read before Change.
	Restore(ctx context.Context, key string, before SettingState, restart bool) error
	// Applied reports whether the server runs with value, or waits for a
	// restart to do so.
	Applied(ctx context.Context, key, value string, restart bool) (inEffect, pending bool, err error)
	// Unchanged: value needs no change at run time.
	Unchanged(st SettingState, value string, restart bool) bool
	// SavesItself: the server keeps a Change across restarts; otherwise
	// the option file fix renders must.
	SavesItself() bool
	// Method says how a change is made, for people.
	Method(restart bool) string
	Close()
}

// RuntimeOnly is implemented by a SettingsConn whose changes nothing dbhost
// writes keeps across a restart (Redis reads no directory of snippets): a
// change is made at run time only, and the rendered line is left for a
// person to merge into the server's configuration file.
type RuntimeOnly interface {
	RuntimeOnly() bool
}

// Settings is implemented by profiles whose servers' settings dbhost
// changes on a live connection.
type Settings interface {
	OpenSettings(ctx context.Context, h *host.Host, in *Instance, opts Options) (SettingsConn, error)
}

// OpenSettings connects to in for changing its settings, or says why its
// engine's settings are not changed.
func OpenSettings(ctx context.Context, h *host.Host, in *Instance, opts Options) (SettingsConn, error) {
	s, ok := in.Profile().(Settings)
	if !ok {
		return nil, fmt.Errorf("%s settings are not changed by this version", in.Engine)
	}
	return s.OpenSettings(ctx, h, in, opts)
}

// ChangesSettings reports whether dbhost changes settings of in's engine.
func ChangesSettings(in *Instance) bool {
	_, ok := in.Profile().(Settings)
	return ok
}
