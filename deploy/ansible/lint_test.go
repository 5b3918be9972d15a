package ansible

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/dbhost/dbhost/internal/testdb"
	"gopkg.in/yaml.v3"
)

// lintCollection is the collection's directory, relative to this package.
const lintCollection = "ansible_collections/dbhost/fleet"

// lintTool finds a program, or skips (fails under DBHOST_INTEGRATION=require).
func lintTool(t testing.TB, name, debPackage string) string {
	t.Helper()
	p, err := exec.LookPath(name)
	testdb.Need(t, name+" (Debian package "+debPackage+")", err == nil)
	return p
}

// lintEnv is the environment of ansible's tools in a test: the collection
// resolvable as dbhost.fleet, and every cache and temporary file in dir
// rather than in root's home.
func lintEnv(t testing.TB, dir string) []string {
	t.Helper()
	here, err := filepath.Abs(".")
	if err != nil {
		t.Fatal(err)
	}
	env := []string{
		"HOME=" + dir,
		"XDG_CACHE_HOME=" + filepath.Join(dir, ".cache"),
		"ANSIBLE_COLLECTIONS_PATH=" + here,
		"ANSIBLE_LOCAL_TEMP=" + filepath.Join(dir, "tmp"),
		"ANSIBLE_NOCOLOR=1",
		"ANSIBLE_FORCE_COLOR=0",
		"NO_COLOR=1",
		"ANSIBLE_RETRY_FILES_ENABLED=0",
		"ANSIBLE_DEPRECATION_WARNINGS=0",
	}
	for _, kv := range os.Environ() {
		// PATH and the locale from the caller; nothing else of it (an
		// ANSIBLE_CONFIG or ANSIBLE_* of the user's would change the run).
		if strings.HasPrefix(kv, "PATH=") || strings.HasPrefix(kv, "LANG=") || strings.HasPrefix(kv, "LC_") {
			env = append(env, kv)
		}
	}
	return env
}

func lintRun(dir string, env []string, name string, args ...string) (string, error) {
	cmd := exec.Command(name, args...)
	cmd.Dir = dir
	cmd.Env = env
	b, err := cmd.CombinedOutput()
	return string(b), err
}

// lintables are what ansible-lint is given: the collection's top-level
// entries (with no argument it would lint the whole git repository, and a
// collection directory given as "." is taken for a single file).
func lintables(t testing.TB) []string {
	t.Helper()
	ents, err := os.ReadDir(lintCollection)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range ents {
		if strings.HasPrefix(e.Name(), ".") || e.Name() == "tests" || strings.HasSuffix(e.Name(), ".md") {
			continue
		}
		out = append(out, e.Name())
	}
	return out
}

