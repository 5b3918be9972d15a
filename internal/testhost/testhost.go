// Package testhost makes real, private Linux hosts on this machine for
// integration tests that need several hosts (the Ansible collection's
// roll-out): each host is an overlay copy of / in its own mount, UTS, PID,
// IPC and network namespaces, with its own hostname, sshd on a veth address
// (10.237.N.2, the controller side 10.237.N.1) and its own PostgreSQL.
//
// What a host writes lands in a tmpfs that only its mount namespace sees;
// killing its init (PID 1 of the host) ends every process of the host, and
// the namespaces, mounts and veth pair go with the last of them. A killed
// `go test` (SIGKILL: no cleanup runs) takes its hosts along: unshare gets
// the parent-death signal and --kill-child ends the init; what is left is
// the test's temporary directory (keys, logs). Should an init outlive its
// test all the same, the next Start kills it (found by its marker, while
// the testhost lock is held, so never another live test's) and deletes
// leftover veths dbhtN. Tests with hosts run one at a time: the others wait
// for the lock and say so.
package testhost

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/dbhost/dbhost/internal/testdb"
)

// marker is the host init's $0: how a later Start finds the inits a killed
// test left behind.
const marker = "dbhost-testhost-init"

// initScript runs as PID 1 of a new host, in its new namespaces, with the
// host's name ($1) and an empty directory for its tmpfs ($2). It builds the
// root, pivots into it, says "ready" and stays PID 1, reaping orphans (the
// daemons that ansible, pg_ctl and start-stop-daemon leave to init).
const initScript = `set -eu
name=$1 base=$2
# overlayfs refuses an upper dir inside its lower /: a tmpfs holds it.
mount -t tmpfs -o mode=0700,size=4g dbhost-testhost "$base"
mkdir "$base/upper" "$base/work" "$base/root"
mount -t overlay -o "lowerdir=/,upperdir=$base/upper,workdir=$base/work" dbhost-testhost "$base/root"
r=$base/root
mount -t proc proc "$r/proc"
mount -t sysfs sysfs "$r/sys"
mount --bind /dev "$r/dev"
mount --bind /dev/pts "$r/dev/pts"
mount -t tmpfs -o mode=1777 shm "$r/dev/shm"
mount -t tmpfs -o mode=0755 run "$r/run"
mount -t tmpfs -o mode=1777 tmp "$r/tmp"
mount -t tmpfs -o mode=0755 postgresql "$r/var/lib/postgresql"
chown postgres:postgres "$r/var/lib/postgresql"
# What a fresh host would not have: dbhost (the serve role installs it),
# its state and files, this machine's ssh host keys and root's ssh keys,
# and a container runtime's marker (this machine's /.dockerenv on an
# overlay root would make dbhost judge the host a container).
rm -f "$r/.dockerenv" "$r/run/.containerenv"
rm -rf "$r/var/lib/dbhost" "$r/etc/dbhost" "$r/usr/bin/dbhost" "$r/etc/default/dbhost" \
  "$r/root/.ssh" "$r/root/.ansible"
rm -f "$r"/etc/ssh/ssh_host_* "$r"/etc/sysctl.d/*dbhost* "$r"/etc/udev/rules.d/*dbhost* \
  "$r"/etc/security/limits.d/*dbhost* "$r"/etc/tmpfiles.d/*dbhost* "$r"/lib/systemd/system/dbhost.*
rm -rf "$r"/etc/systemd/system/*.d/*dbhost*
hostname "$name"
printf '%s\n' "$name" >"$r/etc/hostname"
printf '127.0.1.1 %s\n' "$name" >>"$r/etc/hosts"
mkdir -m 0755 "$r/run/sshd"
mkdir -m 2775 "$r/run/postgresql"
chown postgres:postgres "$r/run/postgresql"
ip link set lo up
cd "$r"
mkdir .oldroot
pivot_root . .oldroot
cd /
umount -l /.oldroot
rmdir /.oldroot
echo ready
exec /bin/bash -c 'exec </dev/null >/dev/null 2>&1; while :; do sleep 3600 & wait $! || :; done' "$0" "$name"
`

