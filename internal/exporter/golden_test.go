package exporter_test

import (
	"context"
	"flag"
	"path/filepath"
	"regexp"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/dbhost/dbhost/internal/fixture"
)

var update = flag.Bool("update", false, "rewrite the golden /metrics expositions in testdata/metrics")

// metricsHosts are recorded hosts whose expositions together cover every
// default collector: the shared PostgreSQL, MariaDB and Redis as
// provisioned, an audit without root, a container under a memory limit,
// huge pages in use by MariaDB, MongoDB, a Galera node, two NUMA nodes and
// a tuned database device.
var metricsHosts = []string{
	"baseline", "baseline-nonroot", "container-memlimit", "mem-hugepages-mariadb", "mongo-6",
	"mysql-galera", "numa-2node-interleave", "storage-vda-tuned",
}

// Lines of the exposition that are not about the host: the Go runtime and
// the process serving it (node_exporter's e2e test leaves them out too).
var notHost = regexp.MustCompile(`^# (HELP|TYPE) (go|process|promhttp)_|^(go|process|promhttp)_`)

// What changes from one audit to the next of the same host: how long the
// audit and each collector took, and when the audit finished.
var varies = regexp.MustCompile(`(?m)^(dbhost_audit_duration_seconds|dbhost_audit_last_success_timestamp_seconds|dbhost_collector_duration_seconds)(\{[^}]*\})? \S+$`)

// TestGoldenMetrics compares the whole /metrics page served after an audit
// of each recorded host with testdata/metrics/NAME.prom, as
// node_exporter's collector/fixtures/e2e-output.txt does: every change to
// a series, a label or a help text shows in review as a text diff.
// `go test ./internal/exporter -run TestGoldenMetrics -update` rewrites
// them. Normalised: the Go runtime and process series are left out; the
// durations of the audit and of each collector, and the audit's last
// success time, read N; build info's Go version and revision read GO and
// REV.
func TestGoldenMetrics(t *testing.T) {
	for _, name := range metricsHosts {
		t.Run(name, func(t *testing.T) {
			var calls atomic.Int32
			e := newExporter(t, recordedAudit(t, name, &calls), 0)
			e.AuditOnce(context.Background())
			code, body := get(t, e.Handler(), "/metrics")
			if code != 200 || calls.Load() != 1 {
				t.Fatalf("/metrics: %d after %d audits", code, calls.Load())
			}
			got := normalise(body)
			fixture.Golden(t, filepath.Join("testdata", "metrics", name+".prom"), got, *update)
		})
	}
}

func normalise(body string) string {
	var out strings.Builder
	for _, ln := range strings.SplitAfter(body, "\n") {
		if !notHost.MatchString(ln) {
			out.WriteString(ln)
		}
	}
	s := varies.ReplaceAllString(out.String(), "$1$2 N")
	return buildInfo.ReplaceAllString(s, `${1}goversion="GO",revision="REV",`)
}

// The toolchain and source revision of the test binary, not the host's.
var buildInfo = regexp.MustCompile(`(?m)^(dbhost_build_info\{)goversion="[^"]*",revision="[^"]*",`)

// TestGoldenMetricsNormalise: only the runtime's series, the timings and
// the build's toolchain go; a host's series stays as served.
func TestGoldenMetricsNormalise(t *testing.T) {
	in := "# HELP go_goroutines x\n# TYPE go_goroutines gauge\ngo_goroutines 7\nprocess_open_fds 9\n" +
		"dbhost_audit_duration_seconds 0.0123\ndbhost_audit_last_success_timestamp_seconds 1.7e+09\n" +
		"dbhost_collector_duration_seconds{collector=\"block\"} 7.832e-06\n" +
		"dbhost_sysctl{name=\"vm.swappiness\"} 60\ndbhost_goroutines_like 1\n" +
		"dbhost_build_info{goversion=\"go1.26.8\",revision=\"abc\",version=\"test\"} 1\n"
	want := "dbhost_audit_duration_seconds N\ndbhost_audit_last_success_timestamp_seconds N\n" +
		"dbhost_collector_duration_seconds{collector=\"block\"} N\n" +
		"dbhost_sysctl{name=\"vm.swappiness\"} 60\ndbhost_goroutines_like 1\n" +
		"dbhost_build_info{goversion=\"GO\",revision=\"REV\",version=\"test\"} 1\n"
	if got := normalise(in); got != want {
		t.Errorf("normalise:\n%s\nwant\n%s", got, want)
	}
}
