package main

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/dbhost/dbhost/internal/check"
	"github.com/dbhost/dbhost/internal/engine"
	"github.com/dbhost/dbhost/internal/facts"
	"github.com/dbhost/dbhost/internal/fix"
	"github.com/dbhost/dbhost/internal/host"
	"github.com/dbhost/dbhost/internal/testdb"
)

// Host scenarios: process limits, systemd units, persisted configuration,
// network, time, TuneD and cgroups. (This VM's root lacks CAP_SYS_RESOURCE:
// no process may raise its open-files hard limit above 20000 or lower its
// oom_score_adj, so the passing nofile and OOM fixtures are derived by
// tools/derive-host.) Files written under /etc exist only
// while the scenario is recorded (tempFile removes them and any directory it
// had to create); kernel knobs go through the journal.

func init() {
	register(Scenario{
		Name:  "limits-nofile-1024",
		Note:  "private PostgreSQL started under prlimit --nofile=1024:1024",
		Setup: postgresSetup(testdb.Options{Nofile: 1024}),
	})
	register(Scenario{
		Name: "limits-nproc-low",
		Note: "private PostgreSQL whose process limit was lowered to 4096 after it started (runuser -u postgres -- prlimit --pid PID --nproc=4096:4096: lowering one's own limits needs no privilege)",
		Setup: func(r *Run) error {
			s := r.Postgres(testdb.Options{})
			return r.Command("runuser", "-u", "postgres", "--", "prlimit", "--pid", strconv.Itoa(s.PID), "--nproc=4096:4096")
		},
	})
	register(Scenario{
		Name:  "limits-filemax-low",
		Note:  "fs.file-max lowered to 50000 (678 handles were in use), below the databases' summed open-file limits of 60000",
		Setup: sysctlSetup("fs.file-max", "50000"),
	})
	register(Scenario{
		Name: "limits-unit-dropin",
		Note: "temporary files: /etc/systemd/system/mariadb.service.d/99-dbhost-test.conf (LimitNOFILE=65536, LimitNPROC=65536, TasksMax=64) and /etc/security/limits.d/99-dbhost-test.conf (postgres - nofile 65536)",
		Setup: tempFilesSetup(
			"/etc/systemd/system/mariadb.service.d/99-dbhost-test.conf", "[Service]\nLimitNOFILE=65536\nLimitNPROC=65536\nTasksMax=64\n",
			"/etc/security/limits.d/99-dbhost-test.conf", "# dbhost fixture\npostgres  -  nofile  65536\n"),
	})
	register(Scenario{
		Name: "net-tuned",
		Note: "network parameters at dbhost's targets: somaxconn 4096, tcp_max_syn_backlog 4096, tcp_keepalive_time 120, tcp_keepalive_intvl 30, tcp_fin_timeout 30",
		Setup: sysctlSetup("net.core.somaxconn", "4096", "net.ipv4.tcp_max_syn_backlog", "4096",
			"net.ipv4.tcp_keepalive_time", "120", "net.ipv4.tcp_keepalive_intvl", "30", "net.ipv4.tcp_fin_timeout", "30"),
	})
	register(Scenario{
		Name: "net-somaxconn-128",
		Note: "net.core.somaxconn 128, then a private PostgreSQL (max_connections 100: asks for a backlog of 244) and a private Redis (tcp-backlog 511) started: the kernel cut both sockets to 128; the private servers' ports are in the ephemeral range",
		Setup: func(r *Run) error {
			if err := r.Sysctl("net.core.somaxconn", "128"); err != nil {
				return err
			}
			r.Postgres(testdb.Options{Settings: map[string]string{"max_connections": "100"}})
			r.Redis(testdb.Options{})
			return nil
		},
	})
	register(Scenario{
		Name: "net-listen-all",
		Note: "private PostgreSQL with listen_addresses='*' and private Redis with bind * -::* (protected-mode yes): both listen on 0.0.0.0 and ::",
		Setup: func(r *Run) error {
			r.Postgres(testdb.Options{Settings: map[string]string{"listen_addresses": "*"}})
			r.Redis(testdb.Options{Settings: map[string]string{"bind": "* -::*"}})
			return nil
		},
	})
	register(Scenario{
		Name: "net-ports",
		Note: "private PostgreSQL on a port from the ephemeral range, reserved in net.ipv4.ip_local_reserved_ports; net.ipv4.ip_local_port_range narrowed to 5000 ports that still hold it",
		Setup: func(r *Run) error {
			s := r.Postgres(testdb.Options{})
			if err := r.Sysctl("net.ipv4.ip_local_reserved_ports", strconv.Itoa(s.Port)); err != nil {
				return err
			}
			// The free port came from the default range (32768-60999); the
			// narrowed range must still contain it for "reserved" to matter.
			lo := s.Port - 2500
			return r.Sysctl("net.ipv4.ip_local_port_range", fmt.Sprintf("%d %d", lo, lo+4999))
		},
	})
	register(Scenario{
		Name:   "net-nonroot",
		Note:   "the host collected as user nobody: the servers' socket inodes (/proc/PID/fd) are closed to it, so their listening sockets are unknown",
		AsUser: "nobody",
	})
	register(Scenario{
		Name: "persist-files",
		Note: "temporary files: /etc/sysctl.d/99-dbhost-test.conf (vm.swappiness = 10, -net.core.somaxconn = 8192, net.ipv4.tcp_fin_timeout = 30, a glob), /etc/udev/rules.d/60-dbhost-test.rules (scheduler and read-ahead for vd*), /etc/security/limits.d/99-dbhost-test.conf: the sysctl.d values differ from the running ones",
		Setup: tempFilesSetup(
			"/etc/sysctl.d/99-dbhost-test.conf", "# dbhost fixture\nvm.swappiness = 10\n-net.core.somaxconn = 8192\nnet/ipv4/tcp_fin_timeout = 30\nnet.ipv4.conf.*.rp_filter = 2\n-net.ipv4.conf.all.rp_filter\n",
			"/etc/udev/rules.d/60-dbhost-test.rules", "# dbhost fixture\nACTION==\"add|change\", SUBSYSTEM==\"block\", KERNEL==\"vd[a-z]\", \\\n  ATTR{queue/scheduler}=\"none\", ATTR{bdi/read_ahead_kb}=\"64\"\n",
			"/etc/security/limits.d/99-dbhost-test.conf", "mysql soft nofile 64000\nmysql hard nofile 64000\n@postgres - nproc 64000\n"),
	})
	register(Scenario{
		Name:  "persist-sysctl-match",
		Note:  "kernel.pid_max set to 4194304, the value /usr/lib/sysctl.d/50-pid-max.conf persists: no judged parameter differs from sysctl.d",
		Setup: sysctlSetup("kernel.pid_max", "4194304"),
	})
	register(Scenario{
		Name:  "tuned-profile",
		Note:  "fake TuneD configuration, no daemon: /etc/tuned/active_profile dbhost-test-guest, which includes dbhost-test-base; their values copy TuneD's throughput-performance and virtual-guest profiles (swappiness 30, dirty_ratio 30, THP always, readahead >4096); reapply_sysctl default",
		Setup: func(r *Run) error { return fakeTuned(r, "dbhost-test-guest", "") },
	})
	register(Scenario{
		Name: "tuned-noreapply",
		Note: "the tuned-profile configuration plus /etc/tuned/tuned-main.conf reapply_sysctl = 0 and /etc/sysctl.d/99-dbhost-test.conf vm.swappiness = 1: TuneD's 30 wins at boot",
		Setup: func(r *Run) error {
			if err := fakeTuned(r, "dbhost-test-guest", "reapply_sysctl = 0\n"); err != nil {
				return err
			}
			return tempFile(r, "/etc/sysctl.d/99-dbhost-test.conf", "vm.swappiness = 1\n")
		},
	})
	register(Scenario{
		Name: "tuned-fixed",
		Note: "the tuned-profile configuration with the child profile dbhost's fix renders for tuned.overrides (/etc/tuned/dbhost/tuned.conf, written from the live finding) made active: what the host looks like after applying the fix",
		Setup: func(r *Run) error {
			if err := fakeTuned(r, "dbhost-test-guest", ""); err != nil {
				return err
			}
			return applyTunedFix(r)
		},
	})
	register(Scenario{
		Name:  "tuned-missing",
		Note:  "/etc/tuned/active_profile names a profile that exists nowhere (dbhost-test-absent)",
		Setup: func(r *Run) error { return tempFile(r, "/etc/tuned/active_profile", "dbhost-test-absent\n") },
	})
	register(Scenario{
		Name:  "time-chrony",
		Note:  "chronyd (Debian's chrony 4.3, run from its unpacked package, -u root, no rtcsync) disciplining the clock from a SOCK reference clock fed offset 0 by the recorder, because this VM reaches no NTP server; stopped afterwards and the kernel clock state (adjtimex status, frequency, errors) restored",
		Setup: func(r *Run) error { return runChrony(r, true) },
	})
	register(Scenario{
		Name:  "time-chrony-nosource",
		Note:  "chronyd with Debian's pool servers, which this VM cannot reach (UDP 123 blocked): running, never synchronised; stopped afterwards and the clock state restored",
		Setup: func(r *Run) error { return runChrony(r, false) },
	})
	register(Scenario{
		Name: "container-memlimit",
		Note: "real cgroup v1 limits: /sys/fs/cgroup/memory/dbhost-test (memory.limit_in_bytes 300 MiB), cpu/dbhost-test (cfs_quota 50000 of 100000), pids/dbhost-test (pids.max 500); a private PostgreSQL with shared_buffers 256MB and a private Redis without maxmemory moved into them",
		Setup: func(r *Run) error {
			if err := cgroupsV1(r, 300<<20); err != nil {
				return err
			}
			pg := r.Postgres(testdb.Options{Settings: map[string]string{"shared_buffers": "256MB"}})
			rd := r.Redis(testdb.Options{})
			return joinCgroups(pg.PID, rd.PID)
		},
	})
	register(Scenario{
		Name: "container-memlimit-ok",
		Note: "real cgroup v1 limits as in container-memlimit but memory.limit_in_bytes 1 GiB; a private PostgreSQL (shared_buffers 32MB) and a private Redis with maxmemory 100mb moved into them",
		Setup: func(r *Run) error {
			if err := cgroupsV1(r, 1<<30); err != nil {
				return err
			}
			pg := r.Postgres(testdb.Options{})
			rd := r.Redis(testdb.Options{Settings: map[string]string{"maxmemory": "100mb"}})
			return joinCgroups(pg.PID, rd.PID)
		},
	})
}

