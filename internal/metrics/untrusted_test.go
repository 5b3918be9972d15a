package metrics_test

import (
	"flag"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"

	dto "github.com/prometheus/client_model/go"

	"github.com/dbhost/dbhost/internal/check"
	"github.com/dbhost/dbhost/internal/engine"
	"github.com/dbhost/dbhost/internal/facts"
	"github.com/dbhost/dbhost/internal/fixture"
	"github.com/dbhost/dbhost/internal/host"
	"github.com/dbhost/dbhost/internal/metrics"
)

var update = flag.Bool("update", false, "rewrite testdata/untrusted.golden")

// evilDevices are block devices only untrusted instances claim to live on.
// Every text an untrusted instance chooses in withUntrusted holds "evil".
var evilDevices = []string{"evil0", "evil1", "evil2"}

// withUntrusted is a recorded host plus n untrusted postgres instances
// (the look-alikes any user can start: each picks its port, data
// directory, version and limits, and lives on a device of its choosing)
// and notDescribed more that discovery only counted. The devices exist for
// every n, so that only the instances differ.
func withUntrusted(t *testing.T, name string, n int, notDescribed map[engine.Engine]int) *facts.Facts {
	t.Helper()
	base := fixture.Facts(t, name)
	f := base.WithInstances(slices.Clone(base.Instances))
	f.NotDescribed = notDescribed
	f.Storage.Devices = maps.Clone(base.Storage.Devices)
	for _, d := range evilDevices {
		f.Storage.Devices[d] = &facts.BlockDevice{Name: d, Kind: "virtio",
			ReadAheadKB: host.Reading{Value: "128"}, NrRequests: host.Reading{Value: "256"},
			Rotational: host.Reading{Value: "0"}, Scheduler: host.Reading{Value: "[none] evil-sched"}}
	}
	for i := range n {
		in := &engine.Instance{
			Engine: engine.Postgres, Flavor: "postgresql", PID: 1_000_000 + i, Comm: "postgres",
			User: "nobody", UID: 65534, GID: 65534,
			// Half by port, half by data directory (with a line break):
			// both make the name.
			DataDir: fmt.Sprintf("/tmp/evil/d%d\nevil", i),
			Version: fmt.Sprintf("99.%d-evil\x1b[31m", i),
			Trust:   engine.Trust{Basis: engine.TrustNone, Why: "runs as nobody, not as root or postgres"},
		}
		if i%2 == 0 {
			in.Port = 40000 + i
		}
		dev := evilDevices[i%len(evilDevices)]
		f.Instances = append(f.Instances, &facts.Instance{Instance: in,
			Limits:  host.Limits{host.LimitNofile: {Soft: uint64(1000 + i), Hard: uint64(2000 + i)}},
			Storage: []facts.PathStorage{{Role: "data", Path: in.DataDir, Device: dev, Stack: []string{dev}, Physical: []string{dev}}}})
	}
	return f
}

// series names each series of a scrape by its name and labels.
func seriesOf(mfs map[string]*dto.MetricFamily) map[string]bool {
	out := map[string]bool{}
	for name, mf := range mfs {
		for _, m := range mf.Metric {
			var ls []string
			for _, l := range m.Label {
				ls = append(ls, l.GetName()+"="+l.GetValue())
			}
			sort.Strings(ls)
			out[name+"{"+strings.Join(ls, ",")+"}"] = true
		}
	}
	return out
}

func sum(mfs map[string]*dto.MetricFamily, name string) float64 {
	s := 0.0
	for _, m := range mfs[name].GetMetric() {
		s += m.GetGauge().GetValue()
	}
	return s
}

