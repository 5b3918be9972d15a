package check

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/dbhost/dbhost/internal/engine"
	"github.com/dbhost/dbhost/internal/facts"
	"github.com/dbhost/dbhost/internal/fix"
)

// Redis-only judgments: who can reach the data and what a restart or crash
// costs. Host settings Redis cares about (overcommit, THP, somaxconn) live in
// their host domains.

func init() {
	Register(Check{
		ID:        "redis.auth",
		Title:     "Redis on a network address requires authentication",
		Problem:   "Redis on a network address accepts clients without authentication",
		Severity:  Critical,
		AppliesTo: []string{"redis"},
		Doc: `Looks at the sockets the Redis (or Valkey) server really listens on (/proc/net/tcp,
tcp6 and the process's socket inodes, not the bind setting) and at whether a client
that does not authenticate is refused: requirepass, or an ACL default user with a
password or switched off (redis.conf user lines, aclfile). dbhost asks the server
itself without a password when it can (INFO server; a NOAUTH reply proves a password
is required). Redis has no other access control: a client that connects without a
password can read, change and delete every key, and with CONFIG SET dir/dbfilename
make the server write files as its user. Loopback and Unix sockets only: pass. A
non-loopback listener without a password fails, unless protected mode is in force:
with protected-mode yes and no password for the default user, Redis 7.0 and later
refuse every connection that is not from loopback (before 7.0, only while no bind
address is set), so the data is not exposed, although the server is useless to
remote clients until a password is set.`,
		Refs: []string{
			"https://redis.io/docs/latest/operate/oss_and_stack/management/security/",
			"https://redis.io/docs/latest/operate/oss_and_stack/management/security/acl/",
		},
		Run: checkRedisAuth,
	})
	Register(Check{
		ID:        "redis.persistence",
		Title:     "Redis persistence is consistent, and its loss window and restart cost are known",
		Problem:   "Redis writes an append-only file but leaves its flushing to the kernel (appendfsync no)",
		Severity:  Info,
		AppliesTo: []string{"redis"},
		Doc: `Says which persistence the server uses and what it costs: RDB snapshots (save
rules) lose the writes since the last snapshot; the append-only file (appendonly
yes) loses, with appendfsync everysec, up to about 2 seconds of writes (not 1: when
an fsync is slow Redis waits up to 2 s before it writes on), with always only the
writes in flight (fsyncs are batched per event loop). Restart time grows with the
files: an RDB file loads at about 10-20 s per GB, an AOF at about twice that (the
RDB preamble of a rewritten AOF loads at RDB speed). Persistence is for restarts, a
server never serves from disk. No persistence at all passes (a cache). The check
fails only for an inconsistent setup: appendonly yes with appendfsync no pays the
AOF's write cost but leaves flushing to the kernel's writeback (vm.dirty_expire_
centisecs, 30 s by default), so a power loss or kernel crash loses as much as
snapshots would; use everysec.`,
		Refs: []string{
			"https://redis.io/docs/latest/operate/oss_and_stack/management/persistence/",
			"http://oldblog.antirez.com/post/redis-persistence-demystified.html",
		},
		Sysctls: []string{"vm.dirty_expire_centisecs"},
		Run:     checkRedisPersistence,
	})
}

// exposedListeners splits an instance's listeners into those reachable from
// other hosts and a readable list of all of them.
func exposedListeners(in *facts.Instance) (exposed []engine.Listener, all []string) {
	for _, l := range in.Listen {
		all = append(all, l.String())
		if l.Proto != "unix" && !l.Loopback() {
			exposed = append(exposed, l)
		}
	}
	return exposed, all
}

// listenEv quotes the sockets an instance listens on.
func listenEv(in *facts.Instance, all []string) Evidence {
	v := strings.Join(all, ", ")
	switch {
	case len(all) == 0 && in.ListenErr != "":
		v = "unknown: " + in.ListenErr
	case len(all) == 0:
		v = "none"
	}
	return Ev("listening", v, "/proc/net/tcp, /proc/net/tcp6, /proc/net/unix")
}

func listenersText(ls []engine.Listener) string {
	var s []string
	for _, l := range ls {
		s = append(s, l.String())
	}
	return strings.Join(s, ", ")
}

