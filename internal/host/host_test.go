package host

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"errors"
	"io/fs"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/dbhost/dbhost/internal/testdb"
)

// fakeRoot builds a small host tree: what a snapshot would hold.
func fakeRoot(t *testing.T) string {
	t.Helper()
	root := t.TempDir()
	files := map[string]string{
		"proc/sys/vm/swappiness":                "60\n",
		"proc/sys/net/ipv4/ip_local_port_range": "32768\t60999\n",
		"proc/meminfo":                          "MemTotal:       24684092 kB\nMemFree:        22000000 kB\n",
		"etc/mysql/my.cnf":                      "[client]\npassword = hunter2\n[mysqld]\nport = 3306\n",
		"proc/42/limits":                        "Limit                     Soft Limit           Hard Limit           Units     \nMax open files            1024                 524288               files     \n",
	}
	for p, c := range files {
		full := filepath.Join(root, p)
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(full, []byte(c), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return root
}

func TestSnapshotRoundTrip(t *testing.T) {
	h, err := Open(fakeRoot(t))
	if err != nil {
		t.Fatal(err)
	}
	if err := h.StartRecording(); err != nil {
		t.Fatal(err)
	}
	// Reads of every kind, including ones that fail.
	if _, err := h.PIDs(); err != nil {
		t.Fatal(err)
	}
	sw, _ := h.Sysctl("vm.swappiness")
	pr, _ := h.Sysctl("net.ipv4.ip_local_port_range")
	cnf, _ := h.ReadConfig("/etc/mysql/my.cnf")
	mi, err := h.Meminfo()
	if err != nil {
		t.Fatal(err)
	}
	lim, err := h.Limits(42)
	if err != nil {
		t.Fatal(err)
	}
	_, missingErr := h.ReadFile("/etc/nothing")
	dir, _ := h.ReadDir("/proc/sys/vm")
	_, cmdErr := h.Run(context.Background(), "true") // not "/" root: refused, recorded

	var buf bytes.Buffer
	if err := h.WriteSnapshot(&buf, SnapshotInfo{Note: "test"}); err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(t.TempDir(), "s.tar.gz")
	if err := os.WriteFile(file, buf.Bytes(), 0o600); err != nil {
		t.Fatal(err)
	}
	s, err := OpenSnapshot(file)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if s.Live() || s.Manifest().Note != "test" {
		t.Fatalf("manifest: %+v", s.Manifest())
	}
	if v, _ := s.Sysctl("vm.swappiness"); v != sw {
		t.Errorf("swappiness %q, want %q", v, sw)
	}
	if v, _ := s.Sysctl("net.ipv4.ip_local_port_range"); v != pr || v != "32768 60999" {
		t.Errorf("port range %q, want %q", v, pr)
	}
	scnf, _ := s.ReadConfig("/etc/mysql/my.cnf")
	if strings.Contains(string(scnf), "hunter2") || !strings.Contains(string(scnf), "password = "+Redacted) {
		t.Errorf("snapshot kept a password:\n%s", scnf)
	}
	if !strings.Contains(string(cnf), "hunter2") {
		t.Errorf("live read must return the file as is")
	}
	smi, err := s.Meminfo()
	if err != nil || *smi.MemTotal != *mi.MemTotal {
		t.Errorf("meminfo %v %v", smi.MemTotal, err)
	}
	slim, err := s.Limits(42)
	if err != nil || slim[LimitNofile] != lim[LimitNofile] || slim[LimitNofile].Hard != 524288 {
		t.Errorf("limits %+v %v", slim, err)
	}
	if _, err := s.ReadFile("/etc/nothing"); !errors.Is(err, fs.ErrNotExist) || !errors.Is(missingErr, fs.ErrNotExist) {
		t.Errorf("missing file: live %v, snapshot %v", missingErr, err)
	}
	if sdir, _ := s.ReadDir("/proc/sys/vm"); strings.Join(sdir, ",") != strings.Join(dir, ",") {
		t.Errorf("readdir %v, want %v", sdir, dir)
	}
	if _, err := s.Run(context.Background(), "true"); !errors.Is(err, ErrNotLive) || !errors.Is(cmdErr, ErrNotLive) {
		t.Errorf("command: live %v, snapshot %v", cmdErr, err)
	}
	// Something never observed at collection is reported, not invented.
	if _, err := s.Run(context.Background(), "uname"); !errors.Is(err, ErrNotLive) {
		t.Errorf("unrecorded command: %v", err)
	}
}

func TestPermissionErrorsReplay(t *testing.T) {
	if os.Geteuid() == 0 {
		// Root reads everything: the test runs again as nobody.
		runAsNobody(t, "TestPermissionErrorsReplay")
		return
	}
	root := fakeRoot(t)
	secret := filepath.Join(root, "proc/42/maps")
	os.WriteFile(secret, []byte("x"), 0o000)
	h, _ := Open(root)
	h.StartRecording()
	h.PIDs() // every collection reads the process table; a snapshot without one is refused
	_, live := h.ReadFile("/proc/42/maps")
	s, _ := replayed(t, h)
	_, snap := s.ReadFile("/proc/42/maps")
	if !IsPermission(live) || !IsPermission(snap) {
		t.Errorf("live %v, snapshot %v: want permission errors", live, snap)
	}
}

func TestOpenSnapshotRejectsBadArchives(t *testing.T) {
	dir := t.TempDir()
	write := func(name string, b []byte) string {
		p := filepath.Join(dir, name)
		os.WriteFile(p, b, 0o600)
		return p
	}
	tarGz := func(entries map[string]string, link bool) []byte {
		var buf bytes.Buffer
		gz := gzip.NewWriter(&buf)
		tw := tar.NewWriter(gz)
		// In collect's order: the manifest first.
		names := make([]string, 0, len(entries))
		for n := range entries {
			names = append(names, n)
		}
		sort.Slice(names, func(a, b int) bool {
			if (names[a] == "manifest.json") != (names[b] == "manifest.json") {
				return names[a] == "manifest.json"
			}
			return names[a] < names[b]
		})
		for _, n := range names {
			c := entries[n]
			tw.WriteHeader(&tar.Header{Name: n, Mode: 0o600, Size: int64(len(c)), Typeflag: tar.TypeReg})
			tw.Write([]byte(c))
		}
		if link {
			tw.WriteHeader(&tar.Header{Name: "fs/proc/meminfo", Linkname: "/etc/shadow", Typeflag: tar.TypeSymlink})
		}
		tw.Close()
		gz.Close()
		return buf.Bytes()
	}
	manifest := `{"format":"` + SnapshotFormat + `"}`
	cases := map[string]string{
		"not gzip":       write("a", []byte("hello")),
		"no manifest":    write("b", tarGz(map[string]string{"fs/proc/meminfo": "x"}, false)),
		"wrong format":   write("c", tarGz(map[string]string{"manifest.json": `{"format":"other"}`}, false)),
		"path traversal": write("d", tarGz(map[string]string{"manifest.json": manifest, "../escape": "x"}, false)),
		"truncated":      write("e", tarGz(map[string]string{"manifest.json": manifest, "fs/x": strings.Repeat("y", 4096)}, false)[:200]),
	}
	for name, file := range cases {
		if h, err := OpenSnapshot(file); err == nil {
			h.Close()
			t.Errorf("%s: accepted", name)
		} else if !strings.Contains(err.Error(), "not a usable dbhost snapshot") {
			t.Errorf("%s: unclear error %v", name, err)
		}
	}
	// Symbolic links are dropped, never followed out of the snapshot.
	h, err := OpenSnapshot(write("f", tarGz(map[string]string{"manifest.json": manifest, "probes.json": `{"readdir:proc":{"out":"MQ=="}}`}, true)))
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	if b, err := h.ReadFile("/proc/meminfo"); err == nil {
		t.Errorf("followed a link out of the snapshot: %q", b)
	}
}

func TestReadFileTooLarge(t *testing.T) {
	root := t.TempDir()
	f, _ := os.Create(filepath.Join(root, "big.cnf"))
	f.Truncate(MaxFileSize + 1)
	f.Close()
	h, _ := Open(root)
	if _, err := h.ReadConfig("/big.cnf"); !errors.Is(err, ErrTooLarge) {
		t.Fatalf("got %v, want ErrTooLarge", err)
	}
	if got := Explain(pathErr("open", "big.cnf", ErrTooLarge)); !strings.Contains(got, "larger than 64 MiB") {
		t.Errorf("explain: %q", got)
	}
}

// A collection is one observation: a file read twice reads the same, even if
// it changed or vanished in between, and a config file read once plainly and
// once as configuration is stored redacted.
func TestRecordingIsOneObservation(t *testing.T) {
	root := fakeRoot(t)
	h, _ := Open(root)
	h.StartRecording()
	h.PIDs()
	first, err := h.ReadFile("/proc/sys/vm/swappiness")
	if err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(root, "proc/sys/vm/swappiness"), []byte("1\n"), 0o644)
	if again, _ := h.ReadFile("/proc/sys/vm/swappiness"); string(again) != string(first) {
		t.Errorf("second read %q, first %q", again, first)
	}
	os.Remove(filepath.Join(root, "proc/42/limits"))
	if _, err := h.Limits(42); err == nil {
		// Never read before its removal: the live error is the observation.
	} else if !IsNotExist(err) {
		t.Errorf("limits: %v", err)
	}
	unit := filepath.Join(root, "etc/systemd/system/x.service")
	os.MkdirAll(filepath.Dir(unit), 0o755)
	os.WriteFile(unit, []byte("[Service]\nEnvironment=PGPASSWORD=hunter2\n"), 0o644)
	if b, _ := h.ReadFile("/etc/systemd/system/x.service"); !strings.Contains(string(b), "hunter2") {
		t.Fatal("live read must be the file as is")
	}
	h.ReadConfig("/etc/systemd/system/x.service")
	s, _ := replayed(t, h)
	if b, _ := s.ReadFile("/etc/systemd/system/x.service"); strings.Contains(string(b), "hunter2") || !strings.Contains(string(b), Redacted) {
		t.Errorf("snapshot unit file: %q", b)
	}
	if b, _ := s.ReadFile("/proc/sys/vm/swappiness"); string(b) != string(first) {
		t.Errorf("snapshot holds %q, the collection observed %q", b, first)
	}
}

// replayed writes what h recorded as a snapshot and opens it, until the
// test ends; it returns the archive too.
func replayed(t *testing.T, h *Host) (*Host, []byte) {
	t.Helper()
	var buf bytes.Buffer
	if err := h.WriteSnapshot(&buf, SnapshotInfo{}); err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(t.TempDir(), "s.tar.gz")
	os.WriteFile(file, buf.Bytes(), 0o600)
	s, err := OpenSnapshot(file)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s, buf.Bytes()
}

// runAsNobody runs one test of this binary again as user nobody, from a
// copy nobody can execute (go test's build directory is root's alone), and
// fails unless it passed there.
func runAsNobody(t *testing.T, name string) {
	t.Helper()
	u, err := user.Lookup("nobody")
	testdb.Need(t, "user nobody", err == nil)
	uid, _ := strconv.Atoi(u.Uid)
	gid, _ := strconv.Atoi(u.Gid)
	dir, err := os.MkdirTemp("", "dbhost-asnobody-")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(dir)
	tmp := filepath.Join(dir, "tmp")
	for _, d := range []string{dir, tmp} {
		os.Mkdir(d, 0o755)
		os.Chmod(d, 0o755)
	}
	os.Chown(tmp, uid, gid)
	bin, err := os.ReadFile(os.Args[0])
	if err != nil {
		t.Fatal(err)
	}
	exe := filepath.Join(dir, "host.test")
	if err := os.WriteFile(exe, bin, 0o755); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(exe, "-test.run", "^"+name+"$", "-test.count=1", "-test.v")
	cmd.Dir, cmd.Env = tmp, []string{"PATH=/usr/bin:/bin", "TMPDIR=" + tmp, "HOME=" + tmp}
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}}
	out, err := cmd.CombinedOutput()
	if err != nil || !strings.Contains(string(out), "--- PASS: "+name) {
		t.Fatalf("%s as nobody: %v\n%s", name, err, out)
	}
}
