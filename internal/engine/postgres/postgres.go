// Package postgres finds running PostgreSQL servers and reads their
// configuration (postgresql.conf with its includes and postgresql.auto.conf,
// plus command-line overrides) and, over a local connection, their live
// settings.
package postgres

import (
	"context"
	"errors"
	"fmt"
	"path"
	"slices"
	"strconv"
	"strings"

	"github.com/dbhost/dbhost/internal/engine"
	"github.com/dbhost/dbhost/internal/host"
	"github.com/dbhost/dbhost/internal/textio"
)

func init() { engine.Register(detector{}) }

type detector struct{ engine.Base }

func (detector) Engine() engine.Engine { return engine.Postgres }

// isServerComm reports whether a command name is PostgreSQL's server binary.
// Backends and auxiliary processes keep the comm "postgres" (only their
// argv is rewritten), so the comm alone does not tell the postmaster.
func isServerComm(c string) bool { return c == "postgres" || c == "postmaster" }

// Match accepts the postmaster only: a postgres process whose parent is not
// a postgres process of the same user (backends are the postmaster's
// children and run as its user).
func (detector) Match(p engine.Process, t *engine.Table) bool {
	if !isServerComm(p.Comm) {
		return false
	}
	parent, ok := t.Get(p.PPID)
	return !ok || !isServerComm(parent.Comm) || parent.UID != p.UID
}

// Inspect describes the cluster whose postmaster is p.
func (detector) Inspect(ctx context.Context, h *host.Host, p engine.Process, t *engine.Table, opts engine.Options) (*engine.Instance, error) {
	in := &engine.Instance{
		Engine: engine.Postgres, Flavor: "PostgreSQL", PID: p.PID, Comm: p.Comm,
		User: p.User, UID: p.UID, GID: p.GID,
		Children: t.Children(p.PID),
		Postgres: &engine.PostgresInfo{},
		Paths:    map[string]string{},
	}
	args, err := h.Cmdline(p.PID)
	if err != nil {
		if host.IsNotExist(err) {
			return nil, err // exited during the scan
		}
		in.ConfigErrors = append(in.ConfigErrors, "command line: "+host.Explain(err))
	}
	in.Cmdline = args
	if exe, err := h.Exe(p.PID); err == nil {
		in.Exe = exe
	} else if len(args) > 0 && path.IsAbs(args[0]) {
		in.Exe = args[0] // /proc/PID/exe needs root; argv[0] is usually the full path
	}
	var a Args
	if len(args) > 1 {
		a = ParseArgs(args[1:])
	}

	cfg := NewConfig(h)
	main := configFile(h, p.PID, a)
	if main == "" {
		in.ConfigErrors = append(in.ConfigErrors, "configuration file: cannot tell where it is (no -D or config_file on the command line, and /proc/PID/cwd is unreadable)")
	} else {
		cfg.ReadMain(main)
	}
	in.DataDir = ownDataDir(h, in, dataDir(h, p.PID, a, cfg))
	if in.DataDir != "" {
		cfg.ReadAuto(in.DataDir)
	}
	in.ConfigFiles = cfg.Files
	in.ConfigErrors = append(in.ConfigErrors, cfg.Errors...)
	if len(cfg.IncludeDirs) > 0 {
		in.IncludeDir = cfg.IncludeDirs[0]
	}
	in.Postgres.Cluster = debianCluster(main)

	// Settings from files, overridden by the command line.
	in.Settings = cfg.Settings()
	for _, d := range a.Settings {
		in.Set(d.Name, d.Value, "cmdline")
	}
	in.Port = portOf(in)
	if _, set := in.Setting("port"); !set && !slices.Contains(cfg.Files, main) {
		// The main file (where a port is set) could not be read: the
		// default would be a guess, and a wrong one names this server
		// like the one that does hold 5432. No port then (the name
		// falls back to the data directory), as in mongo.
		in.Port, in.PortUnknown = 0, true
	}
	in.SettingsSource = "files"

	sockDir, sockErr := socketDir(h, in)
	switch {
	case h.Live() && opts.NoConnect:
		in.LiveErr = "live connection not attempted (--no-connect)"
	case h.Live() && !h.System():
		in.LiveErr = "live connection not attempted: the host root is not / (--root)"
	case sockErr != "":
		in.LiveErr = sockErr
	default:
		l, err := readLive(ctx, h, in, sockDir, opts)
		switch {
		case err == nil:
			applyLive(in, l)
		case !h.Live() && errors.Is(err, host.ErrNotLive):
			in.LiveErr = "the snapshot holds no live read of this server (collected with --no-connect or by an older dbhost)"
		default:
			in.LiveErr = host.Explain(err)
		}
	}

	if in.Version == "" {
		version(ctx, h, in)
	}
	if in.SettingsSource != "live" {
		applyDefaults(in, in.Major())
	}
	fillPaths(h, in)
	in.Postgres.HBA = ReadHBA(h, in)
	return in, nil
}

