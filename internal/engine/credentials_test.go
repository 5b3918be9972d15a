package engine_test

import (
	"crypto/sha1"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/dbhost/dbhost/internal/engine"
	"github.com/dbhost/dbhost/internal/testdb"
)

// nobodyDir makes a directory owned by nobody, as a user's own would be.
func nobodyDir(t *testing.T, prefix string) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "dbhost-"+prefix+"-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	os.Chmod(dir, 0o755)
	os.Chown(dir, nobody, nobody)
	return dir
}

// nativeScramble is what mysql_native_password sends for pw and salt.
func nativeScramble(pw string, salt []byte) string {
	h1 := sha1.Sum([]byte(pw))
	h2 := sha1.Sum(h1[:])
	h3 := sha1.Sum(append(append([]byte(nil), salt...), h2[:]...))
	out := make([]byte, 20)
	for i := range out {
		out[i] = h1[i] ^ h3[i]
	}
	return string(out)
}

// fakePostgres starts a fake postmaster as nobody whose configuration puts
// its socket in sockDir on port: the fake listens there unless sockDir
// belongs to another server.
func fakePostgres(t *testing.T, bin []byte, sockDir string, port int, listen bool) (dir string, pid int) {
	t.Helper()
	dir = nobodyDir(t, "fakepg")
	data := filepath.Join(dir, "data")
	os.Mkdir(data, 0o700)
	os.Chown(data, nobody, nobody)
	conf := fmt.Sprintf("port = %d\nunix_socket_directories = '%s'\n", port, sockDir)
	os.WriteFile(filepath.Join(data, "postgresql.conf"), []byte(conf), 0o644)
	env := []string{"FAKE_MODE=sleep"}
	if listen {
		env = []string{"FAKE_MODE=pg", fmt.Sprintf("FAKE_SOCKET=%s/.s.PGSQL.%d", sockDir, port)}
	}
	pid = startFake(t, installFake(t, bin, dir, "postgres", nobody), dir, env, "-D", data)
	if listen {
		waitLog(t, dir, "exec.log", "listening", 1)
	} else {
		waitLog(t, dir, "exec.log", "uid=", 1)
	}
	return dir, pid
}

// TestNoCredentialsToUserServers: a user runs fake PostgreSQL and MariaDB
// servers that ask for passwords in clear text. dbhost, run as root with a
// --pg and --mysql DSN, ~/.pgpass and ~/.my.cnf, must send them no
// password, in any form.
func TestNoCredentialsToUserServers(t *testing.T) {
	testdb.Need(t, "root (discovery as root, fakes as nobody)", os.Geteuid() == 0)
	bin := buildFake(t)
	home := t.TempDir()
	t.Setenv("HOME", home)
	t.Setenv("PGPASSFILE", filepath.Join(home, ".pgpass"))
	const pgpassSecret, cnfSecret, pgDSNSecret, myDSNSecret = "PgPassSecret2", "MyCnfSecret5", "PgDsnSecret3", "MyDsnSecret4"
	os.WriteFile(filepath.Join(home, ".pgpass"), []byte("*:*:*:*:"+pgpassSecret+"\n"), 0o600)
	os.WriteFile(filepath.Join(home, ".my.cnf"), []byte("[client]\nuser = root\npassword = "+cnfSecret+"\n"), 0o600)

	pgPort := testdb.FreePort(t)
	pgSock := nobodyDir(t, "fakepg-sock")
	pgDir, pgPID := fakePostgres(t, bin, pgSock, pgPort, true)

	myDir := nobodyDir(t, "fakemy")
	mySock := filepath.Join(myDir, "mysqld.sock")
	myPID := startFake(t, installFake(t, bin, myDir, "mariadbd", nobody), myDir, []string{"FAKE_MODE=mysql", "FAKE_SOCKET=" + mySock})
	waitLog(t, myDir, "exec.log", "listening", 1)

	pids := map[string]int{"postgres": pgPID, "mariadbd": myPID}
	for _, opts := range []engine.Options{
		// DSNs naming the fakes' own sockets...
		{PGDSN: fmt.Sprintf("host=%s port=%d user=app password=%s", pgSock, pgPort, pgDSNSecret), MySQLDSN: "app:" + myDSNSecret + "@unix(" + mySock + ")/"},
		// ...and DSNs naming no address, and the credential files alone.
		{PGDSN: "user=app password=" + pgDSNSecret, MySQLDSN: "app:" + myDSNSecret + "@/"},
		{},
	} {
		opts.Timeout = 2 * time.Second
		found, _ := discoverWith(t, pids, opts)
		for name, in := range found {
			if in.SettingsSource == "live" {
				t.Errorf("%s: read live from a fake", name)
			}
			if in.Trusted() || !strings.Contains(in.LiveErr, "not trusted") {
				t.Errorf("%s: trusted %v, live error %q; want untrusted and not connected", name, in.Trusted(), in.LiveErr)
			}
		}
	}
	// The fakes listen (the test waited for it) and run as nobody: they
	// are untrusted, so dbhost does not even connect to them.
	harvest := readLog(pgDir, "harvest.log") + readLog(myDir, "harvest.log")
	if harvest != "" {
		t.Errorf("dbhost connected to a server it does not trust:\n%s", harvest)
	}
	for _, s := range []string{pgpassSecret, cnfSecret, pgDSNSecret, myDSNSecret} {
		if strings.Contains(harvest, s) {
			t.Errorf("the fakes harvested %s:\n%s", s, harvest)
		}
	}
}