// yamlFiles counts the collection's YAML files ansible-lint must read.
func yamlFiles(t testing.TB) int {
	t.Helper()
	n := 0
	err := filepath.WalkDir(lintCollection, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && d.Name() == "tests" {
			return filepath.SkipDir
		}
		if !d.IsDir() && (strings.HasSuffix(p, ".yml") || strings.HasSuffix(p, ".yaml")) {
			n++
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return n
}

var lintedFiles = regexp.MustCompile(`on (\d+) files`)

// ansibleLint runs ansible-lint on the given entries of dir.
func ansibleLint(t *testing.T, lint, dir string, entries []string) (string, error) {
	t.Helper()
	config, err := filepath.Abs(".ansible-lint")
	if err != nil {
		t.Fatal(err)
	}
	args := append([]string{"--offline", "--nocolor", "-c", config}, entries...)
	return lintRun(dir, lintEnv(t, t.TempDir()), lint, args...)
}

// TestAnsibleLint: ansible-lint with the production profile passes the
// collection, having read each of its YAML files.
func TestAnsibleLint(t *testing.T) {
	lint := lintTool(t, "ansible-lint", "ansible-lint")
	out, err := ansibleLint(t, lint, lintCollection, lintables(t))
	if err != nil {
		t.Fatalf("ansible-lint: %v\n%s", err, out)
	}
	m := lintedFiles.FindStringSubmatch(out)
	if m == nil {
		t.Fatalf("ansible-lint did not say how many files it read:\n%s", out)
	}
	// It passes what it does not find: it must have read every file.
	if n, _ := strconv.Atoi(m[1]); n < yamlFiles(t) {
		t.Fatalf("ansible-lint read %d files, the collection has %d YAML files:\n%s", n, yamlFiles(t), out)
	}
	if !strings.Contains(out, "production") {
		t.Fatalf("ansible-lint did not use the production profile:\n%s", out)
	}
}

// TestAnsibleLintCatches: the same run fails a playbook that breaks the
// production profile, so that a lint that reads nothing cannot pass.
func TestAnsibleLintCatches(t *testing.T) {
	lint := lintTool(t, "ansible-lint", "ansible-lint")
	dir := t.TempDir()
	if err := os.Mkdir(filepath.Join(dir, "playbooks"), 0o755); err != nil {
		t.Fatal(err)
	}
	bad := "---\n- hosts: all\n  tasks:\n    - command: echo hello\n"
	if err := os.WriteFile(filepath.Join(dir, "playbooks", "bad.yml"), []byte(bad), 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := ansibleLint(t, lint, dir, []string{"playbooks"})
	if err == nil {
		t.Fatalf("ansible-lint passed a playbook without names, FQCN or changed_when:\n%s", out)
	}
	for _, rule := range []string{"name[play]", "fqcn", "no-changed-when"} {
		if !strings.Contains(out, rule) {
			t.Errorf("ansible-lint did not report %s:\n%s", rule, out)
		}
	}
}

// TestAnsibleLintConfig: every rule the configuration skips or only warns
// about says why, in a comment on the line above it.
func TestAnsibleLintConfig(t *testing.T) {
	b, err := os.ReadFile(".ansible-lint")
	if err != nil {
		t.Fatal(err)
	}
	var cfg struct {
		Profile  string   `yaml:"profile"`
		SkipList []string `yaml:"skip_list"`
		WarnList []string `yaml:"warn_list"`
	}
	if err := yaml.Unmarshal(b, &cfg); err != nil {
		t.Fatal(err)
	}
	if cfg.Profile != "production" {
		t.Errorf("profile %q, want production", cfg.Profile)
	}
	lines := strings.Split(string(b), "\n")
	for _, rule := range append(cfg.SkipList, cfg.WarnList...) {
		found := false
		for i, ln := range lines {
			if strings.TrimSpace(ln) == "- "+rule {
				found = true
				if i == 0 || !strings.HasPrefix(strings.TrimSpace(lines[i-1]), "#") {
					t.Errorf(".ansible-lint: %s has no reason above it", rule)
				}
			}
		}
		if !found {
			t.Errorf(".ansible-lint: %s is not one rule per line", rule)
		}
	}
}

// TestPlaybookSyntax: ansible-playbook --syntax-check of every playbook,
// with the collection resolvable as dbhost.fleet.
func TestPlaybookSyntax(t *testing.T) {
	playbook := lintTool(t, "ansible-playbook", "ansible-core")
	dir := t.TempDir()
	inv := filepath.Join(dir, "inventory.ini")
	if err := os.WriteFile(inv, []byte("[dbhost]\ndb1 ansible_host=192.0.2.1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	books, err := filepath.Glob(filepath.Join(lintCollection, "playbooks", "*.yml"))
	if err != nil || len(books) == 0 {
		t.Fatalf("no playbooks in %s/playbooks (%v)", lintCollection, err)
	}
	for _, b := range books {
		t.Run(filepath.Base(b), func(t *testing.T) {
			out, err := lintRun(".", lintEnv(t, t.TempDir()), playbook, "--syntax-check", "-i", inv, b)
			if err != nil {
				t.Fatalf("ansible-playbook --syntax-check %s: %v\n%s", b, err, out)
			}
		})
	}
}

// lintPasslib is what the role says of plain passwords: nothing when the
// controller's Python has passlib (they hash to bcrypt), else that it lacks it.
func lintPasslib(t testing.TB) string {
	t.Helper()
	if exec.Command("/usr/bin/python3", "-c", "import passlib").Run() == nil {
		return ""
	}
	return "install passlib on the controller"
}

// TestServePreflight runs the serve role's first tasks (its checks of the
// variables, which change nothing) on the controller: what the role must
// refuse before it touches a host, and a valid set of variables it passes.
func TestServePreflight(t *testing.T) {
	playbook := lintTool(t, "ansible-playbook", "ansible-core")
	dir := t.TempDir()
	book := filepath.Join(dir, "preflight.yml")
	play := `---
- name: The serve role's checks
  hosts: localhost
  connection: local
  gather_facts: false
  tasks:
    - name: Check the variables
      ansible.builtin.include_role:
        name: dbhost.fleet.serve
        tasks_from: preflight.yml
`
	if err := os.WriteFile(book, []byte(play), 0o644); err != nil {
		t.Fatal(err)
	}
	hash := "$2b$10$abcdefghijklmnopqrstuuYGWZ0dCUe0Iy3M1FJZR8lqP6HWhyLlm"
	for _, tc := range []struct {
		name string
		vars map[string]any
		fail string // the assertion's message; "" when it must pass
	}{
		{"valid", map[string]any{"dbhost_deb": "/tmp/dbhost.deb", "dbhost_extra_args": []string{"--no-collector.block"},
			"dbhost_basic_auth_users": map[string]string{"prometheus": hash}, "dbhost_budget": "postgres:5432=40%"}, ""},
		{"no source", map[string]any{}, "set exactly one of dbhost_deb"},
		{"two sources", map[string]any{"dbhost_deb": "/tmp/dbhost.deb", "dbhost_apt_repository": "deb https://apt.example.net stable main"}, "set exactly one of dbhost_deb"},
		{"cert without key", map[string]any{"dbhost_deb": "/tmp/dbhost.deb", "dbhost_tls_cert": "/tmp/c.pem"}, "dbhost_tls_cert and dbhost_tls_key"},
		{"controller and host TLS", map[string]any{"dbhost_deb": "/tmp/dbhost.deb", "dbhost_tls_cert": "/tmp/c.pem", "dbhost_tls_key": "/tmp/k.pem",
			"dbhost_tls_cert_path": "/etc/c.pem", "dbhost_tls_key_path": "/etc/k.pem"}, "dbhost_tls_cert and dbhost_tls_key"},
		{"argument with a space", map[string]any{"dbhost_deb": "/tmp/dbhost.deb", "dbhost_extra_args": []string{"--waivers=/etc/my waivers.yaml"}}, "not a single flag"},
		{"argument with a quote", map[string]any{"dbhost_deb": "/tmp/dbhost.deb", "dbhost_listen_address": `:9437" --web.expose-security-findings "`}, "not a single flag"},
		{"budget with $", map[string]any{"dbhost_deb": "/tmp/dbhost.deb", "dbhost_budget": "postgres:5432=$X"}, "dbhost_budget holds"},
		{"plain password without passlib", map[string]any{"dbhost_deb": "/tmp/dbhost.deb", "dbhost_basic_auth_passwords": map[string]string{"prometheus": "secret"}}, lintPasslib(t)},
		{"plain password as hash", map[string]any{"dbhost_deb": "/tmp/dbhost.deb", "dbhost_basic_auth_users": map[string]string{"prometheus": "secret"}}, "maps a user name to a bcrypt hash"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			vars := scrapeWriteJSON(t, filepath.Join(t.TempDir(), "vars.json"), tc.vars)
			out, err := lintRun(dir, lintEnv(t, t.TempDir()), playbook, "-e", "@"+vars, book)
			if tc.fail == "" {
				if err != nil {
					t.Fatalf("valid variables refused: %v\n%s", err, out)
				}
				return
			}
			if err == nil || !strings.Contains(out, tc.fail) {
				t.Fatalf("want a failure saying %q, got %v:\n%s", tc.fail, err, out)
			}
			if strings.Contains(out, "secret") {
				t.Errorf("the output shows the password:\n%s", out)
			}
		})
	}
}
