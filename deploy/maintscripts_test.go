package deploy

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/dbhost/dbhost/internal/testdb"
)

// maintStep is one call of a maintainer script as dpkg makes it, and what
// it must do.
type maintStep struct {
	name    string
	script  string   // postinst, prerm, postrm
	args    []string // as dpkg passes them
	systemd bool     // systemd is PID 1 (/run/systemd/system exists)
	root    bool     // dpkg --root: DPKG_ROOT is set
	known   bool     // deb-systemd-helper has state of the units (installed before)
	enabled bool     // ... and the operator had enabled them
	records bool     // /var/lib/dbhost holds change records
	calls   []string // the commands run, in order
	left    []string // what is left of /var/lib/dbhost (nil: the directory is gone)
	stderr  string   // a part of what it says
}

// TestMaintainerScripts runs packaging/debian's scripts as dpkg calls them
// on install, upgrade, removal and purge, with and without systemd as
// PID 1, with stand-ins for systemctl, deb-systemd-helper and
// deb-systemd-invoke that record their calls. Each runs in a private mount
// namespace whose /run and /var/lib are empty (tmpfs): the host's units,
// systemd state, locks and /var/lib/dbhost are never seen nor touched.
func TestMaintainerScripts(t *testing.T) {
	testdb.Need(t, "root (the scripts run in a private mount namespace)", os.Geteuid() == 0)
	unshare := tool(t, "unshare", "util-linux")
	root := repoRoot(t)
	var (
		fresh    = []string{"deb-systemd-helper debian-installed dbhost.service", "deb-systemd-helper update-state dbhost.service", "deb-systemd-helper debian-installed dbhost.socket", "deb-systemd-helper update-state dbhost.socket"}
		again    = []string{"deb-systemd-helper debian-installed dbhost.service", "deb-systemd-helper unmask dbhost.service", "deb-systemd-helper --quiet was-enabled dbhost.service", "deb-systemd-helper update-state dbhost.service", "deb-systemd-helper debian-installed dbhost.socket", "deb-systemd-helper unmask dbhost.socket", "deb-systemd-helper --quiet was-enabled dbhost.socket", "deb-systemd-helper update-state dbhost.socket"}
		reenable = []string{"deb-systemd-helper debian-installed dbhost.service", "deb-systemd-helper unmask dbhost.service", "deb-systemd-helper --quiet was-enabled dbhost.service", "deb-systemd-helper enable dbhost.service", "deb-systemd-helper update-state dbhost.service", "deb-systemd-helper debian-installed dbhost.socket", "deb-systemd-helper unmask dbhost.socket", "deb-systemd-helper --quiet was-enabled dbhost.socket", "deb-systemd-helper enable dbhost.socket", "deb-systemd-helper update-state dbhost.socket"}
		reload   = "systemctl --system daemon-reload"
		own      = []string{"changes", "contention-probe.json", "results.db", "results.db-shm", "results.db-wal"}
	)
	steps := []maintStep{
		// Install: systemd reloads; nothing enabled, nothing started.
		{name: "install", script: "postinst", args: []string{"configure", ""}, systemd: true, calls: append(fresh, reload), left: own},
		{name: "install without systemd", script: "postinst", args: []string{"configure", ""}, calls: fresh, left: own},
		{name: "install into a root", script: "postinst", args: []string{"configure", ""}, systemd: true, root: true, calls: fresh, left: own},
		// Upgrade: prerm stops nothing; postinst reloads and restarts what ran.
		{name: "upgrade prerm", script: "prerm", args: []string{"upgrade", "0.2"}, systemd: true, known: true, left: own},
		{name: "upgrade", script: "postinst", args: []string{"configure", "0.1"}, systemd: true, known: true,
			calls: append(append([]string{}, again...), reload, "deb-systemd-invoke try-restart dbhost.service dbhost.socket"), left: own},
		{name: "upgrade, enabled", script: "postinst", args: []string{"configure", "0.1"}, systemd: true, known: true, enabled: true,
			calls: append(append([]string{}, reenable...), reload, "deb-systemd-invoke try-restart dbhost.service dbhost.socket"), left: own},
		{name: "upgrade without systemd", script: "postinst", args: []string{"configure", "0.1"}, known: true, calls: again, left: own},
		{name: "upgrade into a root", script: "postinst", args: []string{"configure", "0.1"}, systemd: true, root: true, known: true, calls: again, left: own},
		// Remove: stop (socket first), reload, mask; state stays.
		{name: "remove prerm", script: "prerm", args: []string{"remove"}, systemd: true, known: true, calls: []string{"deb-systemd-invoke stop dbhost.socket dbhost.service"}, left: own},
		{name: "remove prerm without systemd", script: "prerm", args: []string{"remove"}, known: true, left: own},
		{name: "remove prerm in a root", script: "prerm", args: []string{"remove"}, systemd: true, root: true, known: true, left: own},
		{name: "remove", script: "postrm", args: []string{"remove"}, systemd: true, known: true, calls: []string{reload, "deb-systemd-helper mask dbhost.service dbhost.socket"}, left: own},
		{name: "remove without systemd", script: "postrm", args: []string{"remove"}, known: true, calls: []string{"deb-systemd-helper mask dbhost.service dbhost.socket"}, left: own},
		// Purge: the helper's links and state, dbhost's own state.
		{name: "purge", script: "postrm", args: []string{"purge"}, systemd: true, known: true, calls: []string{"deb-systemd-helper purge dbhost.service dbhost.socket", "deb-systemd-helper unmask dbhost.service dbhost.socket"}},
		{name: "purge into a root", script: "postrm", args: []string{"purge"}, root: true, known: true, calls: []string{"deb-systemd-helper purge dbhost.service dbhost.socket", "deb-systemd-helper unmask dbhost.service dbhost.socket"}},
		{name: "purge, records kept", script: "postrm", args: []string{"purge"}, systemd: true, known: true, records: true,
			calls: []string{"deb-systemd-helper purge dbhost.service dbhost.socket", "deb-systemd-helper unmask dbhost.service dbhost.socket"},
			left:  []string{"changes", "changes/20260101T000000Z", "changes/20260101T000000Z/meta.json", "experiment.journal"}, stderr: "/var/lib/dbhost: it records changes dbhost made"},
	}
	for _, s := range steps {
		t.Run(strings.ReplaceAll(s.name, " ", "_"), func(t *testing.T) {
			t.Parallel()
			calls, left, stderr := runMaintScript(t, unshare, filepath.Join(root, "packaging", "debian", s.script), s)
			if strings.Join(calls, "\n") != strings.Join(s.calls, "\n") {
				t.Errorf("%s %q ran:\n  %s\nwant:\n  %s", s.script, s.args, strings.Join(calls, "\n  "), strings.Join(s.calls, "\n  "))
			}
			if strings.Join(left, " ") != strings.Join(s.left, " ") {
				t.Errorf("%s %q left in /var/lib/dbhost %q, want %q", s.script, s.args, left, s.left)
			}
			if s.stderr != "" && !strings.Contains(stderr, s.stderr) || s.stderr == "" && stderr != "" {
				t.Errorf("%s %q said %q, want %q", s.script, s.args, stderr, s.stderr)
			}
		})
	}
}

