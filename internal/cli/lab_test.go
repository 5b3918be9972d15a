package cli

import (
	"os"
	"strings"
	"testing"

	"github.com/dbhost/dbhost/internal/galeralab"
	"github.com/dbhost/dbhost/internal/testdb"
)

// Flags that cannot go together, and values the lab cannot run, are
// refused before anything is made; a user who is not root is told to
// use sudo.
func TestLabGaleraRefuses(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--status", "--stop"}, "go alone"},
		{[]string{"--html", "x.html"}, "go with --prove"},
		{[]string{"--prove", "--format", "yaml"}, `--format "yaml"`},
		{[]string{"--nodes", "9"}, "2 to 7"},
		{[]string{"--segments", "4"}, "1 to 3"},
		{[]string{"--weight", "node1"}, "want NAME=W"},
		{[]string{"--weight", "node9=2"}, `"node9": no such member`},
		{[]string{"--option", "datadir=/etc"}, "sets it itself"},
		{[]string{"--name", "../x"}, "lab name"},
	} {
		if os.Geteuid() != 0 && !strings.Contains(c.want, "go ") && !strings.Contains(c.want, "--format") {
			continue // checked after the root check
		}
		code, out, errs := runCLI(t, append([]string{"lab", "galera"}, c.args...)...)
		if code != ExitError || out != "" || !strings.Contains(errs, c.want) {
			t.Errorf("%v: exit %d, %q %q, want %q", c.args, code, out, errs, c.want)
		}
	}
	old := geteuid
	geteuid = func() int { return 1000 }
	defer func() { geteuid = old }()
	code, _, errs := runCLI(t, "lab", "galera", "--status")
	if code != ExitError || !strings.Contains(errs, "run it as root (sudo dbhost lab galera)") {
		t.Errorf("not root: exit %d, %q", code, errs)
	}
	code, _, errs = runCLI(t, "lab")
	if code != ExitError || !strings.Contains(errs, "galera") {
		t.Errorf("lab: exit %d, %q", code, errs)
	}
}

// The command starts a lab and says how to reach and stop it; a second
// start of the same name is refused while it runs; --status shows every
// node's view; --stop removes it, and a second --stop finds nothing.
func TestLabGaleraCommand(t *testing.T) {
	if testing.Short() {
		t.Skip("integration: starts a Galera lab")
	}
	testdb.Need(t, "root (network namespaces)", os.Geteuid() == 0)
	// Parallel first: a test paused by t.Parallel while it holds the host
	// lock shared would keep a serial test that takes it exclusively
	// waiting for ever.
	t.Parallel()
	testdb.HoldHost(t)
	name := "clitest"
	t.Cleanup(func() { galeralab.Remove(galeralab.DefaultRoot, name) })
	code, out, errs := runCLI(t, "lab", "galera", "--name", name, "--nodes", "2", "--weight", "node1=2", "--suspect-timeout", "3s")
	if code != ExitOK || !strings.Contains(out, "lab clitest: 2 data nodes Synced in one Primary component") ||
		!strings.Contains(out, "weight 2  mariadb --socket=/var/lib/dbhost/lab/clitest/node1/mysqld.sock") ||
		!strings.Contains(out, "stop:    sudo dbhost lab galera --stop --name clitest") {
		t.Fatalf("start: exit %d\n%s\n%s", code, out, errs)
	}
	if code, _, errs := runCLI(t, "lab", "galera", "--name", name, "--nodes", "2"); code != ExitError || !strings.Contains(errs, "runs already") {
		t.Errorf("second start: exit %d, %s", code, errs)
	}
	code, out, errs = runCLI(t, "lab", "galera", "--status", "--name", name)
	if code != ExitOK || strings.Count(out, "Primary Synced, size 2, weight 3: node1 node2") != 2 || !strings.Contains(out, "suspect timeout 3s") {
		t.Errorf("status: exit %d\n%s\n%s", code, out, errs)
	}
	code, out, errs = runCLI(t, "lab", "galera", "--stop", "--name", name)
	if code != ExitOK || !strings.Contains(out, "lab clitest stopped") {
		t.Errorf("stop: exit %d\n%s\n%s", code, out, errs)
	}
	if _, err := os.Lstat("/run/netns/dbhost-lab-clitest-node1"); err == nil {
		t.Error("namespace left")
	}
	code, _, errs = runCLI(t, "lab", "galera", "--stop", "--name", name)
	if code != ExitOK || !strings.Contains(errs, "nothing to stop") {
		t.Errorf("second stop: exit %d, %s", code, errs)
	}
}
