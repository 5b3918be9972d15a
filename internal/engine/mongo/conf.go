package mongo

import (
	"fmt"
	"strings"

	"gopkg.in/yaml.v3"
)

// Option is one configuration value: a dotted mongod.conf name as written
// ("storage.dbPath"), its value and where it was set.
type Option struct {
	Name   string
	Value  string
	Source string // "file:/etc/mongod.conf:12" or "cmdline"
}

// Conf is a parsed mongod.conf.
type Conf struct {
	Options []Option
	// Errors lists what does not parse or was not evaluated.
	Errors []string
	// Invalid: the file is not a YAML mapping at all; mongod would refuse
	// to start with it, so it changed after the server started.
	Invalid bool
}

// sections are mongod.conf's top-level keys (mongod and mongos); mongod
// refuses to start with any other.
var sections = map[string]bool{
	"systemLog": true, "storage": true, "processManagement": true, "net": true, "security": true,
	"operationProfiling": true, "replication": true, "sharding": true, "auditLog": true,
	"snmp": true, "setParameter": true, "cloud": true, "encryption": true,
}

// Bounds that keep a hostile file (deep nesting, alias bombs) cheap.
const (
	maxConfBytes = 4 << 20
	maxDepth     = 32
	maxNodes     = 100000
)

// ParseConf parses a mongod.conf (YAML) into dotted options.
func ParseConf(b []byte, file string) *Conf {
	c := &Conf{}
	if len(b) > maxConfBytes {
		c.Invalid = true
		c.Errors = append(c.Errors, fmt.Sprintf("%s: %d bytes is too large for a mongod.conf; not parsed", file, len(b)))
		return c
	}
	var doc yaml.Node
	if err := yaml.Unmarshal(b, &doc); err != nil {
		c.Invalid = true
		c.Errors = append(c.Errors, fmt.Sprintf("%s: %v (mongod would refuse to start with this file)", file, err))
		return c
	}
	if doc.Kind == 0 || len(doc.Content) == 0 {
		return c // empty file: all defaults
	}
	root := doc.Content[0]
	if root.Kind == yaml.ScalarNode && root.Tag == "!!null" {
		return c
	}
	if root.Kind != yaml.MappingNode {
		c.Invalid = true
		c.Errors = append(c.Errors, fmt.Sprintf("%s: not a YAML mapping of settings (mongod would refuse to start with this file)", file))
		return c
	}
	w := &walker{file: file, c: c}
	for i := 0; i+1 < len(root.Content); i += 2 {
		k := root.Content[i].Value
		if sec, _, _ := strings.Cut(k, "."); !sections[sec] {
			c.Errors = append(c.Errors, fmt.Sprintf("%s:%d: unknown section %q (mongod refuses unknown options)", file, root.Content[i].Line, k))
		}
		w.walk(k, root.Content[i+1], 1)
	}
	return c
}

type walker struct {
	file  string
	c     *Conf
	nodes int
}

func (w *walker) walk(name string, n *yaml.Node, depth int) {
	w.nodes++
	if depth > maxDepth || w.nodes > maxNodes {
		if w.nodes == maxNodes+1 || depth == maxDepth+1 {
			w.c.Errors = append(w.c.Errors, fmt.Sprintf("%s:%d: nested too deeply or too large; rest not read", w.file, n.Line))
		}
		return
	}
	if n.Kind == yaml.AliasNode && n.Alias != nil {
		n = n.Alias
	}
	src := fmt.Sprintf("file:%s:%d", w.file, n.Line)
	switch n.Kind {
	case yaml.MappingNode:
		for i := 0; i+1 < len(n.Content); i += 2 {
			k := n.Content[i].Value
			if k == "__exec" || k == "__rest" {
				// Expansion directives (--configExpand): the value comes
				// from a command or a URL when mongod starts.
				w.c.Errors = append(w.c.Errors, fmt.Sprintf("%s: %s comes from a %s expansion, which dbhost does not evaluate", src, name, k))
				return
			}
			w.walk(name+"."+k, n.Content[i+1], depth+1)
		}
	case yaml.SequenceNode:
		var vs []string
		for _, e := range n.Content {
			if e.Kind == yaml.AliasNode && e.Alias != nil {
				e = e.Alias
			}
			if e.Kind == yaml.ScalarNode {
				vs = append(vs, e.Value)
			}
		}
		w.c.Options = append(w.c.Options, Option{Name: name, Value: strings.Join(vs, ","), Source: src})
	case yaml.ScalarNode:
		v := n.Value
		if n.Tag == "!!null" {
			v = ""
		}
		w.c.Options = append(w.c.Options, Option{Name: name, Value: v, Source: src})
	}
}

// Cmdline is what mongod's arguments say.
type Cmdline struct {
	// ConfigFile is the -f/--config argument.
	ConfigFile string
	// Options are the settings the arguments set, as mongod.conf names.
	Options []Option
}

// cmdOpt maps a command-line option to its mongod.conf name. Flags (no
// value) set the fixed value.
type cmdOpt struct {
	name  string
	flag  bool
	value string
}

