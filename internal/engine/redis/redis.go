// Package redis finds running Redis (and Valkey) servers and reads redis.conf
// with its includes and the command line that overrides it.
//
// Redis overwrites its own /proc/PID/cmdline with a process title
// ("redis-server 127.0.0.1:6379", set-proc-title yes by default), so the
// config file is usually not visible there. dbhost then asks the server
// (INFO server, CONFIG GET *, without a password — it never sends one), and
// failing that reads the ExecStart of the systemd service whose cgroup the
// server runs in, and failing that accepts a packaged redis.conf whose port
// matches the one in the title (and says so).
//
// Redis Sentinel processes (redis-sentinel, --sentinel, "[sentinel]" in the
// title) are not database servers and are skipped.
package redis

import (
	"context"
	"errors"
	"fmt"
	"path"
	"strconv"
	"strings"

	"github.com/dbhost/dbhost/internal/engine"
	"github.com/dbhost/dbhost/internal/host"
	"github.com/dbhost/dbhost/internal/textio"
)

// Redis is the Redis product; forks register their own (engine/valkey).
var Redis = Product{
	Name: "redis", Flavor: "Redis", Comm: "redis-server", Accounts: []string{"redis"},
	Units: []string{"redis-server.service", "redis.service"},
	Confs: []string{"/etc/redis/redis.conf", "/etc/redis.conf"},
}

func init() { engine.Register(NewProfile(Redis)) }

// Match accepts the product's server processes, except a fork of another
// one (a background save or AOF rewrite child).
func (d detector) Match(p engine.Process, t *engine.Table) bool {
	if p.Comm != d.p.Comm {
		return false
	}
	if parent, ok := t.Get(p.PPID); ok && isServerComm(parent.Comm) {
		return false
	}
	return true
}

// title is what set-proc-title wrote: "{title} {listen-addr} {server-mode}".
type title struct {
	addr string // bind address of the first listener, "*" for all
	port int
	unix string // listen-addr "unixsocket:/path" when there is no TCP port
	mode string // "cluster", "sentinel" or ""
}

// parseTitle recognises a rewritten command line: one argument that holds
// spaces (the original arguments are gone).
func parseTitle(argv []string) (title, bool) {
	var t title
	if len(argv) != 1 || !strings.Contains(argv[0], " ") {
		return t, false
	}
	fields := strings.Fields(argv[0])
	if len(fields) < 2 {
		return t, false
	}
	for _, f := range fields[1:] {
		switch {
		case strings.HasPrefix(f, "unixsocket:"):
			t.unix = strings.TrimPrefix(f, "unixsocket:")
		case f == "[cluster]" || f == "[sentinel]":
			t.mode = strings.Trim(f, "[]")
		default:
			i := strings.LastIndexByte(f, ':')
			if i < 0 {
				continue
			}
			if p, err := strconv.Atoi(f[i+1:]); err == nil && p > 0 && p < 65536 {
				t.addr, t.port = f[:i], p
			}
		}
	}
	return t, true
}

// inspection is the state of one Inspect: what the process, its files and
// the server itself said so far.
type inspection struct {
	h    *host.Host
	p    engine.Process
	in   *engine.Instance
	opts engine.Options

	argv           []string
	cmdErr, cwdErr error
	cwd            string
	t              title
	rewritten      bool
	cl             Cmdline
	argsKnown      bool
	confFile       string
	conf           *Conf
	lv             *live
}

// Inspect describes one server.
func (d detector) Inspect(ctx context.Context, h *host.Host, p engine.Process, _ *engine.Table, opts engine.Options) (*engine.Instance, error) {
	x := &inspection{h: h, p: p, opts: opts, in: &engine.Instance{
		Engine: engine.Redis, Flavor: d.p.Flavor, PID: p.PID, Comm: p.Comm,
		User: p.User, UID: p.UID, GID: p.GID, SettingsSource: "files",
		Redis: &engine.RedisInfo{},
	}}
	if err := x.process(); err != nil {
		return nil, err
	}
	if x.sentinel() {
		return nil, nil // a Sentinel holds no data
	}
	x.readConf()
	x.ask(ctx)
	x.version(ctx)
	x.settings()
	x.paths()
	return x.in, nil
}

