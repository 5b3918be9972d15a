package engine_test

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/dbhost/dbhost/internal/engine"
	"github.com/dbhost/dbhost/internal/testdb"
)

// TestTCPDSNOnlyToTheServersOwnSocket: real servers listen on 0.0.0.0 of
// their port; a user listens on [::1] of the same port (0.0.0.0 does not
// cover it) and on another port a DSN lists as a fallback host. A --pg or
// --mysql DSN naming those addresses must not hand the fakes a password,
// while a DSN naming the real server's own address still reaches it.
func TestTCPDSNOnlyToTheServersOwnSocket(t *testing.T) {
	testdb.Need(t, "root (discovery as root, fakes as nobody)", os.Geteuid() == 0)
	pg := testdb.Postgres(t, testdb.Options{Settings: map[string]string{"listen_addresses": "0.0.0.0"}})
	my := testdb.MariaDB(t, testdb.Options{Settings: map[string]string{"bind-address": "0.0.0.0"}})
	bin := buildFake(t)
	spare := testdb.FreePort(t)

	pgDir := nobodyDir(t, "fakepg-tcp")
	data := filepath.Join(pgDir, "data")
	os.Mkdir(data, 0o700)
	os.Chown(data, nobody, nobody)
	os.WriteFile(filepath.Join(data, "postgresql.conf"), []byte(fmt.Sprintf("port = %d\nunix_socket_directories = '%s'\n", spare, pgDir)), 0o644)
	pgPID := startFake(t, installFake(t, bin, pgDir, "postgres", nobody), pgDir,
		[]string{"FAKE_MODE=pg", fmt.Sprintf("FAKE_TCP=[::1]:%d,127.0.0.1:%d", pg.Port, spare)}, "-D", data)
	waitLog(t, pgDir, "exec.log", "listening", 1)

	myDir := nobodyDir(t, "fakemy-tcp")
	myPID := startFake(t, installFake(t, bin, myDir, "mariadbd", nobody), myDir,
		[]string{"FAKE_MODE=mysql", fmt.Sprintf("FAKE_TCP=[::1]:%d", my.Port)})
	waitLog(t, myDir, "exec.log", "listening", 1)

	const pgV6, pgFallback, myV6, pgOwn = "PgV6Secret7", "PgFallbackSecret8", "MyV6Secret9", "PgOwnSecret6"
	pids := map[string]int{"pg": pg.PID, "my": my.PID, "fakepg": pgPID, "fakemy": myPID}
	t.Setenv("HOME", t.TempDir()) // no ~/.pgpass, no ~/.my.cnf of root's

	// A DSN naming [::1]: the real servers do not hold it.
	found, _ := discoverWith(t, pids, engine.Options{Timeout: 2 * time.Second,
		PGDSN:    fmt.Sprintf("host=::1 port=%d user=postgres password=%s sslmode=disable", pg.Port, pgV6),
		MySQLDSN: fmt.Sprintf("root:%s@tcp([::1]:%d)/", myV6, my.Port)})
	if in := found["pg"]; in.SettingsSource != "live" || strings.Contains(in.LiveVia, "--pg connection string (host") || !strings.Contains(in.LiveVia, "not this server") {
		t.Errorf("postgres: want a live read over its own socket, saying the DSN names another server: %s %q %q", in.SettingsSource, in.LiveVia, in.LiveErr)
	}
	if in := found["my"]; in.SettingsSource != "live" || !strings.Contains(in.LiveVia, "not this server") {
		t.Errorf("mariadb: want a live read over its own socket, saying the DSN names another server: %s %q %q", in.SettingsSource, in.LiveVia, in.LiveErr)
	}

	// A DSN whose first host is the real server, which refuses the role,
	// and whose fallback host is the user's port.
	found, _ = discoverWith(t, pids, engine.Options{Timeout: 2 * time.Second,
		PGDSN: fmt.Sprintf("host=%s,127.0.0.1 port=%d,%d user=nosuchrole password=%s sslmode=disable", pg.Socket, pg.Port, spare, pgFallback)})
	if in := found["pg"]; in.SettingsSource == "live" || !strings.Contains(in.LiveErr, fmt.Sprintf("127.0.0.1:%d is served by a socket the discovered pid %d does not hold", spare, pg.PID)) {
		t.Errorf("postgres: want the fallback host refused with the reason: %s %q", in.SettingsSource, in.LiveErr)
	}

	// A DSN naming the real server's own TCP address reaches it.
	found, _ = discoverWith(t, pids, engine.Options{Timeout: 2 * time.Second,
		PGDSN: fmt.Sprintf("host=127.0.0.1 port=%d user=postgres password=%s sslmode=disable", pg.Port, pgOwn)})
	if in := found["pg"]; in.SettingsSource != "live" || !strings.Contains(in.LiveVia, "--pg connection string (host 127.0.0.1") {
		t.Errorf("postgres: a DSN naming its own address was not used: %s %q %q", in.SettingsSource, in.LiveVia, in.LiveErr)
	}

	harvest := readLog(pgDir, "harvest.log") + readLog(myDir, "harvest.log")
	salt := []byte("abcdefghijklmnopqrst")
	for _, s := range []string{pgV6, pgFallback, myV6, pgOwn} {
		if strings.Contains(harvest, s) || strings.Contains(harvest, fmt.Sprintf("%x", nativeScramble(s, salt))) {
			t.Errorf("a fake harvested %s:\n%s", s, harvest)
		}
	}
	if strings.Contains(harvest, "pg message p") || strings.Contains(harvest, "mysql auth switch response") {
		t.Errorf("a fake was answered with a password:\n%s", harvest)
	}
}

