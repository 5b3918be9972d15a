// Package cli wires dbhost's commands (cobra and pflag). It holds no state
// between calls: each call builds its own command tree, so tests run
// commands in parallel.
package cli

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path"
	"runtime/debug"
	"strings"
	"syscall"

	"github.com/spf13/pflag"
	"golang.org/x/sys/unix"

	"github.com/dbhost/dbhost/internal/check"
	"github.com/dbhost/dbhost/internal/engine"
	"github.com/dbhost/dbhost/internal/facts"
	"github.com/dbhost/dbhost/internal/host"
	"github.com/dbhost/dbhost/internal/termsafe"
)

// Exit statuses.
const (
	ExitOK       = 0 // nothing at or above --fail-on
	ExitFindings = 1 // findings at or above --fail-on
	ExitError    = 2 // could not run
)

// Env is what a command may touch: its arguments and standard streams.
type Env struct {
	Stdout, Stderr io.Writer
	// Stdin is unused today; kept so tests can drive prompts later.
	Stdin io.Reader
	// Systemctl, when set, lists where `fix --apply --allow-restart` looks
	// for systemctl instead of /usr/bin and /bin (apply.Options.Systemctl).
	// Only code sets it (a test's stand-in): no flag or environment
	// variable does, since root must not run a binary others chose, and
	// the binary must still be one only root can change.
	Systemctl []string
	// Servers, when set, keeps the database servers a command sees on a
	// live host (nil: all it finds). Only code sets it: a test on a shared
	// machine plans for its private servers alone; the machine's own
	// servers, left out, count as the host's other processes.
	Servers func(*facts.Instance) bool
	// HostLock, when set, is how a command that changes the host takes the
	// host lock (nil: journal.LockContext on journal.HostLock, see lockHost). Only code sets it: a
	// test that holds the lock runs its in-process commands under its own
	// hold, so that no other suite's test changes the host in between.
	HostLock func() (release func(), err error)
	// Version is the program's version: what 'dbhost version' prints, the
	// man pages' header, dbhost_build_info and snapshot manifests carry.
	// Empty is a development build (devVersion).
	Version string
}

// devVersion is the version of a build that was not given one.
const devVersion = "dev"

