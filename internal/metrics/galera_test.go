package metrics_test

import (
	"os/exec"
	"strings"
	"testing"

	"github.com/dbhost/dbhost/internal/engine"
	"github.com/dbhost/dbhost/internal/facts"
	"github.com/dbhost/dbhost/internal/metrics"
	"github.com/dbhost/dbhost/internal/testdb"
)

// galeraNode is a trusted MariaDB Galera node of a three-node cluster
// whose other members this node only lists.
func galeraNode(port int, name string, weight string, trusted bool) *facts.Instance {
	st := &engine.GaleraStatus{ClusterStatus: "Primary", LocalState: "Synced", ClusterSize: 3, ClusterWeight: 3,
		StateUUID: "36358ae4-ea8b-11f1-aefa-121a748819a2",
		Members:   []engine.GaleraMember{{Name: "db1", IncomingAddress: "AUTO"}, {Name: "db2", IncomingAddress: "AUTO"}, {Name: "db3", IncomingAddress: "AUTO"}}}
	return &facts.Instance{Instance: &engine.Instance{Engine: engine.MySQL, Flavor: "MariaDB", Port: port,
		Trust:          engine.Trust{Trusted: trusted},
		SettingsSource: "live",
		Settings: map[string]engine.Setting{
			"wsrep_node_name":        {Value: name, Source: "live"},
			"wsrep_provider_options": {Value: "gmcast.segment = 0; pc.weight = " + weight, Source: "live"},
		},
		MySQL: &engine.MySQLInfo{Galera: true, GaleraStatus: st}}}
}

func TestGaleraTolerance(t *testing.T) {
	f := &facts.Facts{Instances: []*facts.Instance{
		galeraNode(3306, "db1", "1", true),
		galeraNode(3307, "db2", "1", true),
		galeraNode(3308, "db3", "1", false), // untrusted: no series, not read
		{Instance: &engine.Instance{Engine: engine.MySQL, Port: 3309, Trust: engine.Trust{Trusted: true}, MySQL: &engine.MySQLInfo{Galera: true}}}, // status not read
	}}
	mfs := families(t, f, nil, nil)
	for _, subj := range []string{"mysql:3306", "mysql:3307"} {
		for mode, want := range map[string]float64{"at_once": 1, "one_by_one": 1, "clean_shutdown": 2} {
			if v, ok := value(mfs, "dbhost_galera_tolerance", "subject", subj, "mode", mode); !ok || v != want {
				t.Errorf("%s %s: %v (present %v), want %v", subj, mode, v, ok, want)
			}
		}
	}
	if n := len(mfs["dbhost_galera_tolerance"].GetMetric()); n != 6 {
		t.Errorf("%d series, want 6 (two read nodes, three modes)", n)
	}
	// A heavier local node changes what the cluster survives: the view
	// merges each node's own weight.
	f.Instances[0] = galeraNode(3306, "db1", "3", true)
	f.Instances[0].MySQL.GaleraStatus.ClusterWeight = 5
	f.Instances[1].MySQL.GaleraStatus.ClusterWeight = 5
	mfs = families(t, f, nil, nil)
	if v, _ := value(mfs, "dbhost_galera_tolerance", "subject", "mysql:3307", "mode", "at_once"); v != 0 {
		t.Errorf("db1 at weight 3 of 5: at_once %v, want 0 (losing db1 stops the cluster)", v)
	}
	// Off with its collector.
	if mfs := families(t, f, nil, map[string]bool{"galera": false}); mfs["dbhost_galera_tolerance"] != nil {
		t.Error("series with the collector off")
	}
	// promtool accepts the exposition (HELP, TYPE, names).
	promtool, err := exec.LookPath("promtool")
	testdb.Need(t, "promtool (Debian package prometheus)", err == nil)
	set, _ := metrics.NewSet(nil)
	cmd := exec.Command(promtool, "check", "metrics")
	cmd.Stdin = strings.NewReader(expose(t, set, f, nil))
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Errorf("promtool check metrics: %v\n%s", err, b)
	}
}
