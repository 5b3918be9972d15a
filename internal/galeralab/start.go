package galeralab

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"time"

	"github.com/dbhost/dbhost/internal/journal"
	"github.com/dbhost/dbhost/internal/safefile"
	"github.com/dbhost/dbhost/internal/termsafe"
)

// Deadlines of a start: a bootstrap runs InnoDB's first start; a joiner
// waits for a state transfer and may wait for a donor.
const (
	bootstrapTimeout = 90 * time.Second
	joinTimeout      = 120 * time.Second
)

// Start makes a lab and returns when every data node is Synced in one
// Primary component of all members (garbd included). A lab of the same
// name left by an earlier run (a crash, a Lab never stopped) is removed
// first. On failure, everything made is removed again.
func Start(ctx context.Context, cfg Config) (*Lab, error) {
	t0 := time.Now()
	if err := cfg.normalize(); err != nil {
		return nil, err
	}
	if os.Geteuid() != 0 {
		return nil, errors.New("the lab needs root (network namespaces, servers run as the mysql user)")
	}
	b, err := trustedBins()
	if err != nil {
		return nil, err
	}
	if cfg.Arbitrator {
		if err := checkGarbd(); err != nil {
			return nil, err
		}
	}
	uid, gid, err := mysqlIDs()
	if err != nil {
		return nil, err
	}
	unlock, err := lockLab(cfg.Name)
	if err != nil {
		return nil, err
	}
	defer unlock()
	l := &Lab{root: cfg.Root, name: cfg.Name, dir: filepath.Join(cfg.Root, cfg.Name), log: cfg.Log,
		suspect: cfg.SuspectTimeout, bins: b, procs: map[string]*proc{}, t0: t0}
	// The root is checked before any journal in it is believed.
	if err := prepareRoot(cfg.Root); err != nil {
		return nil, err
	}
	if _, err := os.Lstat(journalFile(cfg.Root, cfg.Name)); err == nil {
		l.logf("removing what an earlier lab of this name left")
	}
	if err := removeStale(cfg.Root, cfg.Name); err != nil {
		return nil, fmt.Errorf("lab %s: removing an earlier lab of this name: %w", cfg.Name, err)
	}
	if _, err := os.Lstat(l.dir); err == nil {
		return nil, fmt.Errorf("%s exists and no lab journal names it: not touching it", l.dir)
	}
	if l.j, err = journal.Open(journalFile(cfg.Root, cfg.Name), kinds()); err != nil {
		return nil, err
	}
	if err := l.make(ctx, cfg, uid, gid); err != nil {
		if rerr := l.j.Restore(); rerr != nil {
			err = fmt.Errorf("%w (and removing the half-made lab: %v; `dbhost lab galera --stop --name %s` retries)", err, rerr, cfg.Name)
		}
		for _, p := range l.procs {
			p.reaped(5 * time.Second)
		}
		return nil, err
	}
	l.start = time.Since(t0)
	l.st.StartSeconds = l.start.Seconds()
	if err := l.saveState(); err != nil {
		return nil, err
	}
	l.logf("started in %v", l.start.Round(time.Millisecond))
	return l, nil
}

// prepareRoot makes the labs' root directory: root's own, mode 0711 (the
// mysql user reaches its own directories below, lists nothing).
func prepareRoot(root string) error {
	if err := checkRoot(root); err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	d, err := safefile.OpenDir(root)
	if err != nil {
		return fmt.Errorf("lab root %s: %w", root, err)
	}
	d.Close()
	if err := os.Chmod(root, 0o711); err != nil {
		return err
	}
	// The servers run as mysql: every directory above theirs must let
	// others through, or they fail later with a bare "permission denied".
	for p := filepath.Dir(root); ; p = filepath.Dir(p) {
		fi, err := os.Stat(p)
		if err != nil {
			return err
		}
		if fi.Mode().Perm()&0o001 == 0 {
			return fmt.Errorf("lab root %s: the mysql user cannot pass through %s (mode %s): choose another root", root, p, fi.Mode().Perm())
		}
		if p == "/" {
			return nil
		}
	}
}

// checkRoot refuses a labs' root that someone other than root could
// write in (a journal planted there would direct root's undos): the
// directory must be root's and writable by nobody else, every directory
// above it root's or sticky (safefile.OpenDir).
func checkRoot(root string) error {
	fi, err := os.Lstat(root)
	if err != nil {
		return err
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !fi.IsDir() || !ok || int(st.Uid) != os.Geteuid() || fi.Mode().Perm()&0o022 != 0 {
		return fmt.Errorf("lab root %s is not a directory only root can write in (%s)", root, fi.Mode())
	}
	d, err := safefile.OpenDir(root)
	if err != nil {
		return fmt.Errorf("lab root %s: %w", root, err)
	}
	return d.Close()
}

func randomHex(n int) (string, error) {
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		return "", err
	}
	return hex.EncodeToString(b), nil
}