// process reads the command line, binary and working directory.
func (x *inspection) process() error {
	in, h, p := x.in, x.h, x.p
	x.argv, x.cmdErr = h.Cmdline(p.PID)
	if x.cmdErr != nil && host.IsNotExist(x.cmdErr) {
		return x.cmdErr // exited while we looked
	}
	in.Cmdline = x.argv
	if exe, err := h.Exe(p.PID); err == nil {
		in.Exe = exe
	}
	if strings.Contains(path.Base(in.Exe), "valkey") {
		in.Flavor = "Valkey"
	}
	x.cwd, x.cwdErr = h.Readlink(fmt.Sprintf("/proc/%d/cwd", p.PID))
	if x.cwdErr != nil {
		x.cwd = ""
	}
	x.t, x.rewritten = parseTitle(x.argv)
	optSource := "cmdline"
	x.argsKnown = !x.rewritten && x.cmdErr == nil
	if x.cmdErr != nil {
		in.ConfigErrors = append(in.ConfigErrors, "cannot read the command line: "+host.Explain(x.cmdErr))
	} else if !x.rewritten {
		x.cl = ParseCmdline(x.argv)
	} else if uargv, file := unitExecStart(h, p.PID); uargv != nil {
		x.cl = ParseCmdline(uargv)
		optSource = "unit:" + file
		x.argsKnown = true
	}
	for i := range x.cl.Options {
		x.cl.Options[i].Source = optSource
	}
	return nil
}

func (x *inspection) sentinel() bool {
	return x.cl.Sentinel || x.t.mode == "sentinel" || strings.Contains(x.p.Comm, "sentinel") || strings.Contains(path.Base(x.in.Exe), "sentinel")
}

// readConf parses the configuration file the arguments name.
func (x *inspection) readConf() {
	x.confFile = x.cl.ConfigFile
	if x.confFile != "" && !path.IsAbs(x.confFile) {
		if x.cwd == "" {
			x.in.ConfigErrors = append(x.in.ConfigErrors, fmt.Sprintf("config file %s is relative and the server's working directory is unreadable (%s)", x.confFile, host.Explain(x.cwdErr)))
		}
		x.confFile = path.Join(x.cwd, x.confFile)
	}
	if x.confFile != "" {
		x.conf = ParseConf(hostFS{x.h}, x.confFile, x.cwd)
	}
}

// ask asks the server itself, over an address verified to be its own.
func (x *inspection) ask(ctx context.Context) {
	in, p := x.in, x.p
	if x.opts.NoConnect {
		in.LiveErr = "live connections disabled"
		return
	}
	addrs := candidates(x.h, p.PID, x.t, x.conf, x.cl.Options)
	if len(addrs) == 0 {
		in.LiveErr = "no address to ask the server on (no TCP port or Unix socket known)"
	} else if l, err := readLive(ctx, x.h, p.PID, addrs, x.opts.Timeout); err != nil {
		in.LiveErr = host.Explain(err)
	} else if !samePID(x.h, p.PID, l.Info) && !l.AuthRequired {
		in.LiveErr = fmt.Sprintf("%s is served by process %s, not %d", l.Via, l.Info["process_id"], p.PID)
	} else {
		x.lv = l
	}
	if x.lv == nil || x.lv.Info == nil {
		return
	}
	info := x.lv.Info
	if v := firstNonEmpty(info["valkey_version"], info["redis_version"]); v != "" && in.Version == "" {
		in.Version, in.VersionSource = v, "live: INFO server"
	}
	if info["server_name"] == "valkey" || info["valkey_version"] != "" {
		in.Flavor = "Valkey"
	}
	if x.rewritten && x.confFile == "" && info["config_file"] != "" {
		x.confFile = info["config_file"]
		x.conf = ParseConf(hostFS{x.h}, x.confFile, x.cwd)
	}
}

// version asks the binary when the server said nothing, as the server's
// own user.
func (x *inspection) version(ctx context.Context) {
	in := x.in
	if in.Version == "" && in.Exe != "" {
		readVersion(ctx, x.h, in, serverBinary(x.h, in.Exe, x.p.Comm), "")
	}
	if in.Version == "" && in.Exe == "" {
		// The binary on PATH: a last resort when the running one is
		// unknown (/proc/PID/exe needs root); it may be another version.
		readVersion(ctx, x.h, in, x.p.Comm, " (on PATH)")
	}
}

