package main

import (
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/dbhost/dbhost/internal/testdb"
)

// MySQL/MariaDB scenarios: each starts a private MariaDB (temporary
// directory, free port, own socket, run as mysql; the machine's shared
// MariaDB on :3306 keeps running and is recorded too) and shapes its
// configuration or accounts.

func init() {
	register(Scenario{
		Name:  "mysql-private",
		Note:  "private MariaDB (--no-defaults, socket auth for root, no test database) with innodb_flush_method=fsync and max_connections=77 on the command line, bound to 127.0.0.1; read live as root over unix_socket",
		Setup: mariaDBSetup(testdb.Options{Settings: map[string]string{"innodb-flush-method": "fsync", "max-connections": "77"}}),
	})
	register(Scenario{
		Name: "mysql-defaults-file",
		Note: "private MariaDB started with --defaults-file=DIR/my.cnf, which sets skip-name-resolve and includes DIR/conf.d/ (10-flush.cnf: O_DIRECT; 20-links.cnf: symbolic-links=0; notes.txt not read) and !include DIR/extra.cnf (max_connections 88)",
		Setup: func(r *Run) error {
			dir, err := myConfTree(r, 0o644, map[string]string{
				"my.cnf":              "[mysqld]\nskip-name-resolve\nmax_connections = 50\n!includedir @DIR@/conf.d\n!include @DIR@/extra.cnf\n",
				"conf.d/10-flush.cnf": "[mariadb]\ninnodb_flush_method = O_DIRECT\n",
				"conf.d/20-links.cnf": "[server]\nsymbolic-links = 0\n",
				"conf.d/notes.txt":    "[mysqld]\nmax_connections = 1\n",
				"extra.cnf":           "[mysqld]\nmax_connections = 88\n",
			})
			if err != nil {
				return err
			}
			r.MariaDB(testdb.Options{DefaultsFile: filepath.Join(dir, "my.cnf")})
			return nil
		},
	})
	register(Scenario{
		Name: "mysql-hardening-fail",
		Note: "private MariaDB listening on 0.0.0.0 with what mysql_secure_installation removes: anonymous ''@'localhost', root@'%' (socket auth), app@'%' with an empty password, report@'db.example.com', and a test database",
		Setup: func(r *Run) error {
			s := r.MariaDB(testdb.Options{Settings: map[string]string{"bind-address": "0.0.0.0"}})
			return mySQL(r, s,
				"CREATE USER ''@'localhost'",
				"CREATE USER 'root'@'%' IDENTIFIED VIA unix_socket",
				"CREATE USER 'app'@'%'",
				"CREATE USER 'report'@'db.example.com' IDENTIFIED VIA unix_socket",
				"CREATE DATABASE test",
			)
		},
	})
	register(Scenario{
		Name:  "mysql-skip-grant-tables",
		Note:  "private MariaDB started with --skip-grant-tables=1 (no password or privilege checks)",
		Setup: mariaDBSetup(testdb.Options{Settings: map[string]string{"skip-grant-tables": "1"}}),
	})
	register(Scenario{
		Name:   "mysql-nonroot",
		Note:   "private MariaDB collected as user nobody: its --defaults-file is mysql:mysql 0640, its data directory 0700, and it runs from a copy of the server binary named mysqld owned by mysql (dbhost does not run a binary a non-root user can change), so version, live variables, accounts and databases are unknown",
		AsUser: "nobody",
		Setup: func(r *Run) error {
			dir, err := myConfTree(r, 0o640, map[string]string{
				"my.cnf": "[mysqld]\nskip-name-resolve\nsymbolic-links = 0\n",
			})
			if err != nil {
				return err
			}
			bin, err := myServerCopy(r, dir, "mysqld")
			if err != nil {
				return err
			}
			restore := myPrependPath(filepath.Dir(bin))
			defer restore()
			r.MariaDB(testdb.Options{DefaultsFile: filepath.Join(dir, "my.cnf"), Settings: map[string]string{"basedir": "/usr"}})
			return nil
		},
	})
	register(Scenario{
		Name:  "mysql-galera",
		Note:  "private MariaDB as a one-node Galera cluster (wsrep_on, libgalera_smm, gcomm://) with Galera's default gmcast.listen_addr: group communication listens on 0.0.0.0:4567",
		Setup: mariaDBSetup(testdb.Options{Settings: myGalera(nil)}),
	})
	register(Scenario{
		Name:  "mysql-galera-bound",
		Note:  "private one-node Galera cluster with wsrep_node_address=127.0.0.1 and gmcast.listen_addr=tcp://127.0.0.1:PORT (a free port), IST and SST addresses on 127.0.0.1",
		Setup: startGaleraBound,
	})
	register(Scenario{
		Name:   "mysql-galera-nonroot",
		Note:   "the bound one-node Galera cluster of mysql-galera-bound, collected as user nobody: the configuration binds 127.0.0.1 but the server's sockets cannot be read",
		AsUser: "nobody",
		Setup:  startGaleraBound,
	})
}

