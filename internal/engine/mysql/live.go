package mysql

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net"
	"os"
	"os/user"
	"path"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/go-sql-driver/mysql"

	"github.com/dbhost/dbhost/internal/engine"
	"github.com/dbhost/dbhost/internal/host"
)

// liveData is what one live session with the server reads. It is recorded
// as a probe in snapshots, so it must never hold a secret: accounts are
// described by flags, never by their credentials.
type liveData struct {
	// Via says how dbhost connected ("unix:/run/mysqld/mysqld.sock as root,
	// no password"); never the password.
	Via       string            `json:"via"`
	Variables map[string]string `json:"variables"`

	Users     []engine.MySQLUser `json:"users,omitempty"`
	UsersErr  string             `json:"users_error,omitempty"`
	Databases []string           `json:"databases,omitempty"`
	DBErr     string             `json:"databases_error,omitempty"`

	// Galera is the cluster status of a node whose variables say wsrep is
	// on; GaleraErr why it could not be read.
	Galera    *engine.GaleraStatus `json:"galera,omitempty"`
	GaleraErr string               `json:"galera_error,omitempty"`

	// Tables are the user tables Galera replicates badly (read on Galera
	// nodes only): names, never contents.
	Tables *engine.MySQLTables `json:"tables,omitempty"`
}

// liveKey names the probe of one server; the socket identifies it.
func liveKey(socket string) string { return "mysql:live:" + socket }

// readLive connects to the server over its Unix socket and reads its
// variables, accounts and databases. It is the body of one host.Probe.
func readLive(ctx context.Context, h *host.Host, in *engine.Instance, socket string, opts engine.Options) ([]byte, error) {
	cfg, via, err := connConfig(h, in, socket, opts)
	if err != nil {
		return nil, err
	}
	db, err := OpenConfig(cfg)
	if err != nil {
		return nil, err
	}
	defer db.Close()

	step := func() (context.Context, context.CancelFunc) { return context.WithTimeout(ctx, opts.Timeout) }
	c, cancel := step()
	defer cancel()
	if err := db.PingContext(c); err != nil {
		return nil, fmt.Errorf("connect %s: %w", via, err)
	}
	d := liveData{Via: via, Variables: map[string]string{}}
	if d.Variables, err = readVariables(c, db); err != nil {
		return nil, fmt.Errorf("SHOW GLOBAL VARIABLES via %s: %w", via, err)
	}
	if wsrepActive(d.Variables["wsrep_on"], d.Variables["wsrep_provider"]) {
		cg, cancelG := step()
		defer cancelG()
		if d.Galera, err = readGaleraStatus(cg, db); err != nil {
			d.GaleraErr = "wsrep status: " + err.Error()
		}
		ct, cancelT := step()
		defer cancelT()
		d.Tables = readTables(ct, db)
	}
	c2, cancel2 := step()
	defer cancel2()
	if d.Users, err = readUsers(c2, db, d.Variables["version"]); err != nil {
		d.UsersErr = "cannot read accounts: " + err.Error()
	}
	c3, cancel3 := step()
	defer cancel3()
	if d.Databases, err = readDatabases(c3, db); err != nil {
		d.DBErr = "SHOW DATABASES: " + err.Error()
	}
	return json.Marshal(d)
}

