package redis

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"time"

	"github.com/dbhost/dbhost/internal/engine"
	"github.com/dbhost/dbhost/internal/host"
	"github.com/dbhost/dbhost/internal/textio"
)

// OpenSettings: a setting changes with CONFIG SET, on a connection made
// the way the live read makes it (dialFirst: the instance's own Unix
// socket or a TCP socket it holds, checked before a byte is sent, and its
// INFO server must name the instance's process). No password is sent:
// dbhost never sends one to Redis, so a server that requires one is
// refused. CONFIG SET is not kept across a restart, and apply writes no
// file Redis reads (the redis.conf lines fix renders are for a person to
// merge), so SavesItself is false.
func (d detector) OpenSettings(ctx context.Context, h *host.Host, in *engine.Instance, opts engine.Options) (engine.SettingsConn, error) {
	switch {
	case !in.Trusted():
		// PostgreSQL and MySQL leave this to apply, which never plans
		// a change on an untrusted instance; CONFIG SET can make a
		// server write files anywhere, so it is refused here too.
		why := in.Trust.Why
		if why == "" {
			why = "its trust was not judged"
		}
		return nil, fmt.Errorf("the instance is not trusted (%s): dbhost changes only the settings of a server it trusts", why)
	case opts.NoConnect:
		return nil, errors.New("live connection not attempted (--no-connect)")
	case !h.System():
		return nil, host.ErrNotLive
	}
	timeout := opts.Timeout
	if timeout <= 0 {
		timeout = 3 * time.Second
	}
	addrs := settingsAddrs(h, in)
	if len(addrs) == 0 {
		return nil, errors.New("no address to ask the server on (no TCP port or Unix socket known)")
	}
	var authVia string
	conn, _, tried := dialFirst(ctx, h, in, addrs, timeout, func(conn net.Conn) error {
		l := &live{}
		if err := converseInfo(conn, l, timeout); err != nil {
			return err
		}
		if l.AuthRequired {
			authVia = "it requires authentication, and dbhost sends no password to Redis"
			return errors.New(authVia)
		}
		if !samePID(h, in.PID, l.Info) {
			return fmt.Errorf("served by process %s, not %d", l.Info["process_id"], in.PID)
		}
		return nil
	})
	if conn == nil {
		if authVia != "" {
			return nil, fmt.Errorf("%s settings are not changed: %s", d.p.Flavor, strings.Join(tried, "; "))
		}
		return nil, fmt.Errorf("%w: %s", errNoAnswer, strings.Join(tried, "; "))
	}
	return &settingsConn{conn: conn, r: bufio.NewReader(conn), timeout: timeout}, nil
}

// settingsAddrs are the addresses the live read asks on: the one that
// answered it first, then the candidates it would try now (the server's
// own listening sockets, else its title and configured socket and port).
func settingsAddrs(h *host.Host, in *engine.Instance) []string {
	var out []string
	if in.LiveVia != "" {
		out = append(out, in.LiveVia)
	}
	t, _ := parseTitle(in.Cmdline)
	var ds []Directive
	for _, k := range []string{"unixsocket", "port"} {
		if v := in.SettingValue(k); v != "" {
			ds = append(ds, Directive{Name: k, Args: []string{v}})
		}
	}
	for _, a := range candidates(h, in.PID, t, nil, ds) {
		if a != in.LiveVia {
			out = append(out, a)
		}
	}
	return out
}

// converseInfo sends INFO server, as converse does first: a NOAUTH or
// NOPERM refusal sets AuthRequired.
func converseInfo(conn net.Conn, l *live, timeout time.Duration) error {
	conn.SetDeadline(time.Now().Add(timeout))
	return askInfo(conn, bufio.NewReader(conn), l)
}

// askInfo sends INFO server and keeps its fields in l; a NOAUTH or NOPERM
// refusal sets AuthRequired and is no error.
func askInfo(conn net.Conn, r *bufio.Reader, l *live) error {
	info, err := command(conn, r, "INFO", "server")
	var re respError
	if errors.As(err, &re) && (re.kind() == "NOAUTH" || re.kind() == "NOPERM") {
		l.AuthRequired = true
		return nil
	}
	if err != nil {
		return err
	}
	s, ok := info.(string)
	if !ok {
		return errors.New("INFO: unexpected reply")
	}
	l.Info = parseInfo(s)
	return nil
}

type settingsConn struct {
	conn    net.Conn
	r       *bufio.Reader
	timeout time.Duration
}

func (s *settingsConn) Close()            { s.conn.Close() }
func (s *settingsConn) SavesItself() bool { return false }

// RuntimeOnly: Redis reads no directory of snippets, so a CONFIG SET is
// kept only once a person merges the rendered line into redis.conf.
func (s *settingsConn) RuntimeOnly() bool { return true }

func (s *settingsConn) Method(restart bool) string {
	if restart {
		return "only the rendered redis.conf lines (merged by a person); takes effect at the next restart"
	}
	return "CONFIG SET (not kept across a restart unless the rendered redis.conf lines are merged into the server's configuration)"
}

