package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/dbhost/dbhost/internal/facts"
	"github.com/dbhost/dbhost/internal/galera"
	"github.com/dbhost/dbhost/internal/galeralab"
	"github.com/dbhost/dbhost/internal/testdb"
)

// runGalera runs dbhost with only the servers keep accepts in view.
func runGalera(t *testing.T, keep func(*facts.Instance) bool, args ...string) (int, string, string) {
	t.Helper()
	var out, errb bytes.Buffer
	code := Main(append([]string{"dbhost"}, args...), lent(t, Env{Stdout: &out, Stderr: &errb, Servers: keep}))
	return code, out.String(), errb.String()
}

func decodeTolerance(t *testing.T, js string) galeraTolerance {
	t.Helper()
	var doc galeraTolerance
	if err := json.Unmarshal([]byte(js), &doc); err != nil {
		t.Fatalf("%v\n%s", err, js)
	}
	if doc.Schema != GaleraToleranceSchema {
		t.Fatalf("schema %q", doc.Schema)
	}
	return doc
}

func TestGaleraToleranceMembers(t *testing.T) {
	for _, tc := range []struct {
		spec             string
		code             int
		atOnce, oneByOne int
		text             []string
	}{
		{"3", ExitOK, 1, 1, []string{"survives at once:     1 failure(s)", "survives one by one:  1 failure(s)", "add an arbitrator (garbd): at once 1, one by one 2"}},
		{"db1,db2,db3,garbd:arbitrator", ExitOK, 1, 2, []string{"garbd   arbitrator  1", "survives one by one:  2 failure(s)"}},
		{"2", ExitFindings, 0, 0, []string{"losing node1 or node2 alone stops the cluster"}},
		{"a:segment=0,b:segment=0,c:segment=1,d:segment=1", ExitFindings, 1, 2, []string{"0        a,b      stops       none", "in a third segment (gmcast.segment=2)"}},
	} {
		code, out, stderr := runCLI(t, "galera", "tolerance", "--members", tc.spec)
		if code != tc.code {
			t.Errorf("--members %s: exit %d, want %d\n%s%s", tc.spec, code, tc.code, out, stderr)
		}
		for _, s := range tc.text {
			if !strings.Contains(out, s) {
				t.Errorf("--members %s: no %q in\n%s", tc.spec, s, out)
			}
		}
		code, js, _ := runCLI(t, "galera", "tolerance", "--members", tc.spec, "--format", "json")
		doc := decodeTolerance(t, js)
		if code != tc.code || len(doc.Clusters) != 1 || doc.Source != "members" || doc.NotRead == nil {
			t.Fatalf("--members %s json: exit %d\n%s", tc.spec, code, js)
		}
		tol := doc.Clusters[0].Tolerance
		if tol.AtOnce != tc.atOnce || tol.OneByOne != tc.oneByOne || doc.Clusters[0].Serious != (tc.code == ExitFindings) {
			t.Errorf("--members %s json: at once %d one by one %d serious %v", tc.spec, tol.AtOnce, tol.OneByOne, doc.Clusters[0].Serious)
		}
	}
	for _, bad := range [][]string{
		{"--members", "db1,db1"},
		{"--members", "evil\u202e,b,c"},
		{"--members", "3", "--mysql", "root@unix(/x)/"},
		{"--members", "3", "--format", "xml"},
		{"extra"},
	} {
		if code, _, stderr := runCLI(t, append([]string{"galera", "tolerance"}, bad...)...); code != ExitError || stderr == "" {
			t.Errorf("%q: exit %d, stderr %q", bad, code, stderr)
		}
	}
	if code, _, stderr := runCLI(t, "galera"); code != ExitError || !strings.Contains(stderr, "tolerance") {
		t.Errorf("galera alone: exit %d, %q", code, stderr)
	}
}

// With no Galera node in view the command says so and fails.
func TestGaleraToleranceNoNode(t *testing.T) {
	code, _, stderr := runGalera(t, func(*facts.Instance) bool { return false }, "galera", "tolerance")
	if code != ExitError || !strings.Contains(stderr, "no Galera node found") {
		t.Errorf("exit %d, stderr %q", code, stderr)
	}
}