// cmdOpts covers the options that change what dbhost judges (paths, ports,
// addresses, authentication, storage engine and cache, log).
var cmdOpts = map[string]cmdOpt{
	"dbpath":                {name: "storage.dbPath"},
	"storageEngine":         {name: "storage.engine"},
	"wiredTigerCacheSizeGB": {name: "storage.wiredTiger.engineConfig.cacheSizeGB"},
	"directoryperdb":        {name: "storage.directoryPerDB", flag: true, value: "true"},
	"journal":               {name: "storage.journal.enabled", flag: true, value: "true"},
	"nojournal":             {name: "storage.journal.enabled", flag: true, value: "false"},
	"port":                  {name: "net.port"},
	"bind_ip":               {name: "net.bindIp"},
	"bind_ip_all":           {name: "net.bindIpAll", flag: true, value: "true"},
	"ipv6":                  {name: "net.ipv6", flag: true, value: "true"},
	"maxConns":              {name: "net.maxIncomingConnections"},
	"listenBacklog":         {name: "net.listenBacklog"},
	"unixSocketPrefix":      {name: "net.unixDomainSocket.pathPrefix"},
	"nounixsocket":          {name: "net.unixDomainSocket.enabled", flag: true, value: "false"},
	"tlsMode":               {name: "net.tls.mode"},
	"sslMode":               {name: "net.ssl.mode"},
	"auth":                  {name: "security.authorization", flag: true, value: "enabled"},
	"noauth":                {name: "security.authorization", flag: true, value: "disabled"},
	"keyFile":               {name: "security.keyFile"},
	"clusterAuthMode":       {name: "security.clusterAuthMode"},
	"transitionToAuth":      {name: "security.transitionToAuth", flag: true, value: "true"},
	"logpath":               {name: "systemLog.path"},
	"syslog":                {name: "systemLog.destination", flag: true, value: "syslog"},
	"logappend":             {name: "systemLog.logAppend", flag: true, value: "true"},
	"fork":                  {name: "processManagement.fork", flag: true, value: "true"},
	"pidfilepath":           {name: "processManagement.pidFilePath"},
	"timeZoneInfo":          {name: "processManagement.timeZoneInfo"},
	"replSet":               {name: "replication.replSetName"},
	"oplogSize":             {name: "replication.oplogSizeMB"},
	"shardsvr":              {name: "sharding.clusterRole", flag: true, value: "shardsvr"},
	"configsvr":             {name: "sharding.clusterRole", flag: true, value: "configsvr"},
	"quiet":                 {name: "systemLog.quiet", flag: true, value: "true"},
}

// flags are options without a value that dbhost does not map; knowing them
// keeps the next argument from being taken as their value.
var flags = map[string]bool{"help": true, "version": true, "sysinfo": true, "verbose": true, "nohttpinterface": true,
	"noscripting": true, "notablescan": true, "upgrade": true, "repair": true, "cpu": true, "objcheck": true,
	"noIndexBuildRetry": true, "enableMajorityReadConcern": true, "enableFreeMonitoring": true}

// ParseCmdline reads mongod's arguments (argv[0] included): --name value,
// --name=value, -f FILE, -fFILE, flags, --setParameter name=value.
func ParseCmdline(argv []string) Cmdline {
	var c Cmdline
	for i := 1; i < len(argv); i++ {
		a := argv[i]
		var name, val string
		hasVal := false
		switch {
		case a == "-f" || a == "--config":
			if i+1 < len(argv) {
				i++
				c.ConfigFile = argv[i]
			}
			continue
		case strings.HasPrefix(a, "--config="):
			c.ConfigFile = strings.TrimPrefix(a, "--config=")
			continue
		case strings.HasPrefix(a, "-f") && !strings.HasPrefix(a, "--"):
			c.ConfigFile = strings.TrimPrefix(a, "-f")
			continue
		case strings.HasPrefix(a, "--"):
			name, val, hasVal = strings.Cut(a[2:], "=")
		default:
			continue // -v, -vvv, stray values
		}
		o, known := cmdOpts[name]
		if name == "setParameter" {
			o, known = cmdOpt{name: "setParameter"}, true
		}
		takesValue := known && !o.flag || !known && !flags[name]
		if takesValue && !hasVal {
			if i+1 < len(argv) && (!strings.HasPrefix(argv[i+1], "-") || known) {
				i++
				val, hasVal = argv[i], true
			}
		}
		if !known || o.name == "" {
			continue
		}
		switch {
		case name == "setParameter":
			k, v, ok := strings.Cut(val, "=")
			if ok {
				c.Options = append(c.Options, Option{Name: "setParameter." + k, Value: v, Source: "cmdline"})
			}
		case o.flag:
			v := o.value
			if hasVal { // --auth=false style
				v = val
			}
			c.Options = append(c.Options, Option{Name: o.name, Value: v, Source: "cmdline"})
		default:
			c.Options = append(c.Options, Option{Name: o.name, Value: val, Source: "cmdline"})
			if name == "logpath" {
				c.Options = append(c.Options, Option{Name: "systemLog.destination", Value: "file", Source: "cmdline"})
			}
		}
	}
	return c
}
