// Package mongo finds running MongoDB servers (mongod) and reads mongod.conf
// and their command line.
//
// Only mongod is described: mongos routers hold no data and have no storage
// engine, data directory or authorization setting of their own, so the
// checks dbhost runs on MongoDB do not apply to them.
package mongo

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

func init() { engine.Register(detector{}) }

type detector struct{ engine.Base }

func (detector) Engine() engine.Engine { return engine.MongoDB }

// Match accepts mongod processes that are not children of another mongod.
func (detector) Match(p engine.Process, t *engine.Table) bool {
	if p.Comm != "mongod" {
		return false
	}
	if parent, ok := t.Get(p.PPID); ok && parent.Comm == "mongod" {
		return false
	}
	return true
}

// Inspect describes one mongod.
func (detector) Inspect(ctx context.Context, h *host.Host, p engine.Process, _ *engine.Table, _ engine.Options) (*engine.Instance, error) {
	in := &engine.Instance{
		Engine: engine.MongoDB, Flavor: "MongoDB", PID: p.PID, Comm: p.Comm,
		User: p.User, UID: p.UID, GID: p.GID, SettingsSource: "files",
		Mongo: &engine.MongoInfo{},
	}
	argv, err := h.Cmdline(p.PID)
	if err != nil && host.IsNotExist(err) {
		return nil, err // exited while we looked
	}
	in.Cmdline = argv
	if exe, err := h.Exe(p.PID); err == nil {
		in.Exe = exe
	}
	cwd, cwdErr := h.Readlink(fmt.Sprintf("/proc/%d/cwd", p.PID))
	if cwdErr != nil {
		cwd = ""
	}
	readVersion(ctx, h, in, argv)

	cl := ParseCmdline(argv)
	var conf *Conf
	if f := cl.ConfigFile; f != "" {
		if !path.IsAbs(f) {
			if cwd == "" {
				in.ConfigErrors = append(in.ConfigErrors, fmt.Sprintf("config file %s is relative and the server's working directory is unreadable (%s)", f, host.Explain(cwdErr)))
			}
			f = path.Join(cwd, f)
		}
		b, err := h.ReadConfig(f)
		if err != nil {
			in.Mongo.ConfigErr = "cannot read " + host.Explain(err)
			in.ConfigErrors = append(in.ConfigErrors, in.Mongo.ConfigErr)
		} else {
			in.ConfigFiles = []string{f}
			conf = ParseConf(b, f)
			in.ConfigErrors = append(in.ConfigErrors, conf.Errors...)
			if conf.Invalid {
				in.Mongo.ConfigErr = strings.Join(conf.Errors, "; ")
			}
		}
	}

	// Effective settings: defaults, the file, then the command line.
	defaults(in)
	if conf != nil {
		for _, o := range conf.Options {
			in.Set(o.Name, o.Value, o.Source)
		}
	}
	for _, o := range cl.Options {
		in.Set(o.Name, o.Value, o.Source)
	}
	if s, ok := in.Setting("net.port"); !ok || s.Source == "default" {
		// Shard and config servers default to other ports.
		switch in.SettingValue("sharding.clusterRole") {
		case "shardsvr":
			in.Set("net.port", "27018", "default")
		case "configsvr":
			in.Set("net.port", "27019", "default")
		}
	}
	// With the config file unreadable, a default is only a guess: name no
	// port and no data directory rather than the wrong ones.
	guess := func(name string) bool {
		s, _ := in.Setting(name)
		return in.Mongo.ConfigErr != "" && s.Source == "default"
	}
	if !guess("net.port") {
		in.Port, _ = strconv.Atoi(in.SettingValue("net.port"))
	} else {
		in.PortUnknown = true
	}
	dbPath := in.SettingValue("storage.dbPath")
	if guess("storage.dbPath") {
		dbPath = ""
	}
	if dbPath != "" && !path.IsAbs(dbPath) && cwd != "" {
		dbPath = path.Join(cwd, dbPath)
	}
	in.Paths = map[string]string{}
	if dbPath != "" {
		in.DataDir = path.Clean(dbPath)
		in.Paths["data"] = in.DataDir
	}
	if lp := in.SettingValue("systemLog.path"); lp != "" && in.SettingValue("systemLog.destination") == "file" {
		if !path.IsAbs(lp) && cwd != "" {
			lp = path.Join(cwd, lp)
		}
		in.Paths["log"] = path.Dir(lp)
	}
	storageEngine(h, in)
	return in, nil
}

