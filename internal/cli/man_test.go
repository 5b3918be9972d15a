package cli

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/spf13/pflag"
)

// The man pages: one per command, each with its description and every
// flag; groff reads them without a warning.
func TestManPages(t *testing.T) {
	dir := t.TempDir()
	t.Setenv("SOURCE_DATE_EPOCH", "1700000000")
	if code, out, errs := runCLI(t, "man", dir); code != ExitOK || out != "" || errs != "" {
		t.Fatalf("man: exit %d, %q %q", code, out, errs)
	}
	cmds := manCommands(testRoot())
	if ents, _ := os.ReadDir(dir); len(ents) != len(cmds) || len(cmds) < 20 {
		t.Errorf("%d pages for %d commands", len(ents), len(cmds))
	}
	groff, _ := exec.LookPath("groff")
	for _, c := range cmds {
		file := filepath.Join(dir, manName(c)+".1")
		b, err := os.ReadFile(file)
		if err != nil {
			t.Error(err)
			continue
		}
		page := string(b)
		if !strings.HasPrefix(page, `.TH "`+strings.ToUpper(manName(c))+`" 1 "2023-11-14" "dbhost `) || !strings.Contains(page, roffLine(c.Short)) {
			t.Errorf("%s:\n%s", file, page)
		}
		c.LocalFlags().VisitAll(func(f *pflag.Flag) {
			if !strings.Contains(page, `\fB\-\-`+roffName(f.Name)+`\fR`) {
				t.Errorf("%s lacks --%s", file, f.Name)
			}
		})
		if groff != "" {
			cmd := exec.Command(groff, "-man", "-ww", "-z", file)
			if out, err := cmd.CombinedOutput(); err != nil || len(out) > 0 {
				t.Errorf("groff %s: %v %s", file, err, out)
			}
		}
	}
	// Without a directory: dbhost(1), naming every command.
	code, out, _ := runCLI(t, "man")
	for _, c := range testRoot().Commands() {
		if c.IsAvailableCommand() && !strings.Contains(out, `\fB`+roffName(manName(c))+`\fR(1)`) {
			t.Errorf("dbhost(1) does not name %s", c.Name())
		}
	}
	if code != ExitOK {
		t.Errorf("man: exit %d", code)
	}
}
