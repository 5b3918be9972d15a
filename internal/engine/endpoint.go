package engine

import (
	"fmt"
	"strconv"
	"strings"
)

// DefaultDB is the database dbhost's own sessions use when an Endpoint
// names none: benchmark tables never land in an application's database by
// accident (workload.Prepare creates it when it is missing).
const DefaultDB = "dbhost_bench"

// Endpoint says where a database server is and how to log in: the one
// connection description of the commands that connect to a server they
// were given (experiment, knob, workload, pgcluster). The engine packages
// turn it into their driver's configuration (postgres.ConnConfig,
// mysql.EndpointConfig), which dial only an endpoint Locate resolved to a
// server discovered on this host.
type Endpoint struct {
	Engine Engine
	// Host is a host name or IP address, or a Unix socket: for PostgreSQL
	// the socket's directory, for MySQL the socket file. A value starting
	// with "/" is a socket. Empty means the tools' default (localhost).
	Host string
	Port int // 0: the engine's default (5432, 3306)
	User string
	// Password is passed to tools through the environment only, and never
	// appears in String or errors. Empty: the drivers' own defaults apply
	// (~/.pgpass, trust, socket authentication).
	Password string
	DB       string // DefaultDB when empty
	// OSUser, if set, is the system user external tools (pgbench,
	// sysbench) run as, for peer or socket authentication. Drivers inside
	// dbhost ignore it.
	OSUser string

	srv *located // set by Locate: the server this endpoint reaches
}

// String describes the endpoint without its password.
func (e Endpoint) String() string {
	where := e.Host
	if where == "" {
		where = "localhost"
	}
	if !e.Socket() {
		where += ":" + strconv.Itoa(e.PortOrDefault())
	} else {
		where = "unix:" + where
	}
	s := fmt.Sprintf("%s %s@%s/%s", e.Engine, e.User, where, e.Database())
	if e.Password != "" {
		s += " (password set)"
	}
	if e.OSUser != "" {
		s += " as system user " + e.OSUser
	}
	return s
}

// GoString keeps %#v from printing the password.
func (e Endpoint) GoString() string { return "engine.Endpoint{" + e.String() + "}" }

// Socket reports whether Host is a Unix socket.
func (e Endpoint) Socket() bool { return strings.HasPrefix(e.Host, "/") }

// PortOrDefault is Port, else the engine's default port.
func (e Endpoint) PortOrDefault() int {
	if e.Port > 0 {
		return e.Port
	}
	return ProfileOf(e.Engine).DefaultPort()
}

// Database is DB, else DefaultDB.
func (e Endpoint) Database() string {
	if e.DB == "" {
		return DefaultDB
	}
	return e.DB
}
