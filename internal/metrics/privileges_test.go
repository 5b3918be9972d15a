package metrics_test

import (
	"bytes"
	"maps"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/dbhost/dbhost/internal/check"
	"github.com/dbhost/dbhost/internal/fixture"
	"github.com/dbhost/dbhost/internal/metrics"
	"github.com/dbhost/dbhost/internal/report"
	"github.com/dbhost/dbhost/internal/waiver"
)

// privilegePairs are recorded hosts collected as root and, on the same boot
// (the shared servers have the same PIDs), as user nobody; and derived
// hosts that see less than their base: a second server's port is only in
// its configuration, which nobody cannot read.
var privilegePairs = [][2]string{
	{"baseline", "baseline-nonroot"}, {"baseline", "net-nonroot"}, {"baseline", "pg-nonroot"},
	{"baseline", "mem-nonroot"}, {"baseline", "mongo-nonroot"}, {"baseline", "redis-nonroot"},
	{"baseline", "storage-nonroot"}, {"mysql-galera-bound", "mysql-galera-nonroot"},
	// A second cluster whose port nobody cannot read (the case).
	{"baseline", "pg-nonroot-cluster"}, {"pg-nonroot", "pg-nonroot-cluster"},
	{"mysql-nonroot", "mysql-nonroot-port"},
}

// dbSeries lists, per database name, the series that carry it in a
// "subject" label: each as its family and every label but the value.
func dbSeries(mfs map[string]*dto.MetricFamily, names map[string]bool) map[string][]string {
	out := map[string][]string{}
	for fam, mf := range mfs {
		for _, m := range mf.Metric {
			var ls []string
			db := ""
			for _, l := range m.Label {
				if l.GetName() == "subject" && names[l.GetValue()] {
					db = l.GetValue()
				}
				ls = append(ls, l.GetName()+"="+l.GetValue())
			}
			if db != "" {
				sort.Strings(ls)
				out[db] = append(out[db], fam+"{"+strings.Join(ls, ",")+"}")
			}
		}
	}
	return out
}

// TestLabelsAlikeWithoutRoot: a database seen by root and by nobody (the
// same process, matched by PID) has the same name, and every series the
// run without root exports about it is one root exports too, with the same
// labels: no series changes with privileges. Series only root can produce
// may be missing from the other run.
func TestLabelsAlikeWithoutRoot(t *testing.T) {
	for _, p := range privilegePairs {
		rootF, userF := fixture.Facts(t, p[0]), fixture.Facts(t, p[1])
		byPID := map[int]string{}
		rootNames := map[string]bool{}
		for _, in := range rootF.Instances {
			byPID[in.PID] = in.Name()
			rootNames[in.Name()] = true
		}
		userNames := map[string]bool{}
		matched := 0
		for _, in := range userF.Instances {
			userNames[in.Name()] = true
			if n, ok := byPID[in.PID]; ok {
				matched++
				// A name only root could form is not this run's to give:
				// checked below to have no series.
				if n != in.Name() && in.StableName() {
					t.Errorf("%s: pid %d is %q as root, %q in %s", p[0], in.PID, n, in.Name(), p[1])
				}
			}
		}
		if matched < 3 {
			t.Fatalf("%s and %s share %d database processes: not the same boot", p[0], p[1], matched)
		}
		rootSeries := dbSeries(recorded(t, p[0], nil), rootNames)
		userSeries := dbSeries(recorded(t, p[1], nil), userNames)
		for _, in := range userF.Instances {
			name := in.Name()
			if !in.StableName() {
				// Only root could name it: counted, no series.
				if n := len(userSeries[name]); n > 0 {
					t.Errorf("%s: %s, a name only this run gives, has %d series", p[1], name, n)
				}
				continue
			}
			if _, shared := byPID[in.PID]; !shared {
				continue
			}
			have := map[string]bool{}
			for _, s := range rootSeries[name] {
				have[s] = true
			}
			for _, s := range userSeries[name] {
				if !have[s] {
					t.Errorf("%s: %s exports %s, which root (%s) does not", p[1], name, s, p[0])
				}
			}
		}
	}
}