// instSettingEv quotes an effective setting with its source.
func instSettingEv(in *facts.Instance, name string) Evidence {
	s, ok := in.Setting(name)
	if !ok {
		return Ev(name, "not set", "")
	}
	if s.Source == "default" && in.ConfigUnread() != "" {
		return Ev(name, fmt.Sprintf("unknown (the compiled-in default is %q, but the configuration was not read)", s.Value), "")
	}
	v := s.Value
	if v == "" {
		v = `""`
	}
	return Ev(name, v, s.Source)
}

// redisSettingsKnown reports whether the effective settings are known (read
// live, or from files that were all read).
func redisSettingsKnown(in *facts.Instance) (bool, string) {
	if in.SettingsSource == "live" || in.Redis.ConfigErr == "" {
		return true, ""
	}
	return false, in.Redis.ConfigErr
}

func redisAuthEv(in *facts.Instance) Evidence {
	switch {
	case in.Redis.AuthSource == "":
		return Ev("authentication", "unknown", "")
	case in.Redis.AuthConfigured:
		return Ev("authentication", "required", in.Redis.AuthSource)
	}
	return Ev("authentication", "not required (default user has no password)", in.Redis.AuthSource)
}

func checkRedisAuth(f *facts.Facts) []Result {
	var out []Result
	for _, in := range f.ByEngine(engine.Redis) {
		if in.Redis == nil {
			continue
		}
		subj := in.Name()
		exposed, all := exposedListeners(in)
		ev := []Evidence{
			listenEv(in, all),
			redisAuthEv(in),
			instSettingEv(in, "bind"), instSettingEv(in, "protected-mode"),
			Ev("version", in.Flavor+" "+textOrUnknown(in.Version), in.VersionSource),
		}
		authKnown := in.Redis.AuthSource != ""
		switch {
		case len(in.Listen) == 0 && in.ListenErr != "":
			if authKnown && in.Redis.AuthConfigured {
				out = append(out, PassR(subj, "Clients must authenticate ("+in.Redis.AuthSource+"), wherever the server listens.", ev...))
				continue
			}
			out = append(out, UnknownR(subj, "Cannot see which addresses the server listens on: "+in.ListenErr+".", ev...))
			continue
		case len(exposed) == 0:
			out = append(out, PassR(subj, fmt.Sprintf("Listens only on loopback or Unix sockets (%s): only clients on this host can reach it.", strings.Join(all, ", ")), ev...))
			continue
		case !authKnown:
			out = append(out, UnknownR(subj, fmt.Sprintf("Listens on %s, but whether clients must authenticate is unknown: %s.", listenersText(exposed), in.Redis.ConfigErr), ev...))
			continue
		case in.Redis.AuthConfigured:
			out = append(out, PassR(subj, fmt.Sprintf("Listens on %s and clients must authenticate (%s).", listenersText(exposed), in.Redis.AuthSource), ev...))
			continue
		}
		if r, ok := redisProtected(in, subj, exposed, ev); ok {
			out = append(out, r)
			continue
		}
		out = append(out, FailR(subj, fmt.Sprintf(
			"Listens on %s and accepts clients without a password: anyone who reaches the port can read, change or delete every key, and with CONFIG SET dir/dbfilename make the server write files as %s. Protected mode does not help here (%s).",
			listenersText(exposed), textOrUnknown(in.User), redisWhyUnprotected(in)),
			redisAuthFix(in, subj), ev...))
	}
	return out
}

// redisProtected judges an exposed server without a password: protected
// mode refuses non-loopback clients while the default user has no password
// (Redis 7.0+), or, before 7.0, only while no bind address is set.
func redisProtected(in *facts.Instance, subj string, exposed []engine.Listener, ev []Evidence) (Result, bool) {
	if known, why := redisSettingsKnown(in); !known {
		return UnknownR(subj, fmt.Sprintf("Listens on %s without a password; whether protected mode refuses remote clients is unknown: %s.", listenersText(exposed), why), ev...), true
	}
	if !strings.EqualFold(in.SettingValue("protected-mode"), "yes") {
		return Result{}, false
	}
	bind, _ := in.Setting("bind")
	modern := in.Version != "" && engine.VersionAtLeast(in.Version, "7.0")
	if in.Version == "" && bind.Source != "default" {
		return UnknownR(subj, fmt.Sprintf("Listens on %s without a password with protected-mode yes and an explicit bind; protected mode covers that only from Redis 7.0, and the version is unknown.", listenersText(exposed)), ev...), true
	}
	if modern || bind.Source == "default" {
		return PassR(subj, fmt.Sprintf("Listens on %s without a password, but protected mode is in force: the server refuses every client that is not on loopback (DENIED). Remote clients cannot use it; to serve them, set a password (requirepass or an ACL user) rather than turning protected mode off.", listenersText(exposed)), ev...), true
	}
	return Result{}, false
}

