package expreport

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/dbhost/dbhost/internal/results"
	"github.com/dbhost/dbhost/internal/testdb"
)

// TestOpensInBrowser loads an example report in a headless Chromium (make
// test installs Debian's chromium; without it the test skips, and fails
// under DBHOST_INTEGRATION=require), and fails on any console message — a CSP refusal of something external, a
// parse error — or when the charts are not in the rendered page.
func TestOpensInBrowser(t *testing.T) {
	bin := testdb.Chromium(t)
	arms := []results.Arm{{Index: 0, Name: "base <b>"}, {Index: 1, Name: "2M"}, {Index: 2, Name: "1G"}}
	in := scenario{Name: "browser", Arms: arms, Effects: []float64{1, 1.05, 1.1}, PerArm: 6, Clients: []int{2, 8}, Seconds: 20, Seed: 6,
		Exclude: map[int]string{3: "steal time 12% during the trial"}}.build(t)
	var b bytes.Buffer
	if err := HTML(&b, in); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	file := filepath.Join(dir, "report.html")
	if err := os.WriteFile(file, b.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	args := []string{"--headless", "--disable-gpu", "--no-first-run", "--user-data-dir=" + filepath.Join(dir, "profile"),
		"--enable-logging=stderr", "--v=0", "--virtual-time-budget=2000", "--dump-dom", "file://" + file}
	if os.Geteuid() == 0 {
		args = append([]string{"--no-sandbox"}, args...)
	}
	cmd := exec.CommandContext(ctx, bin, args...)
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	if err := cmd.Run(); err != nil {
		t.Fatalf("%s: %v\n%s", bin, err, errOut.String())
	}
	for _, line := range strings.Split(errOut.String(), "\n") {
		if strings.Contains(line, "CONSOLE") || strings.Contains(line, "Refused to") {
			t.Errorf("browser console: %s", line)
		}
	}
	dom := out.String()
	for _, c := range []string{"timeline", "distribution", "effect", "sweep"} {
		if !strings.Contains(dom, `data-chart="`+c+`"`) {
			t.Errorf("rendered page lacks the %s chart", c)
		}
	}
	if strings.Contains(dom, "<b>") {
		t.Error("an arm name became markup")
	}
}
