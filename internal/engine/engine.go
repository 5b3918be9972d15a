// Package engine finds the database servers running on a host and describes
// each one: engine, version, user, data directory, configuration files and
// effective settings, listening sockets. Each engine lives in a subpackage
// that registers a Detector; package engine/all imports them all.
package engine

import (
	"fmt"
	"sort"
	"strconv"
	"strings"

	"github.com/dbhost/dbhost/internal/host"
	"github.com/dbhost/dbhost/internal/termsafe"
)

// Engine names a database engine family.
type Engine string

// The engines dbhost knows.
const (
	Postgres Engine = "postgres"
	MySQL    Engine = "mysql" // MySQL, MariaDB, Percona Server, Galera/PXC
	MongoDB  Engine = "mongodb"
	Redis    Engine = "redis"
)

// Engines lists all engines in display order.
var Engines = []Engine{Postgres, MySQL, MongoDB, Redis}

// Process is one entry of the host's process table.
type Process struct {
	PID  int    `json:"pid"`
	PPID int    `json:"ppid"`
	Comm string `json:"comm"`
	UID  int    `json:"uid"`
	GID  int    `json:"gid"`
	User string `json:"user,omitempty"`
}

// Setting is one effective configuration value and where it was set.
type Setting struct {
	Value string `json:"value"`
	// Source: "live" (read from the server), "file:/etc/.../postgresql.conf:12",
	// "cmdline", or "default" (the engine's compiled-in default).
	Source string `json:"source"`
	// Unit as the server reports it (PostgreSQL: "8kB", "MB", "ms").
	Unit string `json:"unit,omitempty"`
}

// Listener is a socket the instance is listening on.
type Listener struct {
	Proto string `json:"proto"` // tcp, tcp6, unix
	Addr  string `json:"addr"`  // 0.0.0.0, ::, 127.0.0.1, or the socket path
	Port  int    `json:"port,omitempty"`
	// Backlog is the accept queue the socket was created with (/proc/net/tcp
	// shows it for listening sockets), 0 if unknown.
	Backlog int `json:"backlog,omitempty"`
}

// Wildcard reports whether the listener accepts connections on every address.
func (l Listener) Wildcard() bool {
	return l.Proto != "unix" && (l.Addr == "0.0.0.0" || l.Addr == "::")
}

// Loopback reports whether the listener is reachable only from this host.
func (l Listener) Loopback() bool {
	return l.Proto == "unix" || strings.HasPrefix(l.Addr, "127.") || l.Addr == "::1"
}

func (l Listener) String() string {
	if l.Proto == "unix" {
		return "unix:" + l.Addr
	}
	if strings.Contains(l.Addr, ":") {
		return fmt.Sprintf("[%s]:%d", l.Addr, l.Port)
	}
	return fmt.Sprintf("%s:%d", l.Addr, l.Port)
}