// connConfig builds the connection to one instance. An explicit DSN is
// used only when it names this instance: its Unix socket, or a local TCP
// address whose listener the instance holds (a DSN without an address
// means the driver's default, 127.0.0.1:3306). Otherwise the invoking
// user's ~/.my.cnf [client]/[mysql] credentials, else the current OS user
// without a password (socket authentication: MariaDB's root account accepts
// root over the socket), over this server's socket. Every connection is
// checked to reach the instance's own process before a byte is exchanged
// (engine.Instance.Dial), and a password goes only to a server that runs
// as root or the service account (engine.Instance.MayReceiveCredentials).
func connConfig(h *host.Host, in *engine.Instance, socket string, opts engine.Options) (*mysql.Config, string, error) {
	cfg := mysql.NewConfig()
	note := ""
	fromDSN := false
	if opts.MySQLDSN != "" {
		dc, err := mysql.ParseDSN(opts.MySQLDSN)
		if err != nil {
			return nil, "", errors.New("the MySQL DSN does not parse") // the driver's error may quote it, password included
		}
		if dsnNames(h, in, socket, dc) {
			cfg, fromDSN = dc, true
		} else {
			note = fmt.Sprintf(" (the DSN names %s(%s), not this server)", dc.Net, dc.Addr)
		}
	}
	if !fromDSN {
		if socket == "" {
			return nil, "", errors.New("no Unix socket found for this server")
		}
		cfg.Net, cfg.Addr = "unix", socket
	}
	var via string
	switch {
	case fromDSN:
		via = fmt.Sprintf("%s:%s as %s (DSN given)", cfg.Net, cfg.Addr, cfg.User)
	default:
		u, pw, src := clientCredentials(h)
		cfg.User, cfg.Passwd = u, pw
		how := "no password"
		if src != "" {
			how = "credentials from " + src
		}
		via = fmt.Sprintf("%s:%s as %s (%s)%s", cfg.Net, cfg.Addr, cfg.User, how, note)
	}
	if why := in.MayReceiveCredentials(); why != "" && cfg.Passwd != "" {
		cfg.Passwd = ""
		via = fmt.Sprintf("%s:%s as %s (no password: %s)%s", cfg.Net, cfg.Addr, cfg.User, why, note)
	}
	cfg.AllowCleartextPasswords = false
	cfg.Timeout, cfg.ReadTimeout, cfg.WriteTimeout = opts.Timeout, opts.Timeout, opts.Timeout
	// The driver dials through the instance's checked dial: the socket's
	// listener, or the TCP address's listening socket, must be the
	// instance's, whatever the DSN resolves to.
	cfg.DialFunc = func(ctx context.Context, network, addr string) (net.Conn, error) {
		return in.Dial(ctx, h, network, addr, opts.Timeout)
	}
	cfg.DBName = ""
	// The driver logs some failures to stderr itself; dbhost reports them.
	cfg.Logger = &mysql.NopLogger{}
	return cfg, via, nil
}

// dsnNames reports whether a parsed DSN reaches the instance: its socket,
// or a local TCP address on which the instance itself listens.
func dsnNames(h *host.Host, in *engine.Instance, socket string, dc *mysql.Config) bool {
	switch dc.Net {
	case "unix":
		if dc.Addr == socket {
			return true
		}
		a, errA := h.Realpath(dc.Addr)
		b, errB := h.Realpath(socket)
		return errA == nil && errB == nil && a == b
	case "tcp", "tcp4", "tcp6":
		hostName, portText, err := net.SplitHostPort(dc.Addr)
		if err != nil {
			return false
		}
		port, err := strconv.Atoi(portText)
		return err == nil && in.OwnsListener(h, hostName, port)
	}
	return false
}

// clientCredentials reads user and password from the invoking user's
// ~/.my.cnf ([client] then [mysql], later lines win), through ReadSecret:
// never recorded, never printed. src names the file when it held any.
func clientCredentials(h *host.Host) (usr, pw, src string) {
	if u, err := user.Current(); err == nil {
		usr = u.Username
	}
	home := os.Getenv("HOME")
	if home == "" {
		if u, err := user.Current(); err == nil {
			home = u.HomeDir
		}
	}
	if home == "" {
		return usr, "", ""
	}
	file := path.Join(home, ".my.cnf")
	b, err := h.ReadSecret(file)
	if err != nil {
		return usr, "", ""
	}
	entries, _ := ParseOptions(b)
	found := false
	for _, e := range entries {
		if e.Kind != EntryOption || (e.Group != "client" && e.Group != "mysql" && e.Group != "client-server" && e.Group != "client-mariadb") {
			continue
		}
		switch engine.NormalizeName(strings.TrimPrefix(e.Name, "loose-")) {
		case "user":
			usr, found = e.Value, true
		case "password":
			pw, found = e.Value, true
		}
	}
	if found {
		src = file
	}
	return usr, pw, src
}

