package redis

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"
	"time"

	"github.com/dbhost/dbhost/internal/engine"
	"github.com/dbhost/dbhost/internal/host"
)

// Product is a server of the Redis engine: Redis itself or a fork that
// keeps its protocol, configuration and behaviour (Valkey). Each is a
// profile of its own, registered with NewProfile.
type Product struct {
	// Name is the profile's name for --engine; Aliases are other names.
	Name    string
	Aliases []string
	// Flavor is the product's display name, Comm its server's command
	// name.
	Flavor, Comm string
	// Accounts are the service accounts packages run it as.
	Accounts []string
	// Units are the systemd units packages ship; Confs the configuration
	// files they install, tried when nothing else names one.
	Units, Confs []string
}

// NewProfile makes the engine profile of a Redis-compatible product.
func NewProfile(p Product) engine.Profile { return detector{p: p} }

// products are the registered Redis-compatible products.
func products() []Product {
	var out []Product
	for _, p := range engine.Profiles() {
		if d, ok := p.(detector); ok {
			out = append(out, d.p)
		}
	}
	return out
}

// isServerComm reports whether c is any product's server command.
func isServerComm(c string) bool {
	for _, p := range products() {
		if p.Comm == c {
			return true
		}
	}
	return false
}

// packagedConfs are the files distributions install for a product.
func packagedConfs(flavor string) []string {
	for _, p := range products() {
		if p.Flavor == flavor {
			return p.Confs
		}
	}
	return nil
}

type detector struct {
	engine.Base
	p Product
}

func (detector) Engine() engine.Engine             { return engine.Redis }
func (d detector) Name() string                    { return d.p.Name }
func (d detector) Aliases() []string               { return d.p.Aliases }
func (d detector) ServiceAccounts() []string       { return d.p.Accounts }
func (d detector) Units(*engine.Instance) []string { return d.p.Units }
func (d detector) ReadAhead(*engine.Instance) engine.ReadAhead {
	return engine.ReadAhead{Why: d.p.Flavor + " serves from memory and reads its RDB/AOF files sequentially at start-up, where read-ahead helps"}
}

func (d detector) RootRisk() string {
	return d.p.Flavor + " can be told to write its dump file into any directory (CONFIG SET dir and dbfilename), for example an authorized_keys or cron file."
}

func (d detector) BindAdvice(*engine.Instance) string {
	return "Set bind 127.0.0.1 <private address> in " + confName(d.p) + " (CONFIG SET bind applies it at once) and keep protected-mode yes."
}

// confName is the product's configuration file name (redis.conf).
func confName(p Product) string {
	if len(p.Confs) > 0 {
		return p.Confs[0][strings.LastIndex(p.Confs[0], "/")+1:]
	}
	return "redis.conf"
}

func (d detector) Backlog(in *engine.Instance) engine.Need {
	v, ok := in.Uint("tcp-backlog", 511)
	return engine.Need{N: v, Why: fmt.Sprintf("tcp-backlog is %d (%s logs a warning at start-up when somaxconn is lower)", v, d.p.Flavor), Inputs: []engine.Input{in.UintInput("tcp-backlog", ok, v)}}
}

// Descriptors: Redis keeps 32 descriptors beyond maxclients for itself
// (CONFIG_MIN_RESERVED_FDS). At start and on CONFIG SET maxclients it
// raises its own limit towards that, and lowers maxclients to what fits
// when it cannot (it logs that).
func (d detector) Descriptors(in *engine.Instance) engine.Need {
	mc, term, inputs := in.UintNeed("maxclients", 10000)
	n := mc + 32
	return engine.Need{N: n, Why: fmt.Sprintf("%s needs %s + 32 reserved = %d descriptors", d.p.Flavor, term, n),
		Inputs: inputs,
		Short:  fmt.Sprintf("%s raises its soft limit itself up to the hard limit and otherwise lowers maxclients to fit.", d.p.Flavor),
		Live:   fmt.Sprintf("after the running server's limit is raised, CONFIG SET maxclients %d makes it raise its own limit and use it without a restart", mc)}
}

func (detector) KeepaliveOverride(in *engine.Instance) string {
	if v := in.SettingValue("tcp-keepalive"); v != "" {
		return fmt.Sprintf("%s sets tcp-keepalive %s s on its client sockets", in.Name(), v)
	}
	return ""
}

// MainCache is maxmemory; the proposal is half the limit.
func (detector) MainCache(in *engine.Instance, limit uint64) engine.Cache {
	b, ok := MemoryBytes(in.SettingValue("maxmemory"))
	return engine.Cache{Bytes: b, Known: ok, Key: "maxmemory", Proposal: fmt.Sprintf("%dmb", limit/2>>20)}
}

// MemoryBytes parses a memory value the way Redis does: k, m, g are
// powers of ten, kb, mb, gb powers of two.
func MemoryBytes(v string) (uint64, bool) {
	v = strings.ToLower(strings.Trim(strings.TrimSpace(v), `"'`))
	mult := uint64(1)
	for _, u := range []struct {
		suffix string
		mult   uint64
	}{{"gb", 1 << 30}, {"mb", 1 << 20}, {"kb", 1 << 10}, {"g", 1e9}, {"m", 1e6}, {"k", 1e3}, {"b", 1}} {
		if n, ok := strings.CutSuffix(v, u.suffix); ok {
			v, mult = n, u.mult
			break
		}
	}
	n, err := strconv.ParseUint(v, 10, 64)
	if err != nil {
		return 0, false
	}
	return n * mult, true
}

