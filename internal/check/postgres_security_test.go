package check_test

import (
	"strings"
	"testing"

	"github.com/dbhost/dbhost/internal/check"
	"github.com/dbhost/dbhost/internal/engine"
	"github.com/dbhost/dbhost/internal/facts"
)

// hbaRec is a pg_hba.conf record of the pg-hba-* fixtures' private server.
func hbaRec(line int, typ, db, user, addr, method string) engine.HBALine {
	tok := func(s string) []engine.HBAToken {
		var out []engine.HBAToken
		for _, t := range strings.Split(s, ",") {
			out = append(out, engine.HBAToken{Text: t})
		}
		return out
	}
	return engine.HBALine{File: "/data/pg_hba.conf", Line: line, Text: strings.Join([]string{typ, db, user, addr, method}, " "),
		Type: typ, Databases: tok(db), Users: tok(user), Address: addr, Method: method}
}

// withHBA replaces an instance's records.
func withHBA(subject string, lines ...engine.HBALine) func(*facts.Facts) {
	return func(f *facts.Facts) { instance(f, subject).Postgres.HBA.Lines = lines }
}

// loopbackOnly makes the instance listen on 127.0.0.1 alone.
func loopbackOnly(subject string) func(*facts.Facts) {
	return func(f *facts.Facts) {
		in := instance(f, subject)
		in.Listen = []engine.Listener{{Proto: "tcp", Addr: "127.0.0.1", Port: in.Port}}
	}
}

func pgMutate(subject string, fn func(in *facts.Instance)) func(*facts.Facts) {
	return func(f *facts.Facts) { fn(instance(f, subject)) }
}

func both(a, b func(*facts.Facts)) func(*facts.Facts) {
	return func(f *facts.Facts) { a(f); b(f) }
}