// tempFile writes a file that must not exist yet and removes it (and the
// directories it had to create) after collection.
func tempFile(r *Run, path, content string) error {
	if _, err := os.Lstat(path); err == nil {
		return fmt.Errorf("%s exists already: refusing to overwrite it", path)
	}
	var created []string
	for d := filepath.Dir(path); ; d = filepath.Dir(d) {
		if _, err := os.Stat(d); err == nil {
			break
		}
		created = append(created, d)
	}
	r.Cleanup(func() {
		os.Remove(path)
		for _, d := range created { // deepest first
			os.Remove(d)
		}
	})
	for i := len(created) - 1; i >= 0; i-- {
		if err := os.Mkdir(created[i], 0o755); err != nil {
			return err
		}
	}
	return os.WriteFile(path, []byte(content), 0o644)
}

// tempFilesSetup writes temporary files (path, content pairs, in order)
// with tempFile.
func tempFilesSetup(kv ...string) func(*Run) error {
	return func(r *Run) error {
		for i := 0; i+1 < len(kv); i += 2 {
			if err := tempFile(r, kv[i], kv[i+1]); err != nil {
				return err
			}
		}
		return nil
	}
}

// Profiles for the fake TuneD configuration. Their values are those of
// TuneD's shipped throughput-performance and virtual-guest profiles, which
// RHEL hosts run by default.
const (
	tunedBase = `#
# dbhost fixture: the values of TuneD's throughput-performance profile
#
[main]
summary=Broadly applicable tuning that provides excellent performance across a variety of common server workloads

[cpu]
governor=performance
energy_perf_bias=performance
min_perf_pct=100

[vm]
transparent_hugepages=always

[disk]
readahead=>4096

[sysctl]
kernel.sched_min_granularity_ns = 10000000
kernel.sched_wakeup_granularity_ns = 15000000
vm.dirty_ratio = 40
vm.dirty_background_ratio = 10
vm.swappiness=10
`
	tunedGuest = `#
# dbhost fixture: the values of TuneD's virtual-guest profile
#
[main]
summary=Optimize for running inside a virtual guest
include=dbhost-test-base

[sysctl]
vm.dirty_ratio = 30
vm.swappiness = 30
`
)

