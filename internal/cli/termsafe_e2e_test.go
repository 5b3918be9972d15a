package cli

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/dbhost/dbhost/internal/fixture"
	"github.com/dbhost/dbhost/internal/fixture/derive"
	"github.com/dbhost/dbhost/internal/termsafe"
)

// hostile is what a user puts into names root's terminal will show: a
// window-title change, a screen clear, a C1 CSI, a right-to-left override
// and a carriage return that would overwrite the line.
const hostile = "\x1b]0;pwned\x07\x1b[2J\u009b1m\u202e\rX"

// rawControls lists the characters a terminal would act on, outside the
// colour codes dbhost emits itself.
func rawControls(s string) []string {
	for _, c := range termsafe.Colours {
		s = strings.ReplaceAll(s, c, "")
	}
	var bad []string
	for i, r := range s {
		if r == utf8.RuneError {
			if _, size := utf8.DecodeRuneInString(s[i:]); size == 1 {
				bad = append(bad, strconv.Quote(s[i:i+1]))
				continue
			}
		}
		if r != '\n' && r != '\t' && (r < 0x20 || r == 0x7f || r >= 0x80 && r <= 0x9f || r >= 0x202a && r <= 0x202e) {
			bad = append(bad, strconv.QuoteRune(r))
		}
	}
	return bad
}

// hostileSnapshot plants hostile text where a snapshot carries what other
// users control: the host name, a data directory, a process name.
func hostileSnapshot(t *testing.T) string {
	t.Helper()
	a, err := derive.Read(fixture.Path("mysql-private"))
	if err != nil {
		t.Fatal(err)
	}
	a.Manifest["hostname"] = "db1" + hostile
	key := "probe:postgres:live:/var/run/postgresql:5432"
	var live map[string]any
	if err := json.Unmarshal(a.Probes[key].Out, &live); err != nil {
		t.Fatal(err)
	}
	for _, s := range live["settings"].([]any) {
		if m := s.(map[string]any); m["name"] == "data_directory" {
			m["setting"] = "/srv/pg" + hostile
		}
	}
	out, _ := json.Marshal(live)
	a.SetProbe(key, out, "", 0)
	a.SetFile("proc/1/comm", "init"+hostile+"\n")
	p := filepath.Join(t.TempDir(), "hostile.tar.gz")
	if err := a.Write(p); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestNoTerminalEscapesFromData(t *testing.T) {
	snap := hostileSnapshot(t)
	fixes := filepath.Join(t.TempDir(), "fixes")
	for _, args := range [][]string{
		{"audit", "--from", snap, "-v", "--color", "never"},
		{"audit", "--from", snap, "-v", "--color", "always"},
		{"audit", "--from", snap, "--format", "prom"},
		{"fix", "--from", snap, "--out", fixes},
		{"audit", "--from", snap, "--only", "no.such" + hostile},
	} {
		_, stdout, stderr := runCLI(t, args...)
		if bad := rawControls(stdout + stderr); len(bad) > 0 {
			t.Errorf("dbhost %s: raw control characters %v in\n%s%s", strings.Join(args[:2], " "), bad, stdout, stderr)
		}
		if args[0] == "audit" && args[len(args)-1] == "never" {
			// The text is still there, escaped.
			if !strings.Contains(stdout, `/srv/pg\x1b]0;pwned\a\x1b[2J\u009b1m\u202e\rX`) {
				t.Errorf("escaped data directory missing:\n%s", stdout)
			}
			if strings.Contains(stdout, "\x1b[") {
				t.Error("colour codes with --color never")
			}
		}
	}
	// JSON keeps the data intact and escaped by JSON itself.
	_, stdout, _ := runCLI(t, "audit", "--from", snap, "--format", "json")
	var doc map[string]any
	if err := json.Unmarshal([]byte(stdout), &doc); err != nil {
		t.Fatalf("json: %v", err)
	}
	if !strings.Contains(stdout, `/srv/pg\u001b]0;pwned\u0007\u001b[2J`) {
		t.Error("JSON does not carry the data directory escaped by JSON")
	}
}

// TestNoTerminalEscapesLive runs the live-only commands against a real
// process whose name is hostile (an executable's file name becomes the
// process's comm).
func TestNoTerminalEscapesLive(t *testing.T) {
	dir := t.TempDir()
	name := filepath.Join(dir, "\x1b]0;x\x07\x9b\u202e")
	if err := os.Symlink("/bin/sleep", name); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(name, "30")
	cmd.Args[0] = "sleep" + hostile
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { cmd.Process.Kill(); cmd.Wait() }()
	time.Sleep(50 * time.Millisecond)
	pid := strconv.Itoa(cmd.Process.Pid)
	if comm, err := os.ReadFile("/proc/" + pid + "/comm"); err != nil || !strings.Contains(string(comm), "\x1b") {
		t.Fatalf("the process did not get its hostile name: %q, %v", comm, err)
	}
	for _, args := range [][]string{
		{"mem", "--pid", pid},
		{"contention", "--pid", pid, "--interval", "200ms"},
	} {
		_, stdout, stderr := runCLI(t, args...)
		if bad := rawControls(stdout + stderr); len(bad) > 0 {
			t.Errorf("dbhost %s: raw control characters %v in\n%s%s", args[0], bad, stdout, stderr)
		}
		if args[0] == "mem" && !strings.Contains(stdout, `\x1b]0;x\a`) {
			t.Errorf("dbhost mem does not show the process, escaped:\n%s", stdout)
		}
	}
}