// Options tune a host.
type Options struct {
	// Dir holds what the hosts of a test share on the controller: the
	// root's ssh key and the known_hosts file. Default: a directory of the
	// test's own, made by the first Start of the test (StartN uses one
	// for all its hosts).
	Dir string
	// NoPostgres leaves PostgreSQL out.
	NoPostgres bool
}

// Host is a running test host.
type Host struct {
	n          int
	name, addr string
	pid        int // the host's init, as this machine sees it
	dir        string
	KeyFile    string // root's private key for ssh
	KnownHosts string // known_hosts naming this host's new host key
	pgBin      string
	PGData     string // PostgreSQL's data directory inside the host

	cmd  *exec.Cmd
	done chan struct{}
	sshd *exec.Cmd
}

// Name is the host's hostname, dbhost-test-N.
func (h *Host) Name() string { return h.name }

// Addr is the host's address, 10.237.N.2.
func (h *Host) Addr() string { return h.addr }

// PID is the host's init as this machine sees it.
func (h *Host) PID() int { return h.pid }

// Path is the host's file p as the controller sees it (/proc/PID/root/p).
// For reading and polling: a symbolic link on the way resolves against the
// controller's root, not the host's.
func (h *Host) Path(p string) string {
	return filepath.Join("/proc", strconv.Itoa(h.pid), "root", p)
}

var hostEnv = []string{"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", "HOME=/root", "LANG=C.UTF-8"}

// command is args run inside the host: every namespace and the root of its
// init, with a plain root environment.
func (h *Host) command(args ...string) *exec.Cmd {
	cmd := exec.Command("nsenter", append([]string{"-t", strconv.Itoa(h.pid), "-a", "-r", "-w", "--"}, args...)...)
	cmd.Env = hostEnv
	cmd.Dir = "/"
	return cmd
}

// Run runs args inside the host, with stdin when not nil, and returns its
// standard output (and its standard error in the error).
func (h *Host) Run(stdin []byte, args ...string) (string, error) {
	cmd := h.command(args...)
	if stdin != nil {
		cmd.Stdin = bytes.NewReader(stdin)
	}
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	if err := cmd.Run(); err != nil {
		return out.String(), fmt.Errorf("%s on %s: %v\n%s%s", strings.Join(args, " "), h.name, err, out.String(), errOut.String())
	}
	return out.String(), nil
}

