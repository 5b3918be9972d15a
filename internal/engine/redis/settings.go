package redis

import (
	"strings"

	"github.com/dbhost/dbhost/internal/engine"
	"github.com/dbhost/dbhost/internal/host"
)

func explain(err error) string        { return host.Explain(err) }
func isNotExist(err error) bool       { return host.IsNotExist(err) }
func versionAtLeast(v, m string) bool { return v != "" && engine.VersionAtLeast(v, m) }

// multiArg names the settings that take several arguments on one line;
// a single argument holding spaces is split, as Redis does (MULTI_ARG_CONFIG).
var multiArg = map[string]bool{
	"save": true, "bind": true, "client-output-buffer-limit": true, "oom-score-adj-values": true,
	"replicaof": true, "latency-tracking-info-percentiles": true,
	"shutdown-on-sigint": true, "shutdown-on-sigterm": true,
}

// canonical maps old names to the ones CONFIG GET reports.
func canonical(name string) string {
	name = strings.ToLower(name)
	switch {
	case name == "slaveof":
		return "replicaof"
	case strings.HasPrefix(name, "slave-"):
		return "replica-" + strings.TrimPrefix(name, "slave-")
	}
	return name
}

// secretSetting reports settings whose values are credentials; dbhost keeps
// only whether they are set.
func secretSetting(name string) bool {
	name = canonical(name)
	return name == "requirepass" || name == "masterauth" || strings.HasSuffix(name, "-pass") || strings.Contains(name, "password")
}

// defaults sets the compiled-in values of the settings dbhost's checks use,
// for the server version when it matters. Source "default".
func defaults(in *engine.Instance) {
	set := func(k, v string) { in.Set(k, v, "default") }
	set("port", "6379")
	set("tcp-backlog", "511")
	set("timeout", "0")
	set("tcp-keepalive", "300")
	set("maxclients", "10000")
	set("maxmemory", "0")
	set("maxmemory-policy", "noeviction")
	set("appendonly", "no")
	set("appendfsync", "everysec")
	set("save", "3600 1 300 100 60 10000")
	set("dbfilename", "dump.rdb")
	set("appendfilename", "appendonly.aof")
	set("requirepass", "")
	set("aclfile", "")
	set("unixsocket", "")
	set("daemonize", "no")
	set("supervised", "no")
	set("cluster-enabled", "no")
	if in.Version == "" || versionAtLeast(in.Version, "3.2") {
		set("protected-mode", "yes") // introduced in 3.2
	}
	set("oom-score-adj", "no")
	set("hz", "10")
	// Redis 7 binds every IPv4 and IPv6 address by default ("* -::*");
	// before 7.0 an empty bind meant the same. Both rely on protected mode.
	if in.Version == "" || versionAtLeast(in.Version, "7.0") {
		set("bind", "* -::*")
		set("appenddirname", "appendonlydir")
	} else {
		set("bind", "")
	}
	if in.Version == "" || versionAtLeast(in.Version, "6.2") {
		set("disable-thp", "yes")
		set("set-proc-title", "yes")
	}
}

// settings is the effective configuration being built, with Redis's
// special cases: `save` lines accumulate within one load, `user` lines
// define ACL users.
type settings struct {
	in        *engine.Instance
	saveSeen  bool
	users     map[string]*aclUser
	userSrc   map[string]string
	requireAt string // source of a non-empty requirepass
}

func newSettings(in *engine.Instance) *settings {
	return &settings{in: in, users: map[string]*aclUser{}, userSrc: map[string]string{}}
}

// apply records one directive (file line or command-line option).
func (s *settings) apply(d Directive) {
	name := canonical(d.Name)
	args := d.Args
	if multiArg[name] && len(args) == 1 && args[0] != "" {
		if sp, err := SplitArgs(args[0]); err == nil {
			args = sp
		}
	}
	switch name {
	case "include", "rename-command", "loadmodule":
		return
	case "user":
		if len(args) > 0 {
			s.user(args[0], args[1:], d.Source)
		}
		return
	case "save":
		// The first save line of a load replaces the defaults, `save ""`
		// clears, every other save line adds its pairs.
		cur := s.in.SettingValue("save")
		if !s.saveSeen || (len(args) == 1 && args[0] == "") {
			cur = ""
		}
		s.saveSeen = true
		if !(len(args) == 1 && args[0] == "") {
			cur = strings.TrimSpace(cur + " " + strings.Join(args, " "))
		}
		s.in.Set(name, cur, d.Source)
		return
	}
	v := strings.Join(args, " ")
	if secretSetting(name) {
		if v != "" && v != `""` {
			if name == "requirepass" {
				s.requireAt = d.Source
			}
			v = host.Redacted
		} else {
			v = ""
			if name == "requirepass" {
				s.requireAt = ""
			}
		}
	}
	s.in.Set(name, v, d.Source)
}

// aclUser is the authentication state of one ACL user after its rules.
type aclUser struct {
	on        bool
	nopass    bool
	passwords int
}

// user applies an ACL user definition. Redis resets a user that is defined
// in the configuration before applying its rules, so a `user default` line
// without nopass or a password leaves the default user without a way in.
func (s *settings) user(name string, rules []string, src string) {
	u := &aclUser{}
	s.users[name] = u
	s.userSrc[name] = src
	for _, r := range rules {
		switch {
		case strings.EqualFold(r, "on"):
			u.on = true
		case strings.EqualFold(r, "off"):
			u.on = false
		case strings.EqualFold(r, "nopass"):
			u.nopass, u.passwords = true, 0
		case strings.EqualFold(r, "resetpass"):
			u.nopass, u.passwords = false, 0
		case strings.EqualFold(r, "reset"):
			*u = aclUser{}
		case strings.HasPrefix(r, ">"), strings.HasPrefix(r, "#"):
			u.passwords++
			u.nopass = false
		case strings.HasPrefix(r, "<"), strings.HasPrefix(r, "!"):
			if u.passwords > 0 {
				u.passwords--
			}
		}
	}
}

// auth says whether a client that does not authenticate is refused, and
// which line decides it. A `user default` definition wins over
// requirepass (ACL users are loaded after the configuration).
func (s *settings) auth() (bool, string) {
	if u, ok := s.users["default"]; ok {
		return !(u.on && u.nopass), s.userSrc["default"]
	}
	if s.requireAt != "" {
		return true, s.requireAt
	}
	return false, "default"
}
