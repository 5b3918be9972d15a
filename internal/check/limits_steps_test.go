package check_test

import (
	"slices"
	"strings"
	"testing"

	"github.com/dbhost/dbhost/internal/fixture"
)

// TestNowStepsOnRecordedHosts: on every recorded host (PID 1 is not
// systemd on any of them) no finding offers a systemctl or restart command
// to paste, reloads come before changes of the running system, and each
// fix that needs a restart says so.
func TestNowStepsOnRecordedHosts(t *testing.T) {
	reload := []string{"systemctl daemon-reload", "sysctl --system", "udevadm", "systemd-tmpfiles"}
	isReload := func(c string) bool {
		for _, p := range reload {
			if strings.HasPrefix(c, p) {
				return true
			}
		}
		return false
	}
	restarts := 0
	for _, name := range fixture.Names(t) {
		if fixture.Facts(t, name).System.Systemd {
			t.Errorf("%s: recorded where PID 1 is systemd; this test assumes otherwise", name)
			continue
		}
		for _, fd := range fixture.Findings(t, name) {
			if fd.Fix == nil {
				continue
			}
			applied := false
			for _, c := range fd.Fix.Runtime {
				// "now" steps are pasted into a shell: SQL belongs to
				// the manual steps, in the client it needs.
				if w, _, _ := strings.Cut(c, " "); slices.Contains([]string{"SELECT", "ALTER", "REVOKE", "GRANT", "SET", "DROP", "CREATE"}, strings.ToUpper(w)) {
					t.Errorf("%s: %s %s: SQL as a shell step: %q", name, fd.ID, fd.Subject, c)
				}
				if strings.Contains(c, "systemctl") || strings.Contains(c, "restart") {
					t.Errorf("%s: %s %s offers %q", name, fd.ID, fd.Subject, c)
				}
				if isReload(c) && applied {
					t.Errorf("%s: %s %s: reload %q after a change of the running system: %q", name, fd.ID, fd.Subject, c, fd.Fix.Runtime)
				}
				applied = applied || !isReload(c)
			}
			if fd.Fix.Restart != nil {
				restarts++
				if !strings.Contains(fd.Fix.Manual, "RESTART NEEDED") || strings.Contains(fd.Fix.Manual, "systemctl restart") {
					t.Errorf("%s: %s %s: restart not said, or said with systemctl: %q", name, fd.ID, fd.Subject, fd.Fix.Manual)
				}
			}
		}
	}
	if restarts == 0 {
		t.Error("no recorded finding needs a restart: the test shows nothing")
	}
}
