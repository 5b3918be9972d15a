package galeralab

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// Defaults fill in; what the lab cannot run is refused with the reason.
func TestConfig(t *testing.T) {
	c := Config{}
	if err := c.normalize(); err != nil {
		t.Fatal(err)
	}
	if c.Name != "galera" || c.Root != "/var/lib/dbhost/lab" || c.Nodes != 3 || c.Segments != 1 || c.SuspectTimeout != 2*time.Second {
		t.Errorf("defaults: %+v", c)
	}
	bad := []struct {
		c    Config
		want string
	}{
		{Config{Nodes: 1}, "2 to 7"},
		{Config{Nodes: 8}, "2 to 7"},
		{Config{Segments: 4}, "1 to 3"},
		{Config{Nodes: 2, Segments: 3}, "each segment needs a data node"},
		{Config{Name: "a-b"}, "lab name"},
		{Config{Name: "../x"}, "lab name"},
		{Config{Root: "rel"}, "absolute"},
		{Config{Weights: map[string]int{"garbd": 1}}, `"garbd": no such member`},
		{Config{Weights: map[string]int{"node4": 1}}, "no such member"},
		{Config{Weights: map[string]int{"node1": 256}}, "0..255"},
		{Config{SuspectTimeout: time.Millisecond}, "0.5 s to 5 min"},
		{Config{Options: []string{"datadir=/etc"}}, "sets it itself"},
		{Config{Options: []string{"wsrep_cluster_address=gcomm://10.0.0.1"}}, "sets it itself"},
		{Config{Options: []string{"noequals"}}, "NAME=VALUE"},
		{Config{Options: []string{"a b=1"}}, "NAME=VALUE"},
		{Config{Options: []string{"init_connect=x\ny"}}, "control character"},
		{Config{Options: []string{"wsrep_sst_auth=sst:s3cret"}}, "holds a secret"},
	}
	for _, b := range bad {
		err := Check(b.c)
		if err == nil || !strings.Contains(err.Error(), b.want) {
			t.Errorf("%+v: %v, want %q", b.c, err, b.want)
		}
	}
	if err := Check(Config{Arbitrator: true, Weights: map[string]int{"garbd": 0, "node1": 2}, Options: []string{"--wsrep_slave_threads=4"}}); err != nil {
		t.Error(err)
	}
}

// Data nodes go round-robin over the segments, garbd into the last; every
// member has its own address and namespace; the layout is what the
// quorum model reads.
func TestLayoutNodes(t *testing.T) {
	c := Config{Name: "x", Nodes: 5, Segments: 2, Arbitrator: true, Weights: map[string]int{"node2": 3}}
	if err := c.normalize(); err != nil {
		t.Fatal(err)
	}
	nodes := layoutNodes(c, "10.238.7", "/r/x")
	want := []struct {
		name       string
		seg, w     int
		addr, sock string
		port       int
	}{
		{"node1", 0, 1, "10.238.7.1", "/r/x/node1/mysqld.sock", 20071},
		{"node2", 1, 3, "10.238.7.2", "/r/x/node2/mysqld.sock", 20072},
		{"node3", 0, 1, "10.238.7.3", "/r/x/node3/mysqld.sock", 20073},
		{"node4", 1, 1, "10.238.7.4", "/r/x/node4/mysqld.sock", 20074},
		{"node5", 0, 1, "10.238.7.5", "/r/x/node5/mysqld.sock", 20075},
		{"garbd", 1, 1, "10.238.7.8", "", 0},
	}
	if len(nodes) != len(want) {
		t.Fatalf("%d nodes: %+v", len(nodes), nodes)
	}
	for i, w := range want {
		n := nodes[i]
		if n.Name != w.name || n.Segment != w.seg || n.Weight != w.w || n.Addr != w.addr || n.Socket != w.sock || n.Port != w.port ||
			n.Netns != "dbhost-lab-x-"+w.name || n.Arbitrator != (w.name == "garbd") {
			t.Errorf("node %d: %+v, want %+v", i, n, w)
		}
	}
	l := &Lab{st: state{Nodes: nodes}}
	lay := l.Layout()
	if len(lay.Members) != 6 || lay.Members[1].Weight != 3 || !lay.Members[5].Arbitrator || lay.Members[5].Segment != 1 || lay.Members[0].Assumed {
		t.Errorf("layout %+v", lay)
	}
}