// fakeTuned writes /etc/tuned with an active profile and its parent. No
// daemon is started: dbhost reads the configuration TuneD would apply.
func fakeTuned(r *Run, active, mainConf string) error {
	if _, err := os.Stat("/etc/tuned"); err == nil {
		return errors.New("/etc/tuned exists: this host has TuneD configured, refusing to fake one")
	}
	files := map[string]string{
		"/etc/tuned/active_profile":               active + "\n",
		"/etc/tuned/profile_mode":                 "manual\n",
		"/etc/tuned/dbhost-test-base/tuned.conf":  tunedBase,
		"/etc/tuned/dbhost-test-guest/tuned.conf": tunedGuest,
	}
	if mainConf != "" {
		files["/etc/tuned/tuned-main.conf"] = mainConf
	}
	names := make([]string, 0, len(files))
	for p := range files {
		names = append(names, p)
	}
	sort.Strings(names)
	for _, p := range names {
		if err := tempFile(r, p, files[p]); err != nil {
			return err
		}
	}
	return nil
}

// applyTunedFix gathers the live facts, runs tuned.overrides, writes the
// child profile its fix renders and activates it, as tuned-adm profile
// dbhost would.
func applyTunedFix(r *Run) error {
	h, err := host.Open("/")
	if err != nil {
		return err
	}
	f := facts.Gather(context.Background(), h, check.GatherOptions(engine.Options{}))
	fds := check.Run(f, check.Selector{Only: []string{"tuned.overrides"}})
	check.RenderFixes(fds, fix.ContextFrom(f))
	for _, fd := range fds {
		if fd.Status != check.Fail || fd.Fix == nil {
			continue
		}
		for _, file := range fd.Fix.Files {
			if file.Path == "/etc/tuned/dbhost/tuned.conf" {
				if err := tempFile(r, file.Path, file.Content); err != nil {
					return err
				}
				return os.WriteFile("/etc/tuned/active_profile", []byte("dbhost\n"), 0o644)
			}
		}
	}
	return errors.New("tuned.overrides rendered no child profile")
}

