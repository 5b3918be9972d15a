package engine

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/dbhost/dbhost/internal/host"
	"github.com/dbhost/dbhost/internal/testdb"
)

// snapshotFile writes a snapshot archive of probes (key → output, or
// "!error" for a recorded failure) and files, and opens it.
func snapshotFile(t *testing.T, probes map[string]string, files map[string]string) *host.Host {
	t.Helper()
	type result struct {
		Out []byte `json:"out,omitempty"`
		Err string `json:"err,omitempty"`
	}
	pr := map[string]result{"readdir:proc": {Out: []byte("10\n20\n21\n30")}}
	for k, v := range probes {
		if e, ok := strings.CutPrefix(v, "!"); ok {
			pr[k] = result{Err: e}
		} else {
			pr[k] = result{Out: []byte(v)}
		}
	}
	pj, err := json.Marshal(pr)
	if err != nil {
		t.Fatal(err)
	}
	all := [][2]string{
		{"manifest.json", `{"format":"` + host.SnapshotFormat + `","euid":0}`},
		{"probes.json", string(pj)},
	}
	for p, c := range files {
		all = append(all, [2]string{"fs/" + p, c})
	}
	var buf bytes.Buffer
	gz := gzip.NewWriter(&buf)
	tw := tar.NewWriter(gz)
	for _, e := range all {
		name, c := e[0], e[1]
		if err := tw.WriteHeader(&tar.Header{Name: name, Mode: 0o644, Size: int64(len(c)), Typeflag: tar.TypeReg}); err != nil {
			t.Fatal(err)
		}
		tw.Write([]byte(c))
	}
	tw.Close()
	gz.Close()
	file := filepath.Join(t.TempDir(), "snap.tar.gz")
	if err := os.WriteFile(file, buf.Bytes(), 0o600); err != nil {
		t.Fatal(err)
	}
	h, err := host.OpenSnapshot(file)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { h.Close() })
	return h
}

const unixHeader = "Num       RefCount Protocol Flags    Type St Inode Path\n"

// TestAttachListenersForeignNetNS replays a snapshot of two servers in
// other network namespaces (one dumped, one that could not be entered) and
// one in dbhost's: each gets the sockets of its own namespace, TCP from the
// namespace's sock_diag probe and Unix from /proc/PID/net/unix.
func TestAttachListenersForeignNetNS(t *testing.T) {
	probes := map[string]string{
		"readlink:proc/self/ns/net": "net:[4026531833]",
		"readlink:proc/10/ns/net":   "net:[4026531833]",
		"readlink:proc/20/ns/net":   "net:[4026532246]",
		"readlink:proc/21/ns/net":   "net:[4026532246]",
		"readlink:proc/30/ns/net":   "net:[4026532316]",
		"sockets:10":                "[100,101]",
		"sockets:20":                "[200,201,202]",
		"sockets:21":                "[210]",
		"sockets:30":                "[300]",
		// Inode 200 is in both tables: only the namespace's counts.
		"probe:sock_diag:tcp_listen":                  `[{"addr":"0.0.0.0","port":3306,"inode":100,"backlog":80},{"addr":"0.0.0.0","port":9999,"inode":200,"backlog":5}]`,
		"probe:sock_diag:tcp_listen:net:[4026532246]": `[{"addr":"10.238.1.1","port":4567,"inode":200,"backlog":4096},{"addr":"10.238.1.1","port":20011,"inode":201,"backlog":60},{"addr":"::","port":6379,"inode":210,"backlog":511}]`,
		"probe:sock_diag:tcp_listen:net:[4026532316]": "!in another network namespace (net:[4026532316]); listing its sockets needs root",
	}
	files := map[string]string{
		"proc/net/unix":    unixHeader + "0000000000000000: 00000002 00000000 00010000 0001 01 101 /run/mysqld/mysqld.sock\n",
		"proc/20/net/unix": unixHeader + "0000000000000000: 00000002 00000000 00010000 0001 01 202 /var/lib/lab/node1/mysqld.sock\n0000000000000000: 00000002 00000000 00000000 0001 03 203 /var/lib/lab/x.sock\n",
	}
	h := snapshotFile(t, probes, files)
	insts := []*Instance{{PID: 10}, {PID: 20}, {PID: 21}, {PID: 30}}
	AttachListeners(h, insts)
	want := map[int]string{
		10: "0.0.0.0:3306 unix:/run/mysqld/mysqld.sock",
		20: "10.238.1.1:20011 10.238.1.1:4567 unix:/var/lib/lab/node1/mysqld.sock",
		21: "[::]:6379",
		30: "",
	}
	for _, in := range insts {
		var got []string
		for _, l := range in.Listen {
			got = append(got, l.String())
		}
		if g := strings.Join(got, " "); g != want[in.PID] {
			t.Errorf("pid %d listens on %q, want %q", in.PID, g, want[in.PID])
		}
		if in.PID != 30 && in.ListenErr != "" {
			t.Errorf("pid %d: unexpected error %q", in.PID, in.ListenErr)
		}
	}
	if e := insts[3].ListenErr; e != "in another network namespace (net:[4026532316]); listing its sockets needs root" {
		t.Errorf("pid 30: error %q", e)
	}
	if insts[1].Listen[1].Backlog != 4096 {
		t.Errorf("backlog of the namespace's socket lost: %+v", insts[1].Listen)
	}
}

