package galeralab

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/dbhost/dbhost/internal/host"
	"github.com/dbhost/dbhost/internal/termsafe"
	"github.com/dbhost/dbhost/internal/textio"
)

// OSUser runs the lab's servers and garbd.
const OSUser = "mysql"

// stopTimeout bounds a clean shutdown before SIGKILL.
const stopTimeout = 30 * time.Second

// proc is a process this Lab started: waited for here, so that it is
// reaped as soon as it exits (Running must not see a zombie as alive).
type proc struct {
	pid    int
	exited chan struct{}
}

func (p *proc) reaped(d time.Duration) {
	select {
	case <-p.exited:
	case <-time.After(d):
	}
}

func mysqlIDs() (uid, gid int, err error) {
	u, err := user.Lookup(OSUser)
	if err != nil {
		return 0, 0, fmt.Errorf("lab: system user %s: %w (apt-get install mariadb-server)", OSUser, err)
	}
	uid, _ = strconv.Atoi(u.Uid)
	gid, _ = strconv.Atoi(u.Gid)
	return uid, gid, nil
}

// mkdirOwned makes dir (mode 0700) for the servers' user.
func mkdirOwned(dir string, uid, gid int) error {
	if err := os.Mkdir(dir, 0o700); err != nil {
		return err
	}
	return os.Chown(dir, uid, gid)
}

// consoleLog is where a member's standard output and error go: in the
// lab's root-owned console directory, so that the server's user cannot
// turn the file root opens into a link.
func (l *Lab) consoleLog(name string) string { return filepath.Join(l.dir, "console", name+".log") }

// spawn starts argv in the member's namespace, in a session of its own (a
// Ctrl-C at dbhost's terminal must not reach it, and it outlives dbhost),
// its output appended to the member's console log.
func (l *Lab) spawn(n Node, dir string, argv []string) (*proc, error) {
	lf, err := os.OpenFile(l.consoleLog(n.Name), os.O_CREATE|os.O_WRONLY|os.O_APPEND|unix.O_NOFOLLOW, 0o600)
	if err != nil {
		return nil, err
	}
	defer lf.Close()
	fmt.Fprintf(lf, "--- %s: starting %s\n", time.Now().Format(time.RFC3339), n.Name)
	// Only the network namespace: `ip netns exec` would also give the
	// server a mount namespace of its own, where /proc/PID/exe reads
	// through the real root (under a chroot, a path dbhost cannot trust).
	args := append([]string{"--net=" + filepath.Join(netnsDir, n.Netns), "--"}, argv...)
	cmd := exec.Command(l.bins.nsenter, args...)
	cmd.Env = cleanEnv
	cmd.Dir = dir
	cmd.Stdout, cmd.Stderr = lf, lf
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s: %w", n.Name, err)
	}
	p := &proc{pid: cmd.Process.Pid, exited: make(chan struct{})}
	go func() { cmd.Wait(); close(p.exited) }()
	l.procs[n.Name] = p
	l.st.Nodes[l.index(n.Name)].PID = p.pid
	return p, nil
}

func (l *Lab) index(name string) int {
	_, i, _ := l.node(name)
	return i
}

// isoSeconds writes d as Galera's ISO 8601 duration (PT2S, PT0.5S).
func isoSeconds(d time.Duration) string {
	return "PT" + strconv.FormatFloat(d.Seconds(), 'f', -1, 64) + "S"
}

