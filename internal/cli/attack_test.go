package cli

// Tests an attacker would write: a local user with a shell account starts
// impostors (testdb.StartImpostor: their own program under a server's name,
// run as nobody) whose argv and files try to make root write, read, or
// change what they choose. Each test fails on a dbhost that believes what a
// process claims.

import (
	"archive/tar"
	"compress/gzip"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/dbhost/dbhost/internal/testdb"
)

// payloads are data directory names that would each add a line to one of
// the files dbhost writes, if a name reached one raw.
var payloads = map[string]string{
	"sysctl.d":        "kernel.core_pattern = |/tmp/pwn %p",
	"systemd drop-in": "[Service]\nExecStartPre=/tmp/pwn",
	"limits.d":        "* hard nproc unlimited",
	"udev":            `ACTION=="add", RUN+="/tmp/pwn"`,
	"tmpfiles.d":      "w /proc/sys/kernel/core_pattern - - - - |/tmp/pwn",
	"grub":            `GRUB_CMDLINE_LINUX="init=/tmp/pwn"`,
	"postgresql.conf": "shared_preload_libraries = '/tmp/pwn'",
	"my.cnf":          "[mysqld]\nplugin-load-add=/tmp/pwn.so",
}

// TestAttackNewlineInjection: two impostors on the system PostgreSQL's
// port, their data directories holding a newline and a line for each file
// format. Neither `fix --out`, `fix --plan` nor the audit may carry a
// payload onto a line of its own.
func TestAttackNewlineInjection(t *testing.T) {
	testdb.Journal(t) // the host lock: no other test's servers come and go
	var ims []*testdb.Impostor
	for format, p := range payloads {
		dd := "DIR/b\n" + p + "\n#"
		ims = append(ims,
			testdb.StartImpostor(t, testdb.ImpostorOptions{Name: "postgres", Args: []string{"-D", dd, "-c", "port=5432"}}),
			testdb.StartImpostor(t, testdb.ImpostorOptions{Name: "mariadbd", Args: []string{"--datadir=" + dd, "--port=3306"}}))
		t.Logf("%s payload in the data directories of pids %d and %d", format, ims[len(ims)-2].PID, ims[len(ims)-1].PID)
	}
	out := t.TempDir()
	if code, _, errs := runCLI(t, "fix", "--out", out); code != ExitOK {
		t.Fatalf("fix --out: exit %d\n%s", code, errs)
	}
	_, plan, _ := runCLI(t, "fix", "--plan")
	_, audit, _ := runCLI(t, "audit", "-v", "--fail-on", "none")
	texts := map[string]string{"fix --plan": plan, "audit -v": audit}
	filepath.WalkDir(out, func(p string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			b, _ := os.ReadFile(p)
			texts[strings.TrimPrefix(p, out)] = string(b)
		}
		return nil
	})
	for where, text := range texts {
		for _, ln := range strings.Split(text, "\n") {
			for format, p := range payloads {
				for _, pl := range strings.Split(p, "\n") {
					if strings.Contains(pl, "pwn") && strings.TrimSpace(ln) == pl {
						t.Errorf("%s: a line of its own carries the %s payload %q", where, format, pl)
					}
				}
			}
		}
		// Outside the README's notes and the audit, no rendered file
		// mentions the impostors at all.
		if where != "fix --plan" && where != "audit -v" && !strings.HasSuffix(where, "README.txt") && strings.Contains(text, "pwn") {
			t.Errorf("%s names the impostors' payload:\n%s", where, text)
		}
	}
	for _, im := range ims {
		if !strings.Contains(audit, "pid"+strconv.Itoa(im.PID)) {
			t.Errorf("the audit does not list the impostor pid %d", im.PID)
		}
	}
}

// shadowLines are the lines of /etc/shadow, to look for in what dbhost
// outputs.
func shadowLines(t *testing.T) []string {
	t.Helper()
	b, err := os.ReadFile("/etc/shadow")
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, ln := range strings.Split(string(b), "\n") {
		if strings.Count(ln, ":") >= 8 {
			out = append(out, ln)
		}
	}
	if len(out) == 0 {
		t.Fatal("/etc/shadow has no entries to look for")
	}
	return out
}

// snapshotText is every member of a snapshot, named and concatenated.
func snapshotText(t *testing.T, file string) string {
	t.Helper()
	f, err := os.Open(file)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	zr, err := gzip.NewReader(f)
	if err != nil {
		t.Fatal(err)
	}
	tr := tar.NewReader(zr)
	var b strings.Builder
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return b.String()
		}
		if err != nil {
			t.Fatal(err)
		}
		b.WriteString("\n== " + h.Name + "\n")
		io.Copy(&b, tr)
	}
}