// THP: fork/copy-on-write for persistence copies each touched huge page
// whole; Redis 7's disable-thp (default yes) turns THP off for the server
// with prctl(PR_SET_THP_DISABLE).
func (detector) THP(in *engine.Instance, _ string) engine.THPAdvice {
	if disablesTHP(in) {
		return engine.THPAdvice{Enabled: []string{"madvise", "never", "always"}, Why: "switches THP off for itself (disable-thp), so any mode suits it"}
	}
	return engine.THPAdvice{Enabled: []string{"madvise", "never"}, PtesZero: true, OnlyIfAlways: true,
		Why: "wants THP not \"always\": with fork/copy-on-write for persistence each touched 2 MiB page is copied whole, causing latency spikes and memory growth"}
}

func disablesTHP(in *engine.Instance) bool {
	if v, set := in.Setting("disable-thp"); set {
		switch strings.ToLower(strings.Trim(strings.TrimSpace(v.Value), `'"`)) {
		case "on", "1", "true", "yes", "force":
			return true
		}
		return false
	}
	return in.Version != "" && engine.VersionAtLeast(in.Version, "7.0")
}

const CommandsSource = "INFO stats: total_commands_processed"

// OpenQueries reads total_commands_processed over the instance's Unix
// socket, else a loopback port, verified to lead to the server itself.
// It sends no credentials: dbhost never sends a password to Redis.
func (detector) OpenQueries(ctx context.Context, h *host.Host, in *engine.Instance, opts engine.Options) (*engine.QueryCounter, error) {
	switch {
	case opts.NoConnect:
		return nil, errors.New("live connection not attempted (--no-connect)")
	case !h.System():
		return nil, host.ErrNotLive
	case in.Redis != nil && in.Redis.AuthConfigured:
		return nil, errors.New("the server requires a password and dbhost never sends one to Redis")
	}
	addrs := localAddrs(in)
	if len(addrs) == 0 {
		return nil, errors.New("no local listening socket seen or configured for this server")
	}
	var tried []string
	for _, a := range addrs {
		network, addr, _ := strings.Cut(a, ":")
		conn, err := in.Dial(ctx, h, network, addr, opts.Timeout)
		if err != nil {
			tried = append(tried, fmt.Sprintf("%s: %v", a, err))
			continue
		}
		r := bufio.NewReader(conn)
		read := func(ctx context.Context) (uint64, error) { return commands(ctx, conn, r, opts.Timeout) }
		if _, err := read(ctx); err != nil {
			conn.Close()
			tried = append(tried, fmt.Sprintf("%s: %v", a, err))
			continue
		}
		return &engine.QueryCounter{Read: read, Close: func() { conn.Close() }, Source: CommandsSource, Via: a}, nil
	}
	return nil, errors.New(strings.Join(tried, "; "))
}

// localAddrs lists the Unix sockets, then the loopback addresses, the
// server listens on; without listeners (they need root to be seen) what
// the configuration says.
func localAddrs(in *engine.Instance) []string {
	var addrs []string
	for _, l := range in.Listen {
		if l.Proto == "unix" {
			addrs = append(addrs, "unix:"+l.Addr)
		}
	}
	for _, l := range in.Listen {
		switch {
		case l.Proto == "unix":
		case l.Wildcard() && l.Proto == "tcp":
			addrs = append(addrs, fmt.Sprintf("tcp:127.0.0.1:%d", l.Port))
		case l.Wildcard():
			addrs = append(addrs, fmt.Sprintf("tcp:[::1]:%d", l.Port))
		case l.Loopback():
			addrs = append(addrs, "tcp:"+net.JoinHostPort(l.Addr, strconv.Itoa(l.Port)))
		}
	}
	if len(addrs) == 0 {
		if u := in.SettingValue("unixsocket"); strings.HasPrefix(u, "/") {
			addrs = append(addrs, "unix:"+u)
		}
		if in.Port > 0 {
			addrs = append(addrs, fmt.Sprintf("tcp:127.0.0.1:%d", in.Port))
		}
	}
	return addrs
}

// commands sends INFO stats and returns total_commands_processed.
func commands(ctx context.Context, conn net.Conn, r *bufio.Reader, timeout time.Duration) (uint64, error) {
	deadline := time.Now().Add(timeout)
	if d, ok := ctx.Deadline(); ok && d.Before(deadline) {
		deadline = d
	}
	conn.SetDeadline(deadline)
	reply, err := command(conn, r, "INFO", "stats")
	if err != nil {
		return 0, err
	}
	s, ok := reply.(string)
	if !ok {
		return 0, fmt.Errorf("unexpected reply %T", reply)
	}
	v, ok := parseInfo(s)["total_commands_processed"]
	if !ok {
		return 0, errors.New("INFO stats has no total_commands_processed")
	}
	return strconv.ParseUint(v, 10, 64)
}

func (d detector) MainConfig(in *engine.Instance) string {
	return engine.ConfigNamed(in, confName(d.p))
}

// ConfigSnippet: redis.conf lines next to the main file, for a person to
// merge.
func (detector) ConfigSnippet(s engine.Snippet) (string, string) { return s.Merge(confLine) }

func (d detector) DefaultPort() int { return 6379 }
