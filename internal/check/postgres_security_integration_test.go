package check_test

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/dbhost/dbhost/internal/check"
	"github.com/dbhost/dbhost/internal/testdb"
)

// TestPGSecurityLive starts a private PostgreSQL that listens on every
// address with a trust record for 0.0.0.0/0 and CREATE on schema public
// granted to PUBLIC, audits the live host (both fail), applies the fixes
// the findings propose and audits again (both pass).
func TestPGSecurityLive(t *testing.T) {
	if testing.Short() {
		t.Skip("integration test: starts PostgreSQL")
	}
	psqlBin, err := exec.LookPath("psql")
	testdb.Need(t, fmt.Sprint("psql: ", err), err == nil)
	s := testdb.Postgres(t, testdb.Options{Settings: map[string]string{"listen_addresses": "*"}})
	psql := func(sql string) {
		t.Helper()
		out, err := exec.Command(psqlBin, "-X", "-q", "-v", "ON_ERROR_STOP=1", "-h", s.Socket, "-p", strconv.Itoa(s.Port), "-U", "postgres", "-d", "postgres", "-c", sql).CombinedOutput()
		if err != nil {
			t.Fatalf("%s: %v: %s", sql, err, out)
		}
	}
	hba := func(content string) {
		t.Helper()
		p := filepath.Join(s.DataDir, "pg_hba.conf")
		if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		// The server reads it as its own user, as pg_hba.conf is kept.
		fi, err := os.Stat(s.DataDir)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.Chown(p, int(fi.Sys().(*syscall.Stat_t).Uid), -1); err != nil {
			t.Fatal(err)
		}
		if err := syscall.Kill(s.PID, syscall.SIGHUP); err != nil {
			t.Fatal(err)
		}
		time.Sleep(300 * time.Millisecond)
	}
	psql("GRANT CREATE ON SCHEMA public TO PUBLIC")
	hba("local all all trust\nhost all all 0.0.0.0/0 trust\n")

	fd := liveFinding(t, "pg.hardening.hba_trust", s.PID)
	if fd.Status != check.Fail {
		t.Fatalf("trust for 0.0.0.0/0: %s: %s", fd.Status, fd.Reason)
	}
	wantFix(t, fd, []string{filepath.Join(s.DataDir, "pg_hba.conf") + ":2", "after:  host all all 0.0.0.0/0 scram-sha-256"}, "hba_file="+filepath.Join(s.DataDir, "pg_hba.conf"))
	fd = liveFinding(t, "pg.hardening.public_create", s.PID)
	if fd.Status != check.Fail {
		t.Fatalf("public CREATE granted: %s: %s", fd.Status, fd.Reason)
	}

	psql("REVOKE CREATE ON SCHEMA public FROM PUBLIC")
	hba("local all all trust\nhost all all 0.0.0.0/0 scram-sha-256\n")
	if fd := liveFinding(t, "pg.hardening.hba_trust", s.PID); fd.Status != check.Pass {
		t.Errorf("after the fix: %s: %s", fd.Status, fd.Reason)
	}
	if fd := liveFinding(t, "pg.hardening.public_create", s.PID); fd.Status != check.Pass {
		t.Errorf("after REVOKE: %s: %s", fd.Status, fd.Reason)
	}
}
