package check

import (
	"fmt"
	"sort"
	"strconv"
	"strings"

	"github.com/dbhost/dbhost/internal/engine"
	"github.com/dbhost/dbhost/internal/engine/postgres"
	"github.com/dbhost/dbhost/internal/facts"
	"github.com/dbhost/dbhost/internal/fix"
)

// PostgreSQL access and security: who may connect from where and how
// (pg_hba.conf, read from hba_file with its includes), how passwords are
// stored and sent, and who may create objects in schema public.

const (
	refClientAuth = "https://www.postgresql.org/docs/current/client-authentication.html"
	refHBA        = "https://www.postgresql.org/docs/current/auth-pg-hba-conf.html"
	refPassword   = "https://www.postgresql.org/docs/current/auth-password.html"
	refSSL        = "https://www.postgresql.org/docs/current/ssl-tcp.html"
	refSchemas    = "https://www.postgresql.org/docs/current/ddl-schemas.html#DDL-SCHEMAS-PATTERNS"
)

func init() {
	Register(Check{
		ID:        "pg.hardening.hba_trust",
		Title:     "pg_hba.conf has no trust rule for network clients",
		Problem:   "pg_hba.conf has a trust rule for network clients",
		Severity:  Critical,
		AppliesTo: []string{"postgres"},
		Doc: `Reads pg_hba.conf from the file the server uses (hba_file; by default
$PGDATA/pg_hba.conf) with its include, include_if_exists and include_dir lines
(PostgreSQL 16+) and @file lists, and looks for records with the trust method that
match connections from other hosts (host* records whose address is not loopback
127.0.0.0/8, ::1/128, samehost or localhost). trust lets whoever connects log in as
any role they name, superusers included, with no password: with the server listening
on a network address (the sockets it really holds, else listen_addresses) anyone who
reaches the port owns the database. The server uses the first record that matches, so
a trust record anywhere above a stricter one wins. Fix: scram-sha-256 (PostgreSQL 10+)
on that line and SELECT pg_reload_conf().`,
		Refs: []string{refHBA, refClientAuth},
		Run:  checkHBATrust,
	})
	Register(Check{
		ID:        "pg.hardening.hba_cleartext",
		Title:     "Passwords cross the network only encrypted (pg_hba.conf)",
		Problem:   "Passwords can cross the network in clear text (pg_hba.conf)",
		Severity:  Warning,
		AppliesTo: []string{"postgres"},
		Doc: `Looks for pg_hba.conf records that match network clients with a method that
sends the password in clear text (password, and ldap, radius, pam and bsd, which
receive the password itself) on a record that also matches unencrypted connections
(host or hostnossl rather than hostssl or hostgssenc). Anyone on the path reads the
password; ssl=on alone does not help, because a client may still connect without SSL
and a host record accepts it. Records limited to the loopback interface are not
counted. Fix: make the record hostssl (and for password use scram-sha-256, which never
sends the password), then SELECT pg_reload_conf().`,
		Refs: []string{refPassword, refHBA, refSSL},
		Run:  checkHBACleartext,
	})
	Register(Check{
		ID:        "pg.hardening.md5",
		Title:     "PostgreSQL passwords use SCRAM, not MD5",
		Problem:   "PostgreSQL passwords use MD5, not SCRAM",
		Severity:  Warning,
		AppliesTo: []string{"postgres"},
		Doc: `From PostgreSQL 10 on, scram-sha-256 is available and the documentation calls
it the most secure password method; PostgreSQL 14 made it the default of
password_encryption. MD5 hashes are salted only with the role name: a stolen hash is
enough to log in with the md5 method (it is password-equivalent) and weak passwords
fall to precomputed tables. The check fails on records with the md5 method, on
password_encryption = md5 (new passwords stored as MD5; the default before 14) and,
when dbhost can read pg_authid (superuser connection), on login roles whose stored
password is an MD5 hash (only the hash kind is read, never the hash). Order matters:
set password_encryption = scram-sha-256, set those roles' passwords again, then change
md5 records to scram-sha-256 (a role with an MD5 hash cannot log in on a
scram-sha-256 record; from 14 an md5 record already uses SCRAM for SCRAM hashes).`,
		Refs: []string{refPassword, "https://www.postgresql.org/docs/current/runtime-config-connection.html#GUC-PASSWORD-ENCRYPTION"},
		Run:  checkPGMD5,
	})
	Register(Check{
		ID:        "pg.hardening.ssl",
		Title:     "PostgreSQL offers SSL when it listens on the network (ssl)",
		Problem:   "PostgreSQL listens on the network without SSL (ssl)",
		Severity:  Warning,
		AppliesTo: []string{"postgres"},
		Doc: `Reads ssl (live, else the configuration files; the default is off) and the
addresses the server listens on. With ssl=off every connection over the network is in
clear text: queries, results and any password sent with the password, ldap, radius,
pam or bsd methods; hostssl records then match nothing. A server that listens only on
loopback or its Unix socket passes. Fix: put a certificate and key in the data
directory (server.crt, server.key, or ssl_cert_file/ssl_key_file), set ssl = on (a
reload applies it since PostgreSQL 10) and make remote records hostssl.`,
		Refs: []string{refSSL, "https://www.postgresql.org/docs/current/runtime-config-connection.html#GUC-SSL"},
		Run:  checkPGSSL,
	})
	Register(Check{
		ID:        "pg.hardening.superuser_remote",
		Title:     "PostgreSQL superusers cannot log in from the network",
		Problem:   "PostgreSQL superusers can log in from the network",
		Severity:  Warning,
		AppliesTo: []string{"postgres"},
		Doc: `Walks pg_hba.conf in the server's order (first match wins) for every superuser
that can log in (live: pg_roles.rolsuper and rolcanlogin, with role memberships for
+group) and reports the first record that admits it from a non-local address with a
method other than reject: the keyword all, its name, a group it belongs to. A reject
record for the role that covers every database and the whole address family (all,
0.0.0.0/0, ::/0) before it shadows later records. A superuser reachable over the
network is the first target of password guessing and bypasses every privilege check
(it can run programs as the server's user with COPY ... PROGRAM). Administer over the
Unix socket or SSH. Without a live connection the superusers' names are unknown: a
record for all users reached before any record naming roles still fails; one naming
roles or groups first leaves it unknown. Fix: reject records for the
superusers above the first network record, then SELECT pg_reload_conf().`,
		Refs: []string{refHBA, "https://www.postgresql.org/docs/current/role-attributes.html"},
		Run:  checkSuperuserRemote,
	})
	Register(Check{
		ID:        "pg.hardening.public_create",
		Title:     "PUBLIC cannot create objects in schema public",
		Problem:   "PUBLIC can create objects in schema public",
		Severity:  Warning,
		AppliesTo: []string{"postgres"},
		Doc: `Reads the ACL of schema public (live, in the database dbhost connects to; new
databases copy template1's) and whether PUBLIC (every role) holds CREATE on it. Before
PostgreSQL 15 it did by default: any user could create functions and operators in
public that shadow built-ins for other users whose search_path includes it, including
superusers, and so run code with their rights (CVE-2018-1058). PostgreSQL 15 revoked
it for new clusters; clusters upgraded with pg_upgrade keep the old grant. Fix:
REVOKE CREATE ON SCHEMA public FROM PUBLIC in every database and in template1. Needs a
live connection.`,
		Refs: []string{refSchemas, "https://www.postgresql.org/support/security/CVE-2018-1058/", "https://www.postgresql.org/docs/release/15.0/"},
		Run:  checkPublicCreate,
	})
}

