package cli

import (
	"flag"
	"fmt"
	"os"
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
			file := filepath.Join("testdata", "golden", name+".txt")
			if *update {
				if err := os.WriteFile(file, []byte(got), 0o644); err != nil {
					t.Fatal(err)
				}
				return
			}
			want, err := os.ReadFile(file)
			if err != nil {
				t.Fatalf("%v (run with -update to write it)", err)
			}
			if got != string(want) {
				t.Errorf("the audit of %s differs from %s (run with -update and review the diff):\n%s", name, file, firstDiff(string(want), got))
			}
		})
	}
}

// firstDiff shows the first line where two texts part, with its neighbours.
func firstDiff(want, got string) string {
	w, g := strings.Split(want, "\n"), strings.Split(got, "\n")
	for i := 0; i < len(w) || i < len(g); i++ {
		if i < len(w) && i < len(g) && w[i] == g[i] {
			continue
		}
		line := func(s []string) string {
			if i < len(s) {
				return s[i]
			}
			return "(end)"
		}
		return fmt.Sprintf("line %d:\n- %s\n+ %s", i+1, line(w), line(g))
	}
	return ""
}