// runMaintScript runs one step in a private mount namespace and returns
// the stand-ins' calls, the files left under /var/lib/dbhost (relative,
// sorted; nil when the directory is gone) and the script's stderr.
func runMaintScript(t *testing.T, unshare, script string, s maintStep) (calls, left []string, stderr string) {
	t.Helper()
	dir := t.TempDir()
	bin := filepath.Join(dir, "bin")
	log := filepath.Join(dir, "calls")
	if err := os.Mkdir(bin, 0o755); err != nil {
		t.Fatal(err)
	}
	rec := "echo \"${0##*/} $*\" >>\"$MAINT_LOG\"\n"
	stand := map[string]string{
		"systemctl":          "#!/bin/sh\n" + rec,
		"deb-systemd-invoke": "#!/bin/sh\n" + rec,
		// debian-installed: whether it has state; was-enabled: whether
		// the operator had enabled the unit.
		"deb-systemd-helper": "#!/bin/sh\n" + rec + `case "$1 $2" in
"debian-installed "*) [ -n "$MAINT_KNOWN" ] ;;
"--quiet was-enabled") [ -n "$MAINT_ENABLED" ] ;;
esac
`,
	}
	for name, text := range stand {
		if err := os.WriteFile(filepath.Join(bin, name), []byte(text), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	// In the namespace: empty /run and /var/lib; systemd's directory when
	// it is PID 1; dbhost's state and a lock; run the script; list what
	// is left. With DPKG_ROOT, the state is under it.
	state := "/var/lib/dbhost"
	env := []string{"PATH=" + bin + ":/usr/sbin:/usr/bin:/sbin:/bin", "MAINT_LOG=" + log}
	if s.root {
		droot := filepath.Join(dir, "root")
		env = append(env, "DPKG_ROOT="+droot)
		state = droot + state
	}
	if s.known {
		env = append(env, "MAINT_KNOWN=1")
	}
	if s.enabled {
		env = append(env, "MAINT_ENABLED=1")
	}
	records := ""
	if s.records {
		records = `touch "$STATE/experiment.journal"; mkdir -p "$STATE/changes/20260101T000000Z"; touch "$STATE/changes/20260101T000000Z/meta.json";`
	}
	systemd := ""
	if s.systemd {
		systemd = "mkdir -p /run/systemd/system;"
	}
	shell := `set -e
mount -t tmpfs -o mode=0755 tmpfs /run
mount -t tmpfs -o mode=0755 tmpfs /var/lib
` + systemd + `
mkdir -p "$STATE/changes" /run/dbhost
touch "$STATE/results.db" "$STATE/results.db-wal" "$STATE/results.db-shm" "$STATE/contention-probe.json" /run/dbhost/host.lock
` + records + `
"$SCRIPT" "$@" 2>"$MAINT_ERR"
echo "exit $?"
if [ -e /run/dbhost ] && [ -z "${DPKG_ROOT:-}" ] && [ "$1" = purge ]; then echo "left /run/dbhost"; fi
if [ -d "$STATE" ]; then cd "$STATE" && find . -mindepth 1 | sed 's|^\./||' | LC_ALL=C sort; fi
`
	errFile := filepath.Join(dir, "stderr")
	args := append([]string{"--mount", "--propagation", "private", "sh", "-c", shell, "sh"}, s.args...)
	cmd := exec.Command(unshare, args...)
	cmd.Env = append(env, "STATE="+state, "SCRIPT="+script, "MAINT_ERR="+errFile)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%s: %v\n%s", script, err, out)
	}
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	if len(lines) == 0 || lines[0] != "exit 0" {
		t.Fatalf("%s %q: %s", script, s.args, out)
	}
	for _, ln := range lines[1:] {
		if ln == "left /run/dbhost" {
			t.Errorf("purge left /run/dbhost")
			continue
		}
		left = append(left, ln)
	}
	if b, err := os.ReadFile(log); err == nil {
		calls = strings.Split(strings.TrimSpace(string(b)), "\n")
	}
	b, _ := os.ReadFile(errFile)
	return calls, left, strings.TrimSpace(string(b))
}
