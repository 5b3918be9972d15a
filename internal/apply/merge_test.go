package apply

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/dbhost/dbhost/internal/check"
	"github.com/dbhost/dbhost/internal/fix"
	"github.com/dbhost/dbhost/internal/fixture"
)

// TestApplyKeepsEarlierSettings: an apply for net.* findings after an
// apply for mem.overcommit keeps the overcommit setting the first one
// persisted (it passes now, so it is not rendered again), and a setting
// both render takes the new value.
func TestApplyKeepsEarlierSettings(t *testing.T) {
	root := tree(t)
	f := fixture.Facts(t, "baseline")
	fc := fix.ContextFrom(f)
	all := Select(check.Run(f, check.Selector{}))
	pick := func(prefix string) []check.Finding {
		var out []check.Finding
		for _, fd := range all {
			if strings.HasPrefix(fd.ID, prefix) {
				out = append(out, fd)
			}
		}
		return out
	}
	state := filepath.Join(t.TempDir(), "changes")
	p1, err := Build(root, fc, pick("mem.overcommit"))
	if err != nil {
		t.Fatal(err)
	}
	cs1, err := Apply(p1, Options{StateDir: state})
	if err != nil {
		t.Fatal(err)
	}
	first, _ := os.ReadFile(filepath.Join(root, "etc/sysctl.d/60-dbhost.conf"))
	p2, err := Build(root, fc, pick("net."))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Apply(p2, Options{StateDir: state}); err != nil {
		t.Fatal(err)
	}
	b, _ := os.ReadFile(filepath.Join(root, "etc/sysctl.d/60-dbhost.conf"))
	for _, want := range []string{"# mem.overcommit\nvm.overcommit_memory", "net.ipv4.tcp_keepalive_time", "net.ipv4.tcp_fin_timeout"} {
		if !strings.Contains(string(b), want) {
			t.Errorf("second apply's file lacks %q:\n%s", want, b)
		}
	}
	if strings.Contains(string(b), "swappiness") {
		t.Errorf("a file not written by dbhost was merged:\n%s", b)
	}
	if strings.Count(string(b), "vm.overcommit_memory") != 1 {
		t.Errorf("a setting appears twice:\n%s", b)
	}
	// The first set cannot be rolled back under the second (its undo
	// would put back the first one's content beneath the second's).
	if _, err := Rollback(state, cs1.ID, Options{}); err == nil || !strings.Contains(err.Error(), "roll it back first") {
		t.Fatalf("rollback of the first of two sets: %v", err)
	}
	// Rolling back the second apply puts back the first one's file.
	if _, err := Rollback(state, "", Options{}); err != nil {
		t.Fatal(err)
	}
	if now, _ := os.ReadFile(filepath.Join(root, "etc/sysctl.d/60-dbhost.conf")); string(now) != string(first) {
		t.Errorf("rollback of the second apply left:\n%s\nwant:\n%s", now, first)
	}
}

func TestKeepBlocks(t *testing.T) {
	old := "# Written by dbhost. x\n# Apply now with: sysctl --system\n\n# a\nvm.a = 1\n\n# b\nvm.b = 2\n"
	rendered := "# Written by dbhost. x\n# Apply now with: sysctl --system\n\n# b2\nvm.b = 3\n"
	got := keep("/etc/sysctl.d/60-dbhost.conf", old, rendered)
	want := "# Written by dbhost. x\n# Apply now with: sysctl --system\n\n# b2\nvm.b = 3\n\n# a\nvm.a = 1\n"
	if got != want {
		t.Errorf("keep = %q, want %q", got, want)
	}
	if got := keep("/etc/sysctl.d/60-dbhost.conf", "vm.a = 1\n", rendered); got != rendered {
		t.Errorf("kept settings of a file dbhost did not write: %q", got)
	}
	if got := keep("/etc/systemd/system/x.service.d/60-dbhost.conf", old, rendered); got != rendered {
		t.Errorf("merged a drop-in: %q", got)
	}
}
