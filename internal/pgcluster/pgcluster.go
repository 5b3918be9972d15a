// Package pgcluster runs a throwaway PostgreSQL cluster for experiments: the
// system's own server binaries, a private directory, a free port, the
// postgres OS user (PostgreSQL refuses to run as root), and settings sized to
// this host. Nothing outside its directory is touched, and the journal knows
// how to stop and remove it from the recorded data alone, also after the
// process that made it was killed.
//
// Layout of a cluster directory (mode 0700, owned by postgres):
//
//	DIR/.dbhost-pgcluster   marker with a random token (the undo's proof of ownership)
//	DIR/data/               the data directory (initdb)
//	DIR/.s.PGSQL.PORT       the Unix socket (the only listener: no TCP)
//	DIR/server.log          the server's log
//
// Sizing (see Size): shared_buffers is 25 % of MemTotal, capped at 4 GiB
// and at half of MemAvailable, at least 128 MiB. The huge page experiments
// are why: huge pages matter when shared_buffers is large enough that its
// page tables and TLB misses cost something (hundreds of MB and up), yet the
// segment must stay small enough that 2 MB and 1 GB pages for all of it can
// still be reserved at runtime on a small VM, where free memory soon
// fragments and few contiguous gigabytes remain; a cluster that took most of
// the memory would also push the rest of the host into swap and measure that
// instead. max_connections follows Options.MaxClients, because every
// connection slot adds to the shared segment too. fsync and
// synchronous_commit stay on unless Options.Settings says otherwise:
// experiments measure real durability costs.
//
// Settings live in DATA/dbhost.conf, included at the end of postgresql.conf,
// so that a plain `pg_ctl restart` (RestartArgv) starts the server as Create
// did, and ALTER SYSTEM (postgresql.auto.conf, read last) still overrides
// them.
package pgcluster

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/dbhost/dbhost/internal/engine"
	"github.com/dbhost/dbhost/internal/host"
	"github.com/dbhost/dbhost/internal/journal"
	"github.com/dbhost/dbhost/internal/pgcluster/pgbin"
	"github.com/dbhost/dbhost/internal/safefile"
	"github.com/dbhost/dbhost/internal/workload"
)

// OSUser is the system user the cluster runs as.
const OSUser = "postgres"

// BenchDB is the database Create makes for benchmarks; Target names it.
const BenchDB = workload.DefaultDB

// startTimeout bounds a start (crash recovery after an immediate shutdown
// included) when the context has no earlier deadline.
const startTimeout = 2 * time.Minute

// Options configure a cluster. Zero values are sized to the host.
type Options struct {
	// Dir is the parent of the cluster's directory (default os.TempDir()).
	// The postgres user must be able to reach it. Put it on the storage the
	// experiment is about: on tmpfs, fsync costs nothing.
	Dir string
	// SharedBuffers in bytes; 0 sizes it to the host (see Size).
	SharedBuffers uint64
	// MaxClients is the most benchmark clients that will connect at once;
	// max_connections is sized for it (0: 100).
	MaxClients int
	// Settings are extra server settings written after the sized ones
	// (later wins), e.g. {"fsync": "off"}. Settings that locate the
	// cluster (port, unix_socket_directories, data_directory, ...) are
	// refused.
	Settings map[string]string
}

// Cluster is a running throwaway cluster. Its methods are not safe for
// concurrent use.
type Cluster struct {
	// WorkDir, when set, is where Load's pgbench keeps its private
	// directory (a caller that may be killed cleans it up itself).
	WorkDir   string
	Dir       string // the private directory holding everything
	DataDir   string
	SocketDir string // the Unix socket's directory (Dir)
	LogFile   string
	Port      int
	PID       int    // the postmaster's PID (changes on Restart)
	Bin       string // PostgreSQL's bin directory
	Version   string // server_version, e.g. "15.14"
	// SharedBuffers is the server's shared_buffers in bytes, as it
	// reported it after Create or the last Restart.
	SharedBuffers uint64
	Sizing        Sizing
	// Warnings describe conditions that make measurements on this cluster
	// less meaningful (a data directory on tmpfs).
	Warnings []string

	rec      Record
	uid, gid int
	cred     *syscall.Credential
	exited   chan struct{} // closed when the postmaster this process started exits
}