// Instance is one running database server.
type Instance struct {
	Engine Engine `json:"engine"`
	// Flavor is the product: PostgreSQL, MySQL, MariaDB, Percona Server,
	// Percona XtraDB Cluster, MongoDB, Redis, Valkey.
	Flavor        string `json:"flavor"`
	Version       string `json:"version,omitempty"`
	VersionSource string `json:"version_source,omitempty"`

	PID     int      `json:"pid"`
	Comm    string   `json:"comm"`
	Exe     string   `json:"exe,omitempty"`
	Cmdline []string `json:"cmdline,omitempty"` // secrets redacted
	User    string   `json:"user,omitempty"`
	UID     int      `json:"uid"`
	GID     int      `json:"gid"`
	// Children are worker processes (PostgreSQL backends).
	Children []int `json:"children,omitempty"`

	// Port is the configured TCP port (0: none, or unknown).
	Port int `json:"port,omitempty"`
	// PortUnknown: the configuration that would name the port could not
	// be read, and the engine's default was not assumed (Port is 0).
	PortUnknown bool `json:"port_unknown,omitempty"`
	// DataDir is the data directory as configured.
	DataDir string `json:"data_dir,omitempty"`
	// Paths names the other directories whose storage matters, by role:
	// "wal", "binlog", "redo", "tmp", "log". The data directory is "data".
	Paths map[string]string `json:"paths,omitempty"`

	// ConfigFiles lists the configuration files read, in the order the
	// server reads them.
	ConfigFiles []string `json:"config_files,omitempty"`
	// IncludeDir is a directory the server reads every file of (conf.d);
	// dbhost's fix snippets go there.
	IncludeDir string `json:"include_dir,omitempty"`
	// ConfigErrors lists problems found while reading them (include loops,
	// unreadable files, lines that do not parse).
	ConfigErrors []string `json:"config_errors,omitempty"`

	// Settings are the effective settings, names lower-cased; MySQL names
	// use underscores.
	Settings map[string]Setting `json:"settings,omitempty"`
	// Configured keeps the value a file (or the compiled-in default) gives
	// a setting the running server reports differently: the server lowered
	// it at start (Redis maxclients, MySQL table_open_cache to fit the
	// open-files limit), it was changed at runtime, or the file changed
	// since. Either way the next start asks for it again.
	Configured map[string]Setting `json:"configured,omitempty"`
	// SettingsSource says where Settings came from: "live" (a connection to
	// the server) or "files"; LiveErr says why a live read failed.
	SettingsSource string `json:"settings_source"`
	LiveVia        string `json:"live_via,omitempty"`
	LiveErr        string `json:"live_error,omitempty"`

	Listen    []Listener `json:"listen,omitempty"`
	ListenErr string     `json:"listen_error,omitempty"`

	// Tag tells apart instances that would otherwise share a Name (set by
	// Discover: a trusted server's data directory, or "pidN").
	Tag string `json:"tag,omitempty"`

	// Trust says whether root may act on what the instance claims.
	Trust Trust `json:"trust"`

	Postgres *PostgresInfo `json:"postgres,omitempty"`
	MySQL    *MySQLInfo    `json:"mysql,omitempty"`
	Mongo    *MongoInfo    `json:"mongodb,omitempty"`
	Redis    *RedisInfo    `json:"redis,omitempty"`

	profile Profile
	claim   *host.Claim
}

// PostgresInfo holds PostgreSQL-only facts.
type PostgresInfo struct {
	// Databases with their collation provider versions (PostgreSQL 15+
	// records the glibc version an index was built with).
	Databases []PGDatabase `json:"databases,omitempty"`
	// Cluster is the Debian cluster name ("15/main"), if any.
	Cluster string `json:"cluster,omitempty"`
	// HBA is pg_hba.conf as read from hba_file (nil: not looked for);
	// Security what a live connection read about logins (nil: none).
	HBA      *PGHBA      `json:"hba,omitempty"`
	Security *PGSecurity `json:"security,omitempty"`
}

// PGDatabase is one database's collation facts.
type PGDatabase struct {
	Name string `json:"name"`
	// Collate is datcollate; Provider is "libc" or "icu".
	Collate  string `json:"collate"`
	Provider string `json:"provider,omitempty"`
	// RecordedVersion is datcollversion: the collation library version when
	// the database was created or last refreshed. ActualVersion is the one
	// the running server's library reports now.
	RecordedVersion string `json:"recorded_version,omitempty"`
	ActualVersion   string `json:"actual_version,omitempty"`
}

// MySQLInfo holds MySQL/MariaDB-only facts.
type MySQLInfo struct {
	// Galera is set when wsrep is on (Galera, Percona XtraDB Cluster).
	Galera bool `json:"galera,omitempty"`
	// GaleraStatus is the node's view of its cluster, read live with the
	// variables (nil: not a Galera node, or not read live; never guessed
	// from files). GaleraErr says why it could not be read although the
	// server was reached.
	GaleraStatus *GaleraStatus `json:"galera_status,omitempty"`
	GaleraErr    string        `json:"galera_status_error,omitempty"`
	// Users lists accounts for the hardening checks (host, user, flags),
	// only when read live. Passwords are never read.
	Users []MySQLUser `json:"users,omitempty"`
	// UsersErr says why accounts could not be read although the server
	// was reached (no privilege on the mysql schema).
	UsersErr string `json:"users_error,omitempty"`
	// Databases names the schemas (to spot a leftover "test").
	Databases []string `json:"databases,omitempty"`
	// DatabasesVia says how Databases was learnt: "live" (SHOW DATABASES)
	// or "datadir" (only the test database was looked for, as a directory
	// of the data directory); "" when it could not be learnt.
	DatabasesVia string `json:"databases_via,omitempty"`
	// Configured holds the options as the option files and the command
	// line give them (file:PATH:LINE or cmdline), before live values and
	// compiled-in defaults: a fix that edits one option's line (the
	// wsrep_provider_options list) starts from what is written there.
	Configured map[string]Setting `json:"configured,omitempty"`
	// Tables are the user tables a Galera cluster replicates badly, read
	// live on Galera nodes only (nil: not read).
	Tables *MySQLTables `json:"tables,omitempty"`
}

