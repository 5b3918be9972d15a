package ansible

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/dbhost/dbhost/internal/fixture"
	"github.com/dbhost/dbhost/internal/journal"
	"github.com/dbhost/dbhost/internal/testdb"
)

// The collection's own Python unit tests (tests/unit): the gate's verdicts
// on recorded audits and Galera variants, the parsers of dbhost fix's
// output, the modules run as Ansible runs them against a stand-in dbhost,
// and rollout.yml's control flow on three local inventory hosts. They run
// with the Python interpreter of the distribution's ansible-core.
func TestModulesUnit(t *testing.T) {
	py := modulesPython(t)
	unit := filepath.Join(modulesCollection(t), "tests", "unit")
	cmd := exec.Command(py, "-m", "unittest", "discover", "-s", unit, "-t", unit, "-v")
	cmd.Dir = unit
	cmd.Env = append(os.Environ(), "HOME="+t.TempDir(), "PYTHONDONTWRITEBYTECODE=1")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("python unit tests: %v\n%s", err, out)
	}
	// A test skipped for a missing tool is a failure under require.
	if testdb.Required() && bytes.Contains(out, []byte("skipped")) {
		t.Fatalf("python unit tests skipped some under DBHOST_INTEGRATION=require:\n%s", out)
	}
	if !bytes.Contains(out, []byte("\nOK")) {
		t.Fatalf("python unit tests did not say OK:\n%s", out)
	}
	t.Logf("%s", lastLines(out, 4))
}

// dbhost_health and dbhost_fix (planned, read-only) through ansible on this
// machine, with the dbhost built from this tree, against a private
// PostgreSQL: the gate passes while it answers and names it once it is
// stopped; the plan's --diff is exactly what `dbhost fix --plan` prints.
// Nothing is applied here (applies are tested on the test hosts).
func TestModulesLive(t *testing.T) {
	if testing.Short() {
		t.Skip("integration test: builds dbhost and starts PostgreSQL")
	}
	testdb.Need(t, "root", os.Geteuid() == 0)
	py := modulesPython(t)
	bin := filepath.Join(testdb.RootOnlyDir(t, "dbhost-modules-"), "dbhost")
	build := exec.Command("go", "build", "-o", bin, "./cmd/dbhost")
	build.Dir = modulesRepo(t)
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	holdHostAlone(t)
	pg := testdb.Postgres(t, testdb.Options{})
	name := "postgres:" + strconv.Itoa(pg.Port)

	// Before: the private server answers, and is in what to expect.
	r, failed := modulesRun(t, py, "dbhost_health", map[string]any{"binary": bin, "timeout": 0}, "--check")
	var expect struct {
		Instances []string `json:"instances"`
	}
	decode(t, r["expect"], &expect)
	if !contains(expect.Instances, name) {
		t.Fatalf("expect %v does not name %s (failed %v: %v)", expect.Instances, name, failed, r["msg"])
	}
	want := map[string]any{"instances": []string{name}, "galera": map[string]int{}}
	r, failed = modulesRun(t, py, "dbhost_health", map[string]any{"binary": bin, "timeout": 0, "expect": want})
	if failed || r["healthy"] != true {
		t.Fatalf("gate with %s answering: failed %v: %v", name, failed, r["msg"])
	}
	// A check judged live: its finding on the private server passes.
	r, _ = modulesRun(t, py, "dbhost_health", map[string]any{"binary": bin, "timeout": 0, "only": []string{"pg.settings_source"}, "expect": want})
	var checks []struct{ ID, Subject, Status string }
	decode(t, r["checks"], &checks)
	found := false
	for _, c := range checks {
		if c.ID == "pg.settings_source" && c.Subject == name {
			found = true
			if c.Status != "pass" {
				t.Errorf("pg.settings_source on %s: %s", name, c.Status)
			}
		}
	}
	if !found {
		t.Errorf("no pg.settings_source finding for %s in %v", name, checks)
	}

	// The plan in check mode with --diff: dbhost's own text, nothing written.
	only := []string{"net.keepalive", "net.fin_timeout"}
	planFile := filepath.Join(t.TempDir(), "plans", "p.json")
	r, failed = modulesRun(t, py, "dbhost_fix", map[string]any{"binary": bin, "state": "planned", "only": only, "plan_file": planFile}, "--check", "--diff", "-vvv")
	if failed {
		t.Fatalf("dbhost_fix planned: %v", r["msg"])
	}
	direct := exec.Command(bin, "fix", "--plan", "--only="+strings.Join(only, ","))
	var stdout bytes.Buffer
	direct.Stdout = &stdout
	code := exitCode(t, direct.Run())
	if code > 1 {
		t.Fatalf("dbhost fix --plan exited %d", code)
	}
	if r["changed"] != (code == 1) {
		t.Errorf("changed %v, dbhost fix --plan exited %d", r["changed"], code)
	}
	diff, _ := r["diff"].(map[string]any)
	if diff == nil || diff["prepared"] != stdout.String() {
		t.Errorf("--diff is not what dbhost prints:\n--- module\n%v\n--- dbhost\n%s", r["diff"], stdout.String())
	}
	if _, err := os.Stat(filepath.Dir(planFile)); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("check mode made %s: %v", filepath.Dir(planFile), err)
	}

	// After: the server stopped, the gate fails and names it.
	pg.Stop(t)
	r, failed = modulesRun(t, py, "dbhost_health", map[string]any{"binary": bin, "timeout": 0, "expect": want})
	var failures []string
	decode(t, r["failures"], &failures)
	wantFailure := name + ": not running (it answered before the change)"
	if !failed || !contains(failures, wantFailure) {
		t.Fatalf("gate with %s stopped: failed %v, failures %q, want %q", name, failed, failures, wantFailure)
	}
}