// defaults sets what mongod uses when nothing configures it, for the
// server version when it matters.
func defaults(in *engine.Instance) {
	set := func(k, v string) { in.Set(k, v, "default") }
	set("storage.dbPath", "/data/db")
	set("net.port", "27017")
	set("net.maxIncomingConnections", "1000000")
	set("security.authorization", "disabled")
	set("storage.journal.enabled", "true")
	set("net.ipv6", "false")
	if in.Version == "" || engine.VersionAtLeast(in.Version, "3.6") {
		// Since 3.6 mongod binds only localhost unless told otherwise.
		set("net.bindIp", "localhost")
		set("net.bindIpAll", "false")
	} else {
		set("net.bindIp", "")
		set("net.bindIpAll", "true")
	}
	if in.Version == "" || engine.VersionAtLeast(in.Version, "3.2") {
		set("storage.engine", "wiredTiger")
	} else {
		set("storage.engine", "mmapv1")
	}
}

// storageEngine settles the engine the data is in: storage.bson when it can
// be read (mongod itself goes by it), else the configuration.
func storageEngine(h *host.Host, in *engine.Instance) {
	s, _ := in.Setting("storage.engine")
	in.Mongo.StorageEngine, in.Mongo.StorageEngineSource = s.Value, s.Source
	if in.DataDir == "" {
		return
	}
	f := path.Join(in.DataDir, "storage.bson")
	b, err := h.ReadFile(f)
	if err != nil {
		if !host.IsNotExist(err) && s.Source == "default" {
			// Nothing configures the engine and the data directory is
			// unreadable: the default may not be what the data is in.
			in.Mongo.StorageEngineSource = "default (" + host.Explain(err) + ")"
		}
		return
	}
	if e, err := storageBSONEngine(b); err == nil && e != "" {
		in.Mongo.StorageEngine, in.Mongo.StorageEngineSource = e, "file:"+f
	}
}

var (
	versionRE = textio.LazyRegexp(`db version v(\d+\.\d+\S*)`)
	// Percona Server for MongoDB adds its own version to the build info.
	perconaRE = textio.LazyRegexp(`(?i)"psmdbVersion"|percona`)
)

// readVersion runs `mongod --version` ("db version v8.0.4" and a Build Info
// document) as the server's user: on the running binary, else argv[0] when
// it is a path; the mongod on PATH only when the running binary is unknown
// (it may be another version). A binary someone other than root can change
// is not run (host.CheckTrusted), and the reason is kept.
func readVersion(ctx context.Context, h *host.Host, in *engine.Instance, argv []string) {
	bins := []string{in.Exe}
	if len(argv) > 0 && path.IsAbs(argv[0]) && argv[0] != in.Exe {
		bins = append(bins, argv[0])
	}
	if in.Exe == "" {
		bins = append(bins, "mongod")
	}
	var refused []string
	defer func() {
		if in.Version == "" && len(refused) > 0 {
			in.ConfigErrors = append(in.ConfigErrors, "version unknown: "+strings.Join(refused, "; "))
		}
	}()
	for _, b := range bins {
		if b == "" {
			continue
		}
		out, err := h.RunAs(ctx, in.UID, in.GID, b, "--version")
		if errors.Is(err, host.ErrUntrusted) {
			refused = append(refused, err.Error())
		}
		if err != nil {
			continue
		}
		m := versionRE.FindSubmatch(out)
		if m == nil {
			continue
		}
		in.Version = string(m[1])
		in.VersionSource = b + " --version"
		if b == "mongod" {
			in.VersionSource += " (on PATH)"
		}
		switch {
		case perconaRE.Match(out):
			in.Flavor = "Percona Server for MongoDB"
		case strings.Contains(string(out), `"enterprise"`):
			in.Flavor = "MongoDB Enterprise"
		}
		return
	}
}

// AuthEnforced reports whether mongod refuses unauthenticated clients:
// security.authorization enabled, or internal authentication (a keyFile or
// x509 cluster authentication), which turns authorization on, unless
// transitionToAuth lets unauthenticated clients in. The second result
// names the setting that decides it.
func AuthEnforced(in *engine.Instance) (bool, string) {
	if strings.EqualFold(in.SettingValue("security.transitionToAuth"), "true") {
		return false, "security.transitionToAuth"
	}
	if strings.EqualFold(in.SettingValue("security.authorization"), "enabled") {
		return true, "security.authorization"
	}
	if in.SettingValue("security.keyFile") != "" {
		return true, "security.keyFile"
	}
	switch strings.ToLower(in.SettingValue("security.clusterAuthMode")) {
	case "x509", "sendx509":
		return true, "security.clusterAuthMode"
	}
	return false, "security.authorization"
}