// MySQLTables lists user tables (system schemas left out) by what Galera
// cannot do with them: rows of a table without a primary key are found by
// a full scan on every other node, and tables not in InnoDB are not
// replicated at all. Counts are complete; names stop at 20 per list.
type MySQLTables struct {
	WithoutPK      []string `json:"without_pk,omitempty"`
	WithoutPKCount int      `json:"without_pk_count"`
	// NonInnoDB names "schema.table (ENGINE)".
	NonInnoDB      []string `json:"non_innodb,omitempty"`
	NonInnoDBCount int      `json:"non_innodb_count"`
	// Err says why the list is missing or incomplete (a timeout, no
	// privilege on information_schema).
	Err string `json:"error,omitempty"`
}

// GaleraStatus is what a Galera node's wsrep status variables said when
// they were read: whether it serves (Synced in a Primary component) and how
// many nodes its cluster has. The key names are those of the audit JSON's
// instances[].galera, which roll-out gates read.
type GaleraStatus struct {
	// ClusterStatus is wsrep_cluster_status: Primary, non-Primary or
	// Disconnected.
	ClusterStatus string `json:"cluster_status"`
	// LocalState is wsrep_local_state_comment: Synced, Donor/Desynced,
	// Joining, Joined, Initialized.
	LocalState string `json:"local_state"`
	// ClusterSize is wsrep_cluster_size: the nodes of the component.
	ClusterSize int `json:"cluster_size"`
	// Ready is wsrep_ready (the node accepts queries); Connected is
	// wsrep_connected (it has a connection to the group).
	Ready     bool `json:"ready"`
	Connected bool `json:"connected"`
	// StateUUID is wsrep_cluster_state_uuid: the same on every node of one
	// cluster's history; a node bootstrapped anew gets another.
	StateUUID string `json:"cluster_state_uuid,omitempty"`

	// What the cluster checks and the tolerance read (issue 24); zero when
	// the server does not report it.
	//
	// ClusterWeight is wsrep_cluster_weight: the sum of pc.weight over the
	// Primary component (Galera 4). LocalIndex is wsrep_local_index.
	ClusterWeight int `json:"cluster_weight,omitempty"`
	LocalIndex    int `json:"local_index,omitempty"`
	// IncomingAddresses is wsrep_incoming_addresses split: the client
	// addresses of the members (an arbitrator has none).
	IncomingAddresses []string `json:"incoming_addresses,omitempty"`
	// Members are the component's members as the node lists them
	// (mysql.wsrep_cluster_members on MariaDB 10.4+).
	Members []GaleraMember `json:"members,omitempty"`
	// FlowControlPaused is wsrep_flow_control_paused: the fraction of time
	// replication was paused by flow control since the last FLUSH STATUS.
	FlowControlPaused float64 `json:"flow_control_paused"`
	// LocalRecvQueueAvg and CertDepsDistance: wsrep_local_recv_queue_avg,
	// wsrep_cert_deps_distance (how many write sets could apply in parallel).
	LocalRecvQueueAvg float64 `json:"local_recv_queue_avg,omitempty"`
	CertDepsDistance  float64 `json:"cert_deps_distance,omitempty"`
	// ReplicatedBytes and ReceivedBytes are wsrep_replicated_bytes and
	// wsrep_received_bytes since start; Uptime is the server's Uptime in
	// seconds: together the write rate gcache must hold.
	ReplicatedBytes int64 `json:"replicated_bytes,omitempty"`
	ReceivedBytes   int64 `json:"received_bytes,omitempty"`
	Uptime          int64 `json:"uptime_seconds,omitempty"`
	// ReplLatency is wsrep_evs_repl_latency in seconds (min, avg, max,
	// stddev, samples): the group's round trips as Galera measured them.
	ReplLatency *GaleraLatency `json:"repl_latency,omitempty"`
}

