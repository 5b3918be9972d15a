package mysql

import (
	"net"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/dbhost/dbhost/internal/engine"
	"github.com/dbhost/dbhost/internal/host"
)

// ~/.my.cnf of the user running dbhost: [client] then [mysql], later
// lines win, quotes and escapes resolved; other groups ignored.
func TestClientCredentials(t *testing.T) {
	home := t.TempDir()
	t.Setenv("HOME", home)
	cnf := "[client]\nuser = alice\npassword = \"p#ss\\\\w\"\n[mysqldump]\nuser = dump\n[mysql]\nuser=bob\n"
	if err := os.WriteFile(filepath.Join(home, ".my.cnf"), []byte(cnf), 0o600); err != nil {
		t.Fatal(err)
	}
	h, err := host.Open("/")
	if err != nil {
		t.Fatal(err)
	}
	u, pw, src := clientCredentials(h)
	if u != "bob" || pw != `p#ss\w` || src != filepath.Join(home, ".my.cnf") {
		t.Errorf("credentials %q %q from %q", u, pw, src)
	}
	in := &engine.Instance{Engine: engine.MySQL, PID: os.Getpid(), User: "root"}
	cfg, via, err := connConfig(h, in, "/run/x.sock", engine.Options{Timeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Net != "unix" || cfg.Addr != "/run/x.sock" || cfg.User != "bob" || cfg.Passwd != `p#ss\w` {
		t.Errorf("config %+v", cfg)
	}
	if strings.Contains(via, "p#ss") || !strings.Contains(via, "credentials from "+home) {
		t.Errorf("via %q", via)
	}
	// A TCP DSN naming an address the server (here: this process) listens
	// on is used as given; one naming another address is not used at all.
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	own := l.Addr().String()
	cfg, _, err = connConfig(h, in, "/run/x.sock", engine.Options{MySQLDSN: "u:pw@tcp(" + own + ")/", Timeout: time.Second})
	if err != nil || cfg.Net != "tcp" || cfg.Addr != own || cfg.Passwd != "pw" {
		t.Errorf("tcp DSN config %+v %v", cfg, err)
	}
	cfg, via, _ = connConfig(h, in, "/run/x.sock", engine.Options{MySQLDSN: "u:pw@tcp(127.0.0.1:1)/", Timeout: time.Second})
	if cfg.Net != "unix" || cfg.User == "u" || cfg.Passwd == "pw" || !strings.Contains(via, "not this server") {
		t.Errorf("a DSN naming another server was used: %+v (%s)", cfg, via)
	}
	// A server that runs as another user gets no password.
	other := &engine.Instance{Engine: engine.MySQL, PID: os.Getpid(), UID: 65534, User: "nobody"}
	if cfg, via, _ := connConfig(h, other, "/run/x.sock", engine.Options{Timeout: time.Second}); cfg.Passwd != "" || !strings.Contains(via, "no password") {
		t.Errorf("password offered to a server run by nobody: %q (%s)", cfg.Passwd, via)
	}
	if _, _, err := connConfig(h, in, "/run/x.sock", engine.Options{MySQLDSN: "u:pw@bogus(", Timeout: time.Second}); err == nil || strings.Contains(err.Error(), "pw") {
		t.Errorf("bad DSN error %v", err)
	}
}

func TestSameValue(t *testing.T) {
	for _, tc := range []struct {
		file, live string
		same       bool
	}{
		{"1G", "1073741824", true},
		{"ON", "1", true},
		{"", "ON", false},
		{"skip", "ON", false},
		{"/var/lib/mysql", "/var/lib/mysql/", true},
		{"O_DIRECT", "o_direct", true},
		{"fsync", "O_DIRECT", false},
		{"0", "OFF", true},
	} {
		if got := sameValue(tc.file, tc.live); got != tc.same {
			t.Errorf("sameValue(%q, %q) = %v", tc.file, tc.live, got)
		}
	}
}

// The wsrep status variables as a node reports them, also while it is not
// serving; a server without the provider loaded has none.
func TestGaleraStatus(t *testing.T) {
	g, err := galeraStatus(map[string]string{"wsrep_cluster_status": "non-Primary", "wsrep_local_state_comment": "Initialized",
		"wsrep_cluster_size": "1", "wsrep_ready": "OFF", "wsrep_connected": "ON", "wsrep_cluster_state_uuid": "u"})
	want := engine.GaleraStatus{ClusterStatus: "non-Primary", LocalState: "Initialized", ClusterSize: 1, Connected: true, StateUUID: "u"}
	if err != nil || !reflect.DeepEqual(*g, want) {
		t.Errorf("galeraStatus = %+v, %v; want %+v", g, err, want)
	}
	// A member of three data nodes and garbd, as MariaDB 10.11 with Galera
	// 4 reports it (values from a lab node): the arbitrator's address is
	// the empty entry, kept so that the entries stay in index order.
	g, err = galeraStatus(map[string]string{"wsrep_cluster_status": "Primary", "wsrep_local_state_comment": "Synced",
		"wsrep_cluster_size": "4", "wsrep_ready": "ON", "wsrep_connected": "ON", "wsrep_cluster_weight": "4",
		"wsrep_local_index": "3", "wsrep_incoming_addresses": "10.77.0.2:3306, 10.77.0.3:3306,,10.77.0.4:3306",
		"wsrep_flow_control_paused": "0.0123", "wsrep_local_recv_queue_avg": "0.5", "wsrep_cert_deps_distance": "12.5",
		"wsrep_replicated_bytes": "1048576", "wsrep_received_bytes": "2097152", "uptime": "3600",
		"wsrep_evs_repl_latency": "0.000212/0.000422/0.00113/0.000201/57"})
	want = engine.GaleraStatus{ClusterStatus: "Primary", LocalState: "Synced", ClusterSize: 4, Ready: true, Connected: true,
		ClusterWeight: 4, LocalIndex: 3, IncomingAddresses: []string{"10.77.0.2:3306", "10.77.0.3:3306", "", "10.77.0.4:3306"},
		FlowControlPaused: 0.0123, LocalRecvQueueAvg: 0.5, CertDepsDistance: 12.5, ReplicatedBytes: 1 << 20, ReceivedBytes: 2 << 20,
		Uptime: 3600, ReplLatency: &engine.GaleraLatency{Min: 0.000212, Avg: 0.000422, Max: 0.00113, StdDev: 0.000201, Samples: 57}}
	if err != nil || !reflect.DeepEqual(*g, want) {
		t.Errorf("galeraStatus = %+v, %v; want %+v", g, err, want)
	}
	if g, err := ParseGaleraStatus(map[string]string{}); err == nil {
		t.Errorf("no wsrep status: %+v, want an error", g)
	}
	for _, c := range []struct {
		on, provider string
		want         bool
	}{{"ON", "/usr/lib/galera/libgalera_smm.so", true}, {"OFF", "/usr/lib/galera/libgalera_smm.so", false}, {"ON", "none", false}, {"1", "", false}} {
		if got := wsrepActive(c.on, c.provider); got != c.want {
			t.Errorf("wsrepActive(%q, %q) = %v", c.on, c.provider, got)
		}
	}
}

// wsrep_evs_repl_latency: a lone node has no samples; garbage is no
// measurement rather than a zero round trip.
func TestParseReplLatency(t *testing.T) {
	for _, c := range []struct {
		in   string
		want *engine.GaleraLatency
	}{
		{"0.1/0.2/0.3/0.05/4", &engine.GaleraLatency{Min: 0.1, Avg: 0.2, Max: 0.3, StdDev: 0.05, Samples: 4}},
		{"0/0/0/0/0", nil},
		{"", nil},
		{"1/2/3/4", nil},
		{"a/2/3/4/5", nil},
		{"NaN/2/3/4/5", nil},
		{"-1/2/3/4/5", nil},
	} {
		if got := parseReplLatency(c.in); !reflect.DeepEqual(got, c.want) {
			t.Errorf("parseReplLatency(%q) = %+v, want %+v", c.in, got, c.want)
		}
	}
	if statFloat("nan") != 0 || statFloat("+Inf") != 0 || statFloat("x") != 0 || statFloat(" 0.25 ") != 0.25 {
		t.Error("statFloat: NaN, Inf and garbage must read as 0, numbers as themselves")
	}
}
