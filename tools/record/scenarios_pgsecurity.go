package main

import (
	"os"
	"path/filepath"

	"github.com/dbhost/dbhost/internal/testdb"
)

// PostgreSQL access and security scenarios: a private server opened up the
// way careless setups are, and one locked down; both listen on every
// address, so that pg_hba.conf's network records matter.

func init() {
	register(Scenario{
		Name: "pg-hba-open",
		Note: "private PostgreSQL 15 with listen_addresses='*', ssl off, pg_hba.conf with host all all 0.0.0.0/0 trust, an md5 record and a password record for ::/0, password_encryption md5 (ALTER SYSTEM) and role app with an MD5 hash, GRANT CREATE ON SCHEMA public TO PUBLIC (the pre-15 default); read live as root over trust",
		Setup: func(r *Run) error {
			s := r.Postgres(testdb.Options{Settings: map[string]string{"listen_addresses": "*"}})
			if err := psql(r, s,
				"ALTER SYSTEM SET password_encryption = 'md5'",
				"SELECT pg_reload_conf()",
			); err != nil {
				return err
			}
			if err := pgSettle(); err != nil {
				return err
			}
			if err := psql(r, s,
				"CREATE ROLE app LOGIN PASSWORD 'dbhost-fixture-only'",
				"GRANT CREATE ON SCHEMA public TO PUBLIC",
			); err != nil {
				return err
			}
			return pgHBA(s, "# opened up for every network\n"+
				"local   all  all                  trust\n"+
				"host    all  all  127.0.0.1/32    trust\n"+
				"host    all  all  0.0.0.0/0       trust\n"+
				"host    app  app  10.0.0.0 255.0.0.0  md5\n"+
				"host    all  all  ::/0            password\n")
		},
	})
	register(Scenario{
		Name: "pg-hba-hardened",
		Note: "private PostgreSQL 15 with listen_addresses='*', ssl on (self-signed certificate), peer on the socket (root has a superuser role), scram-sha-256 on loopback, reject for the superusers from 0.0.0.0/0 and ::/0 above hostssl scram-sha-256 records for an @file list and a +group; public schema with the PostgreSQL 15 default ACL",
		Setup: func(r *Run) error {
			s := r.Postgres(testdb.Options{Settings: map[string]string{"listen_addresses": "*"}})
			if err := pgCert(r, s); err != nil {
				return err
			}
			if err := psql(r, s,
				"CREATE ROLE root SUPERUSER LOGIN",
				"CREATE ROLE apps NOLOGIN",
				"CREATE ROLE app LOGIN IN ROLE apps",
				"CREATE ROLE reporting LOGIN",
				"ALTER SYSTEM SET ssl = on",
				"SELECT pg_reload_conf()",
			); err != nil {
				return err
			}
			if err := os.WriteFile(filepath.Join(s.DataDir, "approles"), []byte("# roles the applications log in as\napp, reporting\n"), 0o644); err != nil {
				return err
			}
			return pgHBA(s, "local     all  all                         peer\n"+
				"host      all  all            127.0.0.1/32  scram-sha-256\n"+
				"host      all  all            ::1/128       scram-sha-256\n"+
				"host      all  postgres,root  0.0.0.0/0     reject\n"+
				"host      all  postgres,root  ::/0          reject\n"+
				"hostssl   all  @approles      0.0.0.0/0     scram-sha-256\n"+
				"hostssl   all  +apps          ::/0          scram-sha-256\n")
		},
	})
}

// pgCert writes a self-signed certificate and key for a private server
// into its data directory (server.crt, server.key: the default names),
// owned by postgres, the key readable by it alone.
func pgCert(r *Run, s *testdb.Server) error {
	crt, key := filepath.Join(s.DataDir, "server.crt"), filepath.Join(s.DataDir, "server.key")
	if err := r.Command("openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2",
		"-subj", "/CN=localhost", "-keyout", key, "-out", crt); err != nil {
		return err
	}
	uid, gid, err := lookup("postgres")
	if err != nil {
		return err
	}
	for _, f := range []string{crt, key} {
		if err := os.Chown(f, uid, gid); err != nil {
			return err
		}
	}
	return os.Chmod(key, 0o600)
}