// ---- shared ----

// pgNetReach says whether the server accepts TCP connections from other
// hosts: the sockets it holds, else listen_addresses.
func pgNetReach(in *facts.Instance) (bool, Evidence) {
	var tcp, remote []string
	for _, l := range in.Listen {
		if l.Proto == "unix" {
			continue
		}
		tcp = append(tcp, l.String())
		if !l.Loopback() {
			remote = append(remote, l.String())
		}
	}
	if len(tcp) > 0 || in.ListenErr == "" {
		v := strings.Join(tcp, ", ")
		if v == "" {
			v = "no TCP socket (Unix socket only)"
		}
		return len(remote) > 0, Ev("listening", v, "/proc/net/tcp, /proc/net/tcp6, /proc/PID/fd")
	}
	s, ok := in.Setting("listen_addresses")
	if !ok {
		return false, Ev("listen_addresses", "unknown", in.ListenErr)
	}
	for _, a := range strings.Split(s.Value, ",") {
		switch a = strings.TrimSpace(a); {
		case a == "", a == "localhost", a == "::1", strings.HasPrefix(a, "127."):
		default:
			return true, Ev("listen_addresses", s.Value, s.Source)
		}
	}
	return false, Ev("listen_addresses", s.Value, s.Source)
}

// hbaUnknown says why pg_hba.conf cannot be judged, or "".
func hbaUnknown(in *facts.Instance) string {
	switch {
	case in.Postgres == nil || in.Postgres.HBA == nil:
		return "pg_hba.conf was not read for this server"
	case in.Postgres.HBA.Err != "":
		return "cannot read pg_hba.conf (" + pgOr(in.Postgres.HBA.File, "location unknown") + "): " + in.Postgres.HBA.Err
	}
	return ""
}