// Exec runs args inside the host and returns their standard output; the
// test fails when they fail.
func (h *Host) Exec(t testing.TB, args ...string) string {
	t.Helper()
	out, err := h.Run(nil, args...)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// WriteFile writes data to the host's file p (mode perm, owned by root).
func (h *Host) WriteFile(p string, data []byte, perm os.FileMode) error {
	_, err := h.Run(data, "/bin/sh", "-c", `umask 077 && cat >"$1" && chmod "$2" "$1"`, "sh", p, fmt.Sprintf("%o", perm))
	return err
}

// Sysctl reads a kernel parameter inside the host (net.* are the host's
// own: it has its own network namespace).
func (h *Host) Sysctl(name string) (string, error) {
	out, err := h.Run(nil, "/sbin/sysctl", "-n", "--", name)
	return strings.TrimSpace(out), err
}

// pg runs a PostgreSQL program as postgres inside the host.
func (h *Host) pg(prog string, args ...string) (string, error) {
	return h.Run(nil, append([]string{"/usr/sbin/runuser", "-u", "postgres", "--", filepath.Join(h.pgBin, prog)}, args...)...)
}

// StartPostgres starts the host's PostgreSQL and waits until it accepts.
func (h *Host) StartPostgres() error {
	_, err := h.pg("pg_ctl", "-D", h.PGData, "-l", filepath.Join(h.PGData, "server.log"), "-w", "-t", "60", "-s", "start")
	if err != nil {
		log, _ := os.ReadFile(h.Path(filepath.Join(h.PGData, "server.log")))
		return fmt.Errorf("%v\nserver log:\n%s", err, log)
	}
	return nil
}

// StopPostgres stops the host's PostgreSQL (fast shutdown) and waits until
// it is gone.
func (h *Host) StopPostgres() error {
	_, err := h.pg("pg_ctl", "-D", h.PGData, "-m", "fast", "-w", "-t", "60", "-s", "stop")
	return err
}

// kill ends the host: SIGKILL to its init ends every process in its PID
// namespace; the mounts, namespaces and the veth pair go with them.
func (h *Host) kill() {
	if h.cmd == nil {
		return
	}
	if h.pid > 0 { // 0 would signal this process's group
		syscall.Kill(h.pid, syscall.SIGKILL)
	}
	h.cmd.Process.Signal(syscall.SIGKILL) // unshare: --kill-child ends the init too
	select {
	case <-h.done:
	case <-time.After(30 * time.Second):
	}
	if h.sshd != nil {
		h.sshd.Wait()
	}
	deleteLink(vethName(h.n))
	h.cmd = nil
}

func vethName(n int) string { return fmt.Sprintf("dbht%d", n) }

func deleteLink(name string) {
	if _, err := net.InterfaceByName(name); err == nil {
		exec.Command("ip", "link", "del", name).Run()
	}
}

// need checks what every host needs.
func need(t testing.TB, o Options) {
	t.Helper()
	testdb.Need(t, "root (test hosts are namespaces)", os.Geteuid() == 0)
	for _, p := range []string{"unshare", "nsenter", "ip", "ssh-keygen", "ssh"} {
		_, err := exec.LookPath(p)
		testdb.Need(t, p+" (util-linux, iproute2, openssh-client)", err == nil)
	}
	_, err := os.Stat("/usr/sbin/sshd")
	testdb.Need(t, "/usr/sbin/sshd (apt-get install openssh-server)", err == nil)
	fs, _ := os.ReadFile("/proc/filesystems")
	testdb.Need(t, "overlay filesystem support", bytes.Contains(fs, []byte("\toverlay\n")))
	if !o.NoPostgres {
		_, err := testdb.PostgresBin()
		testdb.Need(t, fmt.Sprint("PostgreSQL: ", err), err == nil)
	}
}

// hostsLock is held for as long as a test has hosts: two tests' hosts would
// share addresses and veth names. Its own lock, not journal.Lock (whose
// exclusive holds would turn the host lock's shared hold into a no-op).
var hostsLock struct {
	sync.Mutex
	n int
	l net.Listener
}

// lockName is the turn among tests with hosts: an abstract Unix socket,
// which belongs to the network namespace as the veths and addresses the
// hosts use do, not to a file system (a test in a chroot, as fresh-test
// runs them, and one outside share the names dbhtN and 10.237.N.0/30, and
// would not share a lock file), and which the kernel frees when its holder
// dies.
const lockName = "@dbhost-testhost"

func lockHosts(t testing.TB) {
	t.Helper()
	hostsLock.Lock()
	defer hostsLock.Unlock()
	if hostsLock.n == 0 {
		l, err := net.Listen("unix", lockName)
		if err != nil {
			began := time.Now()
			t.Logf("testhost: waiting for another test's hosts to end (%v)", err)
			for err != nil {
				time.Sleep(200 * time.Millisecond)
				l, err = net.Listen("unix", lockName)
			}
			t.Logf("testhost: waited %s", time.Since(began).Round(10*time.Millisecond))
		}
		hostsLock.l = l
		killStale()
	}
	hostsLock.n++
	t.Cleanup(func() {
		hostsLock.Lock()
		defer hostsLock.Unlock()
		if hostsLock.n--; hostsLock.n == 0 {
			hostsLock.l.Close()
			hostsLock.l = nil
		}
	})
}

// killStale kills the inits of hosts that a killed test left (the lock is
// held: no live test owns them) and deletes leftover veths.
func killStale() {
	procs, _ := filepath.Glob("/proc/[0-9]*/cmdline")
	for _, p := range procs {
		b, err := os.ReadFile(p)
		if err != nil {
			continue
		}
		args := strings.Split(string(b), "\x00")
		// The init while it sets up (sh) and once it waits (bash).
		if len(args) > 3 && (args[0] == "/bin/sh" || args[0] == "/bin/bash") && args[1] == "-c" && args[3] == marker {
			if pid, err := strconv.Atoi(filepath.Base(filepath.Dir(p))); err == nil {
				syscall.Kill(pid, syscall.SIGKILL)
			}
		}
	}
	ifs, _ := net.Interfaces()
	for _, i := range ifs {
		if rest, ok := strings.CutPrefix(i.Name, "dbht"); ok {
			if _, err := strconv.Atoi(rest); err == nil {
				exec.Command("ip", "link", "del", i.Name).Run()
			}
		}
	}
}

// Start makes test host n (1..250): dbhost-test-N at 10.237.N.2.
func Start(t testing.TB, n int, o Options) *Host {
	t.Helper()
	return StartN(t, []int{n}, o)[0]
}

// StartN makes the hosts numbered ns in parallel, sharing one Dir.
func StartN(t testing.TB, ns []int, o Options) []*Host {
	t.Helper()
	need(t, o)
	// The turn among tests with hosts first, then the host lock: a test
	// waiting for its turn must not hold the host lock shared meanwhile,
	// or tests that take it exclusively wait for every queued test.
	lockHosts(t)
	// The host lock, shared for the hosts' lifetime: tests that compare two
	// audits of this machine must not see the hosts' servers come and go
	// (they run in this machine's process table).
	testdb.HoldHost(t)
	if o.Dir == "" {
		o.Dir = t.TempDir()
	} else if err := os.MkdirAll(o.Dir, 0o700); err != nil {
		t.Fatal(err)
	}
	key, known, err := keys(o.Dir)
	if err != nil {
		t.Fatal(err)
	}
	var ending time.Time
	t.Cleanup(func() {
		t.Logf("testhost: %d hosts ended in %s", len(ns), time.Since(ending).Round(10*time.Millisecond))
	})
	begin := time.Now()
	hosts := make([]*Host, len(ns))
	errs := make([]error, len(ns))
	var wg sync.WaitGroup
	for i, n := range ns {
		if n < 1 || n > 250 {
			t.Fatalf("test host number %d: want 1..250", n)
		}
		h := &Host{n: n, name: fmt.Sprintf("dbhost-test-%d", n), addr: fmt.Sprintf("10.237.%d.2", n),
			dir: filepath.Join(o.Dir, fmt.Sprintf("host%d", n)), KeyFile: key, KnownHosts: known}
		hosts[i] = h
		t.Cleanup(h.kill)
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			errs[i] = h.start(o)
		}(i)
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
	// known_hosts from each host's new key: ssh checks them strictly.
	var kh bytes.Buffer
	for _, h := range hosts {
		pub, err := os.ReadFile(h.Path("/etc/ssh/ssh_host_ed25519_key.pub"))
		if err != nil {
			t.Fatal(err)
		}
		fields := strings.Fields(string(pub))
		if len(fields) < 2 {
			t.Fatalf("%s: host key %q", h.name, pub)
		}
		fmt.Fprintf(&kh, "%s %s %s\n", h.addr, fields[0], fields[1])
	}
	f, err := os.OpenFile(known, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
	if err == nil {
		_, err = f.Write(kh.Bytes())
		if cerr := f.Close(); err == nil {
			err = cerr
		}
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("testhost: %d hosts up in %s", len(ns), time.Since(begin).Round(10*time.Millisecond))
	t.Cleanup(func() { ending = time.Now() })
	return hosts
}

// keys makes root's ssh key for the hosts in dir (once) and the
// known_hosts file the hosts' keys go to.
func keys(dir string) (key, known string, err error) {
	key = filepath.Join(dir, "id_ed25519")
	known = filepath.Join(dir, "known_hosts")
	if _, err := os.Stat(key); err == nil {
		return key, known, nil
	}
	out, err := exec.Command("ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", "dbhost-test", "-f", key).CombinedOutput()
	if err != nil {
		return "", "", fmt.Errorf("ssh-keygen: %v: %s", err, out)
	}
	return key, known, nil
}

// start brings the host up: namespaces and root, network, ssh, PostgreSQL.
func (h *Host) start(o Options) error {
	deleteLink(vethName(h.n))
	fsDir := filepath.Join(h.dir, "fs")
	if err := os.MkdirAll(fsDir, 0o700); err != nil {
		return err
	}
	cmd := exec.Command("unshare", "--mount", "--uts", "--ipc", "--pid", "--net", "--fork", "--kill-child",
		"--propagation", "private", "/bin/sh", "-c", initScript, marker, h.name, fsDir)
	cmd.Env = hostEnv
	cmd.Dir = "/"
	// unshare dies with the test (then --kill-child ends the host); its
	// own process group keeps a Ctrl-C of `go test` from reaching it first.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL, Setpgid: true}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return err
	}
	cmd.Stderr = cmd.Stdout
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("%s: unshare: %v", h.name, err)
	}
	h.cmd = cmd
	h.done = make(chan struct{})
	var said strings.Builder
	ready := make(chan bool, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		ok := false
		for sc.Scan() {
			if sc.Text() == "ready" {
				ok = true
				break
			}
			said.WriteString(sc.Text() + "\n")
		}
		ready <- ok
		for sc.Scan() {
		}
		cmd.Wait()
		close(h.done)
	}()
	select {
	case ok := <-ready:
		if !ok {
			<-h.done
			return fmt.Errorf("%s: init failed: %s%s", h.name, said.String(), cmd.ProcessState)
		}
	case <-time.After(60 * time.Second):
		return fmt.Errorf("%s: init not ready after 60 s: %s", h.name, said.String())
	}
	if h.pid, err = childOf(cmd.Process.Pid); err != nil {
		return fmt.Errorf("%s: %v", h.name, err)
	}
	if err := h.network(); err != nil {
		return err
	}
	if err := h.ssh(); err != nil {
		return err
	}
	if !o.NoPostgres {
		if err := h.postgres(); err != nil {
			return err
		}
	}
	return h.waitSSH()
}

// childOf is unshare's forked child: the host's init.
func childOf(pid int) (int, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/task/%d/children", pid, pid))
	if err != nil {
		return 0, err
	}
	f := strings.Fields(string(b))
	if len(f) != 1 {
		return 0, fmt.Errorf("unshare %d has children %q, want the init alone", pid, f)
	}
	return strconv.Atoi(f[0])
}

// network: a veth pair, dbhtN 10.237.N.1/30 here, eth0 10.237.N.2/30 in
// the host; no route beyond it.
func (h *Host) network() error {
	veth := vethName(h.n)
	steps := [][]string{
		{"ip", "link", "add", veth, "type", "veth", "peer", "name", "eth0", "netns", strconv.Itoa(h.pid)},
		{"ip", "addr", "add", fmt.Sprintf("10.237.%d.1/30", h.n), "dev", veth},
		{"ip", "link", "set", veth, "up"},
	}
	for _, s := range steps {
		if out, err := exec.Command(s[0], s[1:]...).CombinedOutput(); err != nil {
			return fmt.Errorf("%s: %s: %v: %s", h.name, strings.Join(s, " "), err, out)
		}
	}
	for _, s := range [][]string{
		{"/sbin/ip", "addr", "add", h.addr + "/30", "dev", "eth0"},
		{"/sbin/ip", "link", "set", "eth0", "up"},
	} {
		if _, err := h.Run(nil, s...); err != nil {
			return err
		}
	}
	return nil
}

// sshdConfig is the host's sshd_config: root by key only, on the veth
// address alone, no PAM (no login session machinery in the host).
const sshdConfig = `ListenAddress %s:22
HostKey /etc/ssh/ssh_host_ed25519_key
PidFile /run/sshd.pid
PermitRootLogin prohibit-password
PubkeyAuthentication yes
PasswordAuthentication no
KbdInteractiveAuthentication no
UsePAM no
AuthorizedKeysFile .ssh/authorized_keys
MaxStartups 100
MaxSessions 100
Subsystem sftp /usr/lib/openssh/sftp-server
`

// ssh: a new host key (ed25519 alone: the fastest to make, and the one
// known_hosts names), root's authorized key, sshd in the foreground.
func (h *Host) ssh() error {
	if _, err := h.Run(nil, "ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", "root@"+h.name, "-f", "/etc/ssh/ssh_host_ed25519_key"); err != nil {
		return err
	}
	pub, err := os.ReadFile(h.KeyFile + ".pub")
	if err != nil {
		return err
	}
	if _, err := h.Run(nil, "/bin/mkdir", "-m", "0700", "-p", "/root/.ssh"); err != nil {
		return err
	}
	if err := h.WriteFile("/root/.ssh/authorized_keys", pub, 0o600); err != nil {
		return err
	}
	if err := h.WriteFile("/etc/ssh/sshd_config.dbhost-test", []byte(fmt.Sprintf(sshdConfig, h.addr)), 0o644); err != nil {
		return err
	}
	log, err := os.Create(filepath.Join(h.dir, "sshd.log"))
	if err != nil {
		return err
	}
	defer log.Close()
	h.sshd = h.command("/usr/sbin/sshd", "-D", "-e", "-f", "/etc/ssh/sshd_config.dbhost-test")
	h.sshd.Stdout, h.sshd.Stderr = log, log
	h.sshd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := h.sshd.Start(); err != nil {
		h.sshd = nil
		return fmt.Errorf("%s: sshd: %v", h.name, err)
	}
	return nil
}

// waitSSH waits until sshd greets: its banner, not only an accepted
// connection (a loaded machine can accept long before sshd answers, and
// ssh gives up during the banner exchange).
func (h *Host) waitSSH() error {
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		if greets(h.addr+":22", time.Until(deadline)) {
			return nil
		}
		time.Sleep(50 * time.Millisecond)
	}
	return fmt.Errorf("%s: sshd does not answer on %s:22; log:\n%s", h.name, h.addr, h.SSHLog())
}