func readVariables(ctx context.Context, db *sql.DB) (map[string]string, error) {
	rows, err := db.QueryContext(ctx, "SHOW GLOBAL VARIABLES")
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	vars := map[string]string{}
	for rows.Next() {
		var name string
		var value sql.NullString
		if err := rows.Scan(&name, &value); err != nil {
			return nil, err
		}
		n := strings.ToLower(name)
		vars[n] = redactValue(n, value.String)
	}
	return vars, rows.Err()
}

// wsrepActive reports whether wsrep_on and wsrep_provider make the server
// a Galera node (a provider of "none" replicates nothing).
func wsrepActive(on, provider string) bool {
	wsrepOn, _ := IsOn(on)
	provider = strings.TrimSpace(provider)
	return wsrepOn && provider != "" && !strings.EqualFold(provider, "none")
}

// galeraStatusQuery reads only the wsrep status the gates and the cluster
// checks need: the whole of SHOW STATUS is large, and these are cheap
// counters.
const galeraStatusQuery = "SHOW GLOBAL STATUS WHERE Variable_name IN ('wsrep_cluster_status', 'wsrep_local_state_comment', " +
	"'wsrep_cluster_size', 'wsrep_ready', 'wsrep_connected', 'wsrep_cluster_state_uuid', " +
	"'wsrep_cluster_weight', 'wsrep_local_index', 'wsrep_incoming_addresses', 'wsrep_flow_control_paused', " +
	"'wsrep_local_recv_queue_avg', 'wsrep_cert_deps_distance', 'wsrep_replicated_bytes', 'wsrep_received_bytes', " +
	"'wsrep_evs_repl_latency', 'Uptime')"

// galeraMembersQuery lists the component's members (MariaDB 10.4+; absent
// elsewhere, or hidden without privilege on the mysql schema).
const galeraMembersQuery = "SELECT node_uuid, node_name, node_incoming_address FROM mysql.wsrep_cluster_members ORDER BY node_name"