// TestWaivedMarker: a waived finding keeps its dbhost_check_status and
// gains dbhost_check_waived with the very same labels (and its expiry when
// it has one); the others have no marker.
func TestWaivedMarker(t *testing.T) {
	f := fixture.Facts(t, "pg-hba-open")
	fs := slices.Clone(fixture.Findings(t, "pg-hba-open"))
	expires := time.Date(2027, 3, 1, 0, 0, 0, 0, time.UTC)
	var waived []check.Finding
	for i := range fs {
		if fs[i].Status == check.Fail && len(waived) < 2 {
			w := &check.Waiver{Reason: "accepted", Source: "/etc/dbhost/waivers.yaml:3"}
			if len(waived) == 0 {
				w.Expires = expires
			}
			fs[i].Waiver = w
			waived = append(waived, fs[i])
		}
	}
	if len(waived) < 2 {
		t.Fatal("pg-hba-open has fewer than two failing findings")
	}
	plain := families(t, f, fixture.Findings(t, "pg-hba-open"), nil)
	mfs := families(t, f, fs, nil)
	if got, want := statusSeries(mfs["dbhost_check_status"]), statusSeries(plain["dbhost_check_status"]); !maps.Equal(got, want) {
		t.Error("a waiver changed dbhost_check_status")
	}
	if n := len(mfs["dbhost_check_waived"].GetMetric()); n != len(waived) {
		t.Errorf("%d dbhost_check_waived series, want %d", n, len(waived))
	}
	for k, fd := range waived {
		ls := []string{"check", fd.ID, "subject", fd.Subject, "severity", fd.Severity.String()}
		if v, ok := value(mfs, "dbhost_check_status", ls...); !ok || v != 1 {
			t.Errorf("%s %s: status %v (present %v)", fd.ID, fd.Subject, v, ok)
		}
		if v, ok := value(mfs, "dbhost_check_waived", ls...); !ok || v != 1 {
			t.Errorf("%s %s: waived %v (present %v), want 1 with the status's labels", fd.ID, fd.Subject, v, ok)
		}
		v, ok := value(mfs, "dbhost_check_waiver_expiry_timestamp_seconds", ls...)
		if k == 0 && (!ok || v != float64(expires.Unix())) {
			t.Errorf("%s %s: expiry %v (present %v), want %d", fd.ID, fd.Subject, v, ok, expires.Unix())
		}
		if k == 1 && ok {
			t.Errorf("%s %s: an expiry series for a waiver without one", fd.ID, fd.Subject)
		}
	}
}

func statusSeries(mf *dto.MetricFamily) map[string]float64 {
	out := map[string]float64{}
	for _, m := range mf.GetMetric() {
		var ls []string
		for _, l := range m.Label {
			ls = append(ls, l.GetName()+"="+l.GetValue())
		}
		out[strings.Join(ls, ",")] = m.GetGauge().GetValue()
	}
	return out
}

// TestWaiverFileState: serve's waiver file state is exported (valid, and
// the entries that accept nothing), and nothing is when no file was read.
func TestWaiverFileState(t *testing.T) {
	f := fixture.Facts(t, "pg-hba-open")
	fs := fixture.Findings(t, "pg-hba-open")
	set, err := metrics.NewSet(nil)
	if err != nil {
		t.Fatal(err)
	}
	scrape := func(st *waiver.Status) map[string]*dto.MetricFamily {
		var buf bytes.Buffer
		if err := report.WriteMetrics(&buf, set.Collect(&metrics.Input{Facts: f, Findings: fs, Waivers: st})); err != nil {
			t.Fatal(err)
		}
		p := expfmt.NewTextParser(model.UTF8Validation)
		mfs, err := p.TextToMetricFamilies(&buf)
		if err != nil {
			t.Fatal(err)
		}
		return mfs
	}
	if mfs := scrape(nil); mfs["dbhost_waivers_valid"] != nil || mfs["dbhost_waiver_entries"] != nil {
		t.Error("waiver file series without a waiver file")
	}
	mfs := scrape(&waiver.Status{Valid: false, Error: "line 3: unknown check", Outcome: &waiver.Outcome{
		Expired: []waiver.Entry{{Check: "mem.swappiness", Subject: "host"}},
		Stale:   []waiver.Entry{{Check: "redis.auth", Subject: "redis:6379"}, {Check: "mem.thp", Subject: "host"}},
	}})
	for _, c := range []struct {
		name   string
		labels []string
		want   float64
	}{
		{"dbhost_waivers_valid", nil, 0},
		{"dbhost_waiver_entries", []string{"state", "expired"}, 1},
		{"dbhost_waiver_entries", []string{"state", "stale"}, 2},
		{"dbhost_waiver_entries", []string{"state", "unneeded"}, 0},
	} {
		if v, ok := value(mfs, c.name, c.labels...); !ok || v != c.want {
			t.Errorf("%s%v = %v (present %v), want %v", c.name, c.labels, v, ok, c.want)
		}
	}
	if v, ok := value(scrape(&waiver.Status{Valid: true}), "dbhost_waivers_valid"); !ok || v != 1 {
		t.Errorf("valid file: dbhost_waivers_valid = %v (present %v), want 1", v, ok)
	}
}