// Main runs dbhost with os.Args-style arguments and returns the exit status.
func Main(args []string, env Env) int {
	if len(args) > 0 {
		args = args[1:] // the program's name
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	// Every command's human-readable output is escaped (termsafe): process
	// arguments, paths and snapshot values are written by other users.
	// Machine formats opt out with termsafe.Raw.
	stdout, stderr := termsafe.New(env.Stdout, false), termsafe.New(env.Stderr, false)
	defer stdout.Flush()
	defer stderr.Flush()
	env.Stdout, env.Stderr = stdout, stderr
	return run(ctx, env, args)
}

// listFlag collects comma-separated, repeatable values. It is not pflag's
// StringSlice, which reads each value as CSV: a quote would change what
// the value means, or fail.
type listFlag []string

func (l *listFlag) String() string { return strings.Join(*l, ",") }
func (l *listFlag) Type() string   { return "strings" }
func (l *listFlag) Set(v string) error {
	for _, p := range strings.Split(v, ",") {
		if p = strings.TrimSpace(p); p != "" {
			*l = append(*l, p)
		}
	}
	return nil
}

// sourceFlags are shared by commands that observe a host.
type sourceFlags struct {
	from      string
	root      string
	pgDSN     string
	mysqlDSN  string
	noConnect bool
	trust     listFlag
	keep      keepFlags  // fix and audit register them (keepflags.go)
	budget    budgetFlag // registered by the commands that judge memory
	// waivers: registered by audit and fix (waiverflags.go).
	waivers waiverFlags
}

func (s *sourceFlags) register(fs *pflag.FlagSet, withFrom bool) {
	s.registerHost(fs, withFrom)
	fs.StringVar(&s.pgDSN, "pg", "", "PostgreSQL connection string (default: local socket with the usual credentials)")
	fs.StringVar(&s.mysqlDSN, "mysql", "", "MySQL DSN (default: local socket with ~/.my.cnf or socket auth)")
	fs.BoolVar(&s.noConnect, "no-connect", false, "do not connect to databases; read settings from files")
	trustServerFlag(fs, &s.trust)
}

// trustServerFlag registers --trust-server: data directories of servers
// the user vouches for although they fail dbhost's trust rule.
func trustServerFlag(fs *pflag.FlagSet, v *listFlag) {
	fs.Var(v, "trust-server", "trust the server running on this data directory as its owner, although it fails the trust rule (docs/security.md); repeatable, or comma-separated")
}

// trustedDirs cleans the --trust-server directories.
func trustedDirs(l listFlag) []string {
	var out []string
	for _, d := range l {
		if d = strings.TrimSpace(d); d != "" {
			out = append(out, path.Clean(d))
		}
	}
	return out
}

// registerHost registers where to read (--from, --root) without the
// connection flags, for commands that never connect to a database.
func (s *sourceFlags) registerHost(fs *pflag.FlagSet, withFrom bool) {
	if withFrom {
		fs.StringVar(&s.from, "from", "", "read a snapshot written by 'dbhost collect' instead of this host")
	}
	fs.StringVar(&s.root, "root", "/", "root of the live filesystem to read (for chroots and tests)")
}

func (s *sourceFlags) open() (*host.Host, error) {
	if s.from != "" {
		// A snapshot may come from anywhere. Its size is capped (see
		// host.OpenSnapshot); a soft memory limit makes the collector work
		// harder rather than let parsers of large files grow the heap.
		debug.SetMemoryLimit(snapshotMemoryLimit)
		return host.OpenSnapshot(s.from)
	}
	return host.Open(s.root)
}

// gather opens the source and gathers its facts; the caller closes the
// host after judging them. When it fails, it has said why as "dbhost CMD:".
func (s *sourceFlags) gather(ctx context.Context, env Env, cmd string) (*facts.Facts, func() error, bool) {
	keep, err := s.keep.values() // before gathering, which takes seconds
	var h *host.Host
	if err == nil {
		h, err = s.open()
	}
	if err != nil {
		fmt.Fprintf(env.Stderr, "dbhost %s: %v\n", cmd, err)
		return nil, nil, false
	}
	f := facts.Gather(ctx, h, s.options())
	if env.Servers != nil && s.from == "" {
		var servers []*facts.Instance
		for _, in := range f.Instances {
			if env.Servers(in) {
				servers = append(servers, in)
			}
		}
		f = f.WithInstances(servers)
	}
	f.SysctlKeep = keep
	if err := s.budget.apply(f, s.root, s.from == "", true); err != nil {
		fmt.Fprintf(env.Stderr, "dbhost %s: %v\n", cmd, err)
		h.Close()
		return nil, nil, false
	}
	if err := s.waivers.read(h); err != nil {
		fmt.Fprintf(env.Stderr, "dbhost %s: %v\n", cmd, err)
		h.Close()
		return nil, nil, false
	}
	return f, h.Close, true
}

// snapshotMemoryLimit is the soft heap limit while judging a snapshot: an
// archive at the size limits is judged in well under 200 MB of RSS.
const snapshotMemoryLimit = 128 << 20

func (s *sourceFlags) options() facts.Options {
	return gatherOptions(engine.Options{PGDSN: s.pgDSN, MySQLDSN: s.mysqlDSN, NoConnect: s.noConnect, TrustServers: trustedDirs(s.trust)})
}

// gatherOptions are what every command gathers facts with: the engines'
// options and the kernel parameters the checks declare (check.GatherOptions,
// as fleet and the fixtures gather), which collect records and sysctl.drift
// compares.
func gatherOptions(e engine.Options) facts.Options { return check.GatherOptions(e) }

func isTerminal(w io.Writer) bool {
	f, ok := termsafe.Raw(w).(*os.File)
	if !ok {
		return false
	}
	_, err := unix.IoctlGetTermios(int(f.Fd()), unix.TCGETS)
	return err == nil
}
