package cli

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/dbhost/dbhost/internal/check"
	"github.com/dbhost/dbhost/internal/engine"
	"github.com/dbhost/dbhost/internal/facts"
	"github.com/dbhost/dbhost/internal/fix"
	"github.com/dbhost/dbhost/internal/fixture"
	"github.com/dbhost/dbhost/internal/host"
	"github.com/dbhost/dbhost/internal/journal"
)

func runCLI(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	var out, errb bytes.Buffer
	code := Main(append([]string{"dbhost"}, args...), lent(t, Env{Stdout: &out, Stderr: &errb}))
	return code, out.String(), errb.String()
}

func TestExitStatus(t *testing.T) {
	snap := fixture.Path("mem-swapfile") // swappiness 60 with swap
	cases := []struct {
		args []string
		want int
	}{
		{[]string{"audit", "--from", snap, "--only", "mem.swappiness", "--fail-on", "warning"}, ExitFindings},
		{[]string{"audit", "--from", snap, "--only", "mem.swappiness", "--fail-on", "critical"}, ExitOK},
		{[]string{"audit", "--from", snap, "--only", "mem.swappiness", "--fail-on", "none"}, ExitOK},
		{[]string{"audit", "--from", fixture.Path("mem-swappiness-1"), "--only", "mem.swappiness"}, ExitOK},
		{[]string{"audit", "--from", snap, "--fail-on", "loud"}, ExitError},
		{[]string{"audit", "--from", snap, "--only", "no.such.check"}, ExitError},
		{[]string{"audit", "--from", "/nonexistent.tar.gz"}, ExitError},
		{[]string{"audit", "--bogus"}, ExitError},
		{[]string{"audit", "extra"}, ExitError},
		{[]string{"frobnicate"}, ExitError},
		{[]string{}, ExitError},
		{[]string{"audit", "-h"}, ExitOK},
		{[]string{"version"}, ExitOK},
	}
	for _, c := range cases {
		if got, _, stderr := runCLI(t, c.args...); got != c.want {
			t.Errorf("dbhost %s: exit %d, want %d\n%s", strings.Join(c.args, " "), got, c.want, stderr)
		}
	}
}

func TestNotASnapshot(t *testing.T) {
	dir := t.TempDir()
	junk := filepath.Join(dir, "junk.tar.gz")
	os.WriteFile(junk, []byte("this is not an archive"), 0o600)
	code, _, stderr := runCLI(t, "audit", "--from", junk)
	if code != ExitError || !strings.Contains(stderr, "not a usable dbhost snapshot") {
		t.Errorf("exit %d, stderr %q", code, stderr)
	}
}

// An archive with a manifest and nothing else observed nothing: it is
// refused with a clear error and exit status 2.
func TestEmptySnapshotRefused(t *testing.T) {
	var buf bytes.Buffer
	gz := gzip.NewWriter(&buf)
	tw := tar.NewWriter(gz)
	m := []byte(`{"format":"` + host.SnapshotFormat + `","euid":0}`)
	tw.WriteHeader(&tar.Header{Name: "manifest.json", Mode: 0o600, Size: int64(len(m)), Typeflag: tar.TypeReg})
	tw.Write(m)
	tw.Close()
	gz.Close()
	file := filepath.Join(t.TempDir(), "empty.tar.gz")
	os.WriteFile(file, buf.Bytes(), 0o600)
	code, _, stderr := runCLI(t, "audit", "--from", file, "--format", "json")
	if code != ExitError || !strings.Contains(stderr, "holds no observations") {
		t.Errorf("exit %d, want 2; stderr %s", code, stderr)
	}
}

func TestExitStatusNothingJudged(t *testing.T) {
	unknown := []check.Finding{{ID: "a", Status: check.Unknown}, {ID: "b", Status: check.Unknown}}
	if got := exitStatus(unknown, check.Warning); got != ExitError {
		t.Errorf("all unknown: %d, want 2", got)
	}
	mixed := append(unknown, check.Finding{ID: "c", Status: check.Fail, Severity: check.Info})
	if got := exitStatus(mixed, check.Warning); got != ExitOK {
		t.Errorf("info failure under --fail-on warning: %d, want 0", got)
	}
	if got := exitStatus(mixed, check.Info); got != ExitFindings {
		t.Errorf("info failure under --fail-on info: %d, want 1", got)
	}
}