func init() {
	const open, hard = "pg-hba-open", "pg-hba-hardened"
	const po, ph = "postgres:36605", "postgres:46757"
	noSecurity := func(s string) func(*facts.Facts) {
		return pgMutate(s, func(in *facts.Instance) { in.Postgres.Security = nil })
	}
	noHBA := func(s string) func(*facts.Facts) {
		return pgMutate(s, func(in *facts.Instance) { in.Postgres.HBA.Err = "permission denied (run dbhost as root)" })
	}
	addCases(
		// pg.hardening.hba_trust: trust on a network record of a server
		// that listens on the network.
		tcase{name: "recorded fail", base: open, id: "pg.hardening.hba_trust", subject: po, want: check.Fail, says: []string{"pg_hba.conf:4", "listens on the network"}},
		tcase{name: "recorded pass", base: hard, id: "pg.hardening.hba_trust", subject: ph, want: check.Pass},
		tcase{name: "not recorded", base: "baseline", id: "pg.hardening.hba_trust", subject: "postgres:5432", want: check.Unknown, says: []string{"not recorded in this snapshot"}},
		tcase{name: "unreadable", base: open, mutate: noHBA(po), id: "pg.hardening.hba_trust", subject: po, want: check.Unknown, says: []string{"permission denied"}},
		tcase{name: "trust on loopback only", base: open, mutate: withHBA(po, hbaRec(1, "host", "all", "all", "127.0.0.1/32", "trust"), hbaRec(2, "host", "all", "all", "::1/128", "trust"), hbaRec(3, "host", "all", "all", "samehost", "trust")), id: "pg.hardening.hba_trust", subject: po, want: check.Pass},
		tcase{name: "trust on 127.0.0.0/7 reaches 126/8", base: open, mutate: withHBA(po, hbaRec(1, "host", "all", "all", "126.0.0.0/7", "trust")), id: "pg.hardening.hba_trust", subject: po, want: check.Fail},
		tcase{name: "trust on samenet", base: open, mutate: withHBA(po, hbaRec(1, "hostssl", "app", "app", "samenet", "trust")), id: "pg.hardening.hba_trust", subject: po, want: check.Fail},
		tcase{name: "server on loopback only", base: open, mutate: loopbackOnly(po), id: "pg.hardening.hba_trust", subject: po, want: check.Pass, says: []string{"listens only locally"}},

		// pg.hardening.hba_cleartext: a password taken in clear text on a
		// record that admits unencrypted network connections.
		tcase{name: "recorded fail", base: open, id: "pg.hardening.hba_cleartext", subject: po, want: check.Fail, says: []string{"pg_hba.conf:6"}},
		tcase{name: "recorded pass", base: hard, id: "pg.hardening.hba_cleartext", subject: ph, want: check.Pass},
		tcase{name: "not recorded", base: "baseline", id: "pg.hardening.hba_cleartext", subject: "postgres:5432", want: check.Unknown},
		tcase{name: "password on hostssl", base: open, mutate: withHBA(po, hbaRec(1, "hostssl", "all", "all", "0.0.0.0/0", "password")), id: "pg.hardening.hba_cleartext", subject: po, want: check.Pass},
		tcase{name: "ldap on hostnossl", base: open, mutate: withHBA(po, hbaRec(1, "hostnossl", "all", "all", "10.0.0.0/8", "ldap")), id: "pg.hardening.hba_cleartext", subject: po, want: check.Fail},
		tcase{name: "password on loopback", base: open, mutate: withHBA(po, hbaRec(1, "host", "all", "all", "127.0.0.1/32", "password")), id: "pg.hardening.hba_cleartext", subject: po, want: check.Pass},
		tcase{name: "md5 on host is no clear text", base: open, mutate: withHBA(po, hbaRec(1, "host", "all", "all", "0.0.0.0/0", "md5")), id: "pg.hardening.hba_cleartext", subject: po, want: check.Pass},

		// pg.hardening.md5: md5 records, password_encryption = md5, MD5
		// hashes (PostgreSQL 10+).
		tcase{name: "recorded fail", base: open, id: "pg.hardening.md5", subject: po, want: check.Fail, says: []string{"password_encryption = md5", "(app)", "1 pg_hba.conf record(s) use md5"}},
		tcase{name: "recorded pass", base: hard, id: "pg.hardening.md5", subject: ph, want: check.Pass},
		tcase{name: "not recorded", base: "baseline", id: "pg.hardening.md5", subject: "postgres:5432", want: check.Unknown},
		tcase{name: "only an md5 record", base: hard, mutate: withHBA(ph, hbaRec(1, "local", "all", "all", "", "md5")), id: "pg.hardening.md5", subject: ph, want: check.Fail},
		tcase{name: "only password_encryption", base: hard, mutate: setting(ph, "password_encryption", "md5"), id: "pg.hardening.md5", subject: ph, want: check.Fail, says: []string{"password_encryption = md5"}},
		tcase{name: "only hashes", base: hard, mutate: pgMutate(ph, func(in *facts.Instance) { in.Postgres.Security.MD5Roles = []string{"Old Role"} }), id: "pg.hardening.md5", subject: ph, want: check.Fail, says: []string{"(Old Role)"}},
		tcase{name: "hashes unreadable", base: hard, mutate: pgMutate(ph, func(in *facts.Instance) { in.Postgres.Security.HashesErr = "permission denied for table pg_authid" }), id: "pg.hardening.md5", subject: ph, want: check.Pass, says: []string{"Not checked", "pg_authid"}},
		tcase{name: "hba unreadable, nothing else wrong", base: hard, mutate: noHBA(ph), id: "pg.hardening.md5", subject: ph, want: check.Unknown},
		tcase{name: "hba unreadable, md5 hashes", base: open, mutate: noHBA(po), id: "pg.hardening.md5", subject: po, want: check.Fail, says: []string{"Not checked"}},
		tcase{name: "9.6 has no SCRAM", base: open, mutate: pgMutate(po, func(in *facts.Instance) { in.Version = "9.6.24" }), id: "pg.hardening.md5", subject: po, want: check.Pass},

		// pg.hardening.ssl: off while listening on the network.
		tcase{name: "recorded fail", base: open, id: "pg.hardening.ssl", subject: po, want: check.Fail},
		tcase{name: "recorded pass", base: hard, id: "pg.hardening.ssl", subject: ph, want: check.Pass},
		tcase{name: "recorded unknown", base: "pg-nonroot", id: "pg.hardening.ssl", subject: "postgres:43111", want: check.Unknown},
		tcase{name: "off on loopback", base: open, mutate: loopbackOnly(po), id: "pg.hardening.ssl", subject: po, want: check.Pass},
		tcase{name: "unset on the network: default off", base: open, mutate: pgMutate(po, func(in *facts.Instance) { delete(in.Settings, "ssl") }), id: "pg.hardening.ssl", subject: po, want: check.Fail},
		tcase{name: "sockets unknown, listen_addresses *", base: open, mutate: pgMutate(po, func(in *facts.Instance) { in.Listen, in.ListenErr = nil, "permission denied" }), id: "pg.hardening.ssl", subject: po, want: check.Fail},
		tcase{name: "sockets unknown, listen_addresses localhost", base: open, mutate: both(setting(po, "listen_addresses", "localhost"), pgMutate(po, func(in *facts.Instance) { in.Listen, in.ListenErr = nil, "permission denied" })), id: "pg.hardening.ssl", subject: po, want: check.Pass},

		// pg.hardening.superuser_remote: first match wins; rejects shadow.
		tcase{name: "recorded fail", base: open, id: "pg.hardening.superuser_remote", subject: po, want: check.Fail, says: []string{"postgres by", "pg_hba.conf:4 (trust)"}},
		tcase{name: "recorded pass", base: hard, id: "pg.hardening.superuser_remote", subject: ph, want: check.Pass},
		tcase{name: "not recorded", base: "baseline", id: "pg.hardening.superuser_remote", subject: "postgres:5432", want: check.Unknown},
		tcase{name: "superusers unknown, all admitted", base: open, mutate: noSecurity(po), id: "pg.hardening.superuser_remote", subject: po, want: check.Fail, says: []string{"every superuser"}},
		tcase{name: "superusers unknown, named rejects", base: hard, mutate: noSecurity(ph), id: "pg.hardening.superuser_remote", subject: ph, want: check.Unknown},
		tcase{name: "superusers unknown, a named login record", base: open, mutate: both(noSecurity(po), withHBA(po, hbaRec(1, "host", "all", "admin", "0.0.0.0/0", "scram-sha-256"))), id: "pg.hardening.superuser_remote", subject: po, want: check.Unknown},
		tcase{name: "superusers known, a named login record for another role", base: open, mutate: withHBA(po, hbaRec(1, "host", "all", "admin", "0.0.0.0/0", "scram-sha-256")), id: "pg.hardening.superuser_remote", subject: po, want: check.Pass},
		tcase{name: "superuser in +apps, IPv6 reject gone", base: hard, mutate: both(
			pgMutate(ph, func(in *facts.Instance) {
				in.Postgres.Security.Superusers = []engine.PGRole{{Name: "postgres"}, {Name: "root", MemberOf: []string{"apps"}}}
			}),
			withHBA(ph, hbaRec(4, "host", "all", "postgres,root", "0.0.0.0/0", "reject"), hbaRec(7, "hostssl", "all", "+apps", "::/0", "scram-sha-256"))),
			id: "pg.hardening.superuser_remote", subject: ph, want: check.Fail, says: []string{"root by /data/pg_hba.conf:7"}},
		tcase{name: "reject for one database only does not shadow", base: hard, mutate: withHBA(ph, hbaRec(1, "host", "app", "all", "all", "reject"), hbaRec(2, "host", "all", "all", "10.0.0.0/8", "scram-sha-256")), id: "pg.hardening.superuser_remote", subject: ph, want: check.Fail},
		tcase{name: "reject all shadows both families", base: hard, mutate: withHBA(ph, hbaRec(1, "host", "all", "all", "all", "reject"), hbaRec(2, "host", "all", "all", "0.0.0.0/0", "trust")), id: "pg.hardening.superuser_remote", subject: ph, want: check.Pass},
		tcase{name: "regular expression", base: hard, mutate: withHBA(ph, hbaRec(1, "host", "all", "/^r", "0.0.0.0/0", "scram-sha-256")), id: "pg.hardening.superuser_remote", subject: ph, want: check.Unknown, says: []string{"regular expression"}},
		tcase{name: "server on loopback only", base: open, mutate: loopbackOnly(po), id: "pg.hardening.superuser_remote", subject: po, want: check.Pass},

		// pg.hardening.public_create: PUBLIC's CREATE on schema public.
		tcase{name: "recorded fail", base: open, id: "pg.hardening.public_create", subject: po, want: check.Fail, says: []string{"database postgres", "granted it explicitly"}},
		tcase{name: "recorded pass", base: hard, id: "pg.hardening.public_create", subject: ph, want: check.Pass},
		tcase{name: "recorded unknown: peer refused", base: "pg-peer", id: "pg.hardening.public_create", subject: "postgres:39821", want: check.Unknown, says: []string{"Peer authentication failed"}},
		tcase{name: "older snapshot", base: "baseline", id: "pg.hardening.public_create", subject: "postgres:5432", want: check.Unknown, says: []string{"older dbhost"}},
		tcase{name: "pre-15 default", base: open, mutate: pgMutate(po, func(in *facts.Instance) { in.Version = "14.10" }), id: "pg.hardening.public_create", subject: po, want: check.Fail, says: []string{"default before PostgreSQL 15"}},
		tcase{name: "no public schema", base: open, mutate: pgMutate(po, func(in *facts.Instance) {
			in.Postgres.Security.PublicSchema, in.Postgres.Security.PublicCreate = false, false
		}), id: "pg.hardening.public_create", subject: po, want: check.Pass},
		tcase{name: "query failed", base: open, mutate: pgMutate(po, func(in *facts.Instance) { in.Postgres.Security.PublicErr = "permission denied" }), id: "pg.hardening.public_create", subject: po, want: check.Unknown},
	)
}