// myConfTree writes option files into a new directory (mode 0755, files
// owned by mysql with the given mode); "@DIR@" in a content is replaced by
// the directory. The directory is removed after collection.
func myConfTree(r *Run, mode os.FileMode, files map[string]string) (string, error) {
	dir, err := sharedTempDir(r, "dbhost-mycnf-")
	if err != nil {
		return "", err
	}
	uid, gid, err := lookup("mysql")
	if err != nil {
		return "", err
	}
	for name, content := range files {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return "", err
		}
		if err := os.WriteFile(p, []byte(strings.ReplaceAll(content, "@DIR@", dir)), mode); err != nil {
			return "", err
		}
		if err := os.Chmod(p, mode); err != nil { // umask-proof
			return "", err
		}
		if err := os.Chown(p, uid, gid); err != nil {
			return "", err
		}
	}
	return dir, nil
}

// myServerCopy copies the MariaDB server binary to dir/bin/name, owned by
// mysql: a binary that a non-root user can replace.
func myServerCopy(r *Run, dir, name string) (string, error) {
	src, err := exec.LookPath("mariadbd")
	if err != nil {
		src = "/usr/sbin/mariadbd"
	}
	in, err := os.Open(src)
	if err != nil {
		return "", err
	}
	defer in.Close()
	if err := os.MkdirAll(filepath.Join(dir, "bin"), 0o755); err != nil {
		return "", err
	}
	dst := filepath.Join(dir, "bin", name)
	out, err := os.OpenFile(dst, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o755)
	if err != nil {
		return "", err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return "", err
	}
	if err := out.Close(); err != nil {
		return "", err
	}
	uid, gid, err := lookup("mysql")
	if err != nil {
		return "", err
	}
	return dst, os.Chown(dst, uid, gid)
}

// myPrependPath puts dir first on PATH, so testdb finds the copied server
// as "mysqld" (it looks for mariadbd, then mysqld); it returns the undo.
func myPrependPath(dir string) func() {
	old := os.Getenv("PATH")
	// testdb looks up mariadbd first: hide it by listing only dir and the
	// directories that hold the install tools and prlimit.
	os.Setenv("PATH", dir+":/usr/bin:/bin")
	return func() { os.Setenv("PATH", old) }
}

// mySQL runs statements on a private server as root over its socket.
func mySQL(r *Run, s *testdb.Server, stmts ...string) error {
	client, err := exec.LookPath("mariadb")
	if err != nil {
		client = "mysql"
	}
	return r.Command(client, "--no-defaults", "--socket="+s.Socket, "--user=root", "--execute="+strings.Join(stmts, ";\n"))
}

// myGalera returns the settings of a one-node Galera cluster, plus extra.
func myGalera(extra map[string]string) map[string]string {
	m := map[string]string{
		"wsrep-on":                 "ON",
		"wsrep-provider":           "/usr/lib/galera/libgalera_smm.so",
		"wsrep-cluster-address":    "gcomm://",
		"wsrep-cluster-name":       "dbhost-fixture",
		"binlog-format":            "ROW",
		"innodb-autoinc-lock-mode": "2",
	}
	for k, v := range extra {
		m[k] = v
	}
	return m
}

// startGaleraBound starts a one-node Galera cluster bound to 127.0.0.1.
func startGaleraBound(r *Run) error {
	r.MariaDB(testdb.Options{Settings: myGalera(myGaleraBound(r))})
	return nil
}

// myGaleraBound binds group communication, IST and SST to 127.0.0.1 on
// free ports.
func myGaleraBound(r *Run) map[string]string {
	gcomm := testdb.FreePort(r.tb)
	sst := testdb.FreePort(r.tb)
	return map[string]string{
		"wsrep-node-address":          "127.0.0.1",
		"wsrep-provider-options":      fmt.Sprintf("gmcast.listen_addr=tcp://127.0.0.1:%d;ist.recv_addr=127.0.0.1:%d", gcomm, gcomm+1),
		"wsrep-sst-receive-address":   "127.0.0.1:" + strconv.Itoa(sst),
		"wsrep-node-incoming-address": "127.0.0.1",
	}
}