// make does everything Start journals.
func (l *Lab) make(ctx context.Context, cfg Config, uid, gid int) error {
	token, err := randomHex(16)
	if err != nil {
		return err
	}
	if err := l.j.Record(kindDir, "lab directory "+l.dir, dirRecord{Dir: l.dir, Token: token}); err != nil {
		return err
	}
	if err := os.Mkdir(l.dir, 0o711); err != nil {
		return err
	}
	if err := safefile.WriteBytes(filepath.Join(l.dir, markerName), 0o600, []byte(token+"\n")); err != nil {
		return err
	}
	if err := os.Mkdir(filepath.Join(l.dir, "console"), 0o700); err != nil {
		return err
	}
	subnet, err := l.makeNetwork(ctx, cfg)
	if err != nil {
		return err
	}
	l.st = state{Version: stateVersion, Name: cfg.Name, Cluster: "dbhost-lab-" + cfg.Name, Subnet: subnet,
		SuspectTimeout: cfg.SuspectTimeout.String(), Options: cfg.Options, Nodes: layoutNodes(cfg, subnet, l.dir)}
	for i, n := range l.st.Nodes {
		if err := l.addMember(ctx, n, i+1); err != nil {
			return err
		}
		dir := filepath.Join(l.dir, n.Name)
		if err := mkdirOwned(dir, uid, gid); err != nil {
			return err
		}
		if !n.Arbitrator {
			for _, sub := range []string{"data", "tmp"} {
				if err := mkdirOwned(filepath.Join(dir, sub), uid, gid); err != nil {
					return err
				}
			}
		}
	}
	if err := l.saveState(); err != nil {
		return err
	}
	l.logf("network %s.0/24 ready (%v); installing the system tables", subnet, l.since())
	first := l.st.Nodes[0]
	if err := l.installDB(ctx, first, uid, gid); err != nil {
		return err
	}
	l.logf("bootstrapping %s (%v)", first.Name, l.since())
	if err := l.startMember(first, true); err != nil {
		return err
	}
	if err := l.waitSynced(ctx, []string{first.Name}, 1, bootstrapTimeout); err != nil {
		return err
	}
	// One joiner at a time into the group (members that join together
	// make the group membership churn for seconds); their state
	// transfers overlap.
	var data []string
	for i, n := range l.st.Nodes[1:] {
		if err := l.startMember(n, false); err != nil {
			return err
		}
		if err := l.waitMembers(ctx, first, n, i+2, joinTimeout); err != nil {
			return err
		}
		l.logf("%s joined (%v)", n.Name, l.since())
	}
	for _, n := range l.st.Nodes {
		if !n.Arbitrator {
			data = append(data, n.Name)
		}
	}
	if err := l.waitSynced(ctx, data, len(l.st.Nodes), joinTimeout); err != nil {
		return err
	}
	return l.saveState()
}

// since is the time since the current operation began, for progress.
func (l *Lab) since() time.Duration { return time.Since(l.t0).Round(100 * time.Millisecond) }

// installDB makes the first node's system tables (as the mysql user); the
// others get theirs by state transfer when they join.
func (l *Lab) installDB(ctx context.Context, n Node, uid, gid int) error {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	dir := filepath.Dir(n.DataDir)
	cmd := exec.CommandContext(ctx, l.bins.installDB, "--no-defaults", "--datadir="+n.DataDir,
		"--auth-root-authentication-method=socket", "--skip-test-db", "--tmpdir="+filepath.Join(dir, "tmp"))
	cmd.Env = cleanEnv
	cmd.Dir = "/"
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Credential: &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid), Groups: []uint32{}}}
	out, err := cmd.CombinedOutput()
	if err != nil {
		return fmt.Errorf("mariadb-install-db for %s: %w\n%s", n.Name, err, tailLines(string(out), 15))
	}
	return nil
}

func tailLines(s string, n int) string {
	var lines []string
	start := 0
	for i := 0; i < len(s); i++ {
		if s[i] == '\n' {
			lines = append(lines, s[start:i])
			start = i + 1
		}
	}
	if start < len(s) {
		lines = append(lines, s[start:])
	}
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	out := ""
	for _, l := range lines {
		out += "  " + termsafe.Line(l) + "\n"
	}
	return out
}
