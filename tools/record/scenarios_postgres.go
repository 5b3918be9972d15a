package main

import (
	"os"
	"path/filepath"
	"strconv"
	"syscall"
	"time"

	"github.com/dbhost/dbhost/internal/testdb"
)

// PostgreSQL scenarios: each starts a private server (temporary directory,
// free port, own socket; the machine's shared cluster keeps running and is
// recorded too) and shapes its configuration or catalog.

func init() {
	register(Scenario{
		Name: "pg-private",
		Note: "private PostgreSQL with -c overrides, a conf.d include (random_page_cost 1.1), ALTER SYSTEM effective_io_concurrency 100, and database app with libc collation en_US.UTF-8 whose recorded version matches glibc; read live as root over trust",
		Setup: func(r *Run) error {
			s, err := pgWithLocale(r, testdb.Options{Settings: map[string]string{"work_mem": "16MB"}})
			if err != nil {
				return err
			}
			if err := pgIncludeDir(s, "50-dbhost-test.conf", "random_page_cost = 1.1\neffective_cache_size = '256MB'\n"); err != nil {
				return err
			}
			if err := psql(r, s,
				"ALTER SYSTEM SET effective_io_concurrency = 100",
				"CREATE DATABASE app TEMPLATE template0 LOCALE 'en_US.UTF-8'",
				"SELECT pg_reload_conf()",
			); err != nil {
				return err
			}
			return pgSettle()
		},
	})
	register(Scenario{
		Name: "pg-collation-mismatch",
		Note: "private PostgreSQL whose database app (libc, en_US.UTF-8) records collation version 2.27 while glibc is 2.36: the catalog value was set by UPDATE pg_database to reproduce a cluster created before the glibc 2.28 collation change",
		Setup: func(r *Run) error {
			s, err := pgWithLocale(r, testdb.Options{})
			if err != nil {
				return err
			}
			return psql(r, s,
				"CREATE DATABASE app TEMPLATE template0 LOCALE 'en_US.UTF-8'",
				"UPDATE pg_database SET datcollversion = '2.27' WHERE datname = 'app'",
			)
		},
	})
	register(Scenario{
		Name: "pg-peer",
		Note: "private PostgreSQL with peer authentication on its socket (the Debian default): root cannot log in as postgres, so its settings come from files and the command line",
		Setup: func(r *Run) error {
			s := r.Postgres(testdb.Options{})
			return pgHBA(s, "local all all peer\nhost all all 127.0.0.1/32 scram-sha-256\n")
		},
	})
	register(Scenario{
		Name: "pg-config-errors",
		Note: "private PostgreSQL whose postgresql.conf was edited after start to include a missing file and a pair of files that include each other (not reloaded: the server still runs with its earlier settings)",
		Setup: func(r *Run) error {
			s := r.Postgres(testdb.Options{})
			files := map[string]string{
				"loop-a.conf": "include 'loop-b.conf'\nwork_mem = '8MB'\n",
				"loop-b.conf": "include 'loop-a.conf'\n",
			}
			for name, content := range files {
				if err := os.WriteFile(filepath.Join(s.DataDir, name), []byte(content), 0o644); err != nil {
					return err
				}
			}
			return appendFile(filepath.Join(s.DataDir, "postgresql.conf"), "\ninclude 'missing.conf'\ninclude 'loop-a.conf'\n")
		},
	})
	register(Scenario{
		Name:   "pg-nonroot",
		Note:   "a private PostgreSQL (and the shared one) collected as user nobody: the private data directory, its config and its socket are closed to nobody",
		AsUser: "nobody",
		Setup:  postgresSetup(testdb.Options{Settings: map[string]string{"work_mem": "16MB"}}),
	})
}

// pgWithLocale starts a private PostgreSQL that can create databases with
// the en_US.UTF-8 libc locale. This VM has only C locales installed; rather
// than adding one to the system, the locale is compiled into a private
// directory that the server finds through LOCPATH (inherited at start).
func pgWithLocale(r *Run, o testdb.Options) (*testdb.Server, error) {
	dir, err := sharedTempDir(r, "dbhost-locale-")
	if err != nil {
		return nil, err
	}
	if err := r.Command("localedef", "-i", "en_US", "-f", "UTF-8", filepath.Join(dir, "en_US.UTF-8")); err != nil {
		return nil, err
	}
	// With LOCPATH set glibc looks only there: keep C.UTF-8 reachable for
	// initdb --locale=C.UTF-8.
	for _, name := range []string{"C.utf8", "C.UTF-8"} {
		if err := os.Symlink("/usr/lib/locale/C.utf8", filepath.Join(dir, name)); err != nil {
			return nil, err
		}
	}
	var s *testdb.Server
	withEnv("LOCPATH", dir, func() { s = r.Postgres(o) })
	return s, nil
}

// pgIncludeDir adds include_dir 'conf.d' to the private server's
// postgresql.conf and writes one file there.
func pgIncludeDir(s *testdb.Server, name, content string) error {
	dir := filepath.Join(s.DataDir, "conf.d")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
		return err
	}
	return appendFile(filepath.Join(s.DataDir, "postgresql.conf"), "\ninclude_dir = 'conf.d'\n")
}

func appendFile(name, text string) error {
	f, err := os.OpenFile(name, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		return err
	}
	_, err = f.WriteString(text)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

// psql runs statements on a private server as postgres (trust on its
// socket), without reading ~/.psqlrc: one psql each, in order, so that none
// is inside another's transaction (CREATE DATABASE cannot be).
func psql(r *Run, s *testdb.Server, stmts ...string) error {
	for _, sql := range stmts {
		if err := r.Command("psql", "-X", "-q", "-v", "ON_ERROR_STOP=1", "-h", s.Socket, "-p", strconv.Itoa(s.Port),
			"-U", "postgres", "-d", "postgres", "-c", sql); err != nil {
			return err
		}
	}
	return nil
}

// pgHBA replaces a private server's pg_hba.conf (owned by postgres, as the
// server wants it) and reloads the server.
func pgHBA(s *testdb.Server, content string) error {
	hba := filepath.Join(s.DataDir, "pg_hba.conf")
	if err := os.WriteFile(hba, []byte(content), 0o600); err != nil {
		return err
	}
	uid, _, err := lookup("postgres")
	if err != nil {
		return err
	}
	if err := os.Chown(hba, uid, -1); err != nil {
		return err
	}
	if err := syscall.Kill(s.PID, syscall.SIGHUP); err != nil {
		return err
	}
	return pgSettle()
}

// pgSettle gives a configuration reload time to reach every process.
func pgSettle() error {
	time.Sleep(300 * time.Millisecond)
	return nil
}