// TestUntrustedSeriesBounded: a host exports the same series whether no
// untrusted instance runs or a thousand do, and whether discovery counted
// more without describing them: the untrusted ones only move the values of
// the fixed aggregate series. No label holds anything an untrusted
// instance chose (its name, data directory, version, device), and the
// findings about the host and trusted servers are counted as before.
func TestUntrustedSeriesBounded(t *testing.T) {
	const host = "limits-nofile-1024" // trusted servers with limits and storage
	none := withUntrusted(t, host, 0, nil)
	if trusted, _ := none.SplitTrust(); len(trusted) == 0 {
		t.Fatalf("%s has no trusted instance", host)
	}
	baseFindings := check.Run(none, check.Selector{})
	base := families(t, none, baseFindings, nil)
	baseSeries := seriesOf(base)
	for _, want := range []string{
		"dbhost_untrusted_instances{engine=postgres}", "dbhost_untrusted_instances{engine=redis}",
		"dbhost_untrusted_instances_not_described{engine=mysql}", "dbhost_untrusted_instances_not_described{engine=mongodb}",
		"dbhost_untrusted_findings{severity=critical,status=fail}", "dbhost_untrusted_findings{severity=info,status=unknown}",
	} {
		if !baseSeries[want] {
			t.Errorf("without untrusted instances: no %s (the aggregates are there at 0)", want)
		}
	}
	if v := sum(base, "dbhost_untrusted_instances") + sum(base, "dbhost_untrusted_findings"); v != 0 {
		t.Errorf("without untrusted instances the aggregates sum to %v", v)
	}

	for _, n := range []int{1, engine.MaxUntrusted, 1000} {
		notDescribed := map[engine.Engine]int{engine.Postgres: 3 * n, engine.MySQL: 2}
		f := withUntrusted(t, host, n, notDescribed)
		fs := check.Run(f, check.Selector{})
		untrustedFindings := 0
		names := map[string]bool{}
		for _, in := range f.Instances {
			if !in.Trusted() {
				names[in.Name()] = true
			}
		}
		for _, fd := range fs {
			if fd.Untrusted {
				untrustedFindings++
				if !names[fd.Subject] {
					t.Fatalf("n=%d: untrusted finding about %q, not one of the untrusted instances", n, fd.Subject)
				}
			}
		}
		if untrustedFindings < n {
			t.Fatalf("n=%d: %d findings about untrusted instances: were they judged?", n, untrustedFindings)
		}
		mfs := families(t, f, fs, nil)
		got := seriesOf(mfs)
		for s := range got {
			if !baseSeries[s] {
				t.Errorf("n=%d: new series %s", n, s)
			}
		}
		for s := range baseSeries {
			if !got[s] {
				t.Errorf("n=%d: series %s gone", n, s)
			}
		}
		for name, mf := range mfs {
			for _, m := range mf.Metric {
				for _, l := range m.Label {
					if v := l.GetValue(); strings.Contains(v, "evil") || strings.Contains(v, "40000") || names[v] {
						t.Errorf("n=%d: %s has %s=%q, chosen by an untrusted instance", n, name, l.GetName(), v)
					}
				}
			}
		}
		for e, want := range map[engine.Engine]int{engine.Postgres: n + 3*n, engine.MySQL: 2, engine.MongoDB: 0, engine.Redis: 0} {
			if v, ok := value(mfs, "dbhost_untrusted_instances", "engine", string(e)); !ok || v != float64(want) {
				t.Errorf("n=%d: dbhost_untrusted_instances{engine=%s} %v (present %v), want %d", n, e, v, ok, want)
			}
			if v, ok := value(mfs, "dbhost_untrusted_instances_not_described", "engine", string(e)); !ok || v != float64(notDescribed[e]) {
				t.Errorf("n=%d: dbhost_untrusted_instances_not_described{engine=%s} %v (present %v), want %d", n, e, v, ok, notDescribed[e])
			}
		}
		if v := sum(mfs, "dbhost_untrusted_findings"); v != float64(untrustedFindings) {
			t.Errorf("n=%d: dbhost_untrusted_findings sum to %v, want %d", n, v, untrustedFindings)
		}
		// The host and the trusted servers are judged as without them.
		for _, m := range base["dbhost_findings"].Metric {
			ls := []string{}
			for _, l := range m.Label {
				ls = append(ls, l.GetName(), l.GetValue())
			}
			if v, _ := value(mfs, "dbhost_findings", ls...); v != m.GetGauge().GetValue() {
				t.Errorf("n=%d: dbhost_findings%q %v, without untrusted instances %v", n, ls, v, m.GetGauge().GetValue())
			}
		}
		t.Logf("n=%d (+%d counted): %d series, as without; %d findings about untrusted instances", n, 3*n+2, len(got), untrustedFindings)
	}
}

// TestUntrustedGolden: the aggregate series of the instances collector, as
// a scrape reads them (help, type and every engine at its count), for a
// host with MaxUntrusted untrusted instances described and more counted.
func TestUntrustedGolden(t *testing.T) {
	f := withUntrusted(t, "baseline", engine.MaxUntrusted, map[engine.Engine]int{engine.Postgres: 984, engine.Redis: 7})
	set, err := metrics.NewSet(map[string]bool{"checks": false, "sysctl": false, "thp": false, "hugepages": false, "block": false, "limits": false})
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	for _, line := range strings.SplitAfter(expose(t, set, f, nil), "\n") {
		name := strings.TrimPrefix(strings.TrimPrefix(line, "# HELP "), "# TYPE ")
		if strings.HasPrefix(name, "dbhost_untrusted_") {
			b.WriteString(line)
		}
	}
	golden := filepath.Join("testdata", "untrusted.golden")
	if *update {
		if err := os.WriteFile(golden, []byte(b.String()), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatalf("%v (go test -run TestUntrustedGolden -update writes it)", err)
	}
	if b.String() != string(want) {
		t.Errorf("the untrusted aggregates differ from %s (-update rewrites it):\n%s", golden, b.String())
	}
}
