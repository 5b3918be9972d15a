package ansible

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/dbhost/dbhost/internal/testdb"
	"github.com/dbhost/dbhost/internal/testhost"
	"golang.org/x/crypto/bcrypt"
)

// collection is the collection's directory in the repository.
const collection = "deploy/ansible/ansible_collections/dbhost/fleet"

// rolloutOnly: kernel net.* values are per network namespace, each test
// host's own; vm.* would be this machine's.
var rolloutOnly = []string{"net.keepalive", "net.fin_timeout"}

// netKeys are the values the roll-out sets (tcp_keepalive_time 120,
// tcp_keepalive_intvl 30, tcp_fin_timeout 30).
var netKeys = []string{"net.ipv4.tcp_keepalive_time", "net.ipv4.tcp_keepalive_intvl", "net.ipv4.tcp_fin_timeout"}

var fixedValues = map[string]string{"net.ipv4.tcp_keepalive_time": "120", "net.ipv4.tcp_keepalive_intvl": "30", "net.ipv4.tcp_fin_timeout": "30"}

const sysctlFile = "/etc/sysctl.d/60-dbhost.conf"

// TestFleet is the collection's integration test: three test hosts, the
// serve role installing the .deb built from this tree, collect and the
// fleet report, and the roll-out in check mode, with a gate that fails on
// the second host, and to the end. The steps share the hosts and run in
// order; each needs the one before.
func TestFleet(t *testing.T) {
	if testing.Short() {
		t.Skip("integration test (test hosts, ansible-playbook)")
	}
	testdb.Need(t, "root (test hosts)", os.Geteuid() == 0)
	_, err := exec.LookPath("ansible-playbook")
	testdb.Need(t, "ansible-playbook (apt-get install ansible-core)", err == nil)
	_, err = exec.LookPath("dpkg-deb")
	testdb.Need(t, "dpkg-deb", err == nil)
	root := testhost.RepoRoot(t)
	for _, p := range []string{"serve.yml", "collect.yml", "rollout.yml"} {
		_, err := os.Stat(filepath.Join(root, collection, "playbooks", p))
		testdb.Need(t, "the collection's playbooks/"+p, err == nil)
	}
	work := t.TempDir()

	begin := time.Now()
	deb, ctl := buildDeb(t, root, work)
	t.Logf("package and controller binary: %s", time.Since(begin).Round(10*time.Millisecond))
	hosts := testhost.StartN(t, []int{1, 2, 3}, testhost.Options{Dir: filepath.Join(work, "hosts")})

	password := randomHex(t)
	hash, err := bcrypt.GenerateFromPassword([]byte(password), bcrypt.MinCost)
	if err != nil {
		t.Fatal(err)
	}
	collectDir := filepath.Join(work, "fleet")
	inv := testhost.Inventory(t, hosts, map[string]any{
		"dbhost_controller_binary": ctl,
		"dbhost_collect_dir":       collectDir,
		"dbhost_gate_delay":        1,
	})
	orig := map[string]map[string]string{}
	for _, h := range hosts {
		orig[h.Name()] = sysctls(t, h)
	}
	f := &fleet{root: root, work: work, inv: inv, hosts: hosts, orig: orig}

	if !t.Run("serve", func(t *testing.T) {
		out := f.run(t, 0, "serve.yml", map[string]any{
			"dbhost_deb":              deb,
			"dbhost_basic_auth_users": map[string]string{"prometheus": string(hash)},
			"dbhost_healthz_user":     "prometheus",
			"dbhost_healthz_password": password,
		})
		if strings.Contains(out, password) {
			t.Error("the playbook's output shows the password")
		}
		for _, h := range hosts {
			// The web config holds the hash: root's alone.
			if st, err := os.Stat(h.Path("/etc/dbhost/web.yml")); err != nil || st.Mode().Perm()&0o037 != 0 || st.Sys().(*syscall.Stat_t).Uid != 0 {
				t.Errorf("%s: /etc/dbhost/web.yml: %v, want root's, not group-writable, nothing for others", h.Name(), err)
			}
			url := "http://" + h.Addr() + ":9437/metrics"
			code, body := get(t, url, "prometheus", password)
			if code != http.StatusOK || !strings.Contains(body, "\ndbhost_") {
				t.Errorf("%s with the password: %d, %d bytes, want 200 and dbhost series:\n%.500s", url, code, len(body), body)
			}
			if code, _ := get(t, "http://"+h.Addr()+":9437/healthz", "prometheus", password); code != http.StatusOK {
				t.Errorf("%s: /healthz with the password: %d, want 200", h.Name(), code)
			}
			if code, _ := get(t, url, "", ""); code != http.StatusUnauthorized {
				t.Errorf("%s without the password: %d, want 401", url, code)
			}
			if code, _ := get(t, url, "prometheus", "wrong"); code != http.StatusUnauthorized {
				t.Errorf("%s with a wrong password: %d, want 401", url, code)
			}
		}
	}) {
		return
	}

	// A config dbhost would refuse never replaces the running one: the
	// role's validate (serve --check-config) fails the play first.
	if !t.Run("serve refuses a bad config", func(t *testing.T) {
		h := hosts[0]
		before, err := os.ReadFile(h.Path("/etc/dbhost/web.yml"))
		if err != nil {
			t.Fatal(err)
		}
		// Shaped like bcrypt (the role's own check passes it), but cost 99.
		bad := "$2b$99$" + strings.Repeat("A", 53)
		out := f.run(t, 2, "serve.yml", map[string]any{
			"dbhost_deb":              deb,
			"dbhost_basic_auth_users": map[string]string{"prometheus": bad},
			"dbhost_healthz_user":     "prometheus",
			"dbhost_healthz_password": password,
		}, "--limit", h.Name())
		if !strings.Contains(out, "check-config") || !strings.Contains(out, "prometheus") || strings.Contains(out, bad) || strings.Contains(out, password) {
			t.Errorf("the failed play does not name the check and the user, or shows a secret:\n%s", out)
		}
		if after, err := os.ReadFile(h.Path("/etc/dbhost/web.yml")); err != nil || string(after) != string(before) {
			t.Errorf("%s: web.yml changed by a refused config (%v)", h.Name(), err)
		}
		if code, _ := get(t, "http://"+h.Addr()+":9437/healthz", "prometheus", password); code != http.StatusOK {
			t.Errorf("%s: /healthz after the refused config: %d, want 200 (the old config still serves)", h.Name(), code)
		}
	}) {
		return
	}

	if !t.Run("collect", func(t *testing.T) {
		out := f.run(t, 0, "collect.yml", nil)
		for _, h := range hosts {
			// Each snapshot is its host's, named after it.
			snap := filepath.Join(collectDir, h.Name()+".tar.gz")
			js, _ := exec.Command(ctl, "audit", "--from", snap, "--format", "json", "--fail-on", "none").Output()
			var audit struct {
				Host struct {
					Hostname string `json:"hostname"`
				} `json:"host"`
			}
			if err := json.Unmarshal(js, &audit); err != nil || audit.Host.Hostname != h.Name() {
				t.Errorf("%s: audit --from: hostname %q (%v), want %s", snap, audit.Host.Hostname, err, h.Name())
			}
		}
		report := filepath.Join(collectDir, "fleet.html")
		html, err := os.ReadFile(report)
		if err != nil {
			t.Fatalf("fleet report: %v\n%s", err, out)
		}
		for _, h := range hosts {
			if !bytes.Contains(html, []byte(h.Name())) {
				t.Errorf("the fleet report does not name %s", h.Name())
			}
		}
	}) {
		return
	}

	if !t.Run("check mode", func(t *testing.T) {
		out := f.run(t, 0, "rollout.yml", map[string]any{"dbhost_only": rolloutOnly}, "--check", "--diff")
		// The plan's diff, once per host: the file's new lines and the
		// values.
		if n := strings.Count(out, "+net.ipv4.tcp_keepalive_time = 120"); n < len(hosts) {
			t.Errorf("the plan's diff of %s shows +net.ipv4.tcp_keepalive_time = 120 %d times, want one per host (%d)", sysctlFile, n, len(hosts))
		}
		if strings.Contains(out, "runs in a container") {
			t.Error("dbhost judges the test hosts containers")
		}
		if n := strings.Count(out, "60-dbhost.conf"); n < len(hosts) {
			t.Errorf("the output names 60-dbhost.conf %d times, want at least one per host", n)
		}
		for _, h := range hosts {
			f.untouched(t, h)
		}
		if t.Failed() || testing.Verbose() {
			t.Log(out)
		}
	}) {
		return
	}

	// The gate fails on host 2: its PostgreSQL is stopped as soon as its
	// change set appears (the apply changes only kernel values, which do
	// not need the server), so that the gate after the apply finds it
	// gone however quickly it comes.
	if !t.Run("failed gate", func(t *testing.T) {
		stop := make(chan struct{})
		var wg sync.WaitGroup
		var stopErr error
		var stopped time.Time
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				if sets, _ := changeSets(hosts[1]); len(sets) > 0 {
					stopErr = hosts[1].StopPostgres()
					stopped = time.Now()
					return
				}
				select {
				case <-stop:
					return
				case <-time.After(10 * time.Millisecond):
				}
			}
		}()
		out := f.run(t, 2, "rollout.yml", map[string]any{"dbhost_only": rolloutOnly, "dbhost_gate_timeout": 10})
		close(stop)
		wg.Wait()
		if stopped.IsZero() {
			t.Fatalf("host 2 never had a change set: the roll-out did not reach it\n%s", out)
		}
		if stopErr != nil {
			t.Fatal(stopErr)
		}
		if !regexp.MustCompile(`(?m)^(fatal|failed): \[dbhost-test-2\].*(?i:gate)`).MatchString(out) {
			t.Errorf("the output does not name the failed gate on dbhost-test-2:\n%s", out)
		}
		h1, h2, h3 := hosts[0], hosts[1], hosts[2]
		a1 := f.applied(t, h1)
		sets2, err := changeSets(h2)
		if err != nil || len(sets2) != 1 || sets2[0].Status != "rolled-back" {
			t.Errorf("%s: change sets %+v (%v), want one rolled back", h2.Name(), sets2, err)
		}
		f.unchanged(t, h2)
		if hist := h2.Exec(t, "/usr/bin/dbhost", "fix", "--history"); !strings.Contains(hist, "rolled-back") || !strings.Contains(hist, "rolled back") {
			t.Errorf("%s: fix --history does not show the rollback:\n%s", h2.Name(), hist)
		}
		f.untouched(t, h3)
		if len(sets2) == 1 && !a1.Created.Before(sets2[0].Created) {
			t.Errorf("host 1 applied at %s, host 2 at %s: not in host order", a1.Created, sets2[0].Created)
		}
		if t.Failed() || testing.Verbose() {
			t.Log(out)
		}
	}) {
		return
	}

	t.Run("success", func(t *testing.T) {
		if err := hosts[1].StartPostgres(); err != nil {
			t.Fatal(err)
		}
		// Host 1 back to as it was, by the module: the roll-out then
		// applies on every host.
		f.run(t, 0, "testdata/rollback.yml", nil, "--limit", hosts[0].Name())
		f.unchanged(t, hosts[0])
		began := time.Now()
		out := f.run(t, 0, "rollout.yml", map[string]any{"dbhost_only": rolloutOnly})
		elapsed := time.Since(began)
		var last time.Time
		for _, h := range hosts {
			cs := f.applied(t, h)
			if !cs.Created.After(last) {
				t.Errorf("%s applied at %s, not after the host before it (%s)", h.Name(), cs.Created, last)
			}
			last = cs.Created
		}
		if t.Failed() {
			t.Log(out)
		}
		f.overhead(t, hosts[0], elapsed)

		f.run(t, 0, "testdata/rollback.yml", nil)
		for _, h := range hosts {
			f.unchanged(t, h)
		}
	})
}

