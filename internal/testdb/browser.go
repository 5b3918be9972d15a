package testdb

import (
	"os/exec"
	"testing"
)

// Chromium is the headless browser the report pages are tested in (make
// test installs Debian's chromium): its path, or the test skips (fails
// under DBHOST_INTEGRATION=require). With -short it skips without looking.
func Chromium(t testing.TB) string {
	t.Helper()
	if testing.Short() {
		t.Skip("starts a browser (-short)")
	}
	var bin string
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome", "headless_shell"} {
		if p, err := exec.LookPath(name); err == nil {
			bin = p
			break
		}
	}
	Need(t, "Chromium (Debian package chromium)", bin != "")
	return bin
}