func redisWhyUnprotected(in *facts.Instance) string {
	if !strings.EqualFold(in.SettingValue("protected-mode"), "yes") {
		return "protected-mode is " + textOrUnknown(in.SettingValue("protected-mode"))
	}
	return "before Redis 7.0 protected mode is off as soon as a bind address is set, and bind is " + strconv.Quote(in.SettingValue("bind"))
}

// redisCLI is the redis-cli command that reaches the instance: its TCP
// port, or its Unix socket when it listens on none.
func redisCLI(in *facts.Instance) string {
	if in.Port == 0 {
		if s := in.SettingValue("unixsocket"); s != "" {
			return "redis-cli -s " + s
		}
	}
	return fmt.Sprintf("redis-cli -p %d", in.Port)
}

// redisAuthFix closes the server to remote clients without a password. On
// 7.0+ protected mode does it at runtime; before, only binding loopback
// does. Serving remote clients needs a password, which dbhost cannot choose.
func redisAuthFix(in *facts.Instance, subj string) *fix.Fix {
	cli := redisCLI(in)
	manual := "To serve clients on other hosts, give them a password instead: set requirepass to a long random value (or define ACL users with passwords) in the server's configuration, restart or CONFIG SET it, and configure the clients; keep protected mode on."
	if in.Version != "" && engine.VersionAtLeast(in.Version, "7.0") {
		return &fix.Fix{
			Summary: "Turn protected mode on (refuse non-loopback clients without a password)",
			Config:  []fix.ConfigChange{{Instance: subj, Engine: string(engine.Redis), Key: "protected-mode", Value: "yes"}},
			Runtime: []string{cli + " CONFIG SET protected-mode yes"},
			Manual:  manual,
		}
	}
	return &fix.Fix{
		Summary: "Listen on loopback only",
		Config:  []fix.ConfigChange{{Instance: subj, Engine: string(engine.Redis), Key: "bind", Value: "127.0.0.1", Restart: true}},
		Manual:  manual,
	}
}

func textOrUnknown(s string) string {
	if s == "" {
		return "unknown"
	}
	return s
}

