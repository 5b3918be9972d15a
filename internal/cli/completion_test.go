package cli

import (
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/spf13/cobra"

	"github.com/dbhost/dbhost/internal/report"
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

// completeLines runs cobra's __complete (what the bash, zsh and fish
// scripts call) and returns the completions without their descriptions,
// and the directive.
func completeLines(t *testing.T, args ...string) ([]string, string) {
	t.Helper()
	code, out, errs := runCLI(t, append([]string{"__complete"}, args...)...)
	if code != ExitOK {
		t.Fatalf("__complete %q: exit %d, %s", args, code, errs)
	}
	lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
	var vals []string
	for _, l := range lines[:len(lines)-1] {
		v, _, _ := strings.Cut(l, "\t")
		vals = append(vals, v)
	}
	return vals, lines[len(lines)-1]
}

// TestCompleteCheckIDs: check IDs and domains complete for 'checks', the
// lists of --only and --skip (after the IDs already listed) and
// experiment's --finding (IDs only).
func TestCompleteCheckIDs(t *testing.T) {
	for _, c := range []struct {
		args      []string
		want, not []string
		directive string
	}{
		{[]string{"checks", "mem.thp"}, []string{"mem.thp", "mem.thp.defrag", "mem.thp.enabled", "mem.thp.khugepaged", "mem.thp.persisted"}, []string{"mem.swap"}, ":4"},
		{[]string{"checks", "mem.swap", "mem.sw"}, []string{"mem.swappiness"}, []string{"mem.swap"}, ":4"},
		{[]string{"checks", "st"}, []string{"storage", "storage.zfs", "storage.zfs.atime"}, []string{"mem"}, ":4"},
		{[]string{"audit", "--only", "pg.hardening.s"}, []string{"pg.hardening.ssl", "pg.hardening.superuser_remote"}, []string{"pg.hardening.md5"}, ":6"},
		{[]string{"audit", "--only=mem,sto"}, []string{"mem,storage", "mem,storage.nfs.soft"}, []string{"mem,mem"}, ":6"},
		{[]string{"fix", "--skip", "time."}, []string{"time.clocksource", "time.kernel_sync", "time.sync_daemon"}, nil, ":6"},
		{[]string{"serve", "--only", "net.s"}, []string{"net.somaxconn", "net.syn_backlog"}, nil, ":6"},
		{[]string{"experiment", "--finding", "mem."}, []string{"mem.swappiness", "mem.dirty"}, []string{"mem.thp"}, ":6"},
	} {
		got, directive := completeLines(t, c.args...)
		for _, w := range c.want {
			if !slices.Contains(got, w) {
				t.Errorf("__complete %q lacks %q: %q", c.args, w, got)
			}
		}
		for _, n := range c.not {
			if slices.Contains(got, n) {
				t.Errorf("__complete %q offers %q", c.args, n)
			}
		}
		for _, g := range got {
			if !strings.HasPrefix(g, c.args[len(c.args)-1]) && !strings.HasPrefix(g, strings.TrimPrefix(c.args[len(c.args)-1], "--only=")) {
				t.Errorf("__complete %q offers %q, which does not continue what was typed", c.args, g)
			}
		}
		if directive != c.directive {
			t.Errorf("__complete %q: directive %s, want %s", c.args, directive, c.directive)
		}
	}
	// Each ID offered is one the catalog has: a description is its title.
	_, out, _ := runCLI(t, "__complete", "checks", "")
	if !strings.Contains(out, "mem.swap\tThe host has some swap\n") || !strings.Contains(out, "mem\t") {
		t.Errorf("__complete checks '':\n%s", out)
	}
}

// TestCompleteFormats: every command with --format completes the formats
// it accepts: each value completed runs, in the command's own set.
func TestCompleteFormats(t *testing.T) {
	sets := formatNames()
	var walk func(c *cobra.Command)
	seen := 0
	walk = func(c *cobra.Command) {
		if f := c.LocalNonPersistentFlags().Lookup("format"); f != nil {
			seen++
			args := append(strings.Fields(strings.TrimPrefix(c.CommandPath(), "dbhost ")), "--format", "")
			got, directive := completeLines(t, args...)
			if want := sets[c.CommandPath()]; len(got) == 0 || !slices.Equal(got, want) {
				t.Errorf("%s --format completes %q, the command's set is %q", c.CommandPath(), got, want)
			}
			if directive != ":4" {
				t.Errorf("%s --format: directive %s, want :4 (no file names)", c.CommandPath(), directive)
			}
			for _, g := range got {
				if !strings.Contains(f.Usage, g) {
					t.Errorf("%s --format completes %q, which its help (%q) does not list", c.CommandPath(), g, f.Usage)
				}
			}
		}
		for _, s := range c.Commands() {
			walk(s)
		}
	}
	walk(testRoot())
	if seen < len(sets) {
		t.Errorf("%d commands with --format, %d sets", seen, len(sets))
	}
	got, _ := completeLines(t, "fleet", "report", "--format", "j")
	if !slices.Equal(got, []string{"json"}) {
		t.Errorf("fleet report --format j: %q", got)
	}
}

// TestBashCompletion: bash, given the script 'dbhost completion bash'
// prints, completes check IDs and --format values from the real binary.
// _get_comp_words_by_ref (from the bash-completion package, which the
// script expects) is stood in for by its plain meaning.
func TestBashCompletion(t *testing.T) {
	bash, err := exec.LookPath("bash")
	if err != nil {
		t.Skip("no bash")
	}
	bin := buildDbhost(t)
	script, err := exec.Command(bin, "completion", "bash").Output()
	if err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(t.TempDir(), "dbhost.bash")
	if err := os.WriteFile(file, script, 0o600); err != nil {
		t.Fatal(err)
	}
	const shim = `_get_comp_words_by_ref() { cur="${COMP_WORDS[COMP_CWORD]}"; prev="${COMP_WORDS[COMP_CWORD-1]}"; words=("${COMP_WORDS[@]}"); cword=$COMP_CWORD; }`
	complete := func(words ...string) []string {
		// The words come as arguments: nothing is built into shell text.
		prog := shim + `
source "$1"; shift
COMP_WORDS=("$@"); COMP_CWORD=$(($# - 1)); COMP_LINE="$*"; COMP_POINT=${#COMP_LINE}
__start_dbhost dbhost "${COMP_WORDS[COMP_CWORD]}" "${COMP_WORDS[COMP_CWORD-1]}"
printf '%s\n' "${COMPREPLY[@]}"`
		cmd := exec.Command(bash, append([]string{"--norc", "-c", prog, "bash", file}, words...)...)
		cmd.Env = append(os.Environ(), "PATH="+filepath.Dir(bin)+":"+os.Getenv("PATH"))
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("bash completing %q: %v", words, err)
		}
		var got []string
		for _, l := range strings.Split(strings.TrimSpace(string(out)), "\n") {
			got = append(got, strings.TrimSpace(l))
		}
		return got
	}
	for _, c := range []struct {
		words []string
		want  []string
	}{
		{[]string{"dbhost", "checks", "mem.swa"}, []string{"mem.swap", "mem.swappiness"}},
		{[]string{"dbhost", "audit", "--only", "time.k"}, []string{"time.kernel_sync"}},
		{[]string{"dbhost", "results", "report", "last", "--format", "m"}, []string{"markdown"}},
		{[]string{"dbhost", "audit", "--format", ""}, report.AuditFormats.Names()},
	} {
		if got := complete(c.words...); !slices.Equal(got, c.want) {
			t.Errorf("bash completes %q as %q, want %q", c.words, got, c.want)
		}
	}
}
