package cli

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/dbhost/dbhost/internal/apply"
	"github.com/dbhost/dbhost/internal/testdb"
)

// TestFixPlanPGSetting runs --plan against a private PostgreSQL whose
// password_encryption is md5 (an ALTER SYSTEM entry): the plan names the
// setting and how it changes, saves it with the entry it replaces, and
// writes no conf.d snippet for it. (--apply takes the host lock, which the
// test's own server holds shared: the apply itself is tested in
// internal/apply, TestLivePGSettingApplyRollback.)
func TestFixPlanPGSetting(t *testing.T) {
	testdb.Need(t, "root", os.Geteuid() == 0)
	s := testdb.Postgres(t, testdb.Options{})
	s.PGSet(t, "password_encryption", "md5")
	inst := fmt.Sprintf("postgres:%d", s.Port)
	line := "setting " + inst + " password_encryption: md5 -> scram-sha-256 by ALTER SYSTEM + pg_reload_conf()"
	saved := filepath.Join(t.TempDir(), "plan.json")
	code, plan, errs := runCLI(t, "fix", "--plan", "--only", "pg.hardening.md5", "--plan-out", saved)
	if code != ExitFindings || !strings.Contains(plan, line) || strings.Contains(plan, "conf.d") {
		t.Fatalf("--plan: exit %d, no %q (or a conf.d snippet):\n%s%s", code, line, plan, errs)
	}
	b, err := os.ReadFile(saved)
	if err != nil {
		t.Fatal(err)
	}
	var p apply.Plan
	if err := json.Unmarshal(b, &p); err != nil {
		t.Fatal(err)
	}
	for _, sp := range p.Settings {
		if sp.Server.Name == inst && sp.Key == "password_encryption" && sp.Saved != nil && *sp.Saved == "md5" &&
			sp.Server.DataDir == s.DataDir && !strings.Contains(string(b), "password=") {
			return
		}
	}
	t.Fatalf("saved plan lacks the setting with its saved entry:\n%s", b)
}