func TestOnlySkip(t *testing.T) {
	snap := fixture.Path("baseline")
	_, out, _ := runCLI(t, "audit", "--from", snap, "--format", "json", "--only", "mem", "--fail-on", "none")
	var doc struct {
		Findings []check.Finding `json:"findings"`
	}
	if err := json.Unmarshal([]byte(out), &doc); err != nil {
		t.Fatal(err)
	}
	if len(doc.Findings) == 0 {
		t.Fatal("no findings for --only mem")
	}
	for _, f := range doc.Findings {
		if !strings.HasPrefix(f.ID, "mem.") {
			t.Errorf("--only mem ran %s", f.ID)
		}
	}
	_, out, _ = runCLI(t, "audit", "--from", snap, "--format", "json", "--skip", "mem.swappiness", "--fail-on", "none")
	if strings.Contains(out, `"id": "mem.swappiness"`) {
		t.Error("--skip mem.swappiness still ran it")
	}
}

func TestChecksCatalogJSON(t *testing.T) {
	code, out, _ := runCLI(t, "checks", "--format", "json")
	if code != ExitOK {
		t.Fatal(code)
	}
	var cat []map[string]any
	if err := json.Unmarshal([]byte(out), &cat); err != nil {
		t.Fatal(err)
	}
	if len(cat) != len(check.All()) {
		t.Errorf("%d entries, %d checks", len(cat), len(check.All()))
	}
	for _, c := range cat {
		for _, k := range []string{"id", "title", "severity", "applies_to", "doc"} {
			if v, ok := c[k]; !ok || v == "" {
				t.Errorf("%v lacks %s", c["id"], k)
			}
		}
	}
}

func TestFixIsIdempotent(t *testing.T) {
	dir := t.TempDir()
	snap := fixture.Path("mem-swapfile")
	tree := func() map[string]string {
		m := map[string]string{}
		filepath.Walk(dir, func(p string, info os.FileInfo, err error) error {
			if err == nil && !info.IsDir() {
				b, _ := os.ReadFile(p)
				rel, _ := filepath.Rel(dir, p)
				m[rel] = string(b) + "|" + info.Mode().String()
			}
			return nil
		})
		return m
	}
	if code, _, stderr := runCLI(t, "fix", "--from", snap, "--out", dir); code != ExitOK {
		t.Fatalf("fix: %d %s", code, stderr)
	}
	first := tree()
	sysctl := first[filepath.Join("etc", "sysctl.d", fix.Name+".conf")]
	if !strings.Contains(sysctl, "vm.swappiness = 1") || !strings.Contains(sysctl, "# mem.swappiness") {
		t.Errorf("sysctl.d file:\n%s", sysctl)
	}
	runCLI(t, "fix", "--from", snap, "--out", dir)
	second := tree()
	if len(first) != len(second) {
		t.Fatalf("second run changed the file set: %d vs %d", len(first), len(second))
	}
	for k, v := range first {
		if second[k] != v {
			t.Errorf("%s differs between runs", k)
		}
	}
	// Files of a finding that is gone are removed on the next run.
	runCLI(t, "fix", "--from", fixture.Path("mem-swappiness-1"), "--out", dir, "--only", "mem.swappiness")
	if _, ok := tree()[filepath.Join("etc", "sysctl.d", fix.Name+".conf")]; ok {
		t.Error("stale sysctl.d file kept after its finding passed")
	}
}