// fleet is what the steps share.
type fleet struct {
	root, work, inv string
	hosts           []*testhost.Host
	orig            map[string]map[string]string // host -> sysctl -> value before
}

// run runs a playbook of the collection (or of testdata) with extra
// variables and wants its exit status (0, or 2: ansible-playbook's "a host
// failed").
func (f *fleet) run(t *testing.T, want int, playbook string, vars map[string]any, args ...string) string {
	t.Helper()
	path := filepath.Join(f.root, "deploy", "ansible", playbook)
	if !strings.HasPrefix(playbook, "testdata/") {
		path = filepath.Join(f.root, collection, "playbooks", playbook)
	}
	if len(vars) > 0 {
		b, err := json.Marshal(vars)
		if err != nil {
			t.Fatal(err)
		}
		file, err := os.CreateTemp(f.work, "vars-*.json")
		if err != nil {
			t.Fatal(err)
		}
		file.Write(b)
		file.Close()
		args = append([]string{"-e", "@" + file.Name()}, args...)
	}
	out, err := testhost.Playbook(t, f.work, f.inv, path, args...)
	if got := exitCode(t, err); got != want {
		if strings.Contains(out, "UNREACHABLE!") {
			for _, h := range f.hosts {
				out += fmt.Sprintf("\n%s sshd log:\n%s", h.Name(), h.SSHLog())
			}
		}
		t.Fatalf("ansible-playbook %s: exit %d, want %d\n%s", playbook, got, want, out)
	}
	return out
}

