package change

import "testing"

// TestSystemctlByAbsolutePathOnly: the systemctl a restart runs is named
// by absolute path (Config.Systemctl, set by code); a bare name, which
// PATH would resolve, is never run. Catches a lookup through PATH.
func TestSystemctlByAbsolutePathOnly(t *testing.T) {
	if _, err := (Config{Systemctl: []string{"systemctl", "bin/systemctl"}}).findSystemctl(); err == nil {
		t.Fatal("a relative systemctl was accepted")
	}
}
