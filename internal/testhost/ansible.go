package testhost

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/dbhost/dbhost/internal/testdb"
)

// Inventory writes an inventory of hosts (group dbhost, vars as the
// group's variables) into a directory of the test and returns its path.
// It is YAML in its JSON form, which ansible's yaml inventory reads.
func Inventory(t testing.TB, hosts []*Host, vars map[string]any) string {
	t.Helper()
	if len(hosts) == 0 {
		t.Fatal("an inventory of no hosts")
	}
	entries := map[string]any{}
	for _, h := range hosts {
		entries[h.name] = map[string]any{
			"ansible_host":                 h.addr,
			"ansible_port":                 22,
			"ansible_user":                 "root",
			"ansible_ssh_private_key_file": h.KeyFile,
			// The hosts' new keys, checked strictly: never
			// StrictHostKeyChecking=no.
			"ansible_ssh_common_args":    fmt.Sprintf("-o UserKnownHostsFile=%s -o GlobalKnownHostsFile=/dev/null -o StrictHostKeyChecking=yes -o IdentitiesOnly=yes", h.KnownHosts),
			"ansible_python_interpreter": "/usr/bin/python3",
		}
	}
	group := map[string]any{"hosts": entries}
	if len(vars) > 0 {
		group["vars"] = vars
	}
	b, err := json.MarshalIndent(map[string]any{"all": map[string]any{"children": map[string]any{"dbhost": group}}}, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	f, err := os.CreateTemp(t.TempDir(), "inventory-*.yml")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.Write(append(b, '\n')); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	return f.Name()
}

// RepoRoot is the repository's top directory (the one holding go.mod).
func RepoRoot(t testing.TB) string {
	t.Helper()
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			t.Fatal("no go.mod above the test's directory")
		}
		dir = parent
	}
}

// controlDirs are the ssh control-socket directories of this process's
// playbook runs, one per test directory.
var controlDirs sync.Map

// controlDir is a short directory for ssh's control sockets (a socket
// path must fit in 108 bytes; a test's temporary directory may not), whose
// masters are told to exit and which is removed when the test ends.
func controlDir(t testing.TB, dir string) string {
	t.Helper()
	if d, ok := controlDirs.Load(dir); ok {
		return d.(string)
	}
	d, err := os.MkdirTemp("", "dbh-cp-")
	if err != nil {
		t.Fatal(err)
	}
	controlDirs.Store(dir, d)
	t.Cleanup(func() {
		socks, _ := filepath.Glob(filepath.Join(d, "*"))
		for _, s := range socks {
			exec.Command("ssh", "-o", "ControlPath="+s, "-O", "exit", "dbhost-test").Run()
		}
		os.RemoveAll(d)
		controlDirs.Delete(dir)
	})
	return d
}

// Playbook runs ansible-playbook -i inv playbook extra... in dir, with an
// environment confined to dir (its HOME, temporary and control
// directories; the collection from this repository), and returns what it
// printed. A playbook path that is not absolute is the repository's.
func Playbook(t testing.TB, dir, inv, playbook string, extra ...string) (string, error) {
	t.Helper()
	bin, err := exec.LookPath("ansible-playbook")
	testdb.Need(t, "ansible-playbook (apt-get install ansible-core)", err == nil)
	root := RepoRoot(t)
	if !filepath.IsAbs(playbook) {
		playbook = filepath.Join(root, playbook)
	}
	home := filepath.Join(dir, ".home")
	tmp := filepath.Join(dir, ".ansible-tmp")
	for _, d := range []string{home, tmp} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	// An empty configuration of its own: no ansible.cfg of the machine,
	// the user or the directory applies.
	cfg := filepath.Join(home, "ansible.cfg")
	if err := os.WriteFile(cfg, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	path := os.Getenv("PATH")
	if path == "" {
		path = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
	}
	// A play that hangs fails the test with what was running, well before
	// go test's own timeout would end every test without a word.
	ctx, cancel := context.WithTimeout(context.Background(), playbookTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, append([]string{"-i", inv, playbook}, extra...)...)
	// A process the play left behind holding its output must not hold the test.
	cmd.WaitDelay = 10 * time.Second
	cmd.Dir = dir
	cmd.Env = []string{
		"PATH=" + path, "HOME=" + home, "LANG=C.UTF-8", "PWD=" + dir,
		"ANSIBLE_CONFIG=" + cfg,
		"ANSIBLE_LOCAL_TEMP=" + tmp,
		"ANSIBLE_SSH_CONTROL_PATH_DIR=" + controlDir(t, dir),
		"ANSIBLE_COLLECTIONS_PATH=" + filepath.Join(root, "deploy", "ansible"),
		"ANSIBLE_NOCOLOR=1", "ANSIBLE_FORCE_COLOR=0",
		"ANSIBLE_RETRY_FILES_ENABLED=0",
		"ANSIBLE_PIPELINING=1",
		// ssh's ConnectTimeout (default 10 s) covers the banner exchange,
		// which a loaded machine can stretch.
		"ANSIBLE_TIMEOUT=30",
		"ANSIBLE_FORKS=10",
		"ANSIBLE_HOST_KEY_CHECKING=1",
		"ANSIBLE_DEPRECATION_WARNINGS=0",
	}
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	begin := time.Now()
	err = cmd.Run()
	t.Logf("ansible-playbook %s %s: %s (%v)", filepath.Base(playbook), strings.Join(extra, " "), time.Since(begin).Round(10*time.Millisecond), exitStatus(err))
	if ctx.Err() != nil {
		ps, _ := exec.Command("ps", "-eo", "pid,ppid,etime,args").Output()
		t.Fatalf("ansible-playbook %s did not finish in %s; its output:\n%s\nprocesses:\n%s", filepath.Base(playbook), playbookTimeout, out.String(), ps)
	}
	return out.String(), err
}

// playbookTimeout bounds one play of a test: the longest take about 40 s.
const playbookTimeout = 4 * time.Minute

func exitStatus(err error) string {
	var ee *exec.ExitError
	switch {
	case err == nil:
		return "exit 0"
	case errors.As(err, &ee):
		return fmt.Sprintf("exit %d", ee.ExitCode())
	default:
		return err.Error()
	}
}