// The EVS timeouts follow the suspect timeout in Galera's order (it
// refuses others at start), and a user's provider options come after the
// lab's, so they win.
func TestProviderOptions(t *testing.T) {
	for _, s := range []time.Duration{500 * time.Millisecond, 2 * time.Second, 5 * time.Second, time.Minute} {
		l := &Lab{suspect: s}
		opts := map[string]string{}
		for _, kv := range strings.Split(l.providerOptions(Node{Addr: "10.238.1.1", Weight: 2, Segment: 1}, "gcache.size=64M"), ";") {
			k, v, _ := strings.Cut(kv, "=")
			if _, dup := opts[k]; dup && k != "gcache.size" {
				t.Errorf("%s twice", k)
			}
			opts[k] = v
		}
		d := func(k string) time.Duration {
			v := strings.TrimSuffix(strings.TrimPrefix(opts[k], "PT"), "S")
			f, err := time.ParseDuration(v + "s")
			if err != nil {
				t.Fatalf("%s=%q: %v", k, opts[k], err)
			}
			return f
		}
		if !(d("evs.keepalive_period") <= d("evs.inactive_check_period") && d("evs.inactive_check_period") < d("evs.suspect_timeout") &&
			d("evs.suspect_timeout") == s && d("evs.install_timeout") < d("evs.inactive_timeout") && d("evs.suspect_timeout") < d("evs.inactive_timeout")) {
			t.Errorf("suspect %v: %v", s, opts)
		}
		if opts["gmcast.listen_addr"] != "tcp://10.238.1.1:4567" || opts["pc.weight"] != "2" || opts["gmcast.segment"] != "1" || opts["gcache.size"] != "64M" {
			t.Errorf("%v", opts)
		}
	}
	if o := (&Lab{suspect: time.Second}).providerOptions(Node{Arbitrator: true, Addr: "a"}, ""); strings.Contains(o, "gcache") || strings.Contains(o, "ist.") {
		t.Errorf("garbd options %s", o)
	}
}

// A data node's command line: the lab's settings, then the user's
// (later wins), a user's wsrep_provider_options inside the lab's own.
func TestMariadbdArgs(t *testing.T) {
	c := Config{Name: "x", Nodes: 2, Options: []string{"wsrep_slave_threads=4", "wsrep_provider_options=gcs.fc_limit=64"}}
	if err := c.normalize(); err != nil {
		t.Fatal(err)
	}
	l := &Lab{suspect: c.SuspectTimeout, bins: binPaths, st: state{Cluster: "dbhost-lab-x", Options: c.Options, Nodes: layoutNodes(c, "10.238.3", "/r/x")}}
	args := l.mariadbdArgs(l.st.Nodes[1], false)
	joined := strings.Join(args, " ")
	for _, want := range []string{"--wsrep-cluster-address=gcomm://10.238.3.1,10.238.3.2", "--wsrep-node-name=node2",
		"--bind-address=10.238.3.2", "--socket=/r/x/node2/mysqld.sock", "--innodb-buffer-pool-size=32M", "--wsrep-sst-method=rsync"} {
		if !strings.Contains(joined, want) {
			t.Errorf("no %s in %s", want, joined)
		}
	}
	if args[len(args)-1] != "--wsrep-slave-threads=4" || strings.Contains(joined, "--wsrep-new-cluster") {
		t.Errorf("user option not last, or a joiner bootstraps: %s", joined)
	}
	if !strings.Contains(joined, ";gcs.fc_limit=64") || strings.Count(joined, "--wsrep-provider-options") != 1 {
		t.Errorf("provider options: %s", joined)
	}
	if a := l.mariadbdArgs(l.st.Nodes[0], true); !strings.Contains(strings.Join(a, " "), "--wsrep-new-cluster") {
		t.Errorf("bootstrap: %s", a)
	}
}

// A journal entry that does not describe the lab's own things is refused
// by its undo; the directory goes only with the lab's token in its
// marker; an undo that finds its thing gone is done.
func TestUndoRefuses(t *testing.T) {
	for _, c := range []struct {
		undo func(json.RawMessage) error
		data string
	}{
		{undoDir, `{"dir":"rel/x","token":"0123456789abcdef0123"}`},
		{undoDir, `{"dir":"/tmp/x/../y","token":"0123456789abcdef0123"}`},
		{undoDir, `{"dir":"/tmp/x","token":"short"}`},
		{undoNetns, `{"name":"other-ns"}`},
		{undoNetns, `{"name":"dbhost-lab-x/../../etc"}`},
		{undoVeth, `{"netns":"default","link":"v1"}`},
		{undoRules, `{"netns":"root","rules":[["INPUT","-j","DROP"]]}`},
	} {
		if err := c.undo(json.RawMessage(c.data)); err == nil {
			t.Errorf("%s: accepted", c.data)
		}
	}
	dir := t.TempDir()
	lab := filepath.Join(dir, "x")
	os.Mkdir(lab, 0o700)
	os.WriteFile(filepath.Join(lab, markerName), []byte("another-token-0123456789\n"), 0o600)
	rec, _ := json.Marshal(dirRecord{Dir: lab, Token: "this-token-0123456789"})
	if err := undoDir(rec); err == nil {
		t.Error("removed a directory with another token")
	}
	os.WriteFile(filepath.Join(lab, markerName), []byte("this-token-0123456789\n"), 0o600)
	if err := undoDir(rec); err != nil {
		t.Error(err)
	}
	if _, err := os.Lstat(lab); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("still there: %v", err)
	}
	if err := undoDir(rec); err != nil {
		t.Errorf("second undo: %v", err)
	}
	// Not a lab's namespace: nothing to do, not an error.
	if err := undoNetns(json.RawMessage(`{"name":"dbhost-lab-nosuchlab-node1"}`)); err != nil {
		t.Error(err)
	}
	// A link where the directory was is neither followed nor removed.
	os.Symlink(dir, lab)
	if err := undoDir(rec); err == nil {
		t.Error("followed a link")
	}
}

