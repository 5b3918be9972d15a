// Package mysql finds running MySQL, MariaDB and Percona servers (also as
// Galera / Percona XtraDB Cluster nodes) and reads their option files in the
// server's search order and, over the local socket, their live variables.
package mysql

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path"
	"strconv"
	"strings"

	"github.com/dbhost/dbhost/internal/engine"
	"github.com/dbhost/dbhost/internal/host"
)

func init() { engine.Register(detector{}) }

type detector struct{ engine.Base }

func (detector) Engine() engine.Engine { return engine.MySQL }

// Match accepts the server process itself: comm mysqld or mariadbd. The
// mysqld_safe / mariadbd-safe wrappers and the clients (mysql, mariadb) have
// other names.
func (detector) Match(p engine.Process, t *engine.Table) bool {
	if p.Comm != "mysqld" && p.Comm != "mariadbd" {
		return false
	}
	// A child with the same name is a helper of a server already matched.
	if parent, ok := t.Get(p.PPID); ok && parent.Comm == p.Comm {
		return false
	}
	return true
}

// inspection carries one Inspect through its steps.
type inspection struct {
	ctx  context.Context
	h    *host.Host
	in   *engine.Instance
	opts engine.Options
	cmd  cmdline
	// files holds every option line read (all groups); groups are picked
	// once flavor and version are known.
	files      *Loaded
	flavorF    string // flavor the file list was chosen for
	limits     host.Limits
	socketUsed string
	// exeVersion, when set, waits for the `--version` run started early.
	exeVersion func() ([]byte, error)
}

// Inspect describes one server: version, option files, settings (live when
// a local connection works, else files and compiled-in defaults), paths.
func (detector) Inspect(ctx context.Context, h *host.Host, p engine.Process, t *engine.Table, opts engine.Options) (*engine.Instance, error) {
	if opts.Timeout <= 0 {
		opts.Timeout = defaultTimeout
	}
	in := &engine.Instance{Engine: engine.MySQL, PID: p.PID, Comm: p.Comm, User: p.User, UID: p.UID, GID: p.GID,
		MySQL: &engine.MySQLInfo{}}
	args, err := h.Cmdline(p.PID)
	if err != nil {
		if host.IsNotExist(err) {
			return nil, err // it exited
		}
		in.ConfigErrors = append(in.ConfigErrors, "cannot read the command line: "+host.Explain(err))
	}
	in.Cmdline = args
	if exe, err := h.Exe(p.PID); err == nil {
		in.Exe = exe
	} else if len(args) > 0 && path.IsAbs(args[0]) {
		in.Exe = args[0]
	}
	x := &inspection{ctx: ctx, h: h, in: in, opts: opts, cmd: parseCmdline(args)}
	if opts.NoConnect && h.Live() && in.Exe != "" {
		// No connection will say the version: `mysqld --version` (a large
		// binary, several milliseconds) starts now and runs while the
		// option files are read.
		x.exeVersion = x.startExeVersion()
	}
	x.limits, _ = h.Limits(p.PID)

	// A first guess of the flavor picks the option files; live variables or
	// `--version` then confirm it.
	in.Flavor = FlavorMySQL
	if p.Comm == "mariadbd" || strings.HasSuffix(in.Exe, "/mariadbd") {
		in.Flavor = FlavorMariaDB
	}
	x.loadFiles()
	x.selectSettings()

	socket := x.socket()
	live := x.live(socket)
	if live == nil {
		x.versionFromExe()
	}
	if x.flavorF != in.Flavor {
		x.loadFiles()
	}
	in.Settings = nil
	x.selectSettings()
	in.MySQL.Configured = make(map[string]engine.Setting, len(in.Settings))
	for k, v := range in.Settings {
		in.MySQL.Configured[k] = v
	}
	if live != nil {
		x.applyLive(live)
		if in.MySQL.DatabasesVia == "" {
			x.testDBFromDatadir()
		}
	} else {
		in.SettingsSource = "files"
		x.datadirFromProcess()
		applyDefaults(in, x.limits)
		x.testDBFromDatadir()
	}
	if socket != "" {
		if _, ok := in.Setting("socket"); !ok {
			in.Set("socket", socket, "default")
		}
	}
	x.derive()
	x.files.Finish()
	in.ConfigFiles = x.files.Files
	in.ConfigErrors = append(in.ConfigErrors, x.files.Errors...)
	// Fix snippets go to the last !includedir: the server reads it last,
	// so what dbhost writes there is not overridden by the packaged files
	// of an earlier directory.
	if n := len(x.files.IncludeDirs); n > 0 {
		in.IncludeDir = x.files.IncludeDirs[n-1]
	}
	return in, nil
}