// The module's readers of dbhost fix's JSON (module_utils/fixplan.py) on
// what the dbhost built from this tree prints, so that a change of
// dbhost.changes/1 fails here, not only in the unit tests' recordings: an
// apply on a copy tree (--root, the recorded host baseline, as
// internal/cli's TestFixJSONChangeSets) names its set and its after, its
// stderr holds the plan exactly as --plan prints it, the history lists it.
func TestModulesFixJSON(t *testing.T) {
	testdb.Need(t, "root (a copy tree owned by root)", os.Geteuid() == 0)
	py := modulesPython(t)
	dir := testdb.RootOnlyDir(t, "dbhost-fixjson-")
	bin := filepath.Join(dir, "dbhost")
	build := exec.Command("go", "build", "-o", bin, "./cmd/dbhost")
	build.Dir = modulesRepo(t)
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	root := filepath.Join(dir, "root")
	if err := os.MkdirAll(filepath.Join(root, "etc", "sysctl.d"), 0o755); err != nil {
		t.Fatal(err)
	}
	snap := fixture.Path("baseline")
	run := func(want int, args ...string) (string, string) {
		t.Helper()
		cmd := exec.Command(bin, append(args, "--from", snap, "--root", root)...)
		cmd.Env = append(os.Environ(), "SUDO_USER=") // the history's "by" is root's alone
		var stdout, stderr bytes.Buffer
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		code := exitCode(t, cmd.Run())
		if code != want {
			t.Fatalf("dbhost %v: exit %d, want %d\n%s\n%s", args, code, want, stdout.String(), stderr.String())
		}
		return stdout.String(), stderr.String()
	}
	only := "--only=net.keepalive,net.fin_timeout"
	planFile := filepath.Join(dir, "plan.json")
	plan, _ := run(1, "fix", "--plan", only, "--plan-out="+planFile)
	// The tree is no live host: the kernel values are left, the fixed
	// checks still fail after the apply (exit 1).
	out, errOut := run(1, "fix", "--apply", "--format=json", only, "--plan-file="+planFile)
	hist, _ := run(0, "fix", "--history", "--format=json")
	files := map[string]string{"out": out, "err": errOut, "hist": hist}
	for name, text := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	read := exec.Command(py, "-c", `import json, sys
from ansible_collections.dbhost.fleet.plugins.module_utils import fixplan
out, err, hist = [open(p).read() for p in sys.argv[1:]]
cs = fixplan.parse_applied(out)
print(json.dumps({"id": cs["id"], "status": cs["status"], "after": fixplan.after_statuses(cs),
                  "plan": fixplan.plan_text(err), "history": fixplan.parse_history(hist)}))`,
		filepath.Join(dir, "out"), filepath.Join(dir, "err"), filepath.Join(dir, "hist"))
	read.Env = append(os.Environ(), "PYTHONPATH="+modulesCollectionsRoot(t), "PYTHONDONTWRITEBYTECODE=1")
	b, err := read.Output()
	if err != nil {
		t.Fatalf("fixplan on dbhost's JSON: %v\n%s\n%s", err, b, errOut)
	}
	var got struct {
		ID, Status string
		After      []struct{ Status, Target string }
		Plan       string
		History    []struct {
			ID, Status, Created, By string
			Files                   int
			Fixed                   []string
		}
	}
	if err := json.Unmarshal(b, &got); err != nil {
		t.Fatalf("%v: %s", err, b)
	}
	if got.Status != "applied" || len(got.ID) != len("20261127T150312Z-3fa2") {
		t.Errorf("applied set: id %q status %q", got.ID, got.Status)
	}
	var targets []string
	for _, a := range got.After {
		targets = append(targets, a.Status+" "+a.Target)
	}
	if strings.Join(targets, ", ") != "fail net.fin_timeout, fail net.keepalive" {
		t.Errorf("after: %q", targets)
	}
	if got.Plan != plan {
		t.Errorf("the plan from --apply's stderr is not --plan's:\n--- apply\n%s\n--- plan\n%s", got.Plan, plan)
	}
	if len(got.History) != 1 {
		t.Fatalf("history: %+v", got.History)
	}
	h := got.History[0]
	if h.ID != got.ID || h.Status != "applied" || h.By != "root" || h.Files != 1 || len(h.Created) != len("2026-11-27 15:03:12Z") ||
		strings.Join(h.Fixed, ", ") != "net.fin_timeout, net.keepalive" {
		t.Errorf("history: %+v (apply named %s)", h, got.ID)
	}
}