// Create journals the cluster (kind "pgcluster": directory, marker, port,
// bin directory) before making anything, then creates its directory,
// runs initdb, starts the server, waits until it accepts connections and
// creates BenchDB. On failure, what was made is removed again (the journal
// entry's undo is idempotent, so a later Restore is harmless).
func Create(ctx context.Context, j *journal.Journal, o Options) (*Cluster, error) {
	if j == nil {
		return nil, errors.New("pgcluster: a journal is required (the cluster must be removable after a crash)")
	}
	if err := checkSettings(o.Settings); err != nil {
		return nil, err
	}
	bin, err := pgbin.Dir()
	if err != nil {
		return nil, fmt.Errorf("pgcluster: %w", err)
	}
	c := &Cluster{Bin: bin}
	if err := c.lookupUser(); err != nil {
		return nil, err
	}
	parent := o.Dir
	if parent == "" {
		parent = os.TempDir()
	}
	if parent, err = filepath.Abs(parent); err != nil {
		return nil, err
	}
	if err := reachable(parent, c.uid, c.gid); err != nil {
		return nil, err
	}
	h, err := host.Open("/")
	if err != nil {
		return nil, err
	}
	if c.Sizing, err = hostSizing(h, parent, o); err != nil {
		return nil, fmt.Errorf("pgcluster: %w", err)
	}
	if st, err := h.Statfs(parent); err == nil && st.Type == tmpfsMagic && o.Settings["fsync"] != "off" {
		c.Warnings = append(c.Warnings, parent+" is on tmpfs: fsync and WAL writes cost nothing there, unlike on a disk")
	}
	token, err := randomHex(16)
	if err != nil {
		return nil, err
	}
	name, err := randomHex(6)
	if err != nil {
		return nil, err
	}
	if c.Port, err = freePort(); err != nil {
		return nil, fmt.Errorf("pgcluster: free port: %w", err)
	}
	c.Dir = filepath.Join(parent, dirPrefix+name)
	c.DataDir = filepath.Join(c.Dir, "data")
	c.SocketDir = c.Dir
	c.LogFile = filepath.Join(c.Dir, "server.log")
	c.rec = Record{Dir: c.Dir, Marker: MarkerName, Token: "dbhost pgcluster " + token, Port: c.Port, Bin: bin}
	if err := j.Record(Kind, "throwaway PostgreSQL cluster in "+c.Dir, c.rec); err != nil {
		return nil, fmt.Errorf("pgcluster: journal: %w", err)
	}
	if err := c.make(ctx, o); err != nil {
		if uerr := c.rec.undo(defaultStop); uerr != nil {
			err = fmt.Errorf("%w (and cleaning up: %v; `dbhost experiment recover` retries)", err, uerr)
		}
		return nil, err
	}
	return c, nil
}

// tmpfsMagic is TMPFS_MAGIC from statfs(2).
const tmpfsMagic = 0x01021994

// make does everything Create journaled.
func (c *Cluster) make(ctx context.Context, o Options) error {
	if err := os.Mkdir(c.Dir, 0o700); err != nil {
		return fmt.Errorf("pgcluster: %w", err)
	}
	if err := safefile.WriteBytes(filepath.Join(c.Dir, MarkerName), 0o600, []byte(c.rec.Token+"\n")); err != nil {
		return fmt.Errorf("pgcluster: marker: %w", err)
	}
	if err := os.Chown(c.Dir, c.uid, c.gid); err != nil {
		return fmt.Errorf("pgcluster: give %s to %s: %w", c.Dir, OSUser, err)
	}
	if err := c.run(ctx, filepath.Join(c.Bin, "initdb"), "-D", c.DataDir, "-U", OSUser, "--auth=trust",
		"-E", "UTF8", "--locale=C.UTF-8", "--no-sync", "--no-instructions"); err != nil {
		return err
	}
	if err := c.writeConf(o); err != nil {
		return err
	}
	lf, err := os.OpenFile(c.LogFile, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return fmt.Errorf("pgcluster: %w", err)
	}
	lf.Close()
	if err := os.Chown(c.LogFile, c.uid, c.gid); err != nil {
		return fmt.Errorf("pgcluster: %w", err)
	}
	if err := c.start(ctx); err != nil {
		return err
	}
	if err := c.readServer(ctx); err != nil {
		return err
	}
	conn, err := c.connect(ctx, "postgres")
	if err != nil {
		return err
	}
	defer conn.Close(context.Background())
	if _, err := conn.Exec(ctx, `CREATE DATABASE "`+BenchDB+`"`); err != nil {
		return fmt.Errorf("pgcluster: create database %s: %w", BenchDB, err)
	}
	return nil
}