func pgOr(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

func hbaLineEv(l engine.HBALine) Evidence {
	return Ev("pg_hba.conf record", l.Text, l.File+":"+strconv.Itoa(l.Line))
}

// hbaFileEv names the file the records came from, with any problems.
func hbaFileEv(hba *engine.PGHBA) Evidence {
	v := fmt.Sprintf("%s (%d records", hba.File, len(hba.Lines))
	if n := len(hba.Files); n > 1 {
		v += fmt.Sprintf(" in %d files", n)
	}
	v += ")"
	if len(hba.Errors) > 0 {
		v += "; problems: " + strings.Join(hba.Errors, "; ")
	}
	if len(hba.IdentErr) > 0 {
		v += "; pg_ident.conf problems: " + strings.Join(hba.IdentErr, "; ")
	}
	return Ev("hba_file", v, hba.FileSource)
}

// hbaNetwork reports a record that can match a client on another host.
func hbaNetwork(l engine.HBALine) bool { return l.Type != "local" && !postgres.HBALocalOnly(l) }

// hbaEdit is one record's change.
type hbaEdit struct {
	line  engine.HBALine
	after string
}

// hbaFix rewrites records in place and reloads the server.
func hbaFix(in *facts.Instance, summary string, edits []hbaEdit, extra string) *fix.Fix {
	var b strings.Builder
	for _, e := range edits {
		fmt.Fprintf(&b, "%s:%d\n  before: %s\n  after:  %s\n", e.line.File, e.line.Line, e.line.Text, e.after)
	}
	b.WriteString("Then reload the configuration: SELECT pg_reload_conf(); (pg_hba.conf is read again on reload; check pg_hba_file_rules for errors first).")
	if extra != "" {
		b.WriteString("\n" + extra)
	}
	// The reload is SQL and follows a hand edit: it belongs to the manual
	// steps, not to the shell commands pasted first.
	return &fix.Fix{Summary: summary + " on " + in.Name(), Manual: b.String()}
}

// strongMethod is the method to propose instead of a weak one.
func strongMethod(in *facts.Instance) string {
	if m := in.Major(); m > 0 && m < 10 {
		return "md5"
	}
	return "scram-sha-256"
}

// hbaFinding is the shape of the record checks: bad records that match
// network clients fail when the server listens on the network.
func hbaFinding(in *facts.Instance, bad func(engine.HBALine) bool, edit func(engine.HBALine) string, passWhy, failWhy, summary, extra string) Result {
	subj := in.Name()
	if why := hbaUnknown(in); why != "" {
		return UnknownR(subj, why)
	}
	hba := in.Postgres.HBA
	reach, lev := pgNetReach(in)
	ev := []Evidence{hbaFileEv(hba), lev}
	var edits []hbaEdit
	for _, l := range hba.Lines {
		if hbaNetwork(l) && bad(l) {
			edits = append(edits, hbaEdit{line: l, after: edit(l)})
			ev = append(ev, hbaLineEv(l))
		}
	}
	switch {
	case len(edits) == 0:
		return PassR(subj, passWhy, ev...)
	case !reach:
		return PassR(subj, fmt.Sprintf("%d record(s) would accept network clients this way, but the server listens only locally; they take effect as soon as listen_addresses opens it, so change them as well.", len(edits)), ev...)
	}
	var where []string
	for _, e := range edits {
		where = append(where, e.line.File+":"+strconv.Itoa(e.line.Line))
	}
	return FailR(subj, fmt.Sprintf(failWhy, strings.Join(where, ", ")), hbaFix(in, summary, edits, extra), ev...)
}

// ---- pg.hardening.hba_trust ----

func checkHBATrust(f *facts.Facts) []Result {
	return eachOf(f, engine.Postgres, func(_ *facts.Facts, in *facts.Instance) Result {
		m := strongMethod(in)
		return hbaFinding(in,
			func(l engine.HBALine) bool { return l.Method == "trust" },
			func(l engine.HBALine) string { return postgres.FormatHBA(l, m) },
			"No record lets network clients in without a password (trust appears at most on local or loopback records).",
			"trust admits network clients without any password, as any role they name, superusers included (%s), and the server listens on the network: anyone who reaches the port owns the database.",
			"Require "+m+" instead of trust", "Roles that log in over these records need a password first (\\password NAME in psql).")
	})
}

// ---- pg.hardening.hba_cleartext ----

// cleartextMethods receive the password itself from the client.
var cleartextMethods = map[string]bool{"password": true, "ldap": true, "radius": true, "pam": true, "bsd": true}

func checkHBACleartext(f *facts.Facts) []Result {
	return eachOf(f, engine.Postgres, func(_ *facts.Facts, in *facts.Instance) Result {
		m := strongMethod(in)
		return hbaFinding(in,
			func(l engine.HBALine) bool { return cleartextMethods[l.Method] && !postgres.HBAEncrypted(l) },
			func(l engine.HBALine) string {
				l.Type = "hostssl"
				if l.Method == "password" {
					return postgres.FormatHBA(l, m)
				}
				return postgres.FormatHBA(l, l.Method)
			},
			"No record sends a password in clear text over an unencrypted network connection.",
			"Records %s take the password in clear text from network clients that need not use SSL: anyone on the path reads it.",
			"Accept passwords only over SSL", "hostssl records match only when ssl = on (see pg.hardening.ssl).")
	})
}

// ---- pg.hardening.md5 ----

// pgSetting is a setting's value and evidence, the version's default when
// no source sets it.
func pgSetting(in *facts.Instance, name string) (string, Evidence) {
	if s, ok := in.Setting(name); ok {
		return s.Value, Ev(name, s.Value, s.Source)
	}
	v := postgres.AuthDefault(name, in.Major())
	return v, Ev(name, v+" (not set: the default of PostgreSQL "+pgOr(in.Version, "of unknown version")+")", "default")
}

func checkPGMD5(f *facts.Facts) []Result { return eachOf(f, engine.Postgres, judgePGMD5) }

func judgePGMD5(_ *facts.Facts, in *facts.Instance) Result {
	subj := in.Name()
	if m := in.Major(); m > 0 && m < 10 {
		return PassR(subj, fmt.Sprintf("PostgreSQL %s has no scram-sha-256 (it came with 10): md5 is its strongest password method; upgrade.", in.Version), Ev("version", in.Version, in.VersionSource))
	}
	var md md5Findings
	pe := md.encryption(in)
	md.hashes(in)
	edits := md.records(in)
	if len(md.why) == 0 {
		if hw := hbaUnknown(in); hw != "" {
			return UnknownR(subj, hw, md.ev...)
		}
		return PassR(subj, "password_encryption is "+pe+" and no pg_hba.conf record uses md5."+md.notChecked(), md.ev...)
	}
	extra := ""
	if len(md.steps) > 0 {
		extra = "First, in psql as a superuser:\n" + strings.Join(md.steps, "\n")
	}
	fx := &fix.Fix{Summary: "Move passwords from MD5 to SCRAM on " + subj, Manual: extra}
	if len(edits) > 0 {
		fx = hbaFix(in, "Move passwords from MD5 to SCRAM", edits, extra)
	}
	if md.setEncryption {
		fx.Config = []fix.ConfigChange{{Instance: subj, Engine: string(in.Engine), Key: "password_encryption", Value: "scram-sha-256"}}
	}
	reason := strings.Join(md.why, "; ") + ". An MD5 hash is enough to log in with the md5 method and falls quickly to guessing; scram-sha-256 (available since PostgreSQL 10) is not password-equivalent." + md.notChecked()
	return FailR(subj, reason, fx, md.ev...)
}

// md5Findings gathers what pg.hardening.md5 found: reasons, evidence, the
// SQL steps of the fix and what could not be checked.
type md5Findings struct {
	why, notes, steps []string
	ev                []Evidence
	setEncryption     bool
}

func (md *md5Findings) notChecked() string {
	if len(md.notes) == 0 {
		return ""
	}
	return " Not checked: " + strings.Join(md.notes, "; ") + "."
}

// encryption judges password_encryption (md5, or on before 14, is MD5).
func (md *md5Findings) encryption(in *facts.Instance) string {
	pe, pev := pgSetting(in, "password_encryption")
	md.ev = append(md.ev, pev)
	if v := strings.ToLower(strings.TrimSpace(pe)); v == "md5" || v == "on" {
		md.why = append(md.why, "password_encryption = "+pe+" stores new passwords as MD5 hashes")
		md.steps = append(md.steps, "ALTER SYSTEM SET password_encryption = 'scram-sha-256'; SELECT pg_reload_conf();")
		md.setEncryption = true
	}
	return pe
}

// hashes judges the stored password hashes read from pg_authid.
func (md *md5Findings) hashes(in *facts.Instance) {
	switch sec := in.Postgres.Security; {
	case sec == nil:
		md.notes = append(md.notes, "the stored password hashes were not read (no live connection: "+pgOr(in.LiveErr, "none made")+")")
	case sec.HashesErr != "":
		md.notes = append(md.notes, "the stored password hashes were not read (pg_authid: "+sec.HashesErr+"; it needs a superuser connection)")
	case len(sec.MD5Roles) > 0:
		md.ev = append(md.ev, Ev("roles with MD5 password hashes", strings.Join(sec.MD5Roles, ", "), "live: pg_authid"))
		md.why = append(md.why, fmt.Sprintf("%d role(s) have MD5 password hashes (%s)", len(sec.MD5Roles), strings.Join(sec.MD5Roles, ", ")))
		for _, r := range sec.MD5Roles {
			md.steps = append(md.steps, "\\password "+pgIdent(r)+"   -- in psql, after password_encryption is scram-sha-256")
		}
	default:
		md.ev = append(md.ev, Ev("roles with MD5 password hashes", fmt.Sprintf("none (%d with SCRAM)", sec.ScramRoles), "live: pg_authid"))
	}
}

// records finds md5 records and proposes scram-sha-256 for them.
func (md *md5Findings) records(in *facts.Instance) []hbaEdit {
	if hw := hbaUnknown(in); hw != "" {
		md.notes = append(md.notes, hw)
		return nil
	}
	md.ev = append(md.ev, hbaFileEv(in.Postgres.HBA))
	var edits []hbaEdit
	for _, l := range in.Postgres.HBA.Lines {
		if l.Method == "md5" {
			edits = append(edits, hbaEdit{line: l, after: postgres.FormatHBA(l, "scram-sha-256")})
			md.ev = append(md.ev, hbaLineEv(l))
		}
	}
	if len(edits) > 0 {
		md.why = append(md.why, fmt.Sprintf("%d pg_hba.conf record(s) use md5", len(edits)))
	}
	return edits
}

// pgIdent quotes a role name for psql when it needs it.
func pgIdent(s string) string {
	for _, c := range s {
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '_') {
			return `"` + strings.ReplaceAll(strings.ReplaceAll(s, `"`, `""`), "\n", " ") + `"`
		}
	}
	return s
}