// settings layers the effective settings: defaults, then files, then
// arguments, then live; and decides whether clients must authenticate.
func (x *inspection) settings() {
	in := x.in
	configKnown := x.argsKnown || x.confFile != "" || (x.lv != nil && x.lv.Info != nil)
	if !configKnown {
		if f, c := inferConf(x.h, in.Flavor, x.t.port, x.cwd); c != nil {
			x.confFile, x.conf = f, c
			configKnown = true
			in.ConfigErrors = append(in.ConfigErrors, fmt.Sprintf("set-proc-title hid the command line and the server could not be asked; assumed %s because its port matches", f))
		}
	}
	defaults(in)
	s := newSettings(in)
	if x.conf != nil {
		in.ConfigFiles = x.conf.Files
		in.ConfigErrors = append(in.ConfigErrors, x.conf.Errors...)
		for _, d := range x.conf.Directives {
			s.apply(d)
		}
	}
	for _, d := range x.cl.Options {
		s.apply(d)
	}
	if x.cl.Stdin {
		in.ConfigErrors = append(in.ConfigErrors, "configuration read from standard input: not visible to dbhost")
	}
	aclOK := readACLFile(x.h, in, s, x.cwd)

	authed, authSrc := s.auth()
	// Why the server could not be asked: a refusal for want of a
	// password is an answer, not an error, so LiveErr is still empty.
	asked := in.LiveErr
	if x.lv != nil && x.lv.AuthRequired {
		asked = "it requires authentication on " + x.lv.Via + ", and dbhost sends no password to Redis"
	}
	switch {
	case !configKnown && x.cmdErr != nil:
		in.Redis.ConfigErr = "the command line is unreadable (" + host.Explain(x.cmdErr) + ") and the server could not be asked (" + asked + "): the config file is unknown"
	case !configKnown:
		in.Redis.ConfigErr = "the command line was rewritten by set-proc-title and the server could not be asked (" + asked + "): the config file is unknown"
	case x.conf != nil && x.conf.Unreadable:
		in.Redis.ConfigErr = "configuration files unreadable: " + strings.Join(x.conf.Errors, "; ")
	case !aclOK:
		in.Redis.ConfigErr = "ACL file unreadable"
	default:
		in.Redis.AuthConfigured, in.Redis.AuthSource = authed, authSrc
	}
	x.liveSettings()
}

// liveSettings takes what the server said over what the files say.
func (x *inspection) liveSettings() {
	in, lv := x.in, x.lv
	switch {
	case lv == nil:
	case lv.AuthRequired:
		in.Redis.AuthConfigured, in.Redis.AuthSource = true, "live"
		in.LiveErr = "the server requires authentication (" + lv.Via + "); settings from files"
	default:
		in.Redis.AuthConfigured, in.Redis.AuthSource = false, "live"
		in.Redis.ConfigErr = ""
		in.LiveVia = lv.Via
		if lv.Config == nil {
			in.LiveErr = "CONFIG GET refused (" + lv.ConfigErr + "); settings from files"
			return
		}
		for k, v := range lv.Config {
			in.Set(k, v, "live")
		}
		in.SettingsSource = "live"
	}
}

// paths sets the port, the data directory and the other paths.
func (x *inspection) paths() {
	in := x.in
	switch {
	case x.lv != nil && x.lv.Config != nil:
		in.Port, _ = strconv.Atoi(in.SettingValue("port"))
	case x.t.port > 0:
		in.Port = x.t.port
	default:
		in.Port, _ = strconv.Atoi(in.SettingValue("port"))
	}
	in.DataDir = dataDir(in, x.cwd)
	in.Paths = map[string]string{}
	if in.DataDir != "" {
		in.Paths["data"] = in.DataDir
	}
	if lf := in.SettingValue("logfile"); lf != "" {
		if !path.IsAbs(lf) && in.DataDir != "" {
			lf = path.Join(in.DataDir, lf)
		}
		if path.IsAbs(lf) {
			in.Paths["log"] = path.Dir(lf)
		}
	}
	persistenceFiles(x.h, in)
}