// readServer reads what the running server says about itself: its version
// and shared_buffers (which ALTER SYSTEM and a restart may have changed).
func (c *Cluster) readServer(ctx context.Context) error {
	conn, err := c.connect(ctx, "postgres")
	if err != nil {
		return err
	}
	defer conn.Close(context.Background())
	var sb int64
	if err := conn.QueryRow(ctx, `SELECT setting::bigint * current_setting('block_size')::bigint FROM pg_settings WHERE name = 'shared_buffers'`).Scan(&sb); err != nil {
		return fmt.Errorf("pgcluster: reading shared_buffers: %w", err)
	}
	c.SharedBuffers = uint64(sb)
	if err := conn.QueryRow(ctx, "SHOW server_version").Scan(&c.Version); err != nil {
		return fmt.Errorf("pgcluster: reading server_version: %w", err)
	}
	c.Version, _, _ = strings.Cut(c.Version, " ")
	return nil
}

func (c *Cluster) lookupUser() error {
	u, err := user.Lookup(OSUser)
	if err != nil {
		return fmt.Errorf("pgcluster: system user %s: %w (is PostgreSQL installed?)", OSUser, err)
	}
	c.uid, _ = strconv.Atoi(u.Uid)
	c.gid, _ = strconv.Atoi(u.Gid)
	switch os.Geteuid() {
	case c.uid: // already the postgres user: nothing to switch
	case 0:
		c.cred = &syscall.Credential{Uid: uint32(c.uid), Gid: uint32(c.gid)}
	default:
		return fmt.Errorf("pgcluster: needs root (to run the server as %s) or the %s user", OSUser, OSUser)
	}
	return nil
}

// reachable checks that the postgres user can enter every directory on the
// way to dir, so initdb fails here with a clear message rather than with
// "permission denied" somewhere deep.
func reachable(dir string, uid, gid int) error {
	for d := dir; ; d = filepath.Dir(d) {
		st, err := os.Stat(d)
		if err != nil {
			return fmt.Errorf("pgcluster: %w", err)
		}
		if !st.IsDir() {
			return fmt.Errorf("pgcluster: %s is not a directory", d)
		}
		sys, ok := st.Sys().(*syscall.Stat_t)
		if ok {
			m := st.Mode().Perm()
			var x bool
			switch {
			case int(sys.Uid) == uid:
				x = m&0o100 != 0
			case int(sys.Gid) == gid:
				x = m&0o010 != 0
			default:
				x = m&0o001 != 0
			}
			if !x {
				return fmt.Errorf("pgcluster: the %s user cannot enter %s (mode %s): choose another directory", OSUser, d, m)
			}
		}
		if d == filepath.Dir(d) {
			return nil
		}
	}
}

func randomHex(n int) (string, error) {
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		return "", err
	}
	return hex.EncodeToString(b), nil
}

// freePort asks the kernel for an unused TCP port. The server listens on
// its Unix socket only, whose name includes the port; a port free on TCP
// keeps the name unambiguous should a listener be enabled later.
func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// env is the environment of the server programs: nothing of dbhost's own
// (no PG* variables, no secrets), messages in plain C.
func env() []string {
	e := []string{"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", "LC_ALL=C"}
	if tz, ok := os.LookupEnv("TZ"); ok {
		e = append(e, "TZ="+tz)
	}
	return e
}

// run runs a PostgreSQL program as the postgres user and waits for it.
func (c *Cluster) run(ctx context.Context, name string, args ...string) error {
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Credential: c.cred}
	cmd.Dir = "/"
	cmd.Env = env()
	out, err := cmd.CombinedOutput()
	if err != nil {
		return fmt.Errorf("pgcluster: %s: %w\n%s", filepath.Base(name), err, tail(string(out), 20))
	}
	return nil
}

// writeConf writes DATA/dbhost.conf and includes it from postgresql.conf.
func (c *Cluster) writeConf(o Options) error {
	conf := confFile(c.Sizing, c.Sizing.settings(c.Port, c.SocketDir), o.Settings)
	own := filepath.Join(c.DataDir, "dbhost.conf")
	if err := safefile.WriteBytes(own, 0o600, []byte(conf)); err != nil {
		return fmt.Errorf("pgcluster: %w", err)
	}
	main := filepath.Join(c.DataDir, "postgresql.conf")
	b, err := os.ReadFile(main)
	if err != nil {
		return fmt.Errorf("pgcluster: %w", err)
	}
	b = append(b, "\n# Settings of dbhost's experiment cluster (ALTER SYSTEM still overrides them)\ninclude 'dbhost.conf'\n"...)
	if err := safefile.WriteBytes(main, 0o600, b); err != nil {
		return fmt.Errorf("pgcluster: %w", err)
	}
	for _, f := range []string{own, main} {
		if err := os.Chown(f, c.uid, c.gid); err != nil {
			return fmt.Errorf("pgcluster: %w", err)
		}
	}
	return nil
}

