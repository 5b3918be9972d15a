package galeraprove

import (
	"context"
	"encoding/json"
	"flag"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/dbhost/dbhost/internal/galera"
	"github.com/dbhost/dbhost/internal/galeralab"
	"github.com/dbhost/dbhost/internal/testdb"
)

var record = flag.Bool("record", false, "write the live proofs' reports to testdata (the renderers' fixtures)")

type logW struct{ t *testing.T }

func (w logW) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

// needLab skips (fails under DBHOST_INTEGRATION=require) without root and
// the distribution's Galera packages, and takes the host lock shared.
func needLab(t *testing.T) {
	t.Helper()
	if testing.Short() {
		t.Skip("integration: starts a Galera lab")
	}
	testdb.Need(t, "root (the lab makes network namespaces)", os.Geteuid() == 0)
	for _, p := range []string{"/usr/sbin/mariadbd", testdb.GaleraProvider, "/usr/bin/garbd"} {
		_, err := os.Stat(p)
		testdb.Need(t, p+" (mariadb-server, galera-4, galera-arbitrator-4)", err == nil)
	}
	for _, bin := range []string{"ip", "iptables", "rsync"} {
		_, err := exec.LookPath(bin)
		testdb.Need(t, bin+" (iproute2, iptables, rsync)", err == nil)
	}
	testdb.HoldHost(t)
}

// labRoot is a root-only directory the mysql user can pass through.
func labRoot(t *testing.T) string {
	t.Helper()
	d, err := os.MkdirTemp("/tmp", "dbhost-prove-test-")
	if err != nil {
		t.Fatal(err)
	}
	os.Chmod(d, 0o711)
	t.Cleanup(func() { os.RemoveAll(d) })
	return d
}

// suspect is the labs' evs.suspect_timeout here: 1 s made a loaded 2-CPU
// host suspect live nodes (the cluster then does what no model of the
// scenario predicts), and the suite runs other servers beside the labs.
const suspect = 3 * time.Second

// prove starts a lab, proves the scenarios (nil: every one the model
// picks for the lab), stops the lab, and checks that every prediction
// held. The two proofs run side by side (t.Parallel, before the lock is
// taken): each lab has its own subnet and namespaces, most of a proof is
// waiting for suspect timeouts and recoveries, and the labs' 3 s suspect
// timeout already allows for a loaded host.
func prove(t *testing.T, cfg galeralab.Config, only ...string) *Report {
	needLab(t)
	cfg.Root, cfg.Log, cfg.SuspectTimeout = labRoot(t), logW{t}, suspect
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	began := time.Now()
	l, err := galeralab.Start(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	stopped := false
	t.Cleanup(func() {
		if !stopped {
			l.Stop(context.Background())
		}
	})
	o := Options{Log: logW{t}}
	if only != nil {
		for _, sc := range galera.Scenarios(l.Layout()) {
			if contains(only, sc.Name) {
				o.Scenarios = append(o.Scenarios, sc)
			}
		}
		if len(o.Scenarios) != len(only) {
			t.Fatalf("the model picks %+v; want %q among them", galera.Scenarios(l.Layout()), only)
		}
	}
	r, err := Run(ctx, l, o)
	stopErr := l.Stop(context.Background())
	stopped = true
	if err != nil {
		t.Fatal(err)
	}
	if stopErr != nil {
		t.Fatal(stopErr)
	}
	start, stop := l.Times()
	r.Lab.Name, r.Lab.Start, r.Lab.Stop = cfg.Name, Millis(start), Millis(stop)
	var text strings.Builder
	r.WriteText(&text)
	t.Logf("took %s in all\n%s", time.Since(began).Round(time.Second), text.String())
	if !r.AllMatched() {
		t.Errorf("matched %d of %d scenarios", r.Matched, r.Total)
	}
	if *record {
		b, _ := json.MarshalIndent(r, "", "  ")
		if err := os.WriteFile(filepath.Join("testdata", cfg.Name+".json"), append(b, '\n'), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return r
}

// observedSurvives is what the live cluster did in a scenario.
func observedSurvives(t *testing.T, r *Report, name string) bool {
	t.Helper()
	res := find(t, r, name)
	if !res.Settled {
		t.Errorf("%s: the nodes did not settle", name)
	}
	return res.Survived
}

// The seed's table, observed: three data nodes survive one failure, at
// once or one by one, not two.
func TestProveThreeNodes(t *testing.T) {
	t.Parallel()
	r := prove(t, galeralab.Config{Name: "prove3", Nodes: 3})
	if tol := r.Tolerance; tol.AtOnce != 1 || tol.OneByOne != 1 {
		t.Errorf("model: %d at once, %d one by one; the seed says 1 and 1", tol.AtOnce, tol.OneByOne)
	}
	if !observedSurvives(t, r, "kill_at_once_1") {
		t.Error("3 nodes lost Primary after one failure")
	}
	if observedSurvives(t, r, "kill_at_once_2") {
		t.Error("3 nodes kept Primary after two failures at once")
	}
	if observedSurvives(t, r, "kill_one_by_one_2") {
		t.Error("3 nodes kept Primary after two failures one by one")
	}
	if !observedSurvives(t, r, "shutdown_2") {
		t.Error("the last node lost Primary when two of three shut down cleanly")
	}
}

// Three data nodes and garbd survive two failures one by one, not two at
// once. The failures only: a partition and a clean shutdown are judged by
// the same arithmetic as in the lab without garbd, and the suite's time
// is short.
func TestProveThreeNodesAndArbitrator(t *testing.T) {
	t.Parallel()
	r := prove(t, galeralab.Config{Name: "prove3g", Nodes: 3, Arbitrator: true},
		"kill_at_once_1", "kill_at_once_2", "kill_one_by_one_2", "kill_one_by_one_3")
	if tol := r.Tolerance; tol.AtOnce != 1 || tol.OneByOne != 2 {
		t.Errorf("model: %d at once, %d one by one; the seed says 1 and 2", tol.AtOnce, tol.OneByOne)
	}
	if !observedSurvives(t, r, "kill_one_by_one_2") {
		t.Error("3 nodes + garbd lost Primary after two failures one by one")
	}
	if observedSurvives(t, r, "kill_at_once_2") {
		t.Error("3 nodes + garbd kept Primary after two failures at once")
	}
	if !observedSurvives(t, r, "kill_at_once_1") {
		t.Error("3 nodes + garbd lost Primary after one failure")
	}
}