// configFile finds postgresql.conf: config_file on the command line (Debian's
// pg_ctlcluster passes -c config_file=...), else in the -D directory, else in
// the postmaster's working directory (it chdirs to the data directory; a
// server started with only PGDATA set has no -D, and its environment is
// never read: it may hold passwords).
func configFile(h *host.Host, pid int, a Args) string {
	if v, ok := a.Value("config_file"); ok && path.IsAbs(v) {
		return path.Clean(v)
	}
	dir := a.ConfigDir
	if !path.IsAbs(dir) {
		dir = cwd(h, pid)
	}
	if dir == "" {
		return ""
	}
	if v, ok := a.Value("config_file"); ok {
		return path.Join(dir, v)
	}
	return path.Join(dir, "postgresql.conf")
}

func cwd(h *host.Host, pid int) string {
	d, err := h.Readlink(fmt.Sprintf("/proc/%d/cwd", pid))
	if err != nil || !path.IsAbs(d) {
		return ""
	}
	return d
}

// dataDir is data_directory (command line, then files), else -D, else the
// postmaster's working directory.
func dataDir(h *host.Host, pid int, a Args, cfg *Config) string {
	if v, ok := a.Value("data_directory"); ok && path.IsAbs(v) {
		return path.Clean(v)
	}
	if v, ok := cfg.Value("data_directory"); ok && path.IsAbs(v) {
		return path.Clean(v)
	}
	if path.IsAbs(a.ConfigDir) {
		return path.Clean(a.ConfigDir)
	}
	return cwd(h, pid)
}

var debianConf = textio.LazyRegexp(`^/etc/postgresql/([^/]+)/([^/]+)/postgresql\.conf$`)

// debianCluster names a Debian cluster ("15/main") from its config path.
func debianCluster(conf string) string {
	if m := debianConf.FindStringSubmatch(conf); m != nil {
		return m[1] + "/" + m[2]
	}
	return ""
}

// portOf is the port setting, or 5432.
func portOf(in *engine.Instance) int {
	if s, ok := in.Setting("port"); ok {
		if n, err := strconv.Atoi(strings.TrimSpace(s.Value)); err == nil && n > 0 && n < 65536 {
			return n
		}
	}
	return 5432
}

// socketDir picks the first configured socket directory whose socket exists.
func socketDir(h *host.Host, in *engine.Instance) (string, string) {
	if in.Port == 0 {
		return "", "the port is unknown (the configuration file could not be read), so is the socket"
	}
	v := "/var/run/postgresql"
	if s, ok := in.Setting("unix_socket_directories"); ok {
		v = s.Value
	} else if s, ok := in.Setting("unix_socket_directory"); ok { // before 9.3
		v = s.Value
	}
	var tried []string
	for _, d := range strings.Split(v, ",") {
		d = strings.TrimSpace(d)
		if d == "" || !path.IsAbs(d) { // "" disables; "@name" is abstract
			continue
		}
		sock := path.Join(d, fmt.Sprintf(".s.PGSQL.%d", in.Port))
		_, err := h.Stat(sock)
		if err == nil {
			return d, ""
		}
		if host.IsPermission(err) {
			// A replayed error has no path: name the socket once either way.
			return "", "cannot reach the socket " + sock + ": " + strings.TrimPrefix(host.Explain(err), sock+": ")
		}
		tried = append(tried, sock)
	}
	if len(tried) == 0 {
		return "", fmt.Sprintf("no Unix socket configured (unix_socket_directories = %q); dbhost connects over the local socket only", v)
	}
	return "", "no Unix socket at " + strings.Join(tried, " or ")
}