// unchanged: the host is as before any roll-out: no sysctl.d file of
// dbhost's, the net values as they were, no applied change set.
func (f *fleet) unchanged(t *testing.T, h *testhost.Host) {
	t.Helper()
	if _, err := os.Lstat(h.Path(sysctlFile)); err == nil {
		t.Errorf("%s: %s present", h.Name(), sysctlFile)
	}
	now := sysctls(t, h)
	for _, k := range netKeys {
		if now[k] != f.orig[h.Name()][k] {
			t.Errorf("%s: %s = %s, was %s", h.Name(), k, now[k], f.orig[h.Name()][k])
		}
	}
	sets, err := changeSets(h)
	if err != nil {
		t.Error(err)
	}
	for _, cs := range sets {
		if cs.Status != "rolled-back" {
			t.Errorf("%s: change set %s is %s", h.Name(), cs.ID, cs.Status)
		}
	}
}

// untouched: the host is as before, and no change set was ever made on it.
func (f *fleet) untouched(t *testing.T, h *testhost.Host) {
	t.Helper()
	f.unchanged(t, h)
	if sets, _ := changeSets(h); len(sets) > 0 {
		t.Errorf("%s: change sets %+v, want none", h.Name(), sets)
	}
	if hist := h.Exec(t, "/usr/bin/dbhost", "fix", "--history"); !strings.HasPrefix(hist, "no change sets") {
		t.Errorf("%s: fix --history:\n%s", h.Name(), hist)
	}
}

