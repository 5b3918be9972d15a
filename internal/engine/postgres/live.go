package postgres

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/dbhost/dbhost/internal/engine"
	"github.com/dbhost/dbhost/internal/host"
)

// live is what one local connection read from the server. It is the JSON
// recorded in snapshots under the probe key, so it holds no secrets (secret
// setting values are redacted before they get here).
type live struct {
	Via       string              `json:"via"`
	Version   string              `json:"version"`
	Settings  []liveSetting       `json:"settings"`
	Databases []engine.PGDatabase `json:"databases,omitempty"`
	DBErr     string              `json:"databases_error,omitempty"`
	// Security is nil in snapshots recorded before it was read.
	Security *engine.PGSecurity `json:"security,omitempty"`
}

type liveSetting struct {
	Name    string `json:"name"`
	Setting string `json:"setting"`
	Unit    string `json:"unit,omitempty"`
	Source  string `json:"source"`
	File    string `json:"file,omitempty"`
	Line    int    `json:"line,omitempty"`
}

// liveKey names the probe that holds a live read; it identifies the server
// by socket and never contains a credential.
func liveKey(sockDir string, port int) string {
	return fmt.Sprintf("postgres:live:%s:%d", sockDir, port)
}

// The queries, sent as one simple-protocol message: one round trip.
const (
	settingsSQL = `SELECT name, setting, unit, source, sourcefile, sourceline FROM pg_settings`
	// PostgreSQL 15 records each database's collation library version.
	databases15SQL = `SELECT datname, datcollate, datlocprovider, datcollversion, pg_database_collation_actual_version(oid) FROM pg_database WHERE datallowconn`
	// Without the function (it fails when a collation cannot be loaded).
	databases15NoActualSQL = `SELECT datname, datcollate, datlocprovider, datcollversion, NULL FROM pg_database WHERE datallowconn`
	// Before 15 every database uses libc and nothing records its version.
	databasesOldSQL = `SELECT datname, datcollate, 'c', NULL, NULL FROM pg_database WHERE datallowconn`
)

// readLive connects over the instance's Unix socket and reads settings,
// version and databases, all inside one Probe so that a snapshot replays the
// same answer (or the same failure).
func readLive(ctx context.Context, h *host.Host, in *engine.Instance, sockDir string, opts engine.Options) (*live, error) {
	b, err := h.Probe(liveKey(sockDir, in.Port), func() ([]byte, error) {
		timeout := opts.Timeout
		if timeout <= 0 {
			timeout = 3 * time.Second
		}
		ctx, cancel := context.WithTimeout(ctx, timeout)
		defer cancel()
		l, err := connectAndRead(ctx, h, in, sockDir, opts.PGDSN, timeout)
		if err != nil {
			return nil, err
		}
		return json.Marshal(l)
	})
	if err != nil {
		return nil, err
	}
	var l live
	if err := json.Unmarshal(b, &l); err != nil {
		return nil, fmt.Errorf("recorded live read: %w", err)
	}
	return &l, nil
}

// attempt is one way to log in.
type attempt struct {
	dsn  string // explicit connection string (--pg)
	user string
}

// attempts lists the logins to try on the instance: an explicit DSN alone
// when it names this instance (its socket, or a local address whose
// listener the instance holds; a DSN without host means libpq's default
// socket and port); else PGUSER; else "postgres" (peer authentication when
// dbhost runs as postgres, trust) and then the invoking user. note says
// why a DSN was not used here.
func attempts(h *host.Host, in *engine.Instance, sockDir, dsn string) (out []attempt, note string, err error) {
	if dsn != "" {
		cfg, err := pgconn.ParseConfig(noPassfile(dsn))
		if err != nil {
			return nil, "", errors.New("--pg connection string does not parse") // never echo it: it may hold a password
		}
		if dsnNames(h, in, sockDir, cfg) {
			return []attempt{{dsn: dsn}}, "", nil
		}
		note = fmt.Sprintf("the --pg connection string names host %s port %d, not this server; ", cfg.Host, cfg.Port)
	}
	if u := os.Getenv("PGUSER"); u != "" {
		return []attempt{{user: u}}, note, nil
	}
	out = []attempt{{user: "postgres"}}
	if u := currentUser(); u != "" && u != "postgres" {
		out = append(out, attempt{user: u})
	}
	return out, note, nil
}