// optionFiles lists the files the server reads by default, in order. The
// --defaults-extra-file goes before the user's ~/.my.cnf. MySQL also reads
// SYSCONFDIR/my.cnf ($MYSQL_HOME is in the environment, not read).
func (x *inspection) optionFiles() []string {
	files := []string{"/etc/my.cnf", "/etc/mysql/my.cnf"}
	if x.in.Flavor != FlavorMariaDB {
		files = append(files, sysconfdir(x.in.Exe)+"/my.cnf")
	}
	if x.cmd.extraFile != "" {
		files = append(files, x.cmd.extraFile)
	}
	if home := homeOf(x.h, x.in.User); home != "" && home != "/" {
		files = append(files, path.Join(home, ".my.cnf"))
	}
	return files
}

// sysconfdir guesses the compiled-in SYSCONFDIR from the binary's prefix:
// /usr/etc for packages, PREFIX/etc for a tarball in /usr/local/mysql or
// /opt.
func sysconfdir(exe string) string {
	dir := path.Dir(exe)
	if exe == "" || (path.Base(dir) != "bin" && path.Base(dir) != "sbin") {
		return "/usr/etc"
	}
	prefix := path.Dir(dir)
	if prefix == "/" {
		return "/usr/etc"
	}
	return path.Join(prefix, "etc")
}

// homeOf returns a user's home directory from /etc/passwd.
func homeOf(h *host.Host, user string) string {
	b, err := h.ReadFile("/etc/passwd")
	if err != nil {
		return ""
	}
	for _, ln := range strings.Split(string(b), "\n") {
		f := strings.Split(ln, ":")
		if len(f) >= 6 && f[0] == user {
			return f[5]
		}
	}
	return ""
}

// loadFiles reads the option files the command line asks for.
func (x *inspection) loadFiles() {
	x.flavorF = x.in.Flavor
	x.files = NewLoader(x.h, x.worldWritable)
	switch {
	case x.cmd.noDefaults:
	case x.cmd.defaultsFile != "":
		x.files.Load(x.cmd.defaultsFile, true)
	default:
		for _, f := range x.optionFiles() {
			x.files.Load(f, f == x.cmd.extraFile)
		}
	}
}

// worldWritable reports why the server would skip a file: it ignores
// world-writable option files.
func (x *inspection) worldWritable(p string) string {
	fi, err := x.h.Stat(p)
	if err == nil && fi.Mode.Perm()&0o002 != 0 {
		return "it is world-writable"
	}
	return ""
}

// selectSettings applies the options of the groups this server reads, then
// the command line (which overrides every file).
func (x *inspection) selectSettings() {
	groups := ServerGroups(x.in.Flavor, x.in.Version, x.cmd.groupSuffix)
	applyOptions(x.in, x.files.Options, groups)
	applyOptions(x.in, x.cmd.options, nil)
}

// socket finds the server's Unix socket: the one it really listens on,
// else the configured one, else the first packaged default that exists.
func (x *inspection) socket() string {
	real := unixSockets(x.h, x.in.PID)
	conf := x.in.SettingValue("socket")
	for _, r := range real {
		if r == conf {
			return r
		}
	}
	if len(real) > 0 {
		return real[0]
	}
	if conf != "" {
		return conf
	}
	for _, p := range []string{"/run/mysqld/mysqld.sock", "/var/run/mysqld/mysqld.sock", "/var/lib/mysql/mysql.sock", "/tmp/mysql.sock"} {
		if x.h.Exists(p) {
			return p
		}
	}
	return ""
}