// modulesRun runs one module on localhost through the ansible command and
// returns its result and whether it failed. The one-line callback prints
// "localhost | STATE => JSON"; it keeps the result's diff only from -vvv on.
func modulesRun(t *testing.T, py, module string, args map[string]any, extra ...string) (map[string]any, bool) {
	t.Helper()
	a, err := json.Marshal(args)
	if err != nil {
		t.Fatal(err)
	}
	home := t.TempDir()
	cmd := exec.Command("ansible", append([]string{"localhost", "-o", "-m", "dbhost.fleet." + module, "-a", string(a),
		"-e", "ansible_python_interpreter=" + py}, extra...)...)
	cmd.Env = append(os.Environ(), "HOME="+home, "ANSIBLE_COLLECTIONS_PATH="+modulesCollectionsRoot(t),
		"ANSIBLE_LOCAL_TEMP="+filepath.Join(home, "local"), "ANSIBLE_REMOTE_TMP="+filepath.Join(home, "remote"),
		"ANSIBLE_NOCOLOR=1", "ANSIBLE_LOCALHOST_WARNING=0", "ANSIBLE_INVENTORY_UNPARSED_WARNING=0")
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	_ = cmd.Run() // a failed module exits non-zero; its result says why
	for _, line := range strings.Split(stdout.String(), "\n") {
		head, body, ok := strings.Cut(line, " => ")
		if !ok || !strings.HasPrefix(head, "localhost | ") {
			continue
		}
		var r map[string]any
		if err := json.Unmarshal([]byte(body), &r); err != nil {
			t.Fatalf("ansible %s: %v:\n%s", module, err, line)
		}
		return r, strings.Contains(head, "| FAILED")
	}
	t.Fatalf("ansible %s: no result for localhost:\n%s\n%s", module, stdout.String(), stderr.String())
	return nil, true
}

// modulesPython is the interpreter ansible-core runs under (its command's
// #! line): the one that imports ansible.module_utils.
func modulesPython(t *testing.T) string {
	t.Helper()
	ap, err := exec.LookPath("ansible-playbook")
	testdb.Need(t, "ansible-playbook (ansible-core)", err == nil)
	_, err = exec.LookPath("ansible")
	testdb.Need(t, "ansible (ansible-core)", err == nil)
	f, err := os.Open(ap)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	line, _ := bufio.NewReader(f).ReadString('\n')
	fields := strings.Fields(strings.TrimPrefix(line, "#!"))
	py := "python3"
	if len(fields) > 0 && !strings.HasSuffix(fields[0], "/env") {
		py = fields[0]
	} else if len(fields) > 1 {
		py = fields[1]
	}
	if p, err := exec.LookPath(py); err == nil {
		py = p
	}
	err = exec.Command(py, "-c", "import ansible.module_utils.basic").Run()
	testdb.Need(t, fmt.Sprintf("%s importing ansible (%v)", py, err), err == nil)
	return py
}

func modulesRepo(t *testing.T) string {
	t.Helper()
	dir, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, "go.mod")); err != nil {
		t.Fatalf("repository root: %v", err)
	}
	return dir
}

// modulesCollectionsRoot is the directory ANSIBLE_COLLECTIONS_PATH names.
func modulesCollectionsRoot(t *testing.T) string {
	return filepath.Join(modulesRepo(t), "deploy", "ansible")
}

func modulesCollection(t *testing.T) string {
	return filepath.Join(modulesCollectionsRoot(t), "ansible_collections", "dbhost", "fleet")
}

func decode(t *testing.T, v any, into any) {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, into); err != nil {
		t.Fatalf("%s: %v", b, err)
	}
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

func lastLines(b []byte, n int) string {
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// exitCode is a finished command's exit status; an error other than a
// status (the binary did not start) fails the test.
func exitCode(t *testing.T, err error) int {
	t.Helper()
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		return ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return 0
}

// holdHostAlone takes the host lock exclusively for the rest of the test
// (the servers it starts then hold nothing more). The gate judges every
// database on this machine, Galera nodes whatever its expect says: another
// package's test starting a server or a Galera lab meanwhile is judged too
// (a lab node caught as Donor/Desynced failed the gate once).
func holdHostAlone(t *testing.T) {
	t.Helper()
	unlock, err := journal.Lock(journal.HostLock)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(unlock)
}
