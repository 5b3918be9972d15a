package galeralab

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/dbhost/dbhost/internal/testdb"
)

// labRoot is a root-owned directory (0711: the mysql user passes through)
// that the test removes however it ends.
func labRoot(t *testing.T) string {
	t.Helper()
	d, err := os.MkdirTemp("/tmp", "dbhost-lab-test-")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(d, 0o711); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(d) })
	return d
}

// needLab skips (or, under DBHOST_INTEGRATION=require, fails) without root
// and the lab's packages, and holds the host lock shared.
func needLab(t *testing.T) {
	t.Helper()
	if testing.Short() {
		t.Skip("integration: starts a Galera lab")
	}
	testdb.Need(t, "root (network namespaces)", os.Geteuid() == 0)
	_, err := trustedBins()
	testdb.Need(t, fmt.Sprintf("the lab's packages (%v)", err), err == nil)
	testdb.Need(t, fmt.Sprintf("garbd (%v)", checkGarbd()), checkGarbd() == nil)
	testdb.HoldHost(t)
}

type testLog struct{ t *testing.T }

func (w testLog) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimSuffix(string(p), "\n"))
	return len(p), nil
}

// stopAtEnd stops the lab when the test ends, whatever happens (a lab
// already stopped is left alone).
func stopAtEnd(t *testing.T, l *Lab) {
	t.Cleanup(func() {
		if err := l.Stop(context.Background()); err != nil {
			t.Errorf("stop: %v", err)
		}
	})
}

// rootRules is the iptables ruleset of the host's own namespace.
func rootRules(t *testing.T) string {
	t.Helper()
	out, err := exec.Command(binPaths.iptables, "-S").CombinedOutput()
	if err != nil {
		t.Fatalf("iptables -S: %v %s", err, out)
	}
	return string(out)
}

// assertGone checks that a lab left nothing: no namespace, no process, no
// directory, no journal, no rule in the host's namespace.
func assertGone(t *testing.T, root, name string, pids []int, rulesBefore string) {
	t.Helper()
	ents, _ := os.ReadDir(netnsDir)
	for _, e := range ents {
		if strings.HasPrefix(e.Name(), nsPrefix+name+"-") {
			t.Errorf("namespace %s left", e.Name())
		}
	}
	for _, pid := range pids {
		if !zombie(pid) {
			t.Errorf("process %d left", pid)
		}
	}
	dir := filepath.Join(root, name)
	procs, _ := filepath.Glob("/proc/[0-9]*/cmdline")
	for _, p := range procs {
		if b, err := os.ReadFile(p); err == nil && strings.Contains(string(b), dir+"/") {
			t.Errorf("%s: a process of the lab left: %q", p, strings.ReplaceAll(string(b), "\x00", " "))
		}
	}
	for _, p := range []string{dir, journalFile(root, name)} {
		if _, err := os.Lstat(p); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("%s left (%v)", p, err)
		}
	}
	if after := rootRules(t); after != rulesBefore {
		t.Errorf("the host's iptables rules changed:\n%s\nbefore:\n%s", after, rulesBefore)
	}
}

func labPIDs(l *Lab) []int {
	var pids []int
	for _, n := range l.Nodes() {
		pids = append(pids, memberPIDs(n)...)
	}
	return pids
}

