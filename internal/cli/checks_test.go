package cli

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/dbhost/dbhost/internal/check"
)

// TestChecksDocumentsNamedChecks: 'dbhost checks ID' prints the check's
// documentation in full: title and problem, severity, what it applies to,
// its doc, the kernel parameters and files it reads, how to see its fix,
// its references.
func TestChecksDocumentsNamedChecks(t *testing.T) {
	code, out, errs := runCLI(t, "checks", "mem.overcommit", "storage.nfs.soft")
	if code != ExitOK || errs != "" {
		t.Fatalf("exit %d, %s", code, errs)
	}
	c, _ := check.Lookup("mem.overcommit")
	for _, want := range []string{
		"mem.overcommit\n", "Wants:       " + c.Title, "Fails as:    " + c.Problem, "Severity:    warning",
		"Applies to:  postgres, redis, mongodb", "Reads vm.overcommit_memory (and overcommit_ratio",
		"kernel parameters:   vm.overcommit_memory, vm.overcommit_ratio, vm.overcommit_kbytes",
		"paths the doc names: /proc/meminfo", "dbhost audit --only mem.overcommit -v", "dbhost fix --only mem.overcommit --out DIR",
		"https://docs.kernel.org/mm/overcommit-accounting.html",
		"\n\nstorage.nfs.soft\n", "Fails as:    An NFS mount under a database is a soft mount",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("checks mem.overcommit storage.nfs.soft lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "mem.swap") {
		t.Error("checks mem.overcommit shows other checks")
	}
}

// TestChecksDomain: a domain prefix lists its checks, in every format.
func TestChecksDomain(t *testing.T) {
	_, out, _ := runCLI(t, "checks", "mem.thp")
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != 6 || !strings.HasPrefix(lines[0], "mem.thp.defrag ") || !strings.Contains(out, "\n4 checks.") {
		t.Errorf("checks mem.thp:\n%s", out)
	}
	code, out, _ := runCLI(t, "checks", "storage.zfs", "--format", "json")
	var cat []catalogEntry
	if err := json.Unmarshal([]byte(out), &cat); code != ExitOK || err != nil || len(cat) != 5 {
		t.Fatalf("checks storage.zfs --format json: exit %d, %v, %d entries", code, err, len(cat))
	}
	for _, c := range cat {
		if !strings.HasPrefix(c.ID, "storage.zfs.") || c.Problem == "" || c.Problem == c.Title {
			t.Errorf("%+v", c)
		}
	}
	_, out, _ = runCLI(t, "checks", "time", "--format", "markdown")
	if strings.Count(out, "\n## ") != 3 || !strings.Contains(out, "Fails as: *No time synchronisation daemon runs*.") {
		t.Errorf("checks time --format markdown:\n%s", out)
	}
}

// TestChecksUnknown: an unknown ID is an error that names it and the
// closest IDs; nothing goes to stdout.
func TestChecksUnknown(t *testing.T) {
	for _, c := range []struct{ arg, want string }{
		{"mem.overcomit", `dbhost checks: unknown check "mem.overcomit" (did you mean mem.overcommit?)`},
		{"swappines", `unknown check "swappines" (did you mean mem.swappiness?)`},
		{"hba_trust", `(did you mean pg.hardening.hba_trust?)`},
		{"zzzz", `dbhost checks: unknown check "zzzz"; 'dbhost checks' lists them`},
	} {
		code, out, errs := runCLI(t, "checks", "mem.swap", c.arg)
		if code != ExitError || out != "" || !strings.Contains(errs, c.want) {
			t.Errorf("checks %s: exit %d, out %q, err %q; want %q", c.arg, code, out, errs, c.want)
		}
	}
}