// TestAttackFileDisclosure: impostors whose PG_VERSION is a link to
// /etc/shadow, whose config_file is /etc/shadow, or whose configuration
// includes it. The audit (text, JSON, Prometheus), collect's snapshot and
// the exporter's labels must hold no line of it.
func TestAttackFileDisclosure(t *testing.T) {
	testdb.Journal(t)
	shadow := shadowLines(t)
	testdb.StartImpostor(t, testdb.ImpostorOptions{Name: "postgres", Args: []string{"-D", "DIR/data", "-c", "port=5491"},
		Dirs: []string{"data"}, Links: map[string]string{"data/PG_VERSION": "/etc/shadow"}})
	testdb.StartImpostor(t, testdb.ImpostorOptions{Name: "postgres", Args: []string{"-D", "DIR", "-c", "config_file=/etc/shadow", "-c", "port=5492"}})
	testdb.StartImpostor(t, testdb.ImpostorOptions{Name: "postgres", Args: []string{"-D", "DIR/data", "-c", "config_file=DIR/pg.conf"},
		Dirs: []string{"data"}, Files: map[string]string{"pg.conf": "port = 5493\ninclude '/etc/shadow'\n"}})
	testdb.StartImpostor(t, testdb.ImpostorOptions{Name: "mariadbd", Args: []string{"--defaults-file=/etc/shadow", "--port=3391"}})
	testdb.StartImpostor(t, testdb.ImpostorOptions{Name: "redis-server", Args: []string{"/etc/shadow"}})

	snap := filepath.Join(t.TempDir(), "snap.tar.gz")
	outs := map[string]string{}
	for _, args := range [][]string{
		{"audit", "-v", "--fail-on", "none"},
		{"audit", "--format", "json", "--fail-on", "none"},
		{"audit", "--format", "prom", "--fail-on", "none"},
		{"collect", "-o", snap},
	} {
		_, o, e := runCLI(t, args...)
		outs[strings.Join(args, " ")] = o + e
	}
	outs["the snapshot"] = snapshotText(t, snap)
	_, o, e := runCLI(t, "audit", "--from", snap, "--format", "json", "--fail-on", "none")
	outs["audit of the snapshot"] = o + e
	for where, text := range outs {
		for _, ln := range shadow {
			if strings.Contains(text, ln) {
				t.Errorf("%s discloses /etc/shadow: %q", where, ln[:strings.Index(ln, ":")+1]+"...")
			}
		}
	}
	if strings.Contains(outs["the snapshot"], "== fs/etc/shadow") {
		t.Errorf("the snapshot holds a member etc/shadow")
	}
}

// TestAttackDeviceNeverOpened: impostors whose config_file, defaults file
// or PG_VERSION name a character device (a node made here, watched with
// inotify) or a FIFO. No audit or collection may open them: opening a
// device can act (a watchdog arms, a tape rewinds).
func TestAttackDeviceNeverOpened(t *testing.T) {
	testdb.Journal(t)
	dir := t.TempDir()
	os.Chmod(dir, 0o755)
	dev := filepath.Join(dir, "kmsg")
	if err := unix.Mknod(dev, unix.S_IFCHR|0o644, int(unix.Mkdev(1, 3))); err != nil { // /dev/null's numbers: harmless if opened
		t.Fatal(err)
	}
	fifo := filepath.Join(dir, "fifo")
	if err := unix.Mkfifo(fifo, 0o644); err != nil {
		t.Fatal(err)
	}
	in, err := unix.InotifyInit1(unix.IN_NONBLOCK | unix.IN_CLOEXEC)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(in)
	for _, p := range []string{dev, fifo} {
		if _, err := unix.InotifyAddWatch(in, p, unix.IN_OPEN); err != nil {
			t.Fatal(err)
		}
	}
	for _, target := range []string{dev, fifo, "/dev/kmsg"} {
		testdb.StartImpostor(t, testdb.ImpostorOptions{Name: "postgres", Args: []string{"-D", "DIR/data", "-c", "config_file=" + target},
			Dirs: []string{"data"}, Links: map[string]string{"data/PG_VERSION": target}})
		testdb.StartImpostor(t, testdb.ImpostorOptions{Name: "mariadbd", Args: []string{"--defaults-file=" + target}})
		testdb.StartImpostor(t, testdb.ImpostorOptions{Name: "redis-server", Args: []string{target}})
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		runCLI(t, "audit", "--fail-on", "none")
		runCLI(t, "collect", "-o", filepath.Join(t.TempDir(), "s.tar.gz"))
	}()
	select {
	case <-done:
	case <-time.After(2 * time.Minute):
		t.Fatal("audit and collect did not finish: a FIFO was opened and blocks")
	}
	buf := make([]byte, 4096)
	if n, _ := unix.Read(in, buf); n > 0 {
		t.Errorf("a device or FIFO an impostor named was opened (%d bytes of inotify events)", n)
	}
}