// ---- pg.hardening.ssl ----

func checkPGSSL(f *facts.Facts) []Result { return eachOf(f, engine.Postgres, judgePGSSL) }

func judgePGSSL(_ *facts.Facts, in *facts.Instance) Result {
	subj := in.Name()
	if _, ok := in.Setting("ssl"); !ok && in.SettingsSource != "live" && len(in.ConfigFiles) == 0 {
		return UnknownR(subj, "neither a live connection ("+pgOr(in.LiveErr, "none made")+") nor the configuration files tell whether ssl is on")
	}
	v, sev := pgSetting(in, "ssl")
	reach, lev := pgNetReach(in)
	ev := []Evidence{sev, lev}
	if on, _ := postgres.Bool(in.Instance, "ssl"); on || v == "on" {
		return PassR(subj, "ssl is on: network clients can encrypt their connections (hostssl records make them).", ev...)
	}
	if !reach {
		return PassR(subj, "ssl is off, but the server listens only on loopback or its Unix socket: nothing crosses the network.", ev...)
	}
	fx := &fix.Fix{
		Summary: "Turn on SSL for " + subj,
		Config:  []fix.ConfigChange{{Instance: subj, Engine: string(in.Engine), Key: "ssl", Value: "on", Restart: in.Major() > 0 && in.Major() < 10}},
		Manual:  "Put the server's certificate and key in the data directory (server.crt, and server.key readable only by the server's user) or name them with ssl_cert_file and ssl_key_file, set ssl = on, reload (SELECT pg_reload_conf();), then change remote pg_hba.conf records to hostssl.",
	}
	return FailR(subj, "ssl is off while the server listens on the network: queries, results and passwords sent by the password, ldap, radius, pam or bsd methods cross the network in clear text, and hostssl records match nothing.", fx, ev...)
}