// pgFinding runs one check on a recorded host, changed by mutate.
func pgFinding(t *testing.T, base string, mutate func(*facts.Facts), id, subject string) check.Finding {
	t.Helper()
	f := cloneFacts(t, base)
	if mutate != nil {
		mutate(f)
	}
	for _, fd := range check.Run(f, check.Selector{Only: []string{id}}) {
		if fd.Subject == subject {
			return fd
		}
	}
	t.Fatalf("no %s finding for %s on %s", id, subject, base)
	return check.Finding{}
}

// wantFix asserts a failing finding's fix and evidence mention each text.
func wantFix(t *testing.T, fd check.Finding, fixSays []string, evSays ...string) {
	t.Helper()
	if fd.Status != check.Fail || fd.Fix == nil {
		t.Fatalf("%s: %s without fix: %s", fd.ID, fd.Status, fd.Reason)
	}
	text := fd.Fix.Summary + "\n" + fd.Fix.Manual + "\n" + strings.Join(fd.Fix.Runtime, "\n")
	for _, c := range fd.Fix.Config {
		text += "\n" + c.Key + "=" + c.Value
	}
	for _, w := range fixSays {
		if !strings.Contains(text, w) {
			t.Errorf("%s fix lacks %q:\n%s", fd.ID, w, text)
		}
	}
	var ev []string
	for _, e := range fd.Evidence {
		ev = append(ev, e.Key+"="+e.Value+" @"+e.Source)
	}
	for _, w := range evSays {
		if !strings.Contains(strings.Join(ev, "\n"), w) {
			t.Errorf("%s evidence lacks %q: %v", fd.ID, w, ev)
		}
	}
}

