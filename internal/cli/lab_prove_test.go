package cli

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/dbhost/dbhost/internal/galeralab"
)

// A report that could not be written where asked is refused before the
// lab starts (minutes of proof for nothing otherwise), and nothing is
// made.
func TestProveRefusesAnUnwritableReportFirst(t *testing.T) {
	root := t.TempDir()
	var out, errb bytes.Buffer
	a := &app{env: Env{Stdout: &out, Stderr: &errb}}
	html := filepath.Join(root, "no-such-dir", "proof.html")
	code := runGaleraProve(context.Background(), a, galeralab.Config{Name: "refused", Root: root, Nodes: 3}, html, "text")
	if code != ExitError || !strings.Contains(errb.String(), html+": its directory does not exist") {
		t.Fatalf("exit %d, stderr %q", code, errb.String())
	}
	if ents, _ := os.ReadDir(root); len(ents) != 0 || out.Len() != 0 {
		t.Errorf("something was made or printed: %v %q", ents, out.String())
	}
	errb.Reset()
	if code := runGaleraProve(context.Background(), a, galeralab.Config{Name: "refused", Root: root}, "", "yaml"); code != ExitError || !strings.Contains(errb.String(), `--format "yaml"`) {
		t.Errorf("exit %d, stderr %q", code, errb.String())
	}
}