// ---- pg.hardening.superuser_remote ----

// suAdmit is the first record that lets a superuser in from the network.
type suAdmit struct {
	role string
	line engine.HBALine
}

// firstNetworkMatch walks the records as the server does for a role (""
// when the superusers are unknown: only the keyword all is sure to match)
// and returns the first non-reject record that admits it from the network,
// and whether a regular expression or an unknown role name left the walk
// unsure before that.
func firstNetworkMatch(lines []engine.HBALine, role string, memberOf []string) (engine.HBALine, bool, bool) {
	unsure := false
	for _, fam := range []int{4, 6} {
		for _, l := range lines {
			v4, v6 := postgres.HBAFamilies(l)
			if !hbaNetwork(l) || fam == 4 && !v4 || fam == 6 && !v6 {
				continue
			}
			m := postgres.HBAUserMatch(l, role, memberOf)
			if role == "" && m == "no" {
				unsure = true // a record for named roles or groups: superusers may be among them
				continue
			}
			if m == "maybe" {
				unsure = true
				continue
			}
			if m == "no" {
				continue
			}
			if l.Method != "reject" {
				return l, true, unsure
			}
			w4, w6 := postgres.HBAWholeFamily(l)
			if postgres.HBAAllDatabases(l) && (fam == 4 && w4 || fam == 6 && w6) {
				break // every later record is shadowed for this family
			}
		}
	}
	return engine.HBALine{}, false, unsure
}