// GaleraMember is one member of a Galera component as a node lists it.
type GaleraMember struct {
	UUID            string `json:"uuid,omitempty"`
	Name            string `json:"name"`
	IncomingAddress string `json:"incoming_address,omitempty"`
}

// GaleraLatency is wsrep_evs_repl_latency (seconds).
type GaleraLatency struct {
	Min     float64 `json:"min"`
	Avg     float64 `json:"avg"`
	Max     float64 `json:"max"`
	StdDev  float64 `json:"stddev"`
	Samples int     `json:"samples"`
}

// MySQLUser is one account, without credentials.
type MySQLUser struct {
	User string `json:"user"`
	Host string `json:"host"`
	// EmptyPassword: one of the account's authentication methods takes a
	// password and its stored credential is empty (anyone can log in).
	EmptyPassword bool `json:"empty_password"`
	Super         bool `json:"super,omitempty"`
	Grant         bool `json:"grant,omitempty"`
	// Plugins are the account's authentication methods (unix_socket,
	// mysql_native_password, ...); Locked accounts cannot log in.
	Plugins []string `json:"plugins,omitempty"`
	Locked  bool     `json:"locked,omitempty"`
}

// MongoInfo holds MongoDB-only facts.
type MongoInfo struct {
	StorageEngine string `json:"storage_engine,omitempty"`
	// StorageEngineSource says where StorageEngine came from: the
	// storage.bson of the data directory, a config file line, the command
	// line, or "default".
	StorageEngineSource string `json:"storage_engine_source,omitempty"`
	// ConfigErr says why the effective configuration is incomplete (the
	// config file could not be read or parsed); "" when it is complete.
	ConfigErr string `json:"config_error,omitempty"`
}

// RedisInfo holds Redis-only facts.
type RedisInfo struct {
	// AuthConfigured reports requirepass or ACL users with passwords: a
	// client that does not authenticate is refused.
	AuthConfigured bool `json:"auth_configured"`
	// AuthSource says how AuthConfigured was established: "live" (the
	// server answered or refused an unauthenticated command), the file
	// line that decides it, or "default" (nothing sets a password). ""
	// means it is unknown (see ConfigErr).
	AuthSource string `json:"auth_source,omitempty"`
	// ConfigErr says why the configuration is unknown or incomplete.
	ConfigErr string `json:"config_error,omitempty"`
	// RDBBytes and AOFBytes are the sizes of the persistence files in the
	// data directory (0 when there is none); FilesErr why they could not
	// be read.
	RDBBytes int64  `json:"rdb_bytes,omitempty"`
	AOFBytes int64  `json:"aof_bytes,omitempty"`
	FilesErr string `json:"files_error,omitempty"`
}

// Name identifies the instance in findings: "postgres:5432", or the data
// directory or PID when no port is known; "@Tag" is added when another
// instance has the same name ("postgres:5432@/srv/pg2").
func (i *Instance) Name() string {
	var n string
	switch {
	case i.Port > 0:
		n = fmt.Sprintf("%s:%d", i.Engine, i.Port)
	case i.DataDir != "":
		n = fmt.Sprintf("%s:%s", i.Engine, termsafe.Line(i.DataDir))
	default:
		n = fmt.Sprintf("%s:pid%d", i.Engine, i.PID)
	}
	if i.Tag != "" {
		n += "@" + i.Tag
	}
	return n
}