// fixTree renders `fix --out` and returns every file but the README (which
// lists the findings left without a fix) by path.
func fixTree(t *testing.T) map[string]string {
	t.Helper()
	out := t.TempDir()
	if code, _, errs := runCLI(t, "fix", "--out", out); code != ExitOK {
		t.Fatalf("fix --out: exit %d\n%s", code, errs)
	}
	files := map[string]string{}
	filepath.WalkDir(out, func(p string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() && d.Name() != "README.txt" && d.Name() != ".dbhost-fix-files" {
			b, _ := os.ReadFile(p)
			files[strings.TrimPrefix(p, out)] = string(b)
		}
		return nil
	})
	return files
}

// settingLines are the database settings `fix --plan` would change on a
// server ("setting postgres:PORT key: old -> new ...").
// sizeRE is a memory size as the sizing fixes write it ("5167MB", '4153mb'),
// or a huge page pool sized from them ("vm.nr_hugepages = 798").
var sizeRE = regexp.MustCompile(`(?i)\b([0-9]+)(kB|MB|GB)\b|(nr_hugepages = )([0-9]+)`)

// sameSizing compares two renderings exactly, except that a memory size
// (or a huge page pool) may differ by 2 %: the sizes follow the memory the
// host's processes hold, measured at each audit (a page cache that grew by
// a grain between the two runs moves a share by 64 MiB, and the pool sized
// for it by a few pages). What an impostor claims
// (shared_buffers 23GB, a 20G buffer pool) would move them by far more, or
// add and remove lines.
func sameSizing(a, b string) bool {
	if sizeRE.ReplaceAllString(a, "SIZE") != sizeRE.ReplaceAllString(b, "SIZE") {
		return false
	}
	as, bs := sizeRE.FindAllStringSubmatch(a, -1), sizeRE.FindAllStringSubmatch(b, -1)
	for i := range as {
		x, _ := strconv.ParseFloat(as[i][1]+as[i][4], 64)
		y, _ := strconv.ParseFloat(bs[i][1]+bs[i][4], 64)
		if !strings.EqualFold(as[i][2]+as[i][3], bs[i][2]+bs[i][3]) || x > 1.02*y || y > 1.02*x {
			return false
		}
	}
	return true
}

func settingLines(t *testing.T, server string) []string {
	t.Helper()
	_, plan, _ := runCLI(t, "fix", "--plan")
	var out []string
	for _, ln := range strings.Split(plan, "\n") {
		if strings.Contains(ln, "setting "+server+" ") {
			out = append(out, strings.TrimSpace(ln))
		}
	}
	return out
}

