package cli

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// The completion scripts are cobra's, for dbhost; bash parses the bash
// one, and the completions they ask dbhost for name every command and the
// command's flags.
func TestCompletion(t *testing.T) {
	want := map[string][]string{
		"bash": {"__start_dbhost", "complete -o default -F __start_dbhost dbhost"},
		"zsh":  {"#compdef dbhost", "compdef _dbhost dbhost", "__complete"},
		"fish": {"complete -c dbhost", "__complete"},
	}
	for shell, strs := range want {
		code, out, errs := runCLI(t, "completion", shell)
		if code != ExitOK || errs != "" {
			t.Fatalf("completion %s: exit %d, %s", shell, code, errs)
		}
		for _, s := range strs {
			if !strings.Contains(out, s) {
				t.Errorf("completion %s lacks %q", shell, s)
			}
		}
		if bash, err := exec.LookPath("bash"); shell == "bash" && err == nil {
			file := filepath.Join(t.TempDir(), "dbhost.bash")
			os.WriteFile(file, []byte(out), 0o644)
			if b, err := exec.Command(bash, "-n", file).CombinedOutput(); err != nil {
				t.Errorf("bash -n: %v %s", err, b)
			}
		}
	}
	if code, out, errs := runCLI(t, "completion", "tcsh"); code != ExitError || out != "" || !strings.Contains(errs, `dbhost completion: unknown shell "tcsh"`) {
		t.Errorf("completion tcsh: exit %d, %q %q", code, out, errs)
	}
	_, out, _ := runCLI(t, "__complete", "")
	for _, c := range testRoot().Commands() {
		if c.IsAvailableCommand() && !strings.Contains(out, "\n"+c.Name()+"\t") && !strings.HasPrefix(out, c.Name()+"\t") {
			t.Errorf("__complete '' lacks %s:\n%s", c.Name(), out)
		}
	}
	_, out, _ = runCLI(t, "__complete", "experiment", "--cl")
	if !strings.Contains(out, "--clients\t") {
		t.Errorf("__complete experiment --cl:\n%s", out)
	}
}