// start starts the postmaster as the postgres user, in its own process
// group (a Ctrl-C at the terminal must not reach it before dbhost has put
// the host back), and waits until it is ready. The postmaster is not tied
// to this process: if dbhost is killed, it keeps running until recovery
// stops it.
func (c *Cluster) start(ctx context.Context) error {
	lf, err := os.OpenFile(c.LogFile, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		return fmt.Errorf("pgcluster: %w", err)
	}
	defer lf.Close()
	cmd := exec.Command(filepath.Join(c.Bin, "postgres"), "-D", c.DataDir)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Credential: c.cred}
	cmd.Dir = c.DataDir
	cmd.Env = env()
	cmd.Stdout, cmd.Stderr = lf, lf
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("pgcluster: start postgres: %w", err)
	}
	exited := make(chan struct{})
	go func() { cmd.Wait(); close(exited) }()
	c.exited = exited
	pid := cmd.Process.Pid

	ctx, cancel := context.WithTimeout(ctx, startTimeout)
	defer cancel()
	for {
		if pf, err := readPIDFile(c.DataDir); err == nil && pf.PID == pid && pf.Status == "ready" {
			c.PID = pid
			return nil
		}
		select {
		case <-exited:
			return fmt.Errorf("pgcluster: postgres exited during startup; log:\n%s", c.logTail(20))
		case <-ctx.Done():
			// A half-started server must not outlive the failed start.
			syscall.Kill(pid, syscall.SIGQUIT)
			select {
			case <-exited:
			case <-time.After(defaultStop.quit):
				syscall.Kill(pid, syscall.SIGKILL)
			}
			return fmt.Errorf("pgcluster: postgres not ready: %w; log:\n%s", ctx.Err(), c.logTail(20))
		case <-time.After(50 * time.Millisecond):
		}
	}
}

func (c *Cluster) logTail(n int) string {
	b, _ := os.ReadFile(c.LogFile)
	return tail(string(b), n)
}

func tail(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// Target is how workloads reach the cluster: its socket, the postgres
// superuser (trust authentication on the private socket, no password), the
// tools run as the postgres OS user, database BenchDB.
func (c *Cluster) Target() workload.Target {
	return workload.Target{Engine: engine.Postgres, Host: c.SocketDir, Port: c.Port, User: OSUser, DB: BenchDB, OSUser: OSUser}
}

// Restart stops the server with a fast shutdown and starts it again with the
// same arguments (settings changed with ALTER SYSTEM take effect), waits
// until it accepts connections, and updates c.PID and c.SharedBuffers. It
// also works after another process restarted the server (postmaster.pid
// names the one to stop). Buffers are cold afterwards: call Prewarm.
func (c *Cluster) Restart(ctx context.Context) error {
	h, err := host.Open("/")
	if err != nil {
		return err
	}
	if err := stopPostmaster(h, c.DataDir, defaultStop); err != nil {
		return fmt.Errorf("pgcluster: stop: %w", err)
	}
	c.PID = 0
	if err := c.start(ctx); err != nil {
		return err
	}
	return c.readServer(ctx)
}

// RestartArgv is how another process (a recovery, a knob's undo) restarts
// the cluster: run argv as the OS user returned, with "/" as the working
// directory. pg_ctl restarts the server with the options it was started
// with (postmaster.opts: only -D, all settings are in the configuration
// files), waits until it is ready, and logs to the cluster's log.
func (c *Cluster) RestartArgv() (argv []string, osUser string) {
	return []string{filepath.Join(c.Bin, "pg_ctl"), "restart", "-D", c.DataDir, "-m", "fast", "-w",
		"-t", strconv.Itoa(int(startTimeout / time.Second)), "-l", c.LogFile}, OSUser
}

// Remove stops the server and removes the cluster's directory now; the
// journal entry stays and its undo finds nothing left to do. The stop is
// not cut short by ctx: a cluster must not be left half removed.
func (c *Cluster) Remove(context.Context) error {
	if err := c.rec.undo(defaultStop); err != nil {
		return fmt.Errorf("pgcluster: %w", err)
	}
	c.PID = 0
	return nil
}