// TestWrongServerNotAttributed: a fake postmaster whose configuration names
// a real server's socket must not be described with that server's live
// settings, version and data directory; the real server still is.
func TestWrongServerNotAttributed(t *testing.T) {
	real := testdb.Postgres(t, testdb.Options{Settings: map[string]string{"work_mem": "7MB"}})
	bin := buildFake(t)
	fakeDir, fakePID := fakePostgres(t, bin, real.Socket, real.Port, false)
	found, _ := discoverWith(t, map[string]int{"fake": fakePID, "real": real.PID}, engine.Options{Timeout: 2 * time.Second})
	fake, rl := found["fake"], found["real"]
	if fake.SettingsSource == "live" || fake.SettingValue("work_mem") == "7168" || fake.DataDir == real.DataDir {
		t.Errorf("the fake took the real server's identity: settings %s, work_mem %q, data %s", fake.SettingsSource, fake.SettingValue("work_mem"), fake.DataDir)
	}
	if fake.Trusted() || !strings.Contains(fake.LiveErr, "not trusted") {
		t.Errorf("the fake is trusted or was connected to: %+v, %q", fake.Trust, fake.LiveErr)
	}
	if rl.SettingsSource != "live" || rl.DataDir != real.DataDir {
		t.Errorf("the real server was not read: %s %s", rl.SettingsSource, rl.LiveErr)
	}
	if fake.Name() == rl.Name() {
		t.Errorf("two instances share the subject %s", fake.Name())
	}
	_ = fakeDir
}

// TestZombieNotListed: a postgres process that exited but was not reaped is
// not a server.
func TestZombieNotListed(t *testing.T) {
	testdb.Need(t, "root (fakes as nobody)", os.Geteuid() == 0)
	bin := buildFake(t)
	dir := nobodyDir(t, "zombie")
	child := installFake(t, bin, dir, "postgres", nobody)
	parent := startFake(t, installFake(t, bin, dir, "zparent", nobody), dir, []string{"FAKE_MODE=zombie", "FAKE_CHILD=" + child})
	waitLog(t, dir, "exec.log", "--version", 1)
	var zombie int
	deadline := time.Now().Add(5 * time.Second)
	for zombie == 0 && time.Now().Before(deadline) {
		// A child is listed under the thread that forked it, which in a
		// Go program need not be the main one.
		var kids []byte
		tasks, _ := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/children", parent))
		for _, task := range tasks {
			b, _ := os.ReadFile(task)
			kids = append(kids, b...)
		}
		if f := strings.Fields(string(kids)); len(f) == 1 {
			if st, _ := os.ReadFile("/proc/" + f[0] + "/stat"); strings.Contains(string(st), ") Z ") {
				fmt.Sscan(f[0], &zombie)
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
	if zombie == 0 {
		t.Fatal("no zombie postgres appeared")
	}
	h, tbl := liveTable(t)
	insts, notes := engine.Discover(t.Context(), h, tbl, engine.Options{NoConnect: true})
	for _, in := range insts {
		if in.PID == zombie {
			t.Errorf("the zombie pid %d is listed as %s", zombie, in.Name())
		}
	}
	if !strings.Contains(strings.Join(notes, "\n"), fmt.Sprintf("pid %d: a zombie", zombie)) {
		t.Errorf("no note about the zombie: %q", notes)
	}
}