// Unchanged: a restart setting is not changed at run time; another that
// already has the value (sizes compared in bytes) needs no CONFIG SET.
func (s *settingsConn) Unchanged(st engine.SettingState, value string, restart bool) bool {
	return restart || SameValue(st.Value, value)
}

var (
	// configName: a setting's name as CONFIG GET and SET take it, no
	// glob pattern.
	configName = textio.LazyRegexp(`^[a-z][a-z0-9-]*$`)
	// configValue: printable ASCII, no space, no control character.
	configValue = textio.LazyRegexp(`^[!-~]*$`)
)

// refusedSetting says why dbhost does not change a setting, or "": a
// secret would be read into the plan and the journal; a path makes the
// server write files where it names (Profile.RootRisk).
func refusedSetting(key string) string {
	switch {
	case !configName.MatchString(key):
		return fmt.Sprintf("%q is not a setting name", key)
	case secretSetting(key):
		return key + " holds a secret: dbhost does not read or change it"
	}
	switch canonical(key) {
	case "dir", "dbfilename", "appendfilename", "appenddirname", "logfile", "pidfile", "aclfile", "unixsocket", "include", "loadmodule":
		return key + " names a file the server writes or reads: dbhost does not change it"
	}
	return ""
}

func checkValue(v string) error {
	if !configValue.MatchString(v) {
		return fmt.Errorf("refusing value %q (only printable characters without spaces are set)", v)
	}
	return nil
}

// do sends one command within the context's deadline, or the timeout.
func (s *settingsConn) do(ctx context.Context, args ...string) (any, error) {
	deadline := time.Now().Add(s.timeout)
	if d, ok := ctx.Deadline(); ok && d.Before(deadline) {
		deadline = d
	}
	s.conn.SetDeadline(deadline)
	return command(s.conn, s.r, args...)
}

func (s *settingsConn) Get(ctx context.Context, key string) (engine.SettingState, error) {
	if why := refusedSetting(key); why != "" {
		return engine.SettingState{}, errors.New(why)
	}
	reply, err := s.do(ctx, "CONFIG", "GET", key)
	if err != nil {
		return engine.SettingState{}, fmt.Errorf("CONFIG GET %s: %w", key, err)
	}
	arr, ok := reply.([]any)
	if !ok {
		return engine.SettingState{}, fmt.Errorf("CONFIG GET %s: unexpected reply", key)
	}
	for i := 0; i+1 < len(arr); i += 2 {
		k, _ := arr[i].(string)
		v, _ := arr[i+1].(string)
		if strings.EqualFold(k, key) {
			// Restore sets it again: a value CONFIG SET would be
			// refused could not be put back.
			if err := checkValue(v); err != nil {
				return engine.SettingState{}, fmt.Errorf("%s is %q, which could not be put back: %w", key, v, err)
			}
			return engine.SettingState{Value: v}, nil
		}
	}
	return engine.SettingState{}, fmt.Errorf("the server has no setting %s", key)
}

func (s *settingsConn) set(ctx context.Context, key, value string) error {
	if why := refusedSetting(key); why != "" {
		return errors.New(why)
	}
	if err := checkValue(value); err != nil {
		return err
	}
	// The value is one bulk string: nothing in it is parsed as another
	// argument.
	_, err := s.do(ctx, "CONFIG", "SET", key, value)
	var re respError
	if errors.As(err, &re) {
		return fmt.Errorf("CONFIG SET %s %s refused by the server: %s", key, value, string(re))
	}
	if err != nil {
		return fmt.Errorf("CONFIG SET %s: %w", key, err)
	}
	return nil
}

// Change: CONFIG SET; a restart setting is not set at run time. A setting
// CONFIG SET cannot change is refused with the server's message.
func (s *settingsConn) Change(ctx context.Context, key, value string, restart bool) error {
	if restart {
		return nil
	}
	return s.set(ctx, key, value)
}

func (s *settingsConn) Restore(ctx context.Context, key string, before engine.SettingState, restart bool) error {
	if restart {
		return nil
	}
	return s.set(ctx, key, before.Value)
}

func (s *settingsConn) Applied(ctx context.Context, key, value string, restart bool) (bool, bool, error) {
	cur, err := s.Get(ctx, key)
	if err != nil {
		return false, false, err
	}
	same := SameValue(cur.Value, value)
	return same, restart && !same, nil
}

// SameValue compares a setting as CONFIG GET shows it with a value as
// redis.conf or CONFIG SET takes it: words case-insensitively, sizes in
// bytes (Redis shows maxmemory as 2052063232 for 1957mb; k, m, g are
// powers of ten, kb, mb, gb powers of two, as Redis reads them).
func SameValue(got, want string) bool {
	if strings.EqualFold(got, want) {
		return true
	}
	a, okA := MemoryBytes(got)
	b, okB := MemoryBytes(want)
	return okA && okB && a == b
}