// unixSockets lists the paths of the Unix sockets a process listens on
// (/proc/net/unix matched with the process's socket inodes; root or the
// server's user is needed for the latter).
func unixSockets(h *host.Host, pid int) []string {
	inodes, err := h.SocketInodes(pid)
	if err != nil || len(inodes) == 0 {
		return nil
	}
	mine := make(map[string]bool, len(inodes))
	for _, i := range inodes {
		mine[strconv.FormatUint(i, 10)] = true
	}
	b, err := h.ReadFile("/proc/net/unix")
	if err != nil {
		return nil
	}
	var out []string
	for _, ln := range strings.Split(string(b), "\n") {
		f := strings.Fields(ln)
		// Num RefCount Protocol Flags Type St Inode Path; flag 00010000
		// (__SO_ACCEPTCON) marks a listening socket.
		if len(f) >= 8 && f[3] == "00010000" && mine[f[6]] && strings.HasPrefix(f[7], "/") {
			out = append(out, f[7])
		}
	}
	return out
}

// live reads the server's variables over its socket inside one probe, so
// a snapshot replays it. With --no-connect a live host is not asked; a
// snapshot always replays what was recorded.
func (x *inspection) live(socket string) *liveData {
	in := x.in
	if x.h.Live() && x.opts.NoConnect {
		in.LiveErr = "live connection disabled (--no-connect)"
		return nil
	}
	if socket == "" {
		in.LiveErr = "no Unix socket found for this server"
		return nil
	}
	x.socketUsed = socket
	b, err := x.h.Probe(liveKey(socket), func() ([]byte, error) {
		return readLive(x.ctx, x.h, in, socket, x.opts)
	})
	if err != nil {
		in.LiveErr = liveError(err)
		return nil
	}
	var d liveData
	if err := json.Unmarshal(b, &d); err != nil {
		in.LiveErr = "recorded live data does not parse: " + err.Error()
		return nil
	}
	if why := x.otherServer(&d); why != "" {
		in.LiveErr = why
		return nil
	}
	in.LiveVia = d.Via
	in.Version, in.VersionSource = d.Variables["version"], "live"
	in.Flavor = FlavorOf(d.Variables["version"], d.Variables["version_comment"])
	return &d
}

// liveError keeps a failed connection's own message (it names the socket
// and the user) and adds the hint host.Explain would give.
func liveError(err error) string {
	msg := err.Error()
	switch {
	case errors.Is(err, host.ErrNotLive):
		return host.Explain(err)
	case host.IsPermission(err) && !strings.Contains(msg, "run dbhost as root"):
		return msg + " (run dbhost as root)"
	}
	return msg
}

// otherServer says why the server reached over the socket is not this
// process (a default socket path can belong to another instance), or "".
// It compares the data directory (configured, else the process's working
// directory) and the configured port with what the server reports.
func (x *inspection) otherServer(d *liveData) string {
	liveDD := strings.TrimSpace(d.Variables["datadir"])
	want := x.in.SettingValue("datadir")
	if want == "" {
		want, _ = x.h.Readlink(fmt.Sprintf("/proc/%d/cwd", x.in.PID))
	}
	if path.IsAbs(want) && path.IsAbs(liveDD) && path.Clean(want) != path.Clean(liveDD) {
		a, errA := x.h.Realpath(want)
		b, errB := x.h.Realpath(liveDD)
		if errA != nil || errB != nil || a != b {
			return fmt.Sprintf("the server at %s reports data directory %s, not this server's %s: it is another instance", x.socketUsed, liveDD, want)
		}
	}
	p, err1 := strconv.Atoi(x.in.SettingValue("port"))
	lp, err2 := strconv.Atoi(d.Variables["port"])
	if err1 == nil && err2 == nil && p > 0 && lp > 0 && p != lp {
		return fmt.Sprintf("the server at %s reports port %d, not this server's %d: it is another instance", x.socketUsed, lp, p)
	}
	return ""
}