// hostFS reads configuration through the host model (redacted in
// snapshots).
type hostFS struct{ h *host.Host }

func (f hostFS) ReadFile(p string) ([]byte, error)  { return f.h.ReadConfig(p) }
func (f hostFS) ReadDir(p string) ([]string, error) { return f.h.ReadDir(p) }

var versionRE = textio.LazyRegexp(`\bv=(\d+\.\d+(?:\.\d+)?\S*)`)

// readVersion runs `BINARY --version` as the server's user: "Redis server
// v=7.0.15 sha=...", "Valkey server v=8.0.1 ...". A binary that someone
// other than root can change is not run (host.CheckTrusted): the reason is
// kept.
func readVersion(ctx context.Context, h *host.Host, in *engine.Instance, bin, note string) {
	if bin == "" || in.Version != "" {
		return
	}
	out, err := h.RunAs(ctx, in.UID, in.GID, bin, "--version")
	if errors.Is(err, host.ErrUntrusted) {
		in.ConfigErrors = append(in.ConfigErrors, "version unknown: "+err.Error())
	}
	if err != nil {
		return
	}
	m := versionRE.FindSubmatch(out)
	if m == nil {
		return
	}
	in.Version = string(m[1])
	in.VersionSource = bin + " --version" + note
	if strings.HasPrefix(string(out), "Valkey") {
		in.Flavor = "Valkey"
	}
}

// serverBinary is the path to run for --version. Debian links
// redis-server to redis-check-rdb: one binary that picks its role from
// argv[0], so it must be run under the server's name.
func serverBinary(h *host.Host, exe, comm string) string {
	if exe == "" || path.Base(exe) == comm {
		return exe
	}
	if alt := path.Join(path.Dir(exe), comm); h.Exists(alt) {
		return alt
	}
	return exe
}

// samePID checks that the server that answered is this process (its own
// PID, or the PID it has in its PID namespace).
func samePID(h *host.Host, pid int, info map[string]string) bool {
	got, err := strconv.Atoi(info["process_id"])
	if err != nil {
		return false
	}
	return (&engine.Instance{PID: pid}).IsPID(h, got)
}

// candidates lists the addresses to ask the server on: its own listening
// sockets when they can be seen (Unix socket first: no network, no
// protected mode), else what the title and configuration say.
func candidates(h *host.Host, pid int, t title, conf *Conf, opts []Directive) []string {
	var out []string
	add := func(a string) {
		for _, x := range out {
			if x == a {
				return
			}
		}
		out = append(out, a)
	}
	probe := &engine.Instance{PID: pid}
	engine.AttachListeners(h, []*engine.Instance{probe})
	for _, l := range probe.Listen {
		if l.Proto == "unix" {
			add("unix:" + l.Addr)
		}
	}
	for _, l := range probe.Listen {
		if l.Proto != "unix" && l.Loopback() {
			add(tcpAddr(l.Addr, l.Port))
		}
	}
	for _, l := range probe.Listen {
		switch {
		case l.Wildcard() && l.Proto == "tcp":
			add(tcpAddr("127.0.0.1", l.Port))
		case l.Wildcard():
			add(tcpAddr("::1", l.Port))
		case l.Proto != "unix" && !l.Loopback():
			add(tcpAddr(l.Addr, l.Port))
		}
	}
	if len(out) > 0 {
		return out
	}
	var ds []Directive
	if conf != nil {
		ds = append(ds, conf.Directives...)
	}
	ds = append(ds, opts...)
	if u := last(ds, "unixsocket"); u != "" {
		add("unix:" + u)
	}
	if t.unix != "" {
		add("unix:" + t.unix)
	}
	port := t.port
	if port == 0 {
		port = 6379
		if v := last(ds, "port"); v != "" {
			port, _ = strconv.Atoi(v)
		}
	}
	if port > 0 {
		switch t.addr {
		case "", "*", "0.0.0.0", "localhost":
			add(tcpAddr("127.0.0.1", port))
		case "::", "-::*", "::*":
			add(tcpAddr("::1", port))
		default:
			add(tcpAddr(strings.TrimPrefix(t.addr, "-"), port))
		}
	}
	return out
}