// TestPGSecurityFixes: each failing check names the record before and
// after (file:line), the reload, the SQL, and its evidence says where it
// looked.
func TestPGSecurityFixes(t *testing.T) {
	const open, po = "pg-hba-open", "postgres:36605"
	wantFix(t, pgFinding(t, open, nil, "pg.hardening.hba_trust", po),
		[]string{"pg_hba.conf:4\n  before: host    all  all  0.0.0.0/0       trust\n  after:  host all all 0.0.0.0/0 scram-sha-256", "SELECT pg_reload_conf();"},
		"pg_hba.conf record=host    all  all  0.0.0.0/0       trust @/tmp/", "listening=0.0.0.0:36605")
	wantFix(t, pgFinding(t, open, nil, "pg.hardening.hba_cleartext", po),
		[]string{"after:  hostssl all all ::/0 scram-sha-256", "ssl = on"}, "pg_hba.conf:6")
	wantFix(t, pgFinding(t, open, withHBA(po, hbaRec(3, "hostnossl", "all", "all", "10.0.0.0/8", "ldap")), "pg.hardening.hba_cleartext", po),
		[]string{"after:  hostssl all all 10.0.0.0/8 ldap"})
	wantFix(t, pgFinding(t, open, nil, "pg.hardening.md5", po),
		[]string{"after:  host app app 10.0.0.0/8 scram-sha-256", "ALTER SYSTEM SET password_encryption = 'scram-sha-256'", `\password app`, "password_encryption=scram-sha-256"},
		"roles with MD5 password hashes=app @live: pg_authid", "password_encryption=md5 @live:")
	wantFix(t, pgFinding(t, open, pgMutate(po, func(in *facts.Instance) { in.Postgres.Security.MD5Roles = []string{"Old Role"} }), "pg.hardening.md5", po),
		[]string{`\password "Old Role"`})
	wantFix(t, pgFinding(t, open, nil, "pg.hardening.ssl", po), []string{"ssl=on", "server.crt"}, "ssl=off @live")
	wantFix(t, pgFinding(t, open, pgMutate(po, func(in *facts.Instance) { delete(in.Settings, "ssl") }), "pg.hardening.ssl", po),
		nil, "ssl=off (not set: the default of PostgreSQL 15.20) @default")
	wantFix(t, pgFinding(t, open, nil, "pg.hardening.superuser_remote", po),
		[]string{"Insert above /tmp/", "host all postgres 0.0.0.0/0 reject\n  host all postgres ::/0 reject"}, "superusers that can log in=postgres")
	wantFix(t, pgFinding(t, open, func(f *facts.Facts) { instance(f, po).Postgres.Security = nil }, "pg.hardening.superuser_remote", po),
		[]string{"List every superuser"})
	// Problems met reading the files travel with the evidence.
	wantFix(t, pgFinding(t, open, pgMutate(po, func(in *facts.Instance) {
		in.Postgres.HBA.Errors = []string{"/data/pg_hba.conf:9: invalid authentication method \"magic\""}
		in.Postgres.HBA.IdentErr = []string{"/data/pg_ident.conf:2: a user name map line needs 3 fields"}
	}), "pg.hardening.hba_trust", po), nil, `problems: /data/pg_hba.conf:9: invalid authentication method "magic"; pg_ident.conf problems: /data/pg_ident.conf:2`)
	wantFix(t, pgFinding(t, open, nil, "pg.hardening.public_create", po),
		[]string{"REVOKE CREATE ON SCHEMA public FROM PUBLIC;", "template1"}, "public ACL={pg_database_owner=UC/pg_database_owner,=UC/pg_database_owner} @live: pg_namespace in database postgres")
}