// applyLive lays the server's variables over the file settings: what the
// server reports wins; options only the files know (no variable of that
// name) keep their file source.
func (x *inspection) applyLive(d *liveData) {
	in := x.in
	in.SettingsSource = "live"
	vars := d.Variables
	// The option is symbolic-links; the server reports have_symlink.
	if hs, ok := vars["have_symlink"]; ok {
		vars = make(map[string]string, len(d.Variables)+1)
		for k, v := range d.Variables {
			vars[k] = v
		}
		vars["symbolic_links"] = pick(strings.EqualFold(hs, "YES"), "ON", "OFF")
	}
	for n, v := range vars {
		// The running value wins. Where it is what a file or the command
		// line asked for, that origin stays the source: it is where a
		// person would change it.
		src := "live"
		if s, ok := in.Setting(n); ok && sameValue(s.Value, v) {
			src = s.Source
		}
		in.Set(n, v, src)
	}
	in.MySQL.Users = d.Users
	in.MySQL.UsersErr = d.UsersErr
	in.MySQL.GaleraStatus, in.MySQL.GaleraErr = d.Galera, d.GaleraErr
	in.MySQL.Tables = d.Tables
	if d.DBErr == "" {
		in.MySQL.Databases = d.Databases
		in.MySQL.DatabasesVia = "live"
	}
}

// sameValue compares an option as written with the server's value:
// booleans (ON/1/TRUE), sizes (1G/1073741824) and paths (/x/ and /x) in
// any spelling.
func sameValue(file, live string) bool {
	file, live = strings.TrimSpace(file), strings.TrimSpace(live)
	if strings.EqualFold(file, live) {
		return true
	}
	if a, ok := IsOn(file); ok {
		b, ok2 := IsOn(live)
		return ok2 && a == b
	}
	if a, ok := ParseSize(file); ok {
		b, ok2 := ParseSize(live)
		return ok2 && a == b
	}
	if path.IsAbs(file) && path.IsAbs(live) {
		return path.Clean(file) == path.Clean(live)
	}
	return false
}

// versionFromExe runs `mysqld --version` (it reads no option files and no
// data) when no live connection said the version, as the server's user.
// Only a binary that only root can change is run (host.CheckTrusted):
// dbhost often runs as root.
func (x *inspection) versionFromExe() {
	in := x.in
	if in.Exe == "" {
		in.ConfigErrors = append(in.ConfigErrors, "version unknown: the server binary could not be found")
		return
	}
	run := x.exeVersion
	if run == nil {
		run = x.startExeVersion()
	}
	out, err := run()
	if err != nil {
		in.ConfigErrors = append(in.ConfigErrors, "version unknown: "+host.Explain(err))
		return
	}
	v, comment := parseVersionOutput(string(out))
	if v == "" {
		in.ConfigErrors = append(in.ConfigErrors, fmt.Sprintf("version unknown: unexpected output of %s --version", in.Exe))
		return
	}
	in.Version, in.VersionSource = v, in.Exe+" --version"
	in.Flavor = FlavorOf(v, comment)
}

// startExeVersion starts `mysqld --version` as the server's user and
// returns what waits for its output.
func (x *inspection) startExeVersion() func() ([]byte, error) {
	type result struct {
		out []byte
		err error
	}
	done := make(chan result, 1)
	uid, gid, exe := x.in.UID, x.in.GID, x.in.Exe
	go func() {
		out, err := x.h.RunAs(x.ctx, uid, gid, exe, "--version")
		done <- result{out, err}
	}()
	return func() ([]byte, error) {
		r := <-done
		return r.out, r.err
	}
}