// applied: the host runs the fixed values, persisted, and its latest
// change set is applied; it returns that set.
func (f *fleet) applied(t *testing.T, h *testhost.Host) changeSet {
	t.Helper()
	now := sysctls(t, h)
	for _, k := range netKeys {
		if now[k] != fixedValues[k] {
			t.Errorf("%s: %s = %s, want %s", h.Name(), k, now[k], fixedValues[k])
		}
	}
	file, err := os.ReadFile(h.Path(sysctlFile))
	if err != nil || !bytes.Contains(file, []byte("net.ipv4.tcp_keepalive_time = 120")) {
		t.Errorf("%s: %s: %v\n%s", h.Name(), sysctlFile, err, file)
	}
	sets, err := changeSets(h)
	if err != nil || len(sets) == 0 || sets[len(sets)-1].Status != "applied" {
		t.Errorf("%s: change sets %+v (%v), the latest not applied", h.Name(), sets, err)
		return changeSet{}
	}
	if hist := h.Exec(t, "/usr/bin/dbhost", "fix", "--history"); !strings.Contains(hist, sets[len(sets)-1].ID+"  applied") {
		t.Errorf("%s: fix --history does not show %s applied:\n%s", h.Name(), sets[len(sets)-1].ID, hist)
	}
	return sets[len(sets)-1]
}