// TestLookAlikeTakesNothingFromTheRealServer: a user's "postgres" started
// with -D pointing at a real cluster's data directory and -p its port is
// not described with that cluster's data directory and version, and the
// real server keeps its subject name.
func TestLookAlikeTakesNothingFromTheRealServer(t *testing.T) {
	testdb.Need(t, "root (discovery as root, fakes as nobody)", os.Geteuid() == 0)
	real := testdb.Postgres(t, testdb.Options{})
	bin := buildFake(t)
	dir := nobodyDir(t, "lookalike")
	fakePID := startFake(t, installFake(t, bin, dir, "postgres", nobody), dir, []string{"FAKE_MODE=sleep"},
		"-D", real.DataDir, "-p", fmt.Sprint(real.Port))
	waitLog(t, dir, "exec.log", "uid=", 1)

	found, _ := discoverWith(t, map[string]int{"fake": fakePID, "real": real.PID}, engine.Options{Timeout: 2 * time.Second})
	fake, rl := found["fake"], found["real"]
	if rl.SettingsSource != "live" || rl.DataDir != real.DataDir || rl.Version == "" {
		t.Fatalf("the real server was not read: %s %q %q", rl.SettingsSource, rl.DataDir, rl.LiveErr)
	}
	if fake.DataDir == real.DataDir || fake.Paths["data"] == real.DataDir {
		t.Errorf("the look-alike was given the real data directory %s", fake.DataDir)
	}
	if fake.Version != "" {
		t.Errorf("the look-alike was given version %q from %s", fake.Version, fake.VersionSource)
	}
	if why := strings.Join(fake.ConfigErrors, "; "); !strings.Contains(why, "data directory "+real.DataDir+" belongs to uid") &&
		!strings.Contains(why, "data directory "+real.DataDir+": ") {
		t.Errorf("no reason given: %q", fake.ConfigErrors)
	}
	if want := fmt.Sprintf("postgres:%d", real.Port); rl.Name() != want || fake.Name() == want {
		t.Errorf("subjects: real %s, look-alike %s; the real server must keep %s", rl.Name(), fake.Name(), want)
	}
}