// A live single-node cluster: read from its status, it survives no
// failure (exit 1), and a plain MariaDB beside it is no Galera node.
func TestGaleraToleranceLive(t *testing.T) {
	if testing.Short() {
		t.Skip("integration: starts a Galera node")
	}
	if os.Geteuid() != 0 {
		testdb.Need(t, "root (reads the server's socket as its owner would)", false)
	}
	node := testdb.MariaDB(t, testdb.Options{Galera: true})
	mine := func(in *facts.Instance) bool { return in.PID == node.PID }
	code, js, stderr := runGalera(t, mine, "galera", "tolerance", "--format", "json")
	doc := decodeTolerance(t, js)
	if code != ExitFindings || len(doc.Clusters) != 1 || len(doc.NotRead) != 0 {
		t.Fatalf("exit %d, stderr %s\n%s", code, stderr, js)
	}
	cl := doc.Clusters[0]
	tol := cl.Tolerance
	if len(cl.StateUUID) != 36 || len(cl.Nodes) != 1 || len(tol.Layout.Members) != 1 || tol.DataNodes != 1 ||
		tol.AtOnce != 0 || tol.OneByOne != 0 || tol.Layout.Members[0].Assumed || tol.Layout.Members[0].Weight != 1 {
		t.Errorf("single node: %+v", cl)
	}
	want := galera.Analyze(mustLayout(t, tol.Layout.Members[0].Name))
	if tol.AtOnce != want.AtOnce || tol.OneByOne != want.OneByOne || tol.CleanShutdown != want.CleanShutdown {
		t.Errorf("live %+v, planned %+v", tol, want)
	}
	code, out, _ := runGalera(t, mine, "galera", "tolerance")
	if code != ExitFindings || !strings.Contains(out, "survives at once:     0 failure(s)") || !strings.Contains(out, "cluster "+cl.StateUUID) {
		t.Errorf("text: exit %d\n%s", code, out)
	}
	// The exporter's series (audit --format prom builds the same ones): a
	// cluster of one survives no failure.
	_, prom, _ := runGalera(t, mine, "audit", "--format", "prom", "--fail-on", "none", "--only", "net.keepalive")
	for _, mode := range []string{"at_once", "one_by_one", "clean_shutdown"} {
		series := fmt.Sprintf(`dbhost_galera_tolerance{mode=%q,subject=%q} 0`, mode, cl.Nodes[0])
		if !strings.Contains(prom, series+"\n") {
			t.Errorf("no %s in\n%s", series, prom)
		}
	}
	// A DSN naming the node with a wrong account: no status; the node is
	// named with why, and nothing is judged (exit 2).
	code, js, _ = runGalera(t, mine, "galera", "tolerance", "--format", "json", "--mysql", "nobody:wrong@unix("+node.Socket+")/")
	doc = decodeTolerance(t, js)
	if code != ExitError || len(doc.Clusters) != 0 || len(doc.NotRead) != 1 || doc.NotRead[0].Node != cl.Nodes[0] ||
		!strings.Contains(doc.NotRead[0].Why, "nobody") || strings.Contains(js, "wrong") {
		t.Errorf("wrong account: exit %d\n%s", code, js)
	}
}

func mustLayout(t *testing.T, spec string) galera.Layout {
	t.Helper()
	l, err := galera.ParseMembers(spec)
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// On a live three-node lab with an arbitrator, the layout read from the
// nodes is the lab's: the same members, weights, kinds and tolerance as
// the layout described by hand.
func TestGaleraToleranceLab(t *testing.T) {
	if testing.Short() {
		t.Skip("integration: starts a Galera lab")
	}
	testdb.Need(t, "root (network namespaces)", os.Geteuid() == 0)
	for _, f := range []string{testdb.GaleraProvider, "/usr/bin/garbd"} {
		_, err := os.Stat(f)
		testdb.Need(t, "the Galera lab's packages (galera-4, galera-arbitrator-4): "+f, err == nil)
	}
	testdb.HoldHost(t)
	root, err := os.MkdirTemp("/tmp", "dbhost-tolerance-lab-")
	if err != nil {
		t.Fatal(err)
	}
	os.Chmod(root, 0o711) // the mysql user passes through to its data directory
	t.Cleanup(func() { os.RemoveAll(root) })
	ctx := context.Background()
	start := time.Now()
	l, err := galeralab.Start(ctx, galeralab.Config{Name: "tolerance", Root: root, Nodes: 3, Arbitrator: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := l.Stop(context.Background()); err != nil {
			t.Errorf("lab stop: %v", err)
		}
	})
	t.Logf("lab of 3 nodes and garbd started in %v", time.Since(start).Round(time.Millisecond))
	pids := map[int]bool{}
	for _, n := range l.Nodes() {
		pids[n.PID] = true
	}
	mine := func(in *facts.Instance) bool { return pids[in.PID] }
	code, js, stderr := runGalera(t, mine, "galera", "tolerance", "--format", "json")
	doc := decodeTolerance(t, js)
	if code != ExitOK || len(doc.Clusters) != 1 || len(doc.NotRead) != 0 {
		t.Fatalf("exit %d, stderr %s\n%s", code, stderr, js)
	}
	cl := doc.Clusters[0]
	if len(cl.Nodes) != 3 {
		t.Errorf("nodes read: %q", cl.Nodes)
	}
	got := cl.Tolerance
	want := galera.Analyze(mustLayout(t, "node1,node2,node3,garbd"))
	kinds := func(l galera.Layout) map[string]string {
		m := map[string]string{}
		for _, x := range l.Members {
			k := fmt.Sprintf("weight %d segment %d", x.Weight, x.Segment)
			if x.Arbitrator {
				m["arbitrator"] = k
				continue
			}
			if x.Assumed {
				k += " assumed"
			}
			m[x.Name] = k
		}
		return m
	}
	if !reflect.DeepEqual(kinds(got.Layout), kinds(want.Layout)) {
		t.Errorf("members read %+v\nwant %+v", got.Layout.Members, want.Layout.Members)
	}
	if got.AtOnce != 1 || got.OneByOne != 2 || got.AtOnce != want.AtOnce || got.OneByOne != want.OneByOne ||
		got.CleanShutdown != want.CleanShutdown || got.DataNodes != 3 || got.Arbitrators != 1 {
		t.Errorf("live: at once %d, one by one %d, clean %d; described: %d, %d, %d\n%s",
			got.AtOnce, got.OneByOne, got.CleanShutdown, want.AtOnce, want.OneByOne, want.CleanShutdown, js)
	}
}
