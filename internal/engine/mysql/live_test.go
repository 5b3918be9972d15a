package mysql

import (
	"net"
	"os"
	"path/filepath"
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
	if err != nil || *g != want {
		t.Errorf("galeraStatus = %+v, %v; want %+v", g, err, want)
	}
	if g, err := galeraStatus(map[string]string{}); err == nil {
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