// applyLive replaces the file view of the settings with the server's own.
func applyLive(in *engine.Instance, l *live) {
	in.Settings = make(map[string]engine.Setting, len(l.Settings))
	for _, s := range l.Settings {
		in.Settings[engine.NormalizeName(s.Name)] = engine.Setting{Value: s.Setting, Unit: s.Unit, Source: liveSource(s)}
	}
	in.SettingsSource = "live"
	in.LiveVia = l.Via
	if v := strings.Fields(l.Version); len(v) > 0 {
		in.Version, in.VersionSource = v[0], "live"
	}
	in.Postgres.Databases = l.Databases
	in.Postgres.Security = l.Security
	if l.DBErr != "" {
		in.LiveErr = "databases: " + l.DBErr
	}
	if p := portOf(in); p > 0 {
		in.Port = p
	}
	if d := in.SettingValue("data_directory"); path.IsAbs(d) {
		in.DataDir = d
	}
}

var majorRE = textio.LazyRegexp(`^[0-9]{1,3}(\.[0-9]{1,3})?$`)

var binVersion = textio.LazyRegexp(`(?:/postgresql/|/pgsql-)(\d+(?:\.\d+)?)/bin/`)
var versionOutput = textio.LazyRegexp(`\(PostgreSQL\) (\d+[0-9.]*\w*)`)

// version fills the version without a connection: PG_VERSION in the data
// directory (the major; readable by root and the postgres user), else the
// binary's path (/usr/lib/postgresql/15/bin), else `postgres --version` run
// as the server's user, when only root can change the binary.
func version(ctx context.Context, h *host.Host, in *engine.Instance) {
	if in.DataDir != "" {
		f := path.Join(in.DataDir, "PG_VERSION")
		// The file holds the major version and nothing else.
		if v, err := h.ReadString(f); err == nil && majorRE.MatchString(v) {
			in.Version, in.VersionSource = v, "file:"+f
			return
		} else if err == nil {
			in.ConfigErrors = append(in.ConfigErrors, fmt.Sprintf("%s holds no version (%d bytes): not used", f, len(v)))
		}
	}
	if m := binVersion.FindStringSubmatch(in.Exe); m != nil {
		in.Version, in.VersionSource = m[1], "path:"+in.Exe
		return
	}
	if in.Exe == "" {
		return
	}
	out, err := h.RunAs(ctx, in.UID, in.GID, in.Exe, "--version")
	if errors.Is(err, host.ErrUntrusted) {
		in.ConfigErrors = append(in.ConfigErrors, "version unknown: "+err.Error())
	}
	if err != nil {
		return
	}
	if m := versionOutput.FindStringSubmatch(string(out)); m != nil {
		in.Version, in.VersionSource = m[1], "command:"+in.Exe+" --version"
	}
}

// fillPaths names the directories whose storage matters: the data
// directory, the WAL (pg_wal is often a symlink to another device), the
// log directory of the logging collector, and tablespaces.
func fillPaths(h *host.Host, in *engine.Instance) {
	if in.DataDir == "" {
		return
	}
	in.Paths["data"] = in.DataDir
	walName := "pg_wal"
	if m := in.Major(); m > 0 && m < 10 {
		walName = "pg_xlog"
	}
	wal := path.Join(in.DataDir, walName)
	in.Paths["wal"] = wal
	if _, err := h.Readlink(wal); err == nil {
		if r, err := h.Realpath(wal); err == nil {
			in.Paths["wal"] = r
		}
	}
	if on, _ := Bool(in, "logging_collector"); on {
		if d := in.SettingValue("log_directory"); path.IsAbs(d) {
			in.Paths["log"] = path.Clean(d)
		}
	}
	tbl := path.Join(in.DataDir, "pg_tblspc")
	names, err := h.ReadDir(tbl)
	if err != nil {
		return
	}
	for _, n := range names {
		if r, err := h.Realpath(path.Join(tbl, n)); err == nil {
			in.Paths["tablespace:"+n] = r
		}
	}
}