// TestCollectEqualsLive: `collect` then `audit --from` gives the same
// findings (IDs, subjects, statuses) as the live audit taken at that moment.
func TestCollectEqualsLive(t *testing.T) {
	// Servers other tests start and stop would change the host between the
	// two audits' process tables; hold them off.
	unlock, err := journal.Lock(journal.HostLock)
	if err != nil {
		t.Fatal(err)
	}
	defer unlock()
	h, err := host.Open("/")
	if err != nil {
		t.Fatal(err)
	}
	if err := h.StartRecording(); err != nil {
		t.Fatal(err)
	}
	live := facts.Gather(context.Background(), h, gatherOptions(engine.Options{}))
	liveFindings := check.Run(live, check.Selector{})
	file := filepath.Join(t.TempDir(), "snap.tar.gz")
	f, err := os.Create(file)
	if err != nil {
		t.Fatal(err)
	}
	if err := h.WriteSnapshot(f, host.SnapshotInfo{}); err != nil {
		t.Fatal(err)
	}
	f.Close()
	s, err := host.OpenSnapshot(file)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	snap := facts.Gather(context.Background(), s, gatherOptions(engine.Options{}))
	snapFindings := check.Run(snap, check.Selector{})
	key := func(fs []check.Finding) map[string]check.Status {
		m := map[string]check.Status{}
		for _, f := range fs {
			m[f.ID+" "+f.Subject] = f.Status
		}
		return m
	}
	a, b := key(liveFindings), key(snapFindings)
	for k, v := range a {
		if b[k] != v {
			t.Errorf("%s: live %s, snapshot %q", k, v, b[k])
		}
	}
	for k := range b {
		if _, ok := a[k]; !ok {
			t.Errorf("%s only in the snapshot audit", k)
		}
	}
	if len(live.Instances) != len(snap.Instances) {
		t.Errorf("instances: live %d, snapshot %d", len(live.Instances), len(snap.Instances))
	}
}

// TestDocsCatalogCurrent: docs/checks.md is what `dbhost checks --format
// markdown` prints; regenerate it with `make docs`.
func TestDocsCatalogCurrent(t *testing.T) {
	want, err := os.ReadFile(filepath.Join("..", "..", "docs", "checks.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, got, _ := runCLI(t, "checks", "--format", "markdown")
	if got != string(want) {
		t.Error("docs/checks.md is stale: run `make docs`")
	}
}

// The textfile recipe: -o writes the file atomically with mode 0644 and
// leaves no temporary file; with --fail-on none a host with findings exits
// 0, so cron or a timer does not report a failure.
func TestAuditPromTextfile(t *testing.T) {
	dir := t.TempDir()
	out := filepath.Join(dir, "dbhost.prom")
	if err := os.WriteFile(out, []byte("old\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	code, stdout, stderr := runCLI(t, "audit", "--from", fixture.Path("mem-swapfile"), "--format", "prom", "--fail-on", "none", "-o", out)
	if code != ExitOK || stdout != "" {
		t.Fatalf("exit %d, stdout %q, stderr %s", code, stdout, stderr)
	}
	b, err := os.ReadFile(out)
	if err != nil || !strings.Contains(string(b), `dbhost_check_status{check="mem.swappiness",severity="warning",subject="host"} 1`) {
		t.Fatalf("%s: %v\n%s", out, err, b)
	}
	if st, _ := os.Stat(out); st.Mode().Perm() != 0o644 {
		t.Errorf("mode %v, want 0644 (the collector runs as another user)", st.Mode().Perm())
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 1 {
		t.Errorf("files left beside it: %v", ents)
	}
	// A failing audit keeps the old file.
	code, _, _ = runCLI(t, "audit", "--from", filepath.Join(dir, "missing.tar.gz"), "--format", "prom", "--fail-on", "none", "-o", out)
	if b, _ := os.ReadFile(out); code != ExitError || !strings.Contains(string(b), "dbhost_check_status") {
		t.Errorf("exit %d and the file became %q", code, b)
	}
	// Without --fail-on none the findings set the exit status, as before.
	if code, _, _ := runCLI(t, "audit", "--from", fixture.Path("mem-swapfile"), "--format", "prom", "-o", out); code != ExitFindings {
		t.Errorf("exit %d, want %d", code, ExitFindings)
	}
}