// providerOptions are a member's wsrep_provider_options (garbd's
// --options). The EVS timeouts keep Galera's defaults' ratios to the
// suspect timeout (5 s: inactive 15 s, install 7.5 s, checks every 1 s)
// and its order: keepalive_period <= inactive_check_period <
// suspect_timeout, install_timeout < inactive_timeout.
func (l *Lab) providerOptions(n Node, extra string) string {
	s := l.suspect
	check := s / 4
	inactive := 3 * s
	install := 3 * s / 2
	opts := []string{
		"gmcast.listen_addr=tcp://" + n.Addr + ":4567",
		"gmcast.segment=" + strconv.Itoa(n.Segment),
		"pc.weight=" + strconv.Itoa(n.Weight),
		// Recover bootstraps explicitly; no component restored behind
		// its back from a saved view.
		"pc.recovery=FALSE",
		"evs.keepalive_period=" + isoSeconds(check),
		"evs.inactive_check_period=" + isoSeconds(check),
		"evs.suspect_timeout=" + isoSeconds(s),
		"evs.inactive_timeout=" + isoSeconds(inactive),
		"evs.install_timeout=" + isoSeconds(install),
	}
	if !n.Arbitrator {
		opts = append(opts, "gcache.size=32M", "ist.recv_addr="+n.Addr+":4568")
	}
	if extra != "" {
		opts = append(opts, extra)
	}
	return strings.Join(opts, ";")
}

func (l *Lab) clusterAddress() string {
	var a []string
	for _, n := range l.st.Nodes {
		a = append(a, n.Addr)
	}
	return "gcomm://" + strings.Join(a, ",")
}

// mariadbdArgs is a data node's command line. Options the user gave come
// last (later wins), except wsrep_provider_options, which is appended to
// the lab's own provider options.
func (l *Lab) mariadbdArgs(n Node, bootstrap bool) []string {
	dir := filepath.Dir(n.DataDir)
	var extraProv string
	var user []string
	for _, o := range l.st.Options {
		name, val, _ := parseOption(o)
		if name == "wsrep-provider-options" {
			extraProv = val
			continue
		}
		user = append(user, "--"+name+"="+val)
	}
	args := []string{l.bins.mariadbd, "--no-defaults", "--user=" + OSUser,
		"--datadir=" + n.DataDir, "--socket=" + n.Socket, "--pid-file=" + filepath.Join(dir, "mysqld.pid"),
		"--log-error=" + filepath.Join(dir, "error.log"), "--tmpdir=" + filepath.Join(dir, "tmp"),
		"--bind-address=" + n.Addr, "--port=" + strconv.Itoa(portOr3306(n.Port)), "--skip-name-resolve",
		"--innodb-buffer-pool-size=32M", "--innodb-log-file-size=16M", "--performance-schema=OFF",
		"--max-connections=50", "--binlog-format=ROW", "--innodb-autoinc-lock-mode=2", "--default-storage-engine=InnoDB",
		"--wsrep-on=ON", "--wsrep-provider=" + l.bins.provider, "--wsrep-cluster-name=" + l.st.Cluster,
		"--wsrep-cluster-address=" + l.clusterAddress(), "--wsrep-node-address=" + n.Addr,
		"--wsrep-node-name=" + n.Name, "--wsrep-sst-method=rsync",
		"--wsrep-provider-options=" + l.providerOptions(n, extraProv)}
	if bootstrap {
		args = append(args, "--wsrep-new-cluster")
	}
	return append(args, user...)
}

func (l *Lab) garbdArgs(n Node, uid, gid int) []string {
	var data []string
	for _, m := range l.st.Nodes {
		if !m.Arbitrator {
			data = append(data, m.Addr)
		}
	}
	return []string{l.bins.setpriv, "--reuid=" + strconv.Itoa(uid), "--regid=" + strconv.Itoa(gid), "--clear-groups",
		l.bins.garbd, "--address", "gcomm://" + strings.Join(data, ","), "--group", l.st.Cluster,
		"--name", n.Name, "--options", l.providerOptions(n, "")}
}

// startMember starts a data node (bootstrap: a new cluster) or garbd.
func (l *Lab) startMember(n Node, bootstrap bool) error {
	if n.Arbitrator {
		uid, gid, err := mysqlIDs()
		if err != nil {
			return err
		}
		_, err = l.spawn(n, filepath.Join(l.dir, n.Name), l.garbdArgs(n, uid, gid))
		return err
	}
	_, err := l.spawn(n, filepath.Dir(n.DataDir), l.mariadbdArgs(n, bootstrap))
	return err
}