// dsnNames reports whether a parsed connection string reaches the
// instance: its Unix socket (the same directory and port), or a local TCP
// address on which the instance itself listens.
func dsnNames(h *host.Host, in *engine.Instance, sockDir string, cfg *pgconn.Config) bool {
	if int(cfg.Port) != in.Port {
		return false
	}
	if strings.HasPrefix(cfg.Host, "/") {
		if cfg.Host == sockDir {
			return true
		}
		a, errA := h.Realpath(cfg.Host)
		b, errB := h.Realpath(sockDir)
		return errA == nil && errB == nil && a == b
	}
	return in.OwnsListener(h, cfg.Host, int(cfg.Port))
}

func currentUser() string {
	if u, err := user.Current(); err == nil {
		return u.Username
	}
	return os.Getenv("USER")
}

func connectAndRead(ctx context.Context, h *host.Host, in *engine.Instance, sockDir, dsn string, timeout time.Duration) (*live, error) {
	conn, via, err := dial(ctx, h, in, sockDir, dsn, timeout)
	if err != nil {
		return nil, err
	}
	defer conn.Close(context.Background())
	l, err := query(ctx, conn)
	if err != nil {
		return nil, fmt.Errorf("%s: %s", via, shortErr(err))
	}
	l.Via = via
	return l, nil
}

// config builds the connection settings for one attempt. pgx would read
// ~/.pgpass itself with plain file reads; dbhost reads it through the host
// model (ReadSecret, never recorded) and passes the password — only to a
// server that may receive one (engine.Instance.MayReceiveCredentials).
// Every connection is checked to reach the instance's own process before
// the server sees a byte (engine.Instance.Dial).
func (a attempt) config(h *host.Host, in *engine.Instance, sockDir string, timeout time.Duration) (*pgconn.Config, error) {
	secs := strconv.Itoa(max(1, int(timeout.Round(time.Second)/time.Second)))
	var conn string
	if a.dsn != "" {
		conn = noPassfile(a.dsn)
	} else {
		db := os.Getenv("PGDATABASE")
		if db == "" {
			db = "postgres"
		}
		conn = fmt.Sprintf("host=%s port=%d user=%s dbname=%s sslmode=disable passfile='' connect_timeout=%s application_name=dbhost",
			quoteConn(sockDir), in.Port, quoteConn(a.user), quoteConn(db), secs)
	}
	cfg, err := pgconn.ParseConfig(conn)
	if err != nil {
		if a.dsn != "" {
			return nil, errors.New("--pg connection string does not parse") // never echo it: it may hold a password
		}
		return nil, err
	}
	if cfg.ConnectTimeout == 0 || cfg.ConnectTimeout > timeout {
		cfg.ConnectTimeout = timeout
	}
	// Every address pgx tries (fallback hosts, each address of a name)
	// goes through the instance's checked dial.
	timeout = cfg.ConnectTimeout
	cfg.DialFunc = func(ctx context.Context, network, addr string) (net.Conn, error) {
		return in.Dial(ctx, h, network, addr, timeout)
	}
	if why := in.MayReceiveCredentials(); why != "" {
		// Only logins that need no password: the server must not even ask.
		cfg.Password, cfg.RequireAuth = "", "none"
		return cfg, nil
	}
	if cfg.Password == "" {
		cfg.Password = pgpassPassword(h, cfg.Host, int(cfg.Port), cfg.Database, cfg.User)
	}
	return cfg, nil
}

// noPassfile makes pgx skip its own read of ~/.pgpass for a --pg string,
// unless the string names a passfile itself.
func noPassfile(dsn string) string {
	if strings.Contains(dsn, "passfile") {
		return dsn
	}
	if strings.HasPrefix(dsn, "postgres://") || strings.HasPrefix(dsn, "postgresql://") {
		u, err := url.Parse(dsn)
		if err != nil {
			return dsn
		}
		q := u.Query()
		q.Set("passfile", "")
		u.RawQuery = q.Encode()
		return u.String()
	}
	return "passfile='' " + dsn
}