// greets reports whether an SSH server at addr sends its banner in time.
func greets(addr string, within time.Duration) bool {
	c, err := net.DialTimeout("tcp", addr, 200*time.Millisecond)
	if err != nil {
		return false
	}
	defer c.Close()
	c.SetReadDeadline(time.Now().Add(within))
	line, err := bufio.NewReader(c).ReadString('\n')
	return err == nil && strings.HasPrefix(line, "SSH-2.0-")
}

// SSHLog is what the host's sshd wrote (-e: its log on stderr), for a
// test's failure message when a host is unreachable.
func (h *Host) SSHLog() string {
	b, _ := os.ReadFile(filepath.Join(h.dir, "sshd.log"))
	return string(b)
}

// postgres: the distribution's server, initdb as postgres into the
// distribution's layout, trust on the local socket, port 5432 of the
// host's own network.
func (h *Host) postgres() error {
	bin, err := testdb.PostgresBin()
	if err != nil {
		return err
	}
	h.pgBin = bin
	h.PGData = filepath.Join("/var/lib/postgresql", filepath.Base(filepath.Dir(bin)), "main")
	if _, err := h.pg("initdb", "-D", h.PGData, "-U", "postgres", "--auth=trust", "-E", "UTF8",
		"--locale=C.UTF-8", "--no-sync", "--no-instructions"); err != nil {
		return err
	}
	conf := "listen_addresses = '127.0.0.1'\nport = 5432\nunix_socket_directories = '/var/run/postgresql'\n" +
		"shared_buffers = 32MB\nmax_connections = 20\nfsync = off\nlogging_collector = off\n"
	if _, err := h.Run([]byte(conf), "/usr/sbin/runuser", "-u", "postgres", "--", "/bin/sh", "-c", `cat >>"$1"`, "sh",
		filepath.Join(h.PGData, "postgresql.conf")); err != nil {
		return err
	}
	return h.StartPostgres()
}