// TestAttachListenersOldSnapshot: a snapshot without namespace links (an
// older dbhost) matches every server against dbhost's own tables, without
// an error.
func TestAttachListenersOldSnapshot(t *testing.T) {
	h := snapshotFile(t, map[string]string{
		"sockets:10":                 "[100]",
		"probe:sock_diag:tcp_listen": `[{"addr":"127.0.0.1","port":3306,"inode":100,"backlog":80}]`,
	}, map[string]string{"proc/net/unix": unixHeader})
	in := &Instance{PID: 10}
	AttachListeners(h, []*Instance{in})
	if len(in.Listen) != 1 || in.Listen[0].String() != "127.0.0.1:3306" || in.ListenErr != "" {
		t.Errorf("got %+v, error %q", in.Listen, in.ListenErr)
	}
}

// TestAttachListenersNetNSLive starts a process that listens on TCP and
// on a Unix socket inside a fresh network namespace of its own: dbhost's
// own socket table does not hold its sockets, AttachListeners finds both
// in the process's namespace, with the backlog it asked for.
func TestAttachListenersNetNSLive(t *testing.T) {
	if testing.Short() {
		t.Skip("integration: starts a process in a network namespace")
	}
	testdb.Need(t, "root (network namespaces)", os.Geteuid() == 0)
	py, err := exec.LookPath("python3")
	testdb.Need(t, "python3", err == nil)
	testdb.HoldHost(t)
	sock := filepath.Join(t.TempDir(), "l.sock")
	cmd := exec.Command(py, "-c", `import socket, sys
t = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
t.bind(("0.0.0.0", 0))
t.listen(7)
u = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
u.bind(sys.argv[1])
u.listen(3)
print(t.getsockname()[1], flush=True)
sys.stdin.read()`, sock)
	cmd.SysProcAttr = &syscall.SysProcAttr{Cloneflags: syscall.CLONE_NEWNET}
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		stdin.Close() // the listener ends, and its namespace with it
		cmd.Wait()
	})
	var port int
	if _, err := fmt.Fscan(stdout, &port); err != nil {
		t.Fatalf("the listener did not start: %v", err)
	}
	h, err := host.Open("/")
	if err != nil {
		t.Fatal(err)
	}
	self, _ := h.NetNS(0)
	ns, err := h.NetNS(cmd.Process.Pid)
	if err != nil || ns == self {
		t.Fatalf("listener in %q (err %v), dbhost in %q: want another namespace", ns, err, self)
	}
	inodes, err := h.SocketInodes(cmd.Process.Pid)
	if err != nil {
		t.Fatal(err)
	}
	own, err := h.ListenSockets()
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range own {
		for _, ino := range inodes {
			if s.Inode == ino {
				t.Fatalf("the namespace's socket %+v is in dbhost's own table", s)
			}
		}
	}
	in := &Instance{PID: cmd.Process.Pid}
	AttachListeners(h, []*Instance{in})
	want := fmt.Sprintf("0.0.0.0:%d unix:%s", port, sock)
	var got []string
	for _, l := range in.Listen {
		got = append(got, l.String())
	}
	if strings.Join(got, " ") != want || in.ListenErr != "" {
		t.Fatalf("listens on %q (error %q), want %q", got, in.ListenErr, want)
	}
	if in.Listen[0].Backlog != 7 {
		t.Errorf("backlog %d, want 7", in.Listen[0].Backlog)
	}
}