// runChrony runs chronyd from Debian's package (installed, or unpacked into
// a temporary directory so that the host's package set stays as it is) with
// a private configuration. With ref, a SOCK reference clock fed offset 0
// lets it discipline the clock without changing the time; without, it uses
// the Debian pool, unreachable from this VM. The kernel's clock state is
// saved first and restored after chronyd stopped.
func runChrony(r *Run, ref bool) error {
	bin, err := chronydBinary(r)
	if err != nil {
		return err
	}
	dir, err := tempDir(r, "dbhost-chrony-")
	if err != nil {
		return err
	}
	var saved unix.Timex
	if _, err := unix.Adjtimex(&saved); err != nil {
		return err
	}
	r.Cleanup(func() { restoreClock(saved) })
	run := filepath.Join(dir, "run")
	if err := os.Mkdir(run, 0o700); err != nil {
		return err
	}
	refSock := filepath.Join(run, "ref.sock")
	conf := fmt.Sprintf("pidfile %s/chronyd.pid\nbindcmdaddress %s/chronyd.sock\ncmdport 0\nport 0\n", dir, run)
	if ref {
		conf += fmt.Sprintf("refclock SOCK %s refid TEST poll 0 dpoll -2 precision 1e-6\n", refSock)
	} else {
		conf += "pool 2.debian.pool.ntp.org iburst\n"
	}
	cf := filepath.Join(dir, "chrony.conf")
	if err := os.WriteFile(cf, []byte(conf), 0o600); err != nil {
		return err
	}
	log, err := os.Create(filepath.Join(dir, "chronyd.log"))
	if err != nil {
		return err
	}
	defer log.Close()
	cmd := exec.Command(bin, "-u", "root", "-f", cf, "-d")
	cmd.Stdout, cmd.Stderr = log, log
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		return err
	}
	done := make(chan struct{})
	go func() { cmd.Wait(); close(done) }()
	stop := make(chan struct{})
	r.Cleanup(func() {
		close(stop)
		cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			cmd.Process.Kill()
			<-done
		}
	})
	if !ref {
		time.Sleep(5 * time.Second) // let it try its sources
		return nil
	}
	go feedReference(refSock, stop)
	deadline := time.Now().Add(60 * time.Second)
	for time.Now().Before(deadline) {
		var tx unix.Timex
		if _, err := unix.Adjtimex(&tx); err == nil && int64(tx.Maxerror) < facts.MaxErrorLimitUS {
			time.Sleep(3 * time.Second) // a few more updates
			return nil
		}
		select {
		case <-done:
			b, _ := os.ReadFile(log.Name())
			return fmt.Errorf("chronyd exited: %s", b)
		case <-time.After(500 * time.Millisecond):
		}
	}
	return errors.New("chronyd did not discipline the clock within 60 s")
}