// parseVersionOutput reads "mariadbd  Ver 10.11.6-MariaDB-0+deb12u1 for
// debian-linux-gnu on x86_64 (Debian 12)" and "/usr/sbin/mysqld  Ver 8.0.36
// for Linux on x86_64 (MySQL Community Server - GPL)": the version and the
// rest of the line (which names Percona products).
func parseVersionOutput(s string) (version, rest string) {
	s = strings.TrimSpace(strings.SplitN(s, "\n", 2)[0])
	f := strings.Fields(s)
	for i := 0; i+1 < len(f); i++ {
		if f[i] == "Ver" {
			return f[i+1], strings.Join(f[i+2:], " ")
		}
	}
	return "", ""
}

// datadirFromProcess fills the data directory when no file names it: the
// server changes its working directory to the data directory at start.
func (x *inspection) datadirFromProcess() {
	if _, ok := x.in.Setting("datadir"); ok {
		return
	}
	cwdLink := fmt.Sprintf("/proc/%d/cwd", x.in.PID)
	if cwd, err := x.h.Readlink(cwdLink); err == nil && path.IsAbs(cwd) {
		x.in.Set("datadir", cwd, cwdLink)
		return
	}
	x.in.Set("datadir", "/var/lib/mysql", "default")
}

// testDBFromDatadir looks for a "test" database without a connection: a
// database is a directory of the data directory.
func (x *inspection) testDBFromDatadir() {
	dd := x.in.SettingValue("datadir")
	if dd == "" {
		return
	}
	fi, err := x.h.Stat(path.Join(dd, "test"))
	switch {
	case err == nil:
		if fi.IsDir {
			x.in.MySQL.Databases = []string{"test"}
		}
		x.in.MySQL.DatabasesVia = "datadir"
	case host.IsNotExist(err):
		x.in.MySQL.DatabasesVia = "datadir"
	}
}

// derive fills the instance fields that follow from the settings: data
// directory, port, paths by role, Galera.
func (x *inspection) derive() {
	in := x.in
	dd := strings.TrimSpace(in.SettingValue("datadir"))
	if dd != "" {
		dd = path.Clean(dd)
	}
	in.DataDir = dd
	in.Paths = map[string]string{}
	if dd != "" {
		in.Paths["data"] = dd
	}
	if p, err := strconv.Atoi(in.SettingValue("port")); err == nil && p > 0 {
		in.Port = p
	}
	if on, _ := IsOn(in.SettingValue("skip_networking")); on {
		in.Port = 0
	}
	if s, _ := in.Setting("port"); s.Source == "default" && x.files.Unread {
		// An unreadable option file may set another port: 3306 would be a
		// guess, and would name this server like the one on 3306.
		in.Port, in.PortUnknown = 0, true
	}
	if r := resolveDir(in.SettingValue("innodb_log_group_home_dir"), dd); r != "" {
		in.Paths["redo"] = r
	}
	if t := strings.Split(in.SettingValue("tmpdir"), ":")[0]; path.IsAbs(t) {
		in.Paths["tmp"] = path.Clean(t)
	}
	if b := binlogDir(in, dd); b != "" {
		in.Paths["binlog"] = b
	}
	in.MySQL.Galera = wsrepActive(in.SettingValue("wsrep_on"), in.SettingValue("wsrep_provider"))
	if !in.MySQL.Galera {
		in.MySQL.GaleraStatus, in.MySQL.GaleraErr, in.MySQL.Tables = nil, "", nil
	}
}

// binlogDir is the directory of the binary logs when binary logging is on:
// log_bin_basename when read live, else the log-bin option (a bare
// log-bin, or a relative name, puts them in the data directory).
func binlogDir(in *engine.Instance, datadir string) string {
	v := strings.TrimSpace(in.SettingValue("log_bin"))
	if on, isBool := IsOn(v); isBool && !on || v == "" {
		return ""
	}
	if base := in.SettingValue("log_bin_basename"); path.IsAbs(base) {
		return path.Dir(base)
	}
	if _, isBool := IsOn(v); isBool {
		return datadir
	}
	if path.IsAbs(v) {
		return path.Dir(v)
	}
	if datadir == "" {
		return ""
	}
	return path.Dir(path.Join(datadir, v))
}