func checkSuperuserRemote(f *facts.Facts) []Result {
	return eachOf(f, engine.Postgres, judgeSuperuserRemote)
}

func judgeSuperuserRemote(_ *facts.Facts, in *facts.Instance) Result {
	subj := in.Name()
	if why := hbaUnknown(in); why != "" {
		return UnknownR(subj, why)
	}
	hba := in.Postgres.HBA
	reach, lev := pgNetReach(in)
	ev := []Evidence{hbaFileEv(hba), lev}
	var roles []engine.PGRole
	known := false
	rolesWhy := "no live connection (" + pgOr(in.LiveErr, "none made") + ")"
	if sec := in.Postgres.Security; sec != nil {
		if sec.RolesErr == "" {
			roles, known = sec.Superusers, true
		} else {
			rolesWhy = "pg_roles: " + sec.RolesErr
		}
	}
	if !known {
		roles = []engine.PGRole{{}}
	} else {
		names := make([]string, len(roles))
		for i, r := range roles {
			names[i] = r.Name
		}
		ev = append(ev, Ev("superusers that can log in", pgOr(strings.Join(names, ", "), "none"), "live: pg_roles"))
	}
	var hits []suAdmit
	unsure := false
	for _, r := range roles {
		l, ok, u := firstNetworkMatch(hba.Lines, r.Name, r.MemberOf)
		unsure = unsure || u
		if ok {
			hits = append(hits, suAdmit{role: r.Name, line: l})
		}
	}
	switch {
	case len(hits) == 0 && unsure && !known:
		return UnknownR(subj, "pg_hba.conf names specific roles (a reject, a regular expression or a group) and the superusers could not be listed to see whether they are among them: "+rolesWhy, ev...)
	case len(hits) == 0 && unsure:
		return UnknownR(subj, "a regular expression in a user field may match a superuser; dbhost does not evaluate PostgreSQL regular expressions", ev...)
	case len(hits) == 0:
		return PassR(subj, "No pg_hba.conf record lets a superuser log in from another host.", ev...)
	case !reach:
		return PassR(subj, "pg_hba.conf would let superusers in from other hosts, but the server listens only locally.", append(ev, hbaLineEv(hits[0].line))...)
	}
	return FailR(subj, superuserWhy(hits, known), superuserFix(in, hits, known), append(ev, superuserEv(hits)...)...)
}

