package deploy

import (
	"bufio"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

const (
	serviceFile = "systemd/dbhost.service"
	socketFile  = "systemd/dbhost.socket"
	execStart   = "/usr/bin/dbhost serve $ARGS"
)

// unitSettings reads a unit file: section.Key to its values, in order (a
// key may be given more than once).
func unitSettings(t *testing.T, file string) map[string][]string {
	t.Helper()
	f, err := os.Open(file)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	out := map[string][]string{}
	section := ""
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		switch {
		case line == "" || strings.HasPrefix(line, "#") || strings.HasPrefix(line, ";"):
		case strings.HasPrefix(line, "[") && strings.HasSuffix(line, "]"):
			section = strings.Trim(line, "[]")
		default:
			k, v, ok := strings.Cut(line, "=")
			if !ok {
				t.Fatalf("%s: %q", file, line)
			}
			out[section+"."+strings.TrimSpace(k)] = append(out[section+"."+strings.TrimSpace(k)], strings.TrimSpace(v))
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// TestServiceHardening pins what the unit promises: dbhost serve as root
// (HOME=/root for ~/.pgpass), a read-only file system, and exactly the
// capabilities reading other users' files, processes and sockets needs.
// Widening any of it must be a deliberate change of this test.
func TestServiceHardening(t *testing.T) {
	s := unitSettings(t, serviceFile)
	want := map[string]string{
		"Service.ExecStart":               execStart,
		"Service.User":                    "root",
		"Service.Restart":                 "on-failure",
		"Service.EnvironmentFile":         "-/etc/default/dbhost",
		"Service.CapabilityBoundingSet":   "CAP_DAC_READ_SEARCH CAP_DAC_OVERRIDE CAP_SYS_PTRACE CAP_SETUID CAP_SETGID",
		"Service.AmbientCapabilities":     "",
		"Service.NoNewPrivileges":         "yes",
		"Service.ProtectSystem":           "strict",
		"Service.ProtectHome":             "read-only",
		"Service.ReadWritePaths":          "",
		"Service.PrivateMounts":           "yes",
		"Service.DevicePolicy":            "closed",
		"Service.ProtectKernelTunables":   "yes",
		"Service.ProtectKernelModules":    "yes",
		"Service.ProtectKernelLogs":       "yes",
		"Service.ProtectControlGroups":    "yes",
		"Service.ProtectHostname":         "yes",
		"Service.RestrictSUIDSGID":        "yes",
		"Service.RestrictRealtime":        "yes",
		"Service.RestrictNamespaces":      "yes",
		"Service.LockPersonality":         "yes",
		"Service.MemoryDenyWriteExecute":  "yes",
		"Service.SystemCallArchitectures": "native",
		"Service.RestrictAddressFamilies": "AF_UNIX AF_INET AF_INET6 AF_NETLINK",
		"Install.WantedBy":                "multi-user.target",
	}
	for k, v := range want {
		if got := s[k]; len(got) != 1 || got[0] != v {
			t.Errorf("%s: %s=%q, want %q", serviceFile, k, got, v)
		}
	}
	if f := s["Service.SystemCallFilter"]; len(f) == 0 || f[0] != "@system-service" {
		t.Errorf("%s: SystemCallFilter=%q, want @system-service first", serviceFile, f)
	}
	// Settings that would break the audit (see the unit's comments).
	for _, k := range []string{"ProtectProc", "ProcSubset", "PrivateDevices", "ProtectClock", "PrivateUsers", "PrivateNetwork", "DynamicUser"} {
		if v, ok := s["Service."+k]; ok {
			t.Errorf("%s: %s=%q hides or forbids what dbhost reads", serviceFile, k, v)
		}
	}
	if v := s["Service.PrivateTmp"]; len(v) != 1 || v[0] != "no" {
		t.Errorf("%s: PrivateTmp=%q: servers' sockets in /tmp must stay reachable", serviceFile, v)
	}
	sock := unitSettings(t, socketFile)
	if v := sock["Socket.ListenStream"]; len(v) != 1 || v[0] != "9437" {
		t.Errorf("%s: ListenStream=%q, want 9437 (serve's default port)", socketFile, v)
	}
}

// TestUnitsVerify runs systemd-analyze verify on both units, which must say
// nothing at all: it reports unknown keys and bad values as warnings with
// exit status 0. verify also wants ExecStart's program to exist, so the
// units are copied with ExecStart pointing at a dbhost built for the test.
func TestUnitsVerify(t *testing.T) {
	t.Parallel()
	analyze := tool(t, "systemd-analyze", "systemd")
	dir := unitsForVerify(t)
	out, errOut, err := run(dir, analyze, "verify", "dbhost.service", "dbhost.socket")
	if rest := othersUnits(t, dir, out+errOut); err != nil || rest != "" {
		t.Fatalf("systemd-analyze verify: %v\n%s", err, rest)
	}
	// The exposure score of the sandbox: systemd's own measure, 0 (locked
	// down) to 10. 3.5 now (root, network, CAP_SYS_PTRACE are needed).
	out, errOut, err = run(dir, analyze, "security", "--offline=true", "--threshold=40", "--no-pager", "dbhost.service")
	if err != nil {
		t.Errorf("systemd-analyze security: exposure over 4.0: %v\n%s%s", err, out, errOut)
	}
}

// unitsForVerify returns a directory with a dbhost binary and the units,
// ExecStart naming that binary.
func unitsForVerify(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	bin := filepath.Join(dir, "dbhost")
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Fatal(err)
	}
	if out, err := runEnv(repoRoot(t), []string{"CGO_ENABLED=0"}, goBin, "build", "-trimpath", "-o", bin, "./cmd/dbhost"); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	for _, f := range []string{serviceFile, socketFile} {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		s := string(b)
		if f == serviceFile {
			if !strings.Contains(s, "\nExecStart="+execStart+"\n") {
				t.Fatalf("%s: no ExecStart=%s", f, execStart)
			}
			s = strings.Replace(s, "\nExecStart=/usr/bin/dbhost ", "\nExecStart="+bin+" ", 1)
		}
		if err := os.WriteFile(filepath.Join(dir, filepath.Base(f)), []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// runEnv runs a program in dir with extra environment variables and
// returns its output, stdout and stderr together.
func runEnv(dir string, env []string, name string, args ...string) (string, error) {
	cmd := exec.Command(name, args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), env...)
	b, err := cmd.CombinedOutput()
	return string(b), err
}

// TestServiceSyscalls: the unit's SystemCallFilter, expanded by systemd's
// own tables, allows the system calls dbhost serve makes and forbids those
// it must not.
func TestServiceSyscalls(t *testing.T) {
	analyze := tool(t, "systemd-analyze", "systemd")
	out, errOut, err := run(".", analyze, "syscall-filter", "--no-pager")
	if err != nil {
		t.Fatalf("systemd-analyze syscall-filter: %v\n%s", err, errOut)
	}
	sets := map[string][]string{}
	cur := ""
	for _, line := range strings.Split(out, "\n") {
		f := strings.TrimSpace(line)
		switch {
		case f == "" || strings.HasPrefix(f, "#"):
		case strings.HasPrefix(line, "@"):
			cur = f
		case cur != "":
			sets[cur] = append(sets[cur], f)
		}
	}
	var expand func(name string, seen map[string]bool) []string
	expand = func(name string, seen map[string]bool) []string {
		if !strings.HasPrefix(name, "@") {
			return []string{name}
		}
		if seen[name] {
			return nil
		}
		seen[name] = true
		if _, ok := sets[name]; !ok {
			t.Fatalf("unknown syscall set %s", name)
		}
		var res []string
		for _, x := range sets[name] {
			res = append(res, expand(x, seen)...)
		}
		return res
	}
	allowed := map[string]bool{}
	for _, line := range unitSettings(t, serviceFile)["Service.SystemCallFilter"] {
		deny := strings.HasPrefix(line, "~")
		for _, item := range strings.Fields(strings.TrimPrefix(line, "~")) {
			for _, sc := range expand(item, map[string]bool{}) {
				if deny {
					delete(allowed, sc)
				} else {
					allowed[sc] = true
				}
			}
		}
	}
	if len(allowed) < 100 {
		t.Fatalf("%d system calls allowed: the filter was not read", len(allowed))
	}
	// adjtimex (read-only, modes 0) for the clock check; set*id and
	// setgroups to run a server's binary as its account; netlink sock_diag
	// over socket/sendto/recvfrom; prlimit64 for the servers' limits.
	for _, sc := range []string{"adjtimex", "setresuid", "setresgid", "setgroups", "execve", "socket", "connect",
		"sendto", "recvfrom", "openat", "readlinkat", "newfstatat", "getdents64", "prlimit64", "sched_getaffinity",
		"clone", "clone3", "wait4", "epoll_pwait", "accept4"} {
		if !allowed[sc] {
			t.Errorf("SystemCallFilter forbids %s, which dbhost serve makes", sc)
		}
	}
	for _, sc := range []string{"ptrace", "process_vm_readv", "process_vm_writev", "open_by_handle_at", "kexec_load",
		"init_module", "mount", "settimeofday", "clock_settime", "reboot", "swapon"} {
		if allowed[sc] {
			t.Errorf("SystemCallFilter allows %s", sc)
		}
	}
}

// othersUnits drops verify's warnings about units the machine's packages
// installed (verify loads the whole unit path: galera-arbitrator-4's
// garb.service runs as nobody, which systemd warns about) and returns the
// rest, which must be empty.
func othersUnits(t *testing.T, dir, out string) string {
	t.Helper()
	var rest []string
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		if line == "" {
			continue
		}
		if file, _, ok := strings.Cut(line, ":"); ok && strings.HasPrefix(file, "/") && !strings.HasPrefix(file, dir+"/") &&
			!strings.Contains(file, "dbhost") {
			t.Logf("not ours: %s", line)
			continue
		}
		rest = append(rest, line)
	}
	return strings.Join(rest, "\n")
}
