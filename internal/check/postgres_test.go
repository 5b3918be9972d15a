package check_test

import (
	"strings"
	"testing"

	"github.com/dbhost/dbhost/internal/check"
	"github.com/dbhost/dbhost/internal/engine"
	"github.com/dbhost/dbhost/internal/fixture"
)

// The pg-* fixtures run two clusters: the machine's shared PostgreSQL 15 on
// 5432 and a private one on a random port recorded in the snapshot.
const sharedPG = "postgres:5432"

// privatePG returns the subject of a fixture's private cluster.
func privatePG(t *testing.T, name string) string {
	t.Helper()
	f := fixture.Facts(t, name)
	var found []string
	for _, in := range f.ByEngine(engine.Postgres) {
		if in.Name() != sharedPG {
			found = append(found, in.Name())
		}
	}
	if len(found) != 1 {
		t.Fatalf("%s: want one private PostgreSQL, found %v", name, found)
	}
	return found[0]
}

func findPG(t *testing.T, fixtureName, id, subject string) check.Finding {
	t.Helper()
	fd, ok := fixture.Find(t, fixtureName, id, subject)
	if !ok {
		t.Fatalf("%s: no %s finding for %s", fixtureName, id, subject)
	}
	return fd
}

func TestPGCollationGlibc(t *testing.T) {
	const id = "pg.collation_glibc"
	t.Run("pass: recorded version matches glibc", func(t *testing.T) {
		sub := privatePG(t, "pg-private")
		fd := findPG(t, "pg-private", id, sub)
		if fd.Status != check.Pass || !strings.Contains(fd.Reason, "app (libc en_US.UTF-8)") {
			t.Fatalf("%s: %s", fd.Status, fd.Reason)
		}
	})
	t.Run("pass: C.UTF-8 only", func(t *testing.T) {
		fd := findPG(t, "pg-private", id, sharedPG)
		if fd.Status != check.Pass || !strings.Contains(fd.Reason, "code-point") {
			t.Fatalf("%s: %s", fd.Status, fd.Reason)
		}
	})
	t.Run("fail: built under glibc 2.27", func(t *testing.T) {
		sub := privatePG(t, "pg-collation-mismatch")
		fd := findPG(t, "pg-collation-mismatch", id, sub)
		if fd.Status != check.Fail || fd.Severity != check.Critical {
			t.Fatalf("%s %s: %s", fd.Status, fd.Severity, fd.Reason)
		}
		if !strings.Contains(fd.Reason, "built with 2.27, library now 2.36") {
			t.Errorf("reason: %s", fd.Reason)
		}
		if fd.Fix == nil || len(fd.Fix.Runtime) != 2 ||
			!strings.Contains(fd.Fix.Runtime[0], `REINDEX DATABASE "app"`) ||
			!strings.Contains(fd.Fix.Runtime[1], `ALTER DATABASE "app" REFRESH COLLATION VERSION`) {
			t.Errorf("fix: %+v", fd.Fix)
		}
		// The shared cluster beside it is unaffected.
		if s := fixture.Statuses(t, "pg-collation-mismatch", id)[sharedPG]; s != check.Pass {
			t.Errorf("shared cluster: %s", s)
		}
	})
	t.Run("unknown: no live connection", func(t *testing.T) {
		sub := privatePG(t, "pg-peer")
		fd := findPG(t, "pg-peer", id, sub)
		if fd.Status != check.Unknown || !strings.Contains(fd.Reason, "Peer authentication failed") || !strings.Contains(fd.Reason, "glibc 2.28") {
			t.Fatalf("%s: %s", fd.Status, fd.Reason)
		}
	})
}

func TestPGConfigErrors(t *testing.T) {
	const id = "pg.config_errors"
	t.Run("pass", func(t *testing.T) {
		for sub, s := range fixture.Statuses(t, "pg-private", id) {
			if s != check.Pass {
				t.Errorf("%s: %s", sub, s)
			}
		}
	})
	t.Run("fail: missing include and include loop", func(t *testing.T) {
		sub := privatePG(t, "pg-config-errors")
		fd := findPG(t, "pg-config-errors", id, sub)
		if fd.Status != check.Fail {
			t.Fatalf("%s: %s", fd.Status, fd.Reason)
		}
		for _, want := range []string{`missing.conf": not present`, "include loop", "loop-b.conf includes", "refuse to start"} {
			if !strings.Contains(fd.Reason, want) {
				t.Errorf("reason lacks %q: %s", want, fd.Reason)
			}
		}
		if fd.Fix == nil || !strings.Contains(fd.Fix.Manual, "pg_file_settings") || !strings.Contains(fd.Fix.Manual, "/postgresql.conf") {
			t.Errorf("fix: %+v", fd.Fix)
		}
	})
	t.Run("unknown: files closed to a non-root audit", func(t *testing.T) {
		st := fixture.Statuses(t, "pg-nonroot", id)
		sub := privatePG(t, "pg-nonroot")
		if st[sub] != check.Unknown || st[sharedPG] != check.Unknown {
			t.Fatalf("statuses %v", st)
		}
		fd := findPG(t, "pg-nonroot", id, sub)
		if !strings.Contains(fd.Reason, "permission denied") {
			t.Errorf("reason: %s", fd.Reason)
		}
	})
}

func TestPGSettingsSource(t *testing.T) {
	const id = "pg.settings_source"
	t.Run("pass: live over the socket", func(t *testing.T) {
		sub := privatePG(t, "pg-private")
		fd := findPG(t, "pg-private", id, sub)
		if fd.Status != check.Pass || !strings.Contains(fd.Reason, "as user postgres") {
			t.Fatalf("%s: %s", fd.Status, fd.Reason)
		}
	})
	t.Run("fail: peer authentication refuses root", func(t *testing.T) {
		sub := privatePG(t, "pg-peer")
		fd := findPG(t, "pg-peer", id, sub)
		if fd.Status != check.Fail || fd.Severity != check.Info {
			t.Fatalf("%s %s: %s", fd.Status, fd.Severity, fd.Reason)
		}
		if !strings.Contains(fd.Reason, `Peer authentication failed for user "postgres"`) {
			t.Errorf("reason: %s", fd.Reason)
		}
		if fd.Fix == nil || !strings.Contains(fd.Fix.Manual, "pg_ident.conf") {
			t.Errorf("fix: %+v", fd.Fix)
		}
	})
	t.Run("unknown: socket closed to nobody", func(t *testing.T) {
		sub := privatePG(t, "pg-nonroot")
		fd := findPG(t, "pg-nonroot", id, sub)
		if fd.Status != check.Unknown || !strings.Contains(fd.Reason, "permission denied") {
			t.Fatalf("%s: %s", fd.Status, fd.Reason)
		}
	})
}