func tcpAddr(ip string, port int) string {
	if strings.Contains(ip, ":") {
		return fmt.Sprintf("tcp:[%s]:%d", ip, port)
	}
	return fmt.Sprintf("tcp:%s:%d", ip, port)
}

// last returns the value of the last directive with a name.
func last(ds []Directive, name string) string {
	v := ""
	for _, d := range ds {
		if canonical(d.Name) == name {
			v = d.Value()
		}
	}
	return v
}

func firstNonEmpty(vs ...string) string {
	for _, v := range vs {
		if v != "" {
			return v
		}
	}
	return ""
}

// inferConf accepts a packaged configuration file when nothing else names
// one, but only if its port is the one the server reports in its title.
func inferConf(h *host.Host, flavor string, port int, cwd string) (string, *Conf) {
	if port == 0 {
		return "", nil
	}
	for _, f := range packagedConfs(flavor) {
		if !h.Exists(f) {
			continue
		}
		c := ParseConf(hostFS{h}, f, cwd)
		p := last(c.Directives, "port")
		if p == "" {
			p = "6379"
		}
		if p == strconv.Itoa(port) {
			return f, c
		}
	}
	return "", nil
}

// readACLFile applies the users of the aclfile, if one is set. It reports
// false when the file is set but cannot be read.
func readACLFile(h *host.Host, in *engine.Instance, s *settings, cwd string) bool {
	st, _ := in.Setting("aclfile")
	f := st.Value
	if f == "" {
		return true
	}
	if !path.IsAbs(f) {
		f = path.Join(cwd, f)
	}
	b, err := h.ReadConfig(f)
	if err != nil {
		in.ConfigErrors = append(in.ConfigErrors, fmt.Sprintf("cannot read ACL file %s: %s", f, host.Explain(err)))
		return false
	}
	in.ConfigFiles = append(in.ConfigFiles, f)
	for i, ln := range strings.Split(string(b), "\n") {
		ln = strings.TrimSpace(ln)
		if ln == "" || ln[0] == '#' {
			continue
		}
		args, err := SplitArgs(ln)
		if err != nil || len(args) < 2 || strings.ToLower(args[0]) != "user" {
			continue
		}
		s.user(args[1], args[2:], fmt.Sprintf("file:%s:%d", f, i+1))
	}
	return true
}

// dataDir is where the server keeps its files: its working directory
// (Redis chdirs to `dir`), or the configured dir when that is unreadable.
func dataDir(in *engine.Instance, cwd string) string {
	if cwd != "" {
		return cwd
	}
	if d := in.SettingValue("dir"); path.IsAbs(d) {
		return path.Clean(d)
	}
	return ""
}

// persistenceFiles records the on-disk size of the RDB and AOF files: the
// restart cost depends on them.
func persistenceFiles(h *host.Host, in *engine.Instance) {
	if in.DataDir == "" {
		return
	}
	var errs []string
	fail := func(p string, err error) {
		errs = append(errs, p+": "+strings.TrimPrefix(host.Explain(err), p+": "))
	}
	if name := in.SettingValue("dbfilename"); name != "" {
		p := path.Join(in.DataDir, name)
		fi, err := h.Stat(p)
		switch {
		case err == nil:
			in.Redis.RDBBytes = fi.Size
		case !host.IsNotExist(err):
			fail(p, err)
		}
	}
	aofDir := in.SettingValue("appenddirname")
	if aofDir != "" {
		dir := path.Join(in.DataDir, aofDir)
		names, err := h.ReadDir(dir)
		switch {
		case err == nil:
			for _, n := range names {
				if fi, err := h.Stat(path.Join(dir, n)); err == nil && !fi.IsDir {
					in.Redis.AOFBytes += fi.Size
				}
			}
		case !host.IsNotExist(err):
			fail(dir, err)
		}
	} else if name := in.SettingValue("appendfilename"); name != "" {
		p := path.Join(in.DataDir, name)
		fi, err := h.Stat(p)
		switch {
		case err == nil:
			in.Redis.AOFBytes = fi.Size
		case !host.IsNotExist(err):
			fail(p, err)
		}
	}
	in.Redis.FilesErr = strings.Join(errs, "; ")
}
