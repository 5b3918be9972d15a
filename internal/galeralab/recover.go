package galeralab

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/dbhost/dbhost/internal/termsafe"
)

// recoverTimeout bounds each wait of a recovery: a restarted node's
// incremental (or full) state transfer, a merge after a partition heals.
const recoverTimeout = 90 * time.Second

// Recover brings the lab back to every member up, Synced, in one Primary
// component: it heals a partition, bootstraps the most advanced running
// data node when no component is Primary (pc.bootstrap=YES, Galera's
// documented way), or, when no data node runs, restarts the most advanced
// one as a new cluster (safe_to_bootstrap set in its grastate.dat); then
// it restarts every member that is down (a killed node rejoins by IST, or
// SST) and waits until all are Synced.
func (l *Lab) Recover(ctx context.Context) error {
	t0 := time.Now()
	l.mu.Lock()
	defer l.mu.Unlock()
	if err := l.heal(); err != nil {
		return fmt.Errorf("recover: heal: %w", err)
	}
	var data, down []string
	bestSeq, best, ref := int64(-2), "", ""
	for _, n := range l.st.Nodes {
		if !n.Arbitrator {
			data = append(data, n.Name)
		}
		if l.mainPID(n) == 0 {
			down = append(down, n.Name)
			continue
		}
		if n.Arbitrator {
			continue
		}
		st, err := queryStatus(ctx, n)
		if err != nil {
			continue // starting, or blocked joining: not a candidate
		}
		if st["wsrep_cluster_status"] == "Primary" && ref == "" {
			ref = n.Name
		}
		if seq, err := strconv.ParseInt(st["wsrep_last_committed"], 10, 64); err == nil && seq > bestSeq {
			bestSeq, best = seq, n.Name
		}
	}
	switch {
	case ref != "":
	case best != "":
		if err := l.bootstrapRunning(ctx, best); err != nil {
			return err
		}
		ref = best
	default:
		// No data node answers: one that runs but does not answer is
		// stuck (joining a component that will never be Primary).
		for _, name := range data {
			n, _, _ := l.node(name)
			if !contains(down, name) && l.mainPID(n) != 0 {
				l.logf("%s runs but does not answer: killing it", name)
				killNetns(n.Netns, 0)
				down = append(down, name)
			}
		}
		name, err := l.bootstrapFromDisk(ctx, down)
		if err != nil {
			return err
		}
		down = remove(down, name)
		ref = name
	}
	// The Primary component first takes in every running member (and
	// drops the killed ones, after the suspect timeout); then the members
	// that are down rejoin one at a time, as at Start.
	refNode, _, _ := l.node(ref)
	size := len(l.st.Nodes) - len(down)
	if err := l.waitSize(ctx, refNode, size, recoverTimeout); err != nil {
		return fmt.Errorf("recover: %w", err)
	}
	for _, name := range down {
		n, _, _ := l.node(name)
		if err := l.startMember(n, false); err != nil {
			return err
		}
		size++
		if err := l.waitMembers(ctx, refNode, n, size, recoverTimeout); err != nil {
			return fmt.Errorf("recover: %w", err)
		}
	}
	if err := l.waitSynced(ctx, data, len(l.st.Nodes), recoverTimeout); err != nil {
		return fmt.Errorf("recover: %w", err)
	}
	if err := l.saveState(); err != nil {
		return err
	}
	l.logf("recovered in %v (restarted: %s)", time.Since(t0).Round(time.Millisecond), orNone(down))
	return nil
}

func orNone(s []string) string {
	if len(s) == 0 {
		return "none"
	}
	return strings.Join(s, ", ")
}

func contains(s []string, x string) bool {
	for _, v := range s {
		if v == x {
			return true
		}
	}
	return false
}

func remove(s []string, x string) []string {
	var out []string
	for _, v := range s {
		if v != x {
			out = append(out, v)
		}
	}
	return out
}