// quoteConn quotes a keyword/value connection string value.
func quoteConn(s string) string {
	return "'" + strings.ReplaceAll(strings.ReplaceAll(s, `\`, `\\`), `'`, `\'`) + "'"
}

// pgpassPassword looks the login up in PGPASSFILE or ~/.pgpass of the
// invoking user, read through ReadSecret (live only, never recorded). Like
// libpq, a socket connection matches the host name "localhost".
func pgpassPassword(h *host.Host, hostName string, port int, db, usr string) string {
	file := os.Getenv("PGPASSFILE")
	if file == "" {
		home, err := os.UserHomeDir()
		if err != nil {
			return ""
		}
		file = filepath.Join(home, ".pgpass")
	}
	b, err := h.ReadSecret(file)
	if err != nil {
		return ""
	}
	if hostName == "" || strings.HasPrefix(hostName, "/") {
		hostName = "localhost"
	}
	return PgpassLookup(b, hostName, strconv.Itoa(port), db, usr)
}

// PgpassLookup finds the password for a login in .pgpass content
// (hostname:port:database:username:password, '*' matches anything, '\'
// escapes ':' and '\'). The first matching line wins.
func PgpassLookup(b []byte, hostName, port, db, usr string) string {
	want := [4]string{hostName, port, db, usr}
	for _, ln := range strings.Split(string(b), "\n") {
		ln = strings.TrimRight(ln, "\r")
		if ln == "" || ln[0] == '#' {
			continue
		}
		f := splitPgpass(ln)
		if len(f) < 5 {
			continue
		}
		ok := true
		for i := range want {
			if f[i] != "*" && f[i] != want[i] {
				ok = false
				break
			}
		}
		if ok {
			return f[4]
		}
	}
	return ""
}

func splitPgpass(ln string) []string {
	var out []string
	var cur strings.Builder
	for i := 0; i < len(ln); i++ {
		switch c := ln[i]; {
		case c == '\\' && i+1 < len(ln):
			i++
			cur.WriteByte(ln[i])
		case c == ':' && len(out) < 4:
			out = append(out, cur.String())
			cur.Reset()
		default:
			cur.WriteByte(c)
		}
	}
	return append(out, cur.String())
}

// shortErr reduces a connection error to the server's message: enough to
// say why (peer authentication failed, role does not exist) and never a
// password.
func shortErr(err error) string {
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		return pe.Message
	}
	var ce *pgconn.ConnectError
	if errors.As(err, &ce) && ce.Unwrap() != nil {
		err = ce.Unwrap()
	}
	msg := err.Error()
	if i := strings.LastIndex(msg, ": "); i >= 0 && strings.Contains(msg, "failed to connect") {
		msg = msg[i+2:]
	}
	return msg
}

// query reads settings and databases in one round trip.
func query(ctx context.Context, conn *pgconn.PgConn) (*live, error) {
	l := &live{Version: conn.ParameterStatus("server_version")}
	major := majorOf(l.Version)
	dbSQL := databasesOldSQL
	if major >= 15 {
		dbSQL = databases15SQL
	}
	results, err := conn.Exec(ctx, settingsSQL+";\n"+dbSQL).ReadAll()
	if len(results) == 0 || results[0].Err != nil {
		if err == nil && len(results) > 0 {
			err = results[0].Err
		}
		if err == nil {
			err = errors.New("no answer to the pg_settings query")
		}
		return nil, fmt.Errorf("reading pg_settings: %w", err)
	}
	for _, r := range results[0].Rows {
		if len(r) < 6 {
			continue
		}
		s := liveSetting{Name: string(r[0]), Setting: redactValue(string(r[0]), string(r[1])), Unit: string(r[2]), Source: string(r[3]), File: string(r[4])}
		s.Line, _ = strconv.Atoi(string(r[5]))
		l.Settings = append(l.Settings, s)
	}
	var dbRows [][][]byte
	switch {
	case len(results) > 1 && results[1].Err == nil:
		dbRows = results[1].Rows
	case major >= 15:
		// The actual-version function fails when a database's collation
		// cannot be loaded; keep the recorded versions at least.
		r, err2 := conn.Exec(ctx, databases15NoActualSQL).ReadAll()
		if err2 == nil && len(r) > 0 && r[0].Err == nil {
			dbRows = r[0].Rows
		}
		l.DBErr = "pg_database_collation_actual_version: " + shortErr(firstErr(err, results))
	default:
		l.DBErr = shortErr(firstErr(err, results))
	}
	l.Security = querySecurity(ctx, conn)
	for _, r := range dbRows {
		if len(r) < 5 {
			continue
		}
		l.Databases = append(l.Databases, engine.PGDatabase{
			Name: string(r[0]), Collate: string(r[1]), Provider: providerName(string(r[2])),
			RecordedVersion: string(r[3]), ActualVersion: string(r[4]),
		})
	}
	return l, nil
}

func firstErr(err error, results []*pgconn.Result) error {
	for _, r := range results {
		if r.Err != nil {
			return r.Err
		}
	}
	if err != nil {
		return err
	}
	return errors.New("no answer")
}

// providerName spells datlocprovider out.
func providerName(p string) string {
	switch p {
	case "c":
		return "libc"
	case "i":
		return "icu"
	case "b":
		return "builtin"
	}
	return p
}

// majorOf returns the major version of "15.4 (Debian ...)", "9.6.24" (9),
// or 0.
func majorOf(v string) int {
	parts, _ := engine.VersionParts(v)
	if len(parts) == 0 {
		return 0
	}
	return parts[0]
}

// liveSource turns pg_settings.source into a Setting source: "live", or
// "live:PATH:LINE" when a configuration file set it (the file is visible to
// superusers and pg_read_all_settings), or "live:cmdline".
func liveSource(s liveSetting) string {
	switch {
	case s.Source == "configuration file" && s.File != "":
		return "live:" + s.File + ":" + strconv.Itoa(s.Line)
	case s.Source == "command line":
		return "live:cmdline"
	}
	return "live"
}

// The authentication queries, one round trip. Each answers without a
// secret: role names, the public schema's ACL, and for pg_authid (readable
// by superusers only, so it comes last) the kind of hash, never the hash.
const (
	// Superusers that can log in, with every role they belong to (the
	// server's +group test follows memberships, not superuser powers).
	superusersSQL = `WITH RECURSIVE m(member, roleid) AS (SELECT member, roleid FROM pg_auth_members UNION SELECT m.member, a.roleid FROM m JOIN pg_auth_members a ON a.member = m.roleid) ` +
		`SELECT r.rolname, COALESCE((SELECT json_agg(g.rolname ORDER BY g.rolname) FROM m JOIN pg_roles g ON g.oid = m.roleid WHERE m.member = r.oid), '[]') FROM pg_roles r WHERE r.rolsuper AND r.rolcanlogin ORDER BY 1`
	// Whether PUBLIC (grantee 0) holds CREATE on schema public; a NULL ACL
	// means the built-in default for a schema.
	publicSQL = `SELECT current_database(), COALESCE(n.nspacl::text, ''), EXISTS (SELECT 1 FROM aclexplode(COALESCE(n.nspacl, acldefault('n', n.nspowner))) a WHERE a.grantee = 0 AND a.privilege_type = 'CREATE') FROM pg_namespace n WHERE n.nspname = 'public'`
	hashesSQL = `SELECT rolname, CASE WHEN rolpassword LIKE 'md5%' THEN 'md5' WHEN rolpassword LIKE 'SCRAM-SHA-256$%' THEN 'scram' ELSE 'other' END FROM pg_authid WHERE rolcanlogin AND rolpassword IS NOT NULL ORDER BY 1`
)

// querySecurity reads roles, the public schema's privileges and password
// hash kinds. A statement that fails leaves its part unknown, with why.
func querySecurity(ctx context.Context, conn *pgconn.PgConn) *engine.PGSecurity {
	s := &engine.PGSecurity{Superusers: []engine.PGRole{}}
	results, err := conn.Exec(ctx, superusersSQL+";\n"+publicSQL+";\n"+hashesSQL).ReadAll()
	part := func(i int) ([][][]byte, string) {
		switch {
		case i < len(results) && results[i].Err == nil:
			return results[i].Rows, ""
		case i < len(results):
			return nil, shortErr(results[i].Err)
		case err != nil:
			return nil, shortErr(err) // an earlier statement failed, or the connection
		}
		return nil, "no answer"
	}
	rows, why := part(0)
	s.RolesErr = why
	for _, r := range rows {
		role := engine.PGRole{Name: string(r[0])}
		if err := json.Unmarshal(r[1], &role.MemberOf); err != nil {
			s.RolesErr = "memberships of " + role.Name + ": " + err.Error()
		}
		s.Superusers = append(s.Superusers, role)
	}
	rows, s.PublicErr = part(1)
	for _, r := range rows {
		s.Database, s.PublicACL = string(r[0]), string(r[1])
		s.PublicSchema, s.PublicCreate = true, string(r[2]) == "t"
	}
	rows, s.HashesErr = part(2)
	for _, r := range rows {
		switch string(r[1]) {
		case "md5":
			s.MD5Roles = append(s.MD5Roles, string(r[0]))
		case "scram":
			s.ScramRoles++
		}
	}
	return s
}