// Open refuses a name that is no lab, a directory without the marker,
// and a root others can write in (its journals are not believed).
func TestOpenRefuses(t *testing.T) {
	root := t.TempDir()
	if _, err := Open(filepath.Join(root, "missing"), "x"); !errors.Is(err, ErrNoLab) {
		t.Errorf("no root: %v", err)
	}
	os.Chmod(root, 0o777)
	if _, err := Open(root, "x"); err == nil || !strings.Contains(err.Error(), "only root can write in") {
		t.Errorf("writable root: %v", err)
	}
	if err := Remove(root, "x"); err == nil {
		t.Error("Remove believed a writable root")
	}
	os.Chmod(root, 0o700)
	if _, err := Open(root, "none"); !errors.Is(err, ErrNoLab) {
		t.Errorf("no lab: %v", err)
	}
	os.WriteFile(filepath.Join(root, "fake.journal"), []byte(`{"version":2,"changes":[]}`), 0o600)
	os.Mkdir(filepath.Join(root, "fake"), 0o700)
	if _, err := Open(root, "fake"); err == nil || !strings.Contains(err.Error(), "is not a lab") {
		t.Errorf("no marker: %v", err)
	}
	if _, err := Open(root, "../etc"); err == nil {
		t.Error("opened ../etc")
	}
}

// grastate.dat: the seqno of a clean shutdown, -1 after a crash, read
// without following a link.
func TestGrastate(t *testing.T) {
	dir := t.TempDir()
	gs := "# GALERA saved state\nversion: 2.1\nuuid:    3f66bfce-ea8b-11f1-91d3-32925a4aaa5b\nseqno:   -1\nsafe_to_bootstrap: 0\n"
	os.WriteFile(filepath.Join(dir, "grastate.dat"), []byte(gs), 0o660)
	if s := grastateSeqno(dir); s != -1 {
		t.Errorf("seqno %d", s)
	}
	os.WriteFile(filepath.Join(dir, "grastate.dat"), []byte(strings.Replace(gs, "seqno:   -1", "seqno:   42", 1)), 0o660)
	if s := grastateSeqno(dir); s != 42 {
		t.Errorf("seqno %d", s)
	}
	if s := grastateSeqno(t.TempDir()); s != -2 {
		t.Errorf("no file: %d", s)
	}
	other := t.TempDir()
	os.Symlink(filepath.Join(dir, "grastate.dat"), filepath.Join(other, "grastate.dat"))
	if s := grastateSeqno(other); s != -2 {
		t.Errorf("followed a link: %d", s)
	}
}

func TestToStatus(t *testing.T) {
	g := toStatus(map[string]string{"wsrep_cluster_status": "Primary", "wsrep_local_state_comment": "Synced",
		"wsrep_cluster_size": "4", "wsrep_ready": "ON", "wsrep_connected": "ON", "wsrep_cluster_weight": "5",
		"wsrep_incoming_addresses": "10.238.1.1:3306,10.238.1.2:3306,", "wsrep_evs_repl_latency": "0.0001/0.0002/0.0003/5e-05/7",
		"wsrep_flow_control_paused": "0.25", "uptime": "12"})
	if g.ClusterStatus != "Primary" || g.LocalState != "Synced" || g.ClusterSize != 4 || !g.Ready || !g.Connected ||
		g.ClusterWeight != 5 || len(g.IncomingAddresses) != 3 || g.IncomingAddresses[2] != "" || g.FlowControlPaused != 0.25 || g.Uptime != 12 ||
		g.ReplLatency == nil || g.ReplLatency.Max != 0.0003 || g.ReplLatency.Samples != 7 {
		t.Errorf("%+v %+v", g, g.ReplLatency)
	}
}

func TestIsoSeconds(t *testing.T) {
	for d, want := range map[time.Duration]string{2 * time.Second: "PT2S", 500 * time.Millisecond: "PT0.5S", 90 * time.Second: "PT90S"} {
		if got := isoSeconds(d); got != want {
			t.Errorf("%v: %s", d, got)
		}
	}
}
