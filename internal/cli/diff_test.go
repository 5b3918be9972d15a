package cli

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/dbhost/dbhost/internal/fixture"
)

func TestDiffCommand(t *testing.T) {
	base, thp := fixture.Path("baseline"), fixture.Path("mem-thp-always")
	cases := []struct {
		args   []string
		want   int
		stdout []string // substrings
		stderr string
	}{
		{args: []string{"diff", base, thp}, want: ExitFindings,
			stdout: []string{"Transparent huge pages", "enabled  madvise  always", "mem.thp.defrag", "Differences: 2 settings, 3 findings."}},
		{args: []string{"diff", base, base}, want: ExitOK, stdout: []string{"No differences"}},
		{args: []string{"diff", "--format", "json", base, thp}, want: ExitFindings, stdout: []string{`"schema": "dbhost.diff/2"`, `"database_pairs": [`}},
		// The private clusters of the two recordings are paired, and the
		// pair says how.
		{args: []string{"diff", fixture.Path("pg-hba-open"), fixture.Path("pg-hba-hardened")}, want: ExitFindings,
			stdout: []string{"postgres:36605 = postgres:46757  (paired by engine: the only postgres on each side)",
				"pg.hardening.hba_trust         postgres:36605=postgres:46757  critical  fail  pass",
				"Differences: 2 settings, 6 findings."}},
		// vda's queue once, with the database paths it holds.
		{args: []string{"diff", fixture.Path("storage-vda-default"), fixture.Path("storage-vda-tuned")}, want: ExitFindings,
			stdout: []string{"vda/scheduler      mq-deadline  none", "vda holds mysql:3306 data, redo, tmp; postgres:33921=postgres:35309 data, wal;",
				"Differences: 3 settings, 1 finding."}},
		// A kernel default derived from RAM or CPUs shows as read and as
		// what it compares as.
		{args: []string{"diff", base, fixture.Path("persist-sysctl-match")}, want: ExitFindings,
			stdout: []string{"kernel.pid_max  32768 = default (derived from CPUs)  4194304"}},
		{args: []string{"diff", base, "--format", "json", thp}, want: ExitFindings, stdout: []string{`"key": "thp/enabled"`}},
		{args: []string{"diff", "-v", fixture.Path("baseline-nonroot"), base}, want: ExitFindings,
			stdout: []string{"Settings observed on one side only (623)", "aria_block_size", "(not observed)"}},
		{args: []string{"diff", fixture.Path("baseline-nonroot"), base}, want: ExitFindings,
			stdout: []string{"only in b  622  db/mysql:3306/*", "(-v lists them)"}},
		{args: []string{"diff", "--format", "yaml", base, thp}, want: ExitError, stderr: `unknown format "yaml"`},
		{args: []string{"diff", base, "/nonexistent.tar.gz"}, want: ExitError, stderr: "no such file"},
		{args: []string{"diff"}, want: ExitError, stderr: "want one or two operands"},
		{args: []string{"diff", base, thp, base}, want: ExitError, stderr: "want one or two operands"},
		{args: []string{"diff", "live", "-"}, want: ExitError, stderr: "both operands are this host"},
		{args: []string{"diff", "-h"}, want: ExitOK},
	}
	for _, c := range cases {
		code, stdout, stderr := runCLI(t, c.args...)
		if code != c.want {
			t.Errorf("dbhost %s: exit %d, want %d\n%s%s", strings.Join(c.args, " "), code, c.want, stdout, stderr)
		}
		for _, s := range c.stdout {
			if !strings.Contains(stdout, s) {
				t.Errorf("dbhost %s: stdout lacks %q:\n%s", strings.Join(c.args, " "), s, stdout)
			}
		}
		if !strings.Contains(stderr, c.stderr) {
			t.Errorf("dbhost %s: stderr %q, want %q", strings.Join(c.args, " "), stderr, c.stderr)
		}
	}
	_, stdout, _ := runCLI(t, "diff", "--format", "json", base, thp)
	var r struct {
		Settings []struct{ Key, A, B string }
		Findings []struct{ ID, A, B string }
	}
	if err := json.Unmarshal([]byte(stdout), &r); err != nil || len(r.Settings) != 2 || r.Settings[1].Key != "thp/enabled" ||
		r.Settings[1].A != "madvise" || r.Settings[1].B != "always" || len(r.Findings) != 3 {
		t.Errorf("json %+v, %v", r, err)
	}
}

// With one operand, the snapshot is compared with this host: here a root
// (--root) with nothing in it, so nearly everything differs.
func TestDiffWithLiveHost(t *testing.T) {
	code, stdout, stderr := runCLI(t, "diff", "--root", t.TempDir(), fixture.Path("baseline"))
	if code != ExitFindings || !strings.Contains(stdout, "b:  live") || !strings.Contains(stdout, "Databases on one side only (3)") {
		t.Errorf("exit %d\n%s%s", code, stdout, stderr)
	}
}

// Text from a snapshot is escaped for the terminal, also in aligned
// columns: no control character, and no tab or newline that would break
// them.
func TestDiffEscapes(t *testing.T) {
	snap := hostileSnapshot(t) // a hostile host name and PostgreSQL data directory
	_, stdout, stderr := runCLI(t, "diff", snap, fixture.Path("mysql-private"))
	if bad := rawControls(stdout + stderr); len(bad) > 0 {
		t.Errorf("raw control characters %v in\n%s%s", bad, stdout, stderr)
	}
	if !strings.Contains(stdout, `/srv/pg\x1b]0;pwned\a\x1b[2J\u009b1m\u202e\rX`) {
		t.Errorf("the hostile data directory is not shown escaped:\n%s", stdout)
	}
}