// StableName reports whether Name is formed from what the server is
// configured as (its port, or its data directory when it has no TCP port)
// rather than from what a run could not read: a PID (new at every start),
// or the data directory of a server whose port this run could not learn
// (PortUnknown: its configuration is unreadable without root; PostgreSQL
// and MongoDB always have a port). Metrics label only stable names, so
// that a series is the same whoever runs dbhost.
func (i *Instance) StableName() bool {
	if i.PortUnknown {
		return false
	}
	if i.Port > 0 {
		return true
	}
	return i.DataDir != "" && i.Engine != Postgres && i.Engine != MongoDB
}

// Setting returns an effective setting by name (case-insensitive; MySQL's
// dashes and underscores are the same).
func (i *Instance) Setting(name string) (Setting, bool) {
	if i.Settings == nil {
		return Setting{}, false
	}
	s, ok := i.Settings[NormalizeName(name)]
	return s, ok
}

// SettingValue returns a setting's value or "".
func (i *Instance) SettingValue(name string) string {
	s, _ := i.Setting(name)
	return s.Value
}

// Set records a setting (later calls override earlier ones). A secret in
// the value (a password setting, a URI's password) is redacted here: on a
// live host the parsers read configuration files unredacted, and settings
// reach JSON output and evidence.
func (i *Instance) Set(name, value, source string) {
	if i.Settings == nil {
		i.Settings = map[string]Setting{}
	}
	k, s := NormalizeName(name), Setting{Value: host.RedactValue(name, value), Source: source}
	if old, ok := i.Settings[k]; ok && live(source) && !live(old.Source) && old.Value != s.Value {
		if i.Configured == nil {
			i.Configured = map[string]Setting{}
		}
		i.Configured[k] = old
	}
	i.Settings[k] = s
}

func live(source string) bool { return strings.HasPrefix(source, "live") }

// ConfiguredUint is the whole-number value a configuration file sets for a
// setting the running server reports differently (see Configured).
func (i *Instance) ConfiguredUint(name string) (uint64, Setting, bool) {
	s, ok := i.Configured[NormalizeName(name)]
	if !ok {
		return 0, s, false
	}
	n, err := strconv.ParseUint(strings.Trim(strings.TrimSpace(s.Value), `'"`), 10, 64)
	return n, s, err == nil
}

// NormalizeName lower-cases a setting name and turns dashes into
// underscores.
func NormalizeName(name string) string {
	return strings.ReplaceAll(strings.ToLower(strings.TrimSpace(name)), "-", "_")
}

// Major returns the leading number of Version (15 for "15.4", 10 for
// "10.11.6-MariaDB"), or 0.
func (i *Instance) Major() int {
	v, _ := VersionParts(i.Version)
	if len(v) == 0 {
		return 0
	}
	return v[0]
}

// VersionParts splits "10.11.6-MariaDB-0+deb12u1" into [10 11 6] and the
// rest.
func VersionParts(s string) ([]int, string) {
	s = strings.TrimPrefix(strings.TrimSpace(s), "v")
	var out []int
	for s != "" {
		j := 0
		for j < len(s) && s[j] >= '0' && s[j] <= '9' {
			j++
		}
		if j == 0 {
			break
		}
		n, _ := strconv.Atoi(s[:j])
		out = append(out, n)
		s = s[j:]
		if !strings.HasPrefix(s, ".") {
			break
		}
		s = s[1:]
	}
	return out, s
}

// VersionAtLeast compares a dotted version with a minimum ("8.0").
func VersionAtLeast(version, min string) bool {
	a, _ := VersionParts(version)
	b, _ := VersionParts(min)
	for k := 0; k < len(b); k++ {
		var x int
		if k < len(a) {
			x = a[k]
		}
		if x != b[k] {
			return x > b[k]
		}
	}
	return true
}

// SortInstances orders instances by engine, then port, then PID.
func SortInstances(in []*Instance) {
	sort.SliceStable(in, func(a, b int) bool {
		if in[a].Engine != in[b].Engine {
			return engineRank(in[a].Engine) < engineRank(in[b].Engine)
		}
		if in[a].Port != in[b].Port {
			return in[a].Port < in[b].Port
		}
		return in[a].PID < in[b].PID
	})
}

func engineRank(e Engine) int {
	for i, x := range Engines {
		if x == e {
			return i
		}
	}
	return len(Engines)
}