// readGaleraStatus reads a Galera node's view of its cluster. SHOW STATUS
// needs no privilege and is answered also while the node is not ready.
func readGaleraStatus(ctx context.Context, db *sql.DB) (*engine.GaleraStatus, error) {
	rows, err := db.QueryContext(ctx, galeraStatusQuery)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	vals := map[string]string{}
	for rows.Next() {
		var name string
		var value sql.NullString
		if err := rows.Scan(&name, &value); err != nil {
			return nil, err
		}
		vals[strings.ToLower(name)] = strings.TrimSpace(value.String)
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	g, err := galeraStatus(vals)
	if err != nil {
		return nil, err
	}
	// The member list is a convenience: a server without the table, or an
	// account without the privilege, still has its status.
	g.Members, _ = readGaleraMembers(ctx, db)
	return g, nil
}

func readGaleraMembers(ctx context.Context, db *sql.DB) ([]engine.GaleraMember, error) {
	rows, err := db.QueryContext(ctx, galeraMembersQuery)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []engine.GaleraMember
	for rows.Next() {
		var m engine.GaleraMember
		var uuid, name, addr sql.NullString
		if err := rows.Scan(&uuid, &name, &addr); err != nil {
			return nil, err
		}
		m.UUID, m.Name, m.IncomingAddress = uuid.String, name.String, addr.String
		out = append(out, m)
	}
	return out, rows.Err()
}

// ParseGaleraStatus interprets a node's wsrep status variables (SHOW
// GLOBAL STATUS by lower-case name, Uptime included) as the audit does,
// for other readers of a node (the Galera lab).
func ParseGaleraStatus(vals map[string]string) (*engine.GaleraStatus, error) {
	return galeraStatus(vals)
}

// galeraStatus interprets the wsrep status variables. A counter that does
// not parse stays zero, as one the server does not report.
func galeraStatus(vals map[string]string) (*engine.GaleraStatus, error) {
	if _, ok := vals["wsrep_cluster_status"]; !ok {
		return nil, errors.New("the server reports no wsrep_cluster_status (Galera provider not loaded?)")
	}
	g := &engine.GaleraStatus{
		ClusterStatus: vals["wsrep_cluster_status"],
		LocalState:    vals["wsrep_local_state_comment"],
		StateUUID:     vals["wsrep_cluster_state_uuid"],
	}
	g.ClusterSize, _ = strconv.Atoi(vals["wsrep_cluster_size"])
	g.Ready, _ = IsOn(vals["wsrep_ready"])
	g.Connected, _ = IsOn(vals["wsrep_connected"])
	g.ClusterWeight, _ = strconv.Atoi(vals["wsrep_cluster_weight"])
	g.LocalIndex, _ = strconv.Atoi(vals["wsrep_local_index"])
	// One entry per member, in wsrep_local_index order: an arbitrator's is
	// empty ("AUTO," on a node beside garbd), and dropping it would lose the
	// arbitrator and shift the indexes.
	if s := strings.TrimSpace(vals["wsrep_incoming_addresses"]); s != "" {
		for _, a := range strings.Split(s, ",") {
			g.IncomingAddresses = append(g.IncomingAddresses, strings.TrimSpace(a))
		}
	}
	g.FlowControlPaused = statFloat(vals["wsrep_flow_control_paused"])
	g.LocalRecvQueueAvg = statFloat(vals["wsrep_local_recv_queue_avg"])
	g.CertDepsDistance = statFloat(vals["wsrep_cert_deps_distance"])
	g.ReplicatedBytes, _ = strconv.ParseInt(vals["wsrep_replicated_bytes"], 10, 64)
	g.ReceivedBytes, _ = strconv.ParseInt(vals["wsrep_received_bytes"], 10, 64)
	g.Uptime, _ = strconv.ParseInt(vals["uptime"], 10, 64)
	g.ReplLatency = parseReplLatency(vals["wsrep_evs_repl_latency"])
	return g, nil
}

// statFloat reads a status counter; NaN and infinities (a counter divided
// by zero) read as zero, which JSON can carry.
func statFloat(s string) float64 {
	f, err := strconv.ParseFloat(strings.TrimSpace(s), 64)
	if err != nil || math.IsNaN(f) || math.IsInf(f, 0) {
		return 0
	}
	return f
}

// parseReplLatency reads wsrep_evs_repl_latency, "min/avg/max/stddev/n" in
// seconds; nil when the node has no samples yet (a lone node reports
// "0/0/0/0/0").
func parseReplLatency(s string) *engine.GaleraLatency {
	f := strings.Split(strings.TrimSpace(s), "/")
	if len(f) != 5 {
		return nil
	}
	var v [4]float64
	for i := range v {
		x, err := strconv.ParseFloat(strings.TrimSpace(f[i]), 64)
		if err != nil || math.IsNaN(x) || math.IsInf(x, 0) || x < 0 {
			return nil
		}
		v[i] = x
	}
	n, err := strconv.Atoi(strings.TrimSpace(f[4]))
	if err != nil || n <= 0 {
		return nil
	}
	return &engine.GaleraLatency{Min: v[0], Avg: v[1], Max: v[2], StdDev: v[3], Samples: n}
}

// maxTableNames bounds the table names recorded per list: a count says how
// many, the names say where to start.
const maxTableNames = 20

// tablesQuery lists the base tables of the user schemas that either are
// not InnoDB or have no primary key (TABLE_CONSTRAINTS is cheap: it does
// not open the tables' data). Sequences and views are not tables here.
const tablesQuery = "SELECT s, n, e, pk FROM (SELECT t.TABLE_SCHEMA AS s, t.TABLE_NAME AS n, COALESCE(t.ENGINE, '') AS e, " +
	"EXISTS (SELECT 1 FROM information_schema.TABLE_CONSTRAINTS c WHERE c.TABLE_SCHEMA = t.TABLE_SCHEMA " +
	"AND c.TABLE_NAME = t.TABLE_NAME AND c.CONSTRAINT_TYPE = 'PRIMARY KEY') AS pk " +
	"FROM information_schema.TABLES t WHERE t.TABLE_TYPE IN ('BASE TABLE', 'SYSTEM VERSIONED') " +
	"AND t.TABLE_SCHEMA NOT IN ('mysql', 'information_schema', 'performance_schema', 'sys')) x " +
	"WHERE NOT pk OR e <> 'InnoDB' ORDER BY s, n"

// readTables runs the tables query within the step's timeout; a failure
// (timeout, privilege) is recorded, never fatal.
func readTables(ctx context.Context, db *sql.DB) *engine.MySQLTables {
	t := &engine.MySQLTables{}
	rows, err := db.QueryContext(ctx, tablesQuery)
	if err != nil {
		t.Err = "information_schema.TABLES: " + err.Error()
		return t
	}
	defer rows.Close()
	for rows.Next() {
		var schema, name, eng string
		var hasPK bool
		if err := rows.Scan(&schema, &name, &eng, &hasPK); err != nil {
			t.Err = "information_schema.TABLES: " + err.Error()
			return t
		}
		full := schema + "." + name
		if !hasPK {
			t.WithoutPKCount++
			if len(t.WithoutPK) < maxTableNames {
				t.WithoutPK = append(t.WithoutPK, full)
			}
		}
		if !strings.EqualFold(eng, "InnoDB") {
			t.NonInnoDBCount++
			if len(t.NonInnoDB) < maxTableNames {
				t.NonInnoDB = append(t.NonInnoDB, full+" ("+eng+")")
			}
		}
	}
	if err := rows.Err(); err != nil {
		t.Err = "information_schema.TABLES: " + err.Error()
	}
	return t
}

// passwordPlugins authenticate with a password stored in the account; an
// empty stored string means an empty password. Socket, PAM, GSSAPI and LDAP
// accounts do not.
var passwordPlugins = map[string]bool{
	"": true, "mysql_native_password": true, "mysql_old_password": true,
	"caching_sha2_password": true, "sha256_password": true, "ed25519": true, "parsec": true,
}

// readUsers lists accounts with flags only. MariaDB 10.4+ keeps accounts in
// mysql.global_priv as JSON, where an account may accept several
// authentication methods (auth_or); MySQL and older MariaDB in mysql.user,
// whose columns vary by version. Emptiness is computed by the server, so no
// credential ever reaches dbhost.
func readUsers(ctx context.Context, db *sql.DB, version string) ([]engine.MySQLUser, error) {
	var users []engine.MySQLUser
	var err error
	if strings.Contains(version, "MariaDB") && engine.VersionAtLeast(version, "10.4") {
		users, err = readGlobalPriv(ctx, db)
	} else {
		users, err = readUserTable(ctx, db)
	}
	sort.Slice(users, func(a, b int) bool {
		if users[a].User != users[b].User {
			return users[a].User < users[b].User
		}
		return users[a].Host < users[b].Host
	})
	return users, err
}

// authSlots is how many alternative authentication methods are read per
// MariaDB account (IDENTIFIED VIA a OR b OR ...).
const authSlots = 4

func readGlobalPriv(ctx context.Context, db *sql.DB) ([]engine.MySQLUser, error) {
	cols := []string{
		"User", "Host",
		"COALESCE(JSON_VALUE(Priv, '$.plugin'), 'mysql_native_password')",
		"COALESCE(JSON_VALUE(Priv, '$.authentication_string'), '') = ''",
		"COALESCE(JSON_LENGTH(Priv, '$.auth_or'), 0)",
	}
	for i := 0; i < authSlots; i++ {
		cols = append(cols,
			fmt.Sprintf("JSON_VALUE(Priv, '$.auth_or[%d].plugin')", i),
			fmt.Sprintf("COALESCE(JSON_VALUE(Priv, '$.auth_or[%d].authentication_string'), '') = ''", i))
	}
	cols = append(cols,
		// JSON_VALUE turns a JSON true into '1'.
		"COALESCE(JSON_VALUE(Priv, '$.account_locked'), '') IN ('1', 'true')",
		"COALESCE(JSON_VALUE(Priv, '$.is_role'), '') IN ('1', 'true')",
		// SUPER is bit 15, GRANT OPTION bit 10 of the access mask.
		"(CAST(COALESCE(JSON_VALUE(Priv, '$.access'), '0') AS UNSIGNED) & 32768) <> 0",
		"(CAST(COALESCE(JSON_VALUE(Priv, '$.access'), '0') AS UNSIGNED) & 1024) <> 0",
	)
	rows, err := db.QueryContext(ctx, "SELECT "+strings.Join(cols, ", ")+" FROM mysql.global_priv")
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []engine.MySQLUser
	for rows.Next() {
		var (
			u         engine.MySQLUser
			topPlugin string
			topEmpty  bool
			n         int
			slotP     [authSlots]sql.NullString
			slotE     [authSlots]bool
			role      bool
		)
		dest := []any{&u.User, &u.Host, &topPlugin, &topEmpty, &n}
		for i := 0; i < authSlots; i++ {
			dest = append(dest, &slotP[i], &slotE[i])
		}
		dest = append(dest, &u.Locked, &role, &u.Super, &u.Grant)
		if err := rows.Scan(dest...); err != nil {
			return nil, err
		}
		if role {
			continue
		}
		// In auth_or an empty object {} stands for the top-level method.
		type method struct {
			plugin string
			empty  bool
		}
		methods := []method{{topPlugin, topEmpty}}
		if n > 0 {
			methods = nil
			for i := 0; i < min(n, authSlots); i++ {
				if slotP[i].Valid {
					methods = append(methods, method{slotP[i].String, slotE[i]})
				} else {
					methods = append(methods, method{topPlugin, topEmpty})
				}
			}
		}
		for _, m := range methods {
			u.Plugins = append(u.Plugins, m.plugin)
			if m.empty && passwordPlugins[m.plugin] {
				u.EmptyPassword = true
			}
		}
		out = append(out, u)
	}
	return out, rows.Err()
}

func readUserTable(ctx context.Context, db *sql.DB) ([]engine.MySQLUser, error) {
	have := map[string]bool{}
	rows, err := db.QueryContext(ctx, "SELECT LOWER(COLUMN_NAME) FROM information_schema.COLUMNS WHERE TABLE_SCHEMA = 'mysql' AND TABLE_NAME = 'user'")
	if err != nil {
		return nil, err
	}
	for rows.Next() {
		var c string
		if err := rows.Scan(&c); err != nil {
			rows.Close()
			return nil, err
		}
		have[c] = true
	}
	rows.Close()
	if len(have) == 0 {
		return nil, errors.New("mysql.user is not visible to this account")
	}
	col := func(name, expr, otherwise string) string {
		if have[name] {
			return expr
		}
		return otherwise
	}
	empty := []string{}
	if have["authentication_string"] {
		empty = append(empty, "COALESCE(authentication_string, '') = ''")
	}
	if have["password"] {
		empty = append(empty, "COALESCE(Password, '') = ''")
	}
	if len(empty) == 0 {
		empty = []string{"FALSE"}
	}
	q := "SELECT User, Host, " +
		col("plugin", "COALESCE(plugin, '')", "''") + ", " +
		strings.Join(empty, " AND ") + ", " +
		col("super_priv", "Super_priv = 'Y'", "FALSE") + ", " +
		col("grant_priv", "Grant_priv = 'Y'", "FALSE") + ", " +
		col("account_locked", "account_locked = 'Y'", "FALSE") + ", " +
		col("is_role", "is_role = 'Y'", "FALSE") +
		" FROM mysql.user"
	rows, err = db.QueryContext(ctx, q)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []engine.MySQLUser
	for rows.Next() {
		var u engine.MySQLUser
		var plugin string
		var empty, role bool
		if err := rows.Scan(&u.User, &u.Host, &plugin, &empty, &u.Super, &u.Grant, &u.Locked, &role); err != nil {
			return nil, err
		}
		if role {
			continue
		}
		u.Plugins = []string{plugin}
		u.EmptyPassword = empty && passwordPlugins[plugin]
		out = append(out, u)
	}
	return out, rows.Err()
}

func readDatabases(ctx context.Context, db *sql.DB) ([]string, error) {
	rows, err := db.QueryContext(ctx, "SHOW DATABASES")
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var n string
		if err := rows.Scan(&n); err != nil {
			return nil, err
		}
		out = append(out, n)
	}
	sort.Strings(out)
	return out, rows.Err()
}

// defaultTimeout bounds each step of a live read when the caller gave none.
const defaultTimeout = 3 * time.Second