// bootstrapRunning makes the component of a running node Primary.
func (l *Lab) bootstrapRunning(ctx context.Context, name string) error {
	n, _, _ := l.node(name)
	l.logf("no Primary component: bootstrapping %s (pc.bootstrap=YES)", name)
	db, err := connect(n)
	if err != nil {
		return err
	}
	defer db.Close()
	// The provider refuses the option while its component changes (a
	// partition just healed, members merging): try again.
	deadline := time.Now().Add(30 * time.Second)
	for {
		cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		_, err = db.ExecContext(cctx, "SET GLOBAL wsrep_provider_options='pc.bootstrap=YES'")
		cancel()
		if err == nil {
			break
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return fmt.Errorf("recover: bootstrap %s: %w; log:\n%s", name, err, l.logTail(n, 12))
		}
		time.Sleep(250 * time.Millisecond)
	}
	return l.waitSynced(ctx, []string{name}, 0, recoverTimeout)
}

// bootstrapFromDisk starts the data node whose grastate.dat says it is the
// most advanced (the first on a tie) as a new cluster.
func (l *Lab) bootstrapFromDisk(ctx context.Context, down []string) (string, error) {
	best, bestSeq := "", int64(-2)
	for _, name := range down {
		n, _, _ := l.node(name)
		if n.Arbitrator {
			continue
		}
		if seq := grastateSeqno(n.DataDir); seq > bestSeq {
			best, bestSeq = name, seq
		}
	}
	if best == "" {
		return "", fmt.Errorf("recover: no data node to bootstrap")
	}
	n, _, _ := l.node(best)
	l.logf("no data node runs: bootstrapping %s (seqno %d) as a new cluster", best, bestSeq)
	if err := l.safeToBootstrap(ctx, n); err != nil {
		return "", fmt.Errorf("recover: %s: %w", best, err)
	}
	if err := l.startMember(n, true); err != nil {
		return "", err
	}
	return best, l.waitSynced(ctx, []string{best}, 0, recoverTimeout)
}

// readGrastate reads grastate.dat without following a link (the directory
// is the mysql user's).
func readGrastate(dataDir string) (string, error) {
	p := filepath.Join(dataDir, "grastate.dat")
	fd, err := unix.Open(p, unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
	if err != nil {
		return "", err
	}
	f := os.NewFile(uintptr(fd), p)
	defer f.Close()
	fi, err := f.Stat()
	if err != nil || !fi.Mode().IsRegular() || fi.Size() > 64<<10 {
		return "", fmt.Errorf("%s is not a small regular file", p)
	}
	b := make([]byte, fi.Size())
	if _, err := f.ReadAt(b, 0); err != nil && fi.Size() > 0 {
		return "", err
	}
	return string(b), nil
}

func grastateSeqno(dataDir string) int64 {
	s, err := readGrastate(dataDir)
	if err != nil {
		return -2
	}
	sc := bufio.NewScanner(strings.NewReader(s))
	for sc.Scan() {
		if k, v, ok := strings.Cut(sc.Text(), ":"); ok && strings.TrimSpace(k) == "seqno" {
			if n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64); err == nil {
				return n
			}
		}
	}
	return -2
}

// safeToBootstrap sets safe_to_bootstrap: 1 in a node's grastate.dat (a
// crashed node has 0, and Galera then refuses --wsrep-new-cluster). sed
// edits it as the mysql user, whose directory it is: root writes nothing
// there, where the mysql user could have put a link.
func (l *Lab) safeToBootstrap(ctx context.Context, n Node) error {
	uid, gid, err := mysqlIDs()
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, l.bins.sed, "-i", "-e", "s/^safe_to_bootstrap: *0 *$/safe_to_bootstrap: 1/",
		filepath.Join(n.DataDir, "grastate.dat"))
	cmd.Env = cleanEnv
	cmd.Dir = "/"
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid), Groups: []uint32{}}}
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("sed grastate.dat: %v: %s", err, termsafe.Line(string(out)))
	}
	return nil
}