func superuserWhy(hits []suAdmit, known bool) string {
	var who []string
	for _, h := range hits {
		name := h.role
		if !known {
			name = "every superuser"
		}
		who = append(who, fmt.Sprintf("%s by %s:%d (%s)", name, h.line.File, h.line.Line, h.line.Method))
	}
	return "Superusers can log in from other hosts: " + strings.Join(who, "; ") + ". A network-reachable superuser is the first target of password guessing and bypasses every privilege check. Administer over the Unix socket or SSH."
}

func superuserEv(hits []suAdmit) []Evidence {
	seen := map[string]bool{}
	var ev []Evidence
	for _, h := range hits {
		k := h.line.File + ":" + strconv.Itoa(h.line.Line)
		if !seen[k] {
			seen[k] = true
			ev = append(ev, hbaLineEv(h.line))
		}
	}
	return ev
}

// superuserFix puts reject records for the superusers above the first
// record that admits one.
func superuserFix(in *facts.Instance, hits []suAdmit, known bool) *fix.Fix {
	first := hits[0].line
	var names []string
	for _, h := range hits {
		if h.line.File == first.File && h.line.Line < first.Line {
			first = h.line
		}
		names = append(names, pgHBAName(h.role))
	}
	sort.Strings(names)
	who := strings.Join(names, ",")
	if !known {
		who = "postgres"
	}
	manual := fmt.Sprintf("Insert above %s:%d:\n  host all %s 0.0.0.0/0 reject\n  host all %s ::/0 reject\nThen reload: SELECT pg_reload_conf();", first.File, first.Line, who, who)
	if !known {
		manual += "\nList every superuser there (SELECT rolname FROM pg_roles WHERE rolsuper AND rolcanlogin), not only postgres."
	}
	return &fix.Fix{Summary: "Refuse superuser logins from the network on " + in.Name(), Manual: manual}
}

// pgHBAName quotes a role name for pg_hba.conf when it needs it.
func pgHBAName(s string) string {
	if s == "" || strings.ContainsAny(s, " \t,#\"+@/") || s == "all" {
		return `"` + strings.ReplaceAll(s, `"`, `""`) + `"`
	}
	return s
}

// ---- pg.hardening.public_create ----

func checkPublicCreate(f *facts.Facts) []Result { return eachOf(f, engine.Postgres, judgePublicCreate) }

func judgePublicCreate(_ *facts.Facts, in *facts.Instance) Result {
	subj := in.Name()
	sec := in.Postgres.Security
	switch {
	case in.SettingsSource != "live":
		return UnknownR(subj, "the privileges of schema public are only visible over a connection, and none was made: "+pgOr(in.LiveErr, "no live connection"))
	case sec == nil:
		return UnknownR(subj, "the live read holds no privileges of schema public (a snapshot recorded by an older dbhost)")
	case sec.PublicErr != "":
		return UnknownR(subj, "reading the ACL of schema public failed: "+sec.PublicErr)
	case !sec.PublicSchema:
		return PassR(subj, "Database "+pgOr(sec.Database, "(unknown)")+" has no schema public.", Ev("schema public", "absent", "live: pg_namespace"))
	}
	ev := []Evidence{Ev("public ACL", pgOr(sec.PublicACL, "(default)"), "live: pg_namespace in database "+sec.Database), Ev("version", in.Version, in.VersionSource)}
	if !sec.PublicCreate {
		return PassR(subj, "PUBLIC has no CREATE on schema public in database "+sec.Database+": only its owner and explicitly granted roles can create objects there.", ev...)
	}
	reason := "PUBLIC holds CREATE on schema public in database " + sec.Database + ": any role can create functions and operators there that shadow built-ins for other users, superusers included, and so run code with their rights (CVE-2018-1058)."
	if m := in.Major(); m > 0 && m < 15 {
		reason += " It is the default before PostgreSQL 15."
	} else {
		reason += " PostgreSQL 15 no longer grants it: this cluster was upgraded from an older version or granted it explicitly."
	}
	return FailR(subj, reason, &fix.Fix{
		Summary: "Revoke CREATE on schema public from PUBLIC on " + subj,
		Manual:  "Run in psql as a superuser, in every database and in template1 (new databases copy it):\nREVOKE CREATE ON SCHEMA public FROM PUBLIC;\nGrant CREATE to the roles that own the application's objects instead.",
	}, ev...)
}