// chronydBinary finds chronyd, or unpacks Debian's package without
// installing it (installing chrony would remove systemd-timesyncd).
func chronydBinary(r *Run) (string, error) {
	if p, err := exec.LookPath("chronyd"); err == nil {
		return p, nil
	}
	dir, err := tempDir(r, "dbhost-chrony-pkg-")
	if err != nil {
		return "", err
	}
	get := exec.Command("apt-get", "download", "chrony")
	get.Dir = dir
	if out, err := get.CombinedOutput(); err != nil {
		return "", fmt.Errorf("apt-get download chrony: %v: %s", err, out)
	}
	debs, _ := filepath.Glob(filepath.Join(dir, "chrony_*.deb"))
	if len(debs) == 0 {
		return "", errors.New("apt-get download chrony left no package")
	}
	if err := r.Command("dpkg-deb", "-x", debs[0], filepath.Join(dir, "root")); err != nil {
		return "", err
	}
	return filepath.Join(dir, "root/usr/sbin/chronyd"), nil
}

// feedReference sends chronyd's SOCK refclock samples (struct sock_sample:
// timeval, offset, pulse, leap, padding, magic) saying the system clock is
// exact, five times a second, until stop is closed.
func feedReference(path string, stop <-chan struct{}) {
	var c *net.UnixConn
	for c == nil {
		var err error
		c, err = net.DialUnix("unixgram", nil, &net.UnixAddr{Name: path, Net: "unixgram"})
		if err != nil {
			select {
			case <-stop:
				return
			case <-time.After(100 * time.Millisecond):
				continue
			}
		}
	}
	defer c.Close()
	ne := binary.NativeEndian
	for {
		now := time.Now()
		b := make([]byte, 40)
		ne.PutUint64(b[0:], uint64(now.Unix()))
		ne.PutUint64(b[8:], uint64(now.Nanosecond()/1000))
		ne.PutUint64(b[16:], math.Float64bits(0))
		ne.PutUint32(b[36:], 0x534f434b) // "SOCK"
		c.Write(b)
		select {
		case <-stop:
			return
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// restoreClock puts back the kernel's clock discipline state (status bits,
// frequency, error estimates, tick); the time itself was never stepped.
func restoreClock(old unix.Timex) {
	tx := unix.Timex{
		Modes:  unix.ADJ_STATUS | unix.ADJ_FREQUENCY | unix.ADJ_MAXERROR | unix.ADJ_ESTERROR | unix.ADJ_TICK | unix.ADJ_OFFSET,
		Status: old.Status, Freq: old.Freq, Maxerror: old.Maxerror, Esterror: old.Esterror, Tick: old.Tick,
	}
	if _, err := unix.Adjtimex(&tx); err != nil {
		fmt.Fprintf(os.Stderr, "restore adjtimex state: %v\n", err)
	}
}

// cgroupControllers are the v1 hierarchies the container scenarios use.
var cgroupControllers = []string{"memory", "cpu", "pids"}

// cgroupsV1 creates /sys/fs/cgroup/{memory,cpu,pids}/dbhost-test with
// limits; the groups are removed after the servers in them stopped (their
// cleanup is registered first, so it runs last).
func cgroupsV1(r *Run, memLimit int64) error {
	for _, c := range cgroupControllers {
		if _, err := os.Stat(filepath.Join("/sys/fs/cgroup", c)); err != nil {
			return fmt.Errorf("cgroup v1 %s hierarchy: %w", c, err)
		}
	}
	for _, c := range cgroupControllers {
		dir := filepath.Join("/sys/fs/cgroup", c, "dbhost-test")
		if err := os.Mkdir(dir, 0o755); err != nil {
			return err
		}
		r.Cleanup(func() {
			var err error
			for i := 0; i < 50; i++ { // the servers' last tasks may still be exiting
				if err = os.Remove(dir); err == nil || os.IsNotExist(err) {
					return
				}
				time.Sleep(100 * time.Millisecond)
			}
			fmt.Fprintf(os.Stderr, "remove %s: %v\n", dir, err)
		})
	}
	for p, v := range map[string]string{
		"memory/dbhost-test/memory.limit_in_bytes": strconv.FormatInt(memLimit, 10),
		"cpu/dbhost-test/cpu.cfs_quota_us":         "50000",
		"pids/dbhost-test/pids.max":                "500",
	} {
		if err := os.WriteFile(filepath.Join("/sys/fs/cgroup", p), []byte(v), 0o644); err != nil {
			return fmt.Errorf("%s: %w", p, err)
		}
	}
	return nil
}

// joinCgroups moves processes into the dbhost-test groups.
func joinCgroups(pids ...int) error {
	for _, pid := range pids {
		for _, c := range cgroupControllers {
			p := filepath.Join("/sys/fs/cgroup", c, "dbhost-test", "cgroup.procs")
			if err := os.WriteFile(p, []byte(strconv.Itoa(pid)), 0o644); err != nil {
				return fmt.Errorf("move %d to %s: %w", pid, p, err)
			}
		}
	}
	return nil
}