// TestAttackSabotageAndHostValues: beside a private PostgreSQL, impostors
// claim its port, its configuration and data directory, or their own
// configuration with a 23 GB shared_buffers, a million open files, 100 000
// connections and ports of their own. What dbhost would write (every file
// of `fix --out`) and the settings it would change on the real server must
// be exactly what they are without the impostors: nothing an untrusted
// instance claims sizes a setting, a limit or a kernel value.
func TestAttackSabotageAndHostValues(t *testing.T) {
	testdb.Journal(t) // the comparison needs a host that holds still
	real := testdb.Postgres(t, testdb.Options{Settings: map[string]string{"work_mem": "1MB"}})
	server := fmt.Sprintf("postgres:%d", real.Port)
	files0, settings0 := fixTree(t), settingLines(t, server)
	if len(files0) == 0 {
		t.Fatal("fix --out renders nothing on this host: the comparison proves nothing")
	}

	greedy := "shared_buffers = '23GB'\nwork_mem = '4GB'\nmax_connections = 100000\nmax_files_per_process = 1000000\n" +
		"effective_cache_size = '64GB'\nhuge_pages = on\n"
	port := testdb.FreePort(t)
	testdb.StartImpostor(t, testdb.ImpostorOptions{Name: "postgres",
		Args:  []string{"-D", "DIR/data", "-c", "config_file=DIR/pg.conf", "-c", "port=" + strconv.Itoa(port)},
		Dirs:  []string{"data"},
		Files: map[string]string{"pg.conf": greedy, "data/PG_VERSION": "15\n"},
		Env:   []string{"FAKE_MODE=pg", "FAKE_TCP=127.0.0.1:" + strconv.Itoa(port)}})
	testdb.StartImpostor(t, testdb.ImpostorOptions{Name: "postgres",
		Args: []string{"-D", real.DataDir, "-c", "config_file=" + real.Conf, "-c", "port=" + strconv.Itoa(real.Port), "-c", "shared_buffers=23GB"}})
	testdb.StartImpostor(t, testdb.ImpostorOptions{Name: "postgres",
		Args: []string{"-D", "/var/lib/postgresql/15/main", "-c", "config_file=/etc/postgresql/15/main/postgresql.conf", "-c", "max_files_per_process=1000000"}})
	testdb.StartImpostor(t, testdb.ImpostorOptions{Name: "mariadbd",
		Args: []string{"--datadir=DIR", "--port=" + strconv.Itoa(testdb.FreePort(t)), "--max-connections=100000", "--open-files-limit=1000000", "--innodb-buffer-pool-size=20G"}})
	testdb.StartImpostor(t, testdb.ImpostorOptions{Name: "redis-server",
		Args: []string{"--port", strconv.Itoa(testdb.FreePort(t)), "--maxclients", "1000000", "--maxmemory", "20gb", "--tcp-backlog", "65535"}})

	files1, settings1 := fixTree(t), settingLines(t, server)
	for p, b := range files1 {
		if !sameSizing(files0[p], b) {
			t.Errorf("%s changed with the impostors running:\n--- without\n%s\n--- with\n%s", p, files0[p], b)
		}
	}
	for p := range files0 {
		if _, ok := files1[p]; !ok {
			t.Errorf("%s is no longer written with the impostors running", p)
		}
	}
	if !sameSizing(strings.Join(settings0, "\n"), strings.Join(settings1, "\n")) {
		t.Errorf("the settings planned for %s changed with the impostors running:\n--- without\n%s\n--- with\n%s",
			server, strings.Join(settings0, "\n"), strings.Join(settings1, "\n"))
	}

	// The audit still lists the impostors, untrusted, with their owner.
	_, js, _ := runCLI(t, "audit", "--format", "json", "--fail-on", "none")
	var doc struct {
		Instances []struct {
			Name  string
			PID   int
			User  string
			Trust struct {
				Trusted bool
				Why     string
			}
		}
	}
	if err := json.Unmarshal([]byte(js), &doc); err != nil {
		t.Fatal(err)
	}
	untrusted := 0
	for _, in := range doc.Instances {
		switch {
		case in.PID == real.PID && !in.Trust.Trusted:
			t.Errorf("the private server is not trusted: %s", in.Trust.Why)
		case in.User == "nobody" && in.Trust.Trusted:
			t.Errorf("%s (pid %d, nobody) is trusted", in.Name, in.PID)
		case in.User == "nobody":
			untrusted++
		}
	}
	if untrusted < 5 {
		t.Errorf("the audit lists %d untrusted instances, want the 5 impostors", untrusted)
	}
}

// TestSameSizing: the tolerance of TestAttackSabotageAndHostValues covers
// a grain of measured memory, never a claimed size or another line.
func TestSameSizing(t *testing.T) {
	for _, c := range []struct {
		a, b string
		same bool
	}{
		{"effective_cache_size = '15455MB'", "effective_cache_size = '15503MB'", true},
		{"shared_buffers = '5167MB'", "shared_buffers = '128kB'", false},
		{"shared_buffers = '5167MB'", "shared_buffers = '23GB'", false},
		{"nobody hard nofile 1024", "nobody hard nofile 1000448", false},
		{"a = '100MB'", "a = '100MB'\nb = 1", false},
		{"vm.nr_hugepages = 798", "vm.nr_hugepages = 793", true},
		{"vm.nr_hugepages = 798", "vm.nr_hugepages = 11800", false},
		{"vm.nr_hugepages = 798", "vm.swappiness = 798", false},
	} {
		if got := sameSizing(c.a, c.b); got != c.same {
			t.Errorf("sameSizing(%q, %q) = %v", c.a, c.b, got)
		}
	}
}