// memberPIDs are the live processes in a member's namespace: the server
// (or garbd) and whatever it started (a state transfer's rsync).
func memberPIDs(n Node) []int { return nsPIDs(n.Netns) }

// Running reports whether a member's server (or garbd) runs.
func (l *Lab) Running(name string) bool {
	l.mu.Lock()
	n, _, err := l.node(name)
	l.mu.Unlock()
	return err == nil && l.mainPID(n) > 0
}

// mainPID is the member's mariadbd or garbd, 0 when none runs.
func (l *Lab) mainPID(n Node) int {
	want := l.bins.mariadbd
	if n.Arbitrator {
		want = l.bins.garbd
	}
	for _, pid := range memberPIDs(n) {
		if exe, err := os.Readlink(fmt.Sprintf("/proc/%d/exe", pid)); err == nil && exe == want {
			return pid
		}
	}
	return 0
}

// Kill sends SIGKILL to the members, all at once (every process in their
// namespaces, as a power loss would end them), and waits until they are
// gone.
func (l *Lab) Kill(names ...string) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	var nodes []Node
	for _, name := range names {
		n, _, err := l.node(name)
		if err != nil {
			return err
		}
		nodes = append(nodes, n)
	}
	var pids []int
	for _, n := range nodes {
		pids = append(pids, memberPIDs(n)...)
	}
	for _, p := range pids {
		syscall.Kill(p, syscall.SIGKILL)
	}
	deadline := time.Now().Add(10 * time.Second)
	for _, n := range nodes {
		for len(memberPIDs(n)) > 0 {
			if time.Now().After(deadline) {
				return fmt.Errorf("kill %s: processes %v survived SIGKILL", n.Name, memberPIDs(n))
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	l.logf("killed %s", strings.Join(names, ", "))
	return nil
}

// Shutdown stops the members cleanly (SIGTERM: mariadbd and garbd leave
// the group and say so), concurrently, and waits until they are gone;
// SIGKILL after a timeout, which is then an error.
func (l *Lab) Shutdown(ctx context.Context, names ...string) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, name := range names {
		if _, _, err := l.node(name); err != nil {
			return err
		}
	}
	if err := l.shutdown(ctx, stopTimeout, false, names...); err != nil {
		return err
	}
	l.logf("shut down %s", strings.Join(names, ", "))
	return nil
}

// shutdown stops members cleanly, concurrently. With quick (Stop), a
// data node that does not answer over its socket (starting, or waiting
// for a state transfer: a clean shutdown would wait for the transfer)
// is killed at once.
func (l *Lab) shutdown(ctx context.Context, timeout time.Duration, quick bool, names ...string) error {
	var wg sync.WaitGroup
	errs := make([]error, len(names))
	for i, name := range names {
		n, _, err := l.node(name)
		if err != nil {
			errs[i] = err
			continue
		}
		pid := l.mainPID(n)
		if pid == 0 {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			if quick && !n.Arbitrator {
				if _, err := queryStatus(ctx, n); err != nil {
					killNetns(n.Netns, 0)
					return
				}
			}
			syscall.Kill(pid, syscall.SIGTERM)
			t := time.NewTimer(timeout)
			defer t.Stop()
			for l.mainPID(n) != 0 {
				select {
				case <-ctx.Done():
				case <-t.C:
				case <-time.After(50 * time.Millisecond):
					continue
				}
				killNetns(n.Netns, 0)
				errs[i] = fmt.Errorf("%s did not shut down within %v (killed); log:\n%s", n.Name, timeout, l.logTail(n, 15))
				return
			}
			// What the server started (an SST's rsync) goes with it.
			killNetns(n.Netns, 2*time.Second)
		}()
	}
	wg.Wait()
	return errors.Join(errs...)
}

// LogTail is the end of a member's log (lines at most), escaped for a
// terminal: what a proof shows when a member stopped on its own.
func (l *Lab) LogTail(name string, lines int) string {
	l.mu.Lock()
	n, _, err := l.node(name)
	l.mu.Unlock()
	if err != nil {
		return ""
	}
	return l.logTail(n, lines)
}

// logTail is the end of a member's log, escaped for a terminal. The error
// log lives in a directory of the servers' user: it is opened without
// following links and read only if it is a regular file.
func (l *Lab) logTail(n Node, lines int) string {
	p := l.consoleLog(n.Name)
	if !n.Arbitrator {
		p = filepath.Join(filepath.Dir(n.DataDir), "error.log")
	}
	s := readTail(p, 16<<10)
	if n.Arbitrator || s == "" {
		s = readTail(l.consoleLog(n.Name), 16<<10)
	}
	all := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(all) > lines {
		all = all[len(all)-lines:]
	}
	out := make([]string, len(all))
	for i, a := range all {
		out[i] = "  " + termsafe.Line(a)
	}
	return strings.Join(out, "\n")
}

func readTail(p string, max int64) string {
	fd, err := unix.Open(p, unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
	if err != nil {
		return ""
	}
	f := os.NewFile(uintptr(fd), p)
	defer f.Close()
	fi, err := f.Stat()
	if err != nil || !fi.Mode().IsRegular() {
		return ""
	}
	off := fi.Size() - max
	if off < 0 {
		off = 0
	}
	b, _ := io.ReadAll(io.NewSectionReader(f, off, max))
	return string(b)
}

// rss is the resident memory of every process in the lab's namespaces.
func (l *Lab) rss() int64 {
	var total int64
	for _, n := range l.Nodes() {
		for _, pid := range memberPIDs(n) {
			b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
			if err != nil {
				continue
			}
			for _, line := range strings.Split(string(b), "\n") {
				if f := strings.Fields(line); len(f) >= 2 && f[0] == "VmRSS:" {
					kb, _ := strconv.ParseInt(f[1], 10, 64)
					total += kb << 10
				}
			}
		}
	}
	return total
}

// RSS is the resident memory of the lab's processes, in bytes.
func (l *Lab) RSS() int64 { return l.rss() }

// parseOption splits a --option NAME=VALUE, refusing names the lab sets
// itself to locate and wire its nodes.
func parseOption(o string) (name, value string, err error) {
	name, value, ok := strings.Cut(o, "=")
	name = strings.ReplaceAll(strings.TrimPrefix(strings.TrimSpace(name), "--"), "_", "-")
	if !ok || name == "" || !optionRE.MatchString(name) {
		return "", "", fmt.Errorf("option %q: want NAME=VALUE (a mariadbd option)", o)
	}
	if strings.ContainsAny(value, "\n\r\x00") {
		return "", "", fmt.Errorf("option %s: the value holds a control character", name)
	}
	// A server's command line is world-readable (/proc/PID/cmdline).
	if host.RedactValue(strings.ReplaceAll(name, "-", "_"), value) != value {
		return "", "", fmt.Errorf("option %s holds a secret, and every user sees a server's command line: the lab needs none (it uses rsync state transfers and socket authentication)", name)
	}
	if reserved[name] {
		return "", "", fmt.Errorf("option %s: the lab sets it itself (%s)", name, strings.Join(sortedKeys(reserved), ", "))
	}
	return name, value, nil
}

var reserved = map[string]bool{}

func init() {
	for _, n := range []string{"datadir", "socket", "port", "bind-address", "pid-file", "log-error", "tmpdir", "user",
		"basedir", "plugin-dir", "defaults-file", "defaults-extra-file", "no-defaults", "wsrep-on", "wsrep-provider",
		"wsrep-cluster-address", "wsrep-cluster-name", "wsrep-node-address", "wsrep-node-name", "wsrep-new-cluster",
		"wsrep-sst-receive-address", "wsrep-node-incoming-address", "skip-grant-tables", "init-file", "secure-file-priv"} {
		reserved[n] = true
	}
}

var optionRE = textio.LazyRegexp(`^[a-z][a-z0-9-]{0,63}$`)

// portOr3306: a lab recorded before nodes had their own port used 3306.
func portOr3306(p int) int {
	if p == 0 {
		return 3306
	}
	return p
}
