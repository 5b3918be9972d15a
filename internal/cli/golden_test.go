package cli

import (
	"flag"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/dbhost/dbhost/internal/fixture"
)

var update = flag.Bool("update", false, "rewrite the golden audits in testdata/golden")

// goldenHosts is one recorded host of each scenario family (the file name's
// first word), plus the baseline.
var goldenHosts = []string{
	"baseline", "baseline-nonroot", "container-docker", "kernel-glibc-2.17", "limits-filemax-low",
	"mem-commit-near", "mongo-4-mmapv1", "mysql-defaults-file", "net-listen-all",
	"numa-2node-interleave", "persist-files", "pg-collation-mismatch", "redis-auth",
	"sec-apparmor", "storage-bind", "time-chrony-nosource", "tuned-fixed",
}

// The audit's own run time is the only part of the text that changes
// between two runs.
var tookRE = regexp.MustCompile(`(?m)( checks on \d+ subjects?) in [0-9.]+ ms\.$`)

// TestGoldenAudits compares the text audit of each family's recorded host
// with the file checked in beside it, as node_exporter's e2e output does:
// every change in what the audit says shows in review as a text diff.
// `go test ./internal/cli -run TestGoldenAudits -update` rewrites them.
func TestGoldenAudits(t *testing.T) {
	for _, name := range goldenHosts {
		t.Run(name, func(t *testing.T) {
			snap := fixture.Path(name)
			_, out, stderr := runCLI(t, "audit", "--from", snap, "--color", "never")
			if out == "" {
				t.Fatalf("no audit: %s", stderr)
			}
			got := tookRE.ReplaceAllString(strings.ReplaceAll(out, snap, "testdata/hosts/"+name+".tar.gz"), "$1 in N ms.")
			fixture.Golden(t, filepath.Join("testdata", "golden", name+".txt"), got, *update)
		})
	}
}