// overhead logs a roll-out's time per host against the local commands it
// wraps, timed on one host: the gate's audit before, plan, apply, the
// gate's audit after.
func (f *fleet) overhead(t *testing.T, h *testhost.Host, rollout time.Duration) {
	t.Helper()
	only := "--only=" + strings.Join(rolloutOnly, ",")
	// The hosts are applied: put host 1 back first, then time the local
	// round, then leave it applied again for the rollback below.
	h.Exec(t, "/usr/bin/dbhost", "fix", "--rollback")
	var local time.Duration
	for _, step := range []struct {
		args []string
		must bool // plan and audit exit 1 for pending changes and failing findings
	}{
		{[]string{"audit", "--format=json"}, false}, // the gate before
		{[]string{"fix", "--plan", only, "--plan-out=/root/overhead-plan.json"}, false},
		{[]string{"fix", "--apply", only, "--plan-file=/root/overhead-plan.json"}, true},
		{[]string{"audit", only, "--format=json"}, false}, // the gate after
	} {
		began := time.Now()
		if _, err := h.Run(nil, append([]string{"/usr/bin/dbhost"}, step.args...)...); err != nil && step.must {
			t.Fatal(err)
		}
		d := time.Since(began)
		local += d
		t.Logf("local dbhost %s on %s: %s", strings.Join(step.args[:2], " "), h.Name(), d.Round(time.Millisecond))
	}
	per := rollout / time.Duration(len(f.hosts))
	t.Logf("roll-out of %d hosts: %s, %s per host; the local audit+plan+apply+audit: %s; Ansible adds %s per host",
		len(f.hosts), rollout.Round(10*time.Millisecond), per.Round(10*time.Millisecond), local.Round(time.Millisecond), (per - local).Round(10*time.Millisecond))
}

// changeSet is what the tests read of a change set's meta.json.
type changeSet struct {
	ID      string    `json:"id"`
	Status  string    `json:"status"`
	Created time.Time `json:"created"`
}

// changeSets reads the host's change sets, oldest first.
func changeSets(h *testhost.Host) ([]changeSet, error) {
	metas, err := filepath.Glob(h.Path("/var/lib/dbhost/changes/*/meta.json"))
	if err != nil {
		return nil, err
	}
	var out []changeSet
	for _, m := range metas {
		b, err := os.ReadFile(m)
		if err != nil {
			return out, err
		}
		var cs changeSet
		if err := json.Unmarshal(b, &cs); err != nil {
			// Being written: the set exists.
			cs = changeSet{ID: filepath.Base(filepath.Dir(m)), Status: "(being written)"}
		}
		out = append(out, cs)
	}
	sort.Slice(out, func(a, b int) bool { return out[a].ID < out[b].ID })
	return out, nil
}

func sysctls(t *testing.T, h *testhost.Host) map[string]string {
	t.Helper()
	m := map[string]string{}
	for _, k := range netKeys {
		v, err := h.Sysctl(k)
		if err != nil {
			t.Fatal(err)
		}
		m[k] = v
	}
	return m
}

func get(t *testing.T, url, user, password string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	if user != "" {
		req.SetBasicAuth(user, password)
	}
	c := &http.Client{Timeout: 30 * time.Second}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

func randomHex(t *testing.T) string {
	b := make([]byte, 16)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(b)
}

// buildDeb builds the package from this tree (scripts/package-deb, gzip:
// xz takes ten times as long) and takes the controller's dbhost out of it.
func buildDeb(t *testing.T, root, work string) (deb, ctl string) {
	t.Helper()
	dist := filepath.Join(work, "dist")
	var env []string
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		switch k {
		case "VERSION", "SOURCE_DATE_EPOCH", "DEB_COMPRESSION", "GOARCH", "GOOS":
			continue
		}
		env = append(env, kv)
	}
	cmd := exec.Command(filepath.Join(root, "scripts", "package-deb"), dist)
	cmd.Dir = root
	cmd.Env = append(env, "VERSION=0.0.0~test", "DEB_COMPRESSION=gzip")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("scripts/package-deb: %v\n%s", err, out)
	}
	debs, _ := filepath.Glob(filepath.Join(dist, "dbhost_*.deb"))
	if len(debs) != 1 {
		t.Fatalf("scripts/package-deb made %q\n%s", debs, out)
	}
	x := filepath.Join(work, "deb")
	if out, err := exec.Command("dpkg-deb", "-x", debs[0], x).CombinedOutput(); err != nil {
		t.Fatalf("dpkg-deb -x: %v\n%s", err, out)
	}
	return debs[0], filepath.Join(x, "usr", "bin", "dbhost")
}