// waitView polls a data node until its view satisfies ok, for up to
// within; it fails with the last view.
func waitView(t *testing.T, l *Lab, node, what string, within time.Duration, ok func(status string, size int) bool) {
	t.Helper()
	deadline := time.Now().Add(within)
	last := ""
	for time.Now().Before(deadline) {
		st, err := l.Status(context.Background(), node)
		if err == nil && ok(st.ClusterStatus, st.ClusterSize) {
			return
		}
		if err != nil {
			last = err.Error()
		} else {
			last = fmt.Sprintf("%s %s size %d", st.ClusterStatus, st.LocalState, st.ClusterSize)
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Fatalf("%s: %s not seen within %v (last: %s)", node, what, within, last)
}

// A lab of 3 data nodes and garbd starts Synced in one Primary component
// of 4; a node killed leaves a Primary component of 3; Recover brings it
// back; a partition's rules live in the members' namespaces until Heal;
// Stop leaves nothing.
func TestLab(t *testing.T) {
	needLab(t)
	t.Parallel()
	ctx := context.Background()
	root := labRoot(t)
	rules := rootRules(t)
	// 3 s: on a loaded 2-CPU host a shorter suspect timeout may suspect a
	// live node, and the test would watch a failure it did not make.
	l, err := Start(ctx, Config{Name: "t", Root: root, Nodes: 3, Arbitrator: true, SuspectTimeout: 3 * time.Second, Log: testLog{t}})
	if err != nil {
		t.Fatal(err)
	}
	stopAtEnd(t, l)
	start, _ := l.Times()
	t.Logf("3 nodes + garbd started in %v, %d MiB resident", start.Round(time.Millisecond), l.RSS()>>20)
	subnet := l.Nodes()[0].Addr[:strings.LastIndexByte(l.Nodes()[0].Addr, '.')]
	for _, n := range l.Nodes() {
		if !l.Running(n.Name) {
			t.Errorf("%s not running", n.Name)
		}
		if n.Arbitrator {
			continue
		}
		st, err := l.Status(ctx, n.Name)
		if err != nil {
			t.Fatal(err)
		}
		if st.ClusterStatus != "Primary" || st.LocalState != "Synced" || st.ClusterSize != 4 || st.ClusterWeight != 4 || len(st.Members) != 4 {
			t.Errorf("%s: %+v", n.Name, st)
		}
		// The servers listen on their lab addresses only, each on its own
		// port; garbd's entry, when the node lists one, is empty (seen
		// both ways on one node: "a,b,c," and "a,b,c").
		addrs := map[string]bool{}
		for _, a := range st.IncomingAddresses {
			addrs[a] = true
		}
		want := map[string]bool{}
		for _, m := range l.Nodes() {
			if !m.Arbitrator {
				want[fmt.Sprintf("%s:%d", m.Addr, m.Port)] = true
			}
		}
		if len(st.IncomingAddresses) == 4 {
			want[""] = true
		}
		if len(st.IncomingAddresses) < 3 || len(st.IncomingAddresses) > 4 || !reflect.DeepEqual(addrs, want) {
			t.Errorf("%s: incoming addresses %v", n.Name, st.IncomingAddresses)
		}
	}
	if lay := l.Layout(); len(lay.Members) != 4 || !lay.Members[3].Arbitrator {
		t.Errorf("layout %+v", lay)
	}
	// Another process finds the running lab.
	o, err := Open(root, "t")
	if err != nil || len(o.Nodes()) != 4 || !o.Up() || o.SuspectTimeout() != 3*time.Second {
		t.Fatalf("open: %v", err)
	}

	t0 := time.Now()
	if err := l.Kill("node3"); err != nil {
		t.Fatal(err)
	}
	if l.Running("node3") {
		t.Error("node3 runs after Kill")
	}
	waitView(t, l, "node1", "Primary of 3", 4*l.SuspectTimeout()+10*time.Second, func(s string, n int) bool { return s == "Primary" && n == 3 })
	t.Logf("node3 killed: a Primary component of 3 after %v", time.Since(t0).Round(time.Millisecond))
	t0 = time.Now()
	if err := l.Recover(ctx); err != nil {
		t.Fatal(err)
	}
	t.Logf("recovered in %v", time.Since(t0).Round(time.Millisecond))
	waitView(t, l, "node3", "Primary of 4", time.Second, func(s string, n int) bool { return s == "Primary" && n == 4 })

	// Partition: DROP rules in each member's namespace, none in the host's.
	if err := l.Partition([]string{"node1", "node2"}, []string{"node3", "garbd"}); err != nil {
		t.Fatal(err)
	}
	nodeRules := func(ns string) string {
		out, _ := exec.Command(binPaths.ip, "netns", "exec", ns, binPaths.iptables, "-S").CombinedOutput()
		return string(out)
	}
	n1, n3 := l.Nodes()[0], l.Nodes()[2]
	if r := nodeRules(n1.Netns); !strings.Contains(r, "-A INPUT -s "+n3.Addr+"/32 -j DROP") || !strings.Contains(r, "-A OUTPUT -d "+subnet+".8/32 -j DROP") {
		t.Errorf("node1's rules:\n%s", r)
	}
	if rootRules(t) != rules {
		t.Error("Partition changed the host's rules")
	}
	if err := l.Heal(); err != nil {
		t.Fatal(err)
	}
	if r := nodeRules(n1.Netns); strings.Contains(r, "DROP") {
		t.Errorf("after Heal:\n%s", r)
	}

	pids := labPIDs(l)
	if err := l.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	_, stop := l.Times()
	t.Logf("stopped in %v", stop.Round(time.Millisecond))
	assertGone(t, root, "t", pids, rules)
	if _, err := Open(root, "t"); !errors.Is(err, ErrNoLab) {
		t.Errorf("open after stop: %v", err)
	}
}

// A lab dropped without Stop (its process crashed) keeps running; a new
// Start of the same name removes it first. The new one recovers from
// every data node killed; Stop through Open, as a later
// `dbhost lab galera --stop` does, removes it.
func TestLabCrash(t *testing.T) {
	needLab(t)
	t.Parallel()
	ctx := context.Background()
	root := labRoot(t)
	rules := rootRules(t)
	old, err := Start(ctx, Config{Name: "c", Root: root, Nodes: 2, SuspectTimeout: 3 * time.Second, Log: testLog{t}})
	if err != nil {
		t.Fatal(err)
	}
	oldPIDs := labPIDs(old)
	if len(oldPIDs) < 2 {
		t.Fatalf("pids %v", oldPIDs)
	}
	// Dropped: a process that crashed never stops it.
	l, err := Start(ctx, Config{Name: "c", Root: root, Nodes: 2, SuspectTimeout: 3 * time.Second, Log: testLog{t}})
	if err != nil {
		old.Stop(ctx)
		t.Fatal(err)
	}
	stopAtEnd(t, l)
	for _, pid := range oldPIDs {
		if !zombie(pid) {
			t.Errorf("the earlier lab's process %d still runs", pid)
		}
	}
	if st, err := l.Status(ctx, "node2"); err != nil || st.ClusterSize != 2 || st.ClusterStatus != "Primary" {
		t.Fatalf("new lab: %+v %v", st, err)
	}
	// Every data node killed: Recover restarts the most advanced as a new
	// cluster (its grastate.dat made safe to bootstrap), the other joins.
	if err := l.Kill("node1", "node2"); err != nil {
		t.Fatal(err)
	}
	t0 := time.Now()
	if err := l.Recover(ctx); err != nil {
		t.Fatal(err)
	}
	t.Logf("recovered from every data node killed in %v", time.Since(t0).Round(time.Millisecond))
	if st, err := l.Status(ctx, "node1"); err != nil || st.ClusterSize != 2 || st.ClusterStatus != "Primary" || st.LocalState != "Synced" {
		t.Fatalf("after recover: %+v %v", st, err)
	}
	pids := labPIDs(l)
	o, err := Open(root, "c")
	if err != nil {
		t.Fatal(err)
	}
	if err := o.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	assertGone(t, root, "c", pids, rules)
}