func checkRedisPersistence(f *facts.Facts) []Result {
	var out []Result
	for _, in := range f.ByEngine(engine.Redis) {
		if in.Redis == nil {
			continue
		}
		subj := in.Name()
		ev := []Evidence{instSettingEv(in, "appendonly"), instSettingEv(in, "appendfsync"), instSettingEv(in, "save")}
		if known, why := redisSettingsKnown(in); !known {
			out = append(out, UnknownR(subj, "The server's persistence settings are unknown: "+why+".", ev...))
			continue
		}
		aof := strings.EqualFold(in.SettingValue("appendonly"), "yes")
		save := strings.TrimSpace(in.SettingValue("save"))
		fsync := strings.ToLower(in.SettingValue("appendfsync"))
		ev = append(ev, redisFileEv(in)...)
		restart := redisRestartCost(in, aof, save != "")
		switch {
		case aof && fsync == "no":
			expire := "30 s by default"
			r := f.SysctlReading("vm.dirty_expire_centisecs")
			if v, why := r.Count(); why == "" {
				expire = fmt.Sprintf("%d s here", v/100)
				ev = append(ev, EvReading("vm.dirty_expire_centisecs", r))
			}
			out = append(out, FailR(subj, fmt.Sprintf(
				"The append-only file is on but appendfsync is no: Redis never fsyncs it and leaves flushing to the kernel's writeback (vm.dirty_expire_centisecs, %s). A crash of Redis alone loses nothing, but a power loss or kernel crash loses that much of the writes the AOF is paying its I/O for. appendfsync everysec bounds the loss at about 2 s for little cost.%s",
				expire, restart),
				&fix.Fix{
					Summary: "Fsync the append-only file every second",
					Config:  []fix.ConfigChange{{Instance: subj, Engine: string(engine.Redis), Key: "appendfsync", Value: "everysec"}},
					Runtime: []string{redisCLI(in) + " CONFIG SET appendfsync everysec"},
				}, ev...))
		case aof:
			loss := "up to about 2 s of acknowledged writes on a crash or power loss (everysec: a slow fsync is waited for up to 2 s before writes continue, so not 1 s)"
			if fsync == "always" {
				loss = "only the writes of the event loop in flight (always: every batch of writes is fsynced before the replies go out, group-commit style, at a real cost in latency)"
			}
			rdb := ""
			if save != "" {
				rdb = " RDB snapshots are on as well (save " + save + ")."
			}
			out = append(out, PassR(subj, "Append-only file on, appendfsync "+fsync+": loses "+loss+"."+rdb+restart, ev...))
		case save != "":
			out = append(out, PassR(subj, fmt.Sprintf("RDB snapshots only (save %s): a crash loses every write since the last snapshot, up to %s when few keys change.%s", save, redisLongestSave(save), restart), ev...))
		default:
			out = append(out, PassR(subj, "No persistence (no save rules, appendonly no): every restart or crash starts empty. Right for a pure cache; anything else must be rebuilt from elsewhere.", ev...))
		}
	}
	return out
}

// redisLongestSave reads "3600 1 300 100" and names the longest interval.
func redisLongestSave(save string) string {
	f := strings.Fields(save)
	longest := 0
	for i := 0; i+1 < len(f); i += 2 {
		if s, err := strconv.Atoi(f[i]); err == nil && s > longest {
			longest = s
		}
	}
	if longest == 0 {
		return "the save interval"
	}
	return fmt.Sprintf("%d s", longest)
}

func redisFileEv(in *facts.Instance) []Evidence {
	var ev []Evidence
	if in.DataDir == "" {
		return nil
	}
	if in.Redis.FilesErr != "" {
		return []Evidence{Ev("persistence files", "unreadable: "+in.Redis.FilesErr, in.DataDir)}
	}
	rdb := "no file"
	if in.Redis.RDBBytes > 0 {
		rdb = humanBytes(uint64(in.Redis.RDBBytes))
	}
	ev = append(ev, Ev("RDB file size", rdb, in.DataDir+"/"+in.SettingValue("dbfilename")))
	if in.Redis.AOFBytes > 0 {
		ev = append(ev, Ev("AOF size", humanBytes(uint64(in.Redis.AOFBytes)), in.DataDir))
	}
	return ev
}

// redisRestartCost estimates the load time at start from the files: RDB
// about 10-20 s per GB, AOF about twice that.
func redisRestartCost(in *facts.Instance, aof, rdb bool) string {
	if in.DataDir == "" || in.Redis.FilesErr != "" {
		return ""
	}
	const gb = 1 << 30
	est := func(bytes int64, lo, hi float64) string {
		g := float64(bytes) / gb
		if g*lo < 1 {
			return "under a second"
		}
		return fmt.Sprintf("about %.0f-%.0f s", g*lo, g*hi)
	}
	switch {
	case aof && in.Redis.AOFBytes > 0:
		return fmt.Sprintf(" At restart Redis loads the AOF (%s): %s at 20-40 s per GB (less where a rewritten AOF starts with an RDB preamble).", humanBytes(uint64(in.Redis.AOFBytes)), est(in.Redis.AOFBytes, 20, 40))
	case !aof && in.Redis.RDBBytes > 0:
		return fmt.Sprintf(" At restart Redis loads %s (%s): %s at 10-20 s per GB.", in.SettingValue("dbfilename"), humanBytes(uint64(in.Redis.RDBBytes)), est(in.Redis.RDBBytes, 10, 20))
	case rdb || aof:
		return " No persistence file exists yet, so a restart is quick now; it slows by 10-20 s per GB of RDB (twice that for an AOF) as the data grows."
	}
	return ""
}
