package deploy

import (
	"bytes"
	"compress/gzip"
	"debug/elf"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/dbhost/dbhost/internal/testdb"
)

// scriptEnv is the environment for scripts/package-deb: the test's, less
// what would change what the script builds, plus env.
func scriptEnv(env ...string) []string {
	var out []string
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		switch k {
		case "VERSION", "SOURCE_DATE_EPOCH", "DEB_MAINTAINER", "DEBFULLNAME", "DEBEMAIL", "DEB_COMPRESSION", "GOARCH", "GOOS":
			continue
		}
		out = append(out, kv)
	}
	return append(out, env...)
}

// packageScript runs scripts/package-deb and returns the last line it
// printed (the package's path), or all it printed when it failed.
func packageScript(root string, env []string, args ...string) (string, error) {
	cmd := exec.Command(filepath.Join(root, "scripts", "package-deb"), args...)
	cmd.Dir = root
	cmd.Env = env
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err := cmd.Run()
	if err != nil {
		return out.String() + errOut.String(), err
	}
	return strings.TrimSpace(out.String()), nil
}

// TestDebVersion: the package version made from git describe is one dpkg
// accepts and orders as releases go.
func TestDebVersion(t *testing.T) {
	dpkg := tool(t, "dpkg", "dpkg")
	git := tool(t, "git", "git")
	root := repoRoot(t)
	hash, _, err := run(root, git, "rev-parse", "--short=7", "HEAD")
	if err != nil {
		t.Skipf("not a git checkout: %v", err)
	}
	hash = strings.TrimSpace(hash)
	date, err := runEnv(root, []string{"TZ=UTC"}, git, "show", "-s", "--format=%cd", "--date=format-local:%Y%m%d", hash)
	if err != nil {
		t.Fatal(err)
	}
	snapshot := "0.0~git" + strings.TrimSpace(date) + "." + hash
	for _, c := range []struct{ describe, want string }{
		{"v1.2.3", "1.2.3"},
		{"1.2.3", "1.2.3"},
		{"v1.2.3-rc1", "1.2.3~rc1"},
		{"v1.2.3-4-gabc1234", "1.2.3+git4.abc1234"},
		{"v1.2.3-rc1-4-gabc1234", "1.2.3~rc1+git4.abc1234"},
		{"v2.0-dirty", "2.0+dirty"},
		{"dev", "0.0~dev"},
		{hash, snapshot},
		{hash + "-dirty", snapshot + "+dirty"},
		{"release one", ""},
		{"vX", ""},
		{"", ""}, // VERSION empty: the script's default, git describe
	} {
		got, err := packageScript(root, scriptEnv("TZ=Pacific/Kiritimati", "VERSION="+c.describe), "--deb-version")
		switch {
		case c.describe == "":
			if err != nil || !strings.HasPrefix(got, "0.0~git") && !strings.Contains(got, "+git") && !strings.HasPrefix(got, "0.0~dev") {
				t.Errorf("VERSION unset: %q, %v", got, err)
			}
		case c.want == "":
			if err == nil {
				t.Errorf("VERSION=%q: %q, want an error", c.describe, got)
			}
		case err != nil || got != c.want:
			t.Errorf("VERSION=%q: %q, %v; want %q", c.describe, got, err, c.want)
		}
	}
	// As Debian orders them: a release candidate before its release, a
	// snapshot after its tag, any tag after the untagged snapshots.
	order := []string{snapshot, snapshot + "+dirty", "0.1", "1.2.3~rc1", "1.2.3~rc1+git4.abc1234", "1.2.3", "1.2.3+dirty", "1.2.3+git4.abc1234", "1.2.3+git10.abc1234", "1.2.4"}
	for i := 1; i < len(order); i++ {
		if _, _, err := run(root, dpkg, "--compare-versions", order[i-1], "lt", order[i]); err != nil {
			t.Errorf("dpkg: %s is not before %s", order[i-1], order[i])
		}
	}
}

// TestPackage builds the package with scripts/package-deb, reads it with
// dpkg-deb, installs it with dpkg into a throwaway root, runs the installed
// dbhost, and removes it again.
func TestPackage(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("builds dbhost and a package (-short)")
	}
	dpkgDeb := tool(t, "dpkg-deb", "dpkg")
	dpkg := tool(t, "dpkg", "dpkg")
	dpkgQuery := tool(t, "dpkg-query", "dpkg")
	git := tool(t, "git", "git")
	root := repoRoot(t)
	describe, _, err := run(root, git, "describe", "--always", "--dirty")
	if err != nil {
		t.Skipf("not a git checkout: %v", err)
	}
	describe = strings.TrimSpace(describe)

	tmp := t.TempDir()
	env := scriptEnv("DEB_COMPRESSION=gzip")
	// A second build, at the same time, shows the package is reproducible.
	type result struct {
		deb string
		err error
	}
	second := make(chan result, 1)
	go func() {
		deb, err := packageScript(root, env, filepath.Join(tmp, "again"))
		second <- result{deb, err}
	}()
	deb, err := packageScript(root, env, filepath.Join(tmp, "out"))
	if err != nil {
		<-second
		t.Fatalf("scripts/package-deb: %v\n%s", err, deb)
	}

	// Control fields.
	fields := map[string]string{}
	for _, f := range []string{"Package", "Version", "Architecture", "Maintainer", "Section", "Priority", "Description", "Installed-Size"} {
		v, errOut, err := run(root, dpkgDeb, "-f", deb, f)
		if err != nil {
			t.Fatalf("dpkg-deb -f %s: %v %s", f, err, errOut)
		}
		fields[f] = strings.TrimSpace(v)
	}
	version := fields["Version"]
	arch := map[string]string{"386": "i386", "arm": "armhf", "ppc64le": "ppc64el", "mips64le": "mips64el"}[runtime.GOARCH]
	if arch == "" {
		arch = runtime.GOARCH
	}
	want := map[string]string{"Package": "dbhost", "Architecture": arch, "Section": "admin", "Priority": "optional"}
	for k, v := range want {
		if fields[k] != v {
			t.Errorf("%s: %q, want %q", k, fields[k], v)
		}
	}
	if version == "" || version[0] < '0' || version[0] > '9' {
		t.Errorf("Version %q: must start with a digit", version)
	}
	if !strings.Contains(fields["Maintainer"], "<") || !strings.Contains(fields["Description"], "\n") || fields["Installed-Size"] == "" {
		t.Errorf("Maintainer %q, Description %q, Installed-Size %q", fields["Maintainer"], fields["Description"], fields["Installed-Size"])
	}
	if filepath.Base(deb) != "dbhost_"+version+"_"+arch+".deb" {
		t.Errorf("file name %s, want dbhost_%s_%s.deb", filepath.Base(deb), version, arch)
	}

	// Contents: these files, owned by root, 0755 directories and binary,
	// 0644 files.
	files := map[string]string{ // in the package: in the repository
		"usr/bin/dbhost":                               "",
		"lib/systemd/system/dbhost.service":            "deploy/systemd/dbhost.service",
		"lib/systemd/system/dbhost.socket":             "deploy/systemd/dbhost.socket",
		"etc/default/dbhost":                           "deploy/systemd/dbhost.default",
		"usr/share/dbhost/prometheus/dbhost-rules.yml": "deploy/prometheus/dbhost-rules.yml",
		"usr/share/dbhost/grafana/dbhost-fleet.json":   "deploy/grafana/dbhost-fleet.json",
		"usr/share/doc/dbhost/copyright":               "",
		"usr/share/doc/dbhost/changelog.gz":            "",
		"usr/share/lintian/overrides/dbhost":           "packaging/debian/lintian-overrides",
		"usr/share/doc/dbhost/README.md.gz":            "README.md",
		"usr/share/doc/dbhost/README.deploy.md.gz":     "deploy/README.md",
		// Written by dbhost from its command tree: checked below.
		"usr/share/man/man1/dbhost.1.gz":                  "",
		"usr/share/man/man1/dbhost-audit.1.gz":            "",
		"usr/share/man/man1/dbhost-results-show.1.gz":     "",
		"usr/share/bash-completion/completions/dbhost":    "",
		"usr/share/zsh/vendor-completions/_dbhost":        "",
		"usr/share/fish/vendor_completions.d/dbhost.fish": "",
	}
	list, errOut, err := run(root, dpkgDeb, "-c", deb)
	if err != nil {
		t.Fatalf("dpkg-deb -c: %v %s", err, errOut)
	}
	seen := map[string]bool{}
	for _, line := range strings.Split(strings.TrimSpace(list), "\n") {
		f := strings.Fields(line)
		if len(f) != 6 {
			t.Errorf("dpkg-deb -c: %q", line)
			continue
		}
		mode, owner, name := f[0], f[1], strings.TrimSuffix(strings.TrimPrefix(f[5], "./"), "/")
		if owner != "root/root" {
			t.Errorf("%s: owner %s", name, owner)
		}
		wantMode := "-rw-r--r--"
		switch {
		case strings.HasPrefix(mode, "d"):
			wantMode = "drwxr-xr-x"
		case name == "usr/bin/dbhost":
			wantMode = "-rwxr-xr-x"
		default:
			_, ok := files[name]
			if !ok && !manPage(name) {
				t.Errorf("unexpected file %s in the package", name)
			}
			seen[name] = true
		}
		if name == "usr/bin/dbhost" {
			seen[name] = true
		}
		if mode != wantMode {
			t.Errorf("%s: mode %s, want %s", name, mode, wantMode)
		}
	}
	for name := range files {
		if !seen[name] {
			t.Errorf("%s is not in the package", name)
		}
	}

	// Control archive: the maintainer scripts of packaging/debian (no
	// others), executable; the file in /etc is a conffile.
	ctrl := filepath.Join(tmp, "control")
	if _, errOut, err := run(root, dpkgDeb, "-e", deb, ctrl); err != nil {
		t.Fatalf("dpkg-deb -e: %v %s", err, errOut)
	}
	for _, s := range []string{"preinst", "postinst", "prerm", "postrm", "config", "triggers"} {
		got, err := os.ReadFile(filepath.Join(ctrl, s))
		want, werr := os.ReadFile(filepath.Join(root, "packaging", "debian", s))
		switch {
		case werr != nil && err == nil:
			t.Errorf("the package has a %s script", s)
		case werr == nil && (err != nil || !bytes.Equal(got, want)):
			t.Errorf("the package's %s is not packaging/debian/%s (%v)", s, s, err)
		case werr == nil:
			if st, err := os.Stat(filepath.Join(ctrl, s)); err != nil || st.Mode().Perm() != 0o755 {
				t.Errorf("%s: mode %v, want 0755 (%v)", s, st.Mode(), err)
			}
		}
	}
	if b, err := os.ReadFile(filepath.Join(ctrl, "conffiles")); err != nil || string(b) != "/etc/default/dbhost\n" {
		t.Errorf("conffiles %q, %v", b, err)
	}

	// Install into an empty root, with dpkg.
	inst := filepath.Join(tmp, "root")
	admin := filepath.Join(inst, "var", "lib", "dpkg")
	for _, d := range []string{"info", "updates", "triggers"} {
		if err := os.MkdirAll(filepath.Join(admin, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for _, f := range []string{"status", "available"} {
		if err := os.WriteFile(filepath.Join(admin, f), nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	// The maintainer scripts run outside the root (dpkg sets DPKG_ROOT):
	// the real deb-systemd-helper keeps its state under DPKG_ROOT;
	// systemctl and deb-systemd-invoke, which act on the running system,
	// are stand-ins that record any call (there must be none).
	dsh := tool(t, "deb-systemd-helper", "init-system-helpers")
	fake, calls := fakeSystemd(t)
	scriptPath := "PATH=" + fake + string(os.PathListSeparator) + filepath.Dir(dsh) + string(os.PathListSeparator) + os.Getenv("PATH")
	dpkgArgs := []string{"--root=" + inst, "--force-not-root", "--force-script-chrootless", "--log=/dev/null"}
	dpkgRun := func(args ...string) {
		t.Helper()
		cmd := exec.Command(dpkg, append(dpkgArgs, args...)...)
		cmd.Env = append(os.Environ(), scriptPath)
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("dpkg %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
	dpkgRun("--install", deb)
	status, _, err := run(root, dpkgQuery, "--admindir="+admin, "-W", "-f=${Status} ${Version}", "dbhost")
	if err != nil || status != "install ok installed "+version {
		t.Fatalf("dpkg-query: %q, %v; want installed %s", status, err, version)
	}

	// The installed binary runs and says the version it was built as.
	bin := filepath.Join(inst, "usr", "bin", "dbhost")
	if out, errOut, err := run(root, bin, "version"); err != nil || out != "dbhost "+describe+"\n" {
		t.Errorf("dbhost version: %q %q %v; want dbhost %s", out, errOut, err, describe)
	}
	// Static: no program interpreter, no shared library.
	if f, err := elf.Open(bin); err != nil {
		t.Error(err)
	} else {
		for _, p := range f.Progs {
			if p.Type == elf.PT_INTERP {
				t.Error("dbhost has a program interpreter: not static")
			}
		}
		if libs, _ := f.ImportedLibraries(); len(libs) > 0 {
			t.Errorf("dbhost needs %q: not static", libs)
		}
		f.Close()
	}

	// Installed files: modes, and the repository's content.
	for name, src := range files {
		p := filepath.Join(inst, name)
		st, err := os.Lstat(p)
		if err != nil {
			t.Errorf("installed: %v", err)
			continue
		}
		wantPerm := fs.FileMode(0o644)
		if name == "usr/bin/dbhost" {
			wantPerm = 0o755
		}
		if !st.Mode().IsRegular() || st.Mode().Perm() != wantPerm {
			t.Errorf("%s: mode %v, want %v", name, st.Mode(), wantPerm)
		}
		if src == "" {
			continue
		}
		got, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		if strings.HasSuffix(name, ".gz") {
			if got, err = gunzip(got); err != nil {
				t.Errorf("%s: %v", name, err)
			}
		}
		if wantB, err := os.ReadFile(filepath.Join(root, src)); err != nil || !bytes.Equal(got, wantB) {
			t.Errorf("%s differs from %s (%v)", name, src, err)
		}
	}
	// The man pages and completions are what the installed dbhost writes.
	manDir := t.TempDir()
	if _, errOut, err := run(root, bin, "man", manDir); err != nil {
		t.Fatalf("dbhost man: %v %s", err, errOut)
	}
	pages, _ := filepath.Glob(filepath.Join(manDir, "*.1"))
	installed, _ := filepath.Glob(filepath.Join(inst, "usr/share/man/man1/*.1.gz"))
	if len(pages) < 20 || len(installed) != len(pages) {
		t.Errorf("%d man pages installed, dbhost writes %d", len(installed), len(pages))
	}
	for _, p := range pages {
		b, err := os.ReadFile(filepath.Join(inst, "usr/share/man/man1", filepath.Base(p)+".gz"))
		if err == nil {
			b, err = gunzip(b)
		}
		wantB, _ := os.ReadFile(p)
		// The date is SOURCE_DATE_EPOCH's (the commit's) in the package.
		if err != nil || !bytes.Equal(dropLine(b, 0), dropLine(wantB, 0)) || !bytes.HasPrefix(b, []byte(".TH ")) {
			t.Errorf("%s differs from what dbhost man writes (%v)", filepath.Base(p), err)
		}
	}
	for shell, file := range map[string]string{"bash": "usr/share/bash-completion/completions/dbhost",
		"zsh": "usr/share/zsh/vendor-completions/_dbhost", "fish": "usr/share/fish/vendor_completions.d/dbhost.fish"} {
		out, errOut, err := run(root, bin, "completion", shell)
		if b, rerr := os.ReadFile(filepath.Join(inst, file)); err != nil || rerr != nil || string(b) != out || out == "" {
			t.Errorf("%s differs from 'dbhost completion %s': %v %v %s", file, shell, err, rerr, errOut)
		}
	}
	checkCopyright(t, filepath.Join(inst, "usr/share/doc/dbhost/copyright"))
	if b, err := os.ReadFile(filepath.Join(inst, "usr/share/doc/dbhost/changelog.gz")); err != nil {
		t.Error(err)
	} else if b, err = gunzip(b); err != nil || !bytes.HasPrefix(b, []byte("dbhost ("+version+") unstable; urgency=medium\n")) ||
		!bytes.Contains(b, []byte("\n -- "+fields["Maintainer"]+"  ")) {
		t.Errorf("changelog.gz: %v\n%s", err, b)
	}

	// Not enabled: no symlink anywhere (a *.wants/ link is what enabling
	// makes), no .wants directory.
	err = filepath.WalkDir(inst, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			t.Error(err)
			return nil
		}
		if d.Type()&fs.ModeSymlink != 0 || strings.HasSuffix(p, ".wants") || strings.HasSuffix(p, ".requires") {
			t.Errorf("installed %s: the service must be left disabled", p)
		}
		return nil
	})
	if err != nil {
		t.Error(err)
	}

	// dpkg --verify checks the files against the package's md5sums.
	if out, errOut, err := run(root, dpkg, "--root="+inst, "--verify", "dbhost"); err != nil || out != "" || errOut != "" {
		t.Errorf("dpkg --verify: %v %s%s", err, out, errOut)
	}
	rules := filepath.Join(inst, "usr/share/dbhost/prometheus/dbhost-rules.yml")
	if err := os.WriteFile(rules, []byte("groups: []\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, _, _ := run(root, dpkg, "--root="+inst, "--verify", "dbhost"); !strings.Contains(out, "/usr/share/dbhost/prometheus/dbhost-rules.yml") {
		t.Errorf("dpkg --verify does not see a changed file: %q (md5sums missing?)", out)
	}

	// deb-systemd-helper recorded the links enabling would make (for
	// purge to remove) and made none.
	dshState := filepath.Join(inst, "var/lib/systemd/deb-systemd-helper-enabled")
	for unit, link := range map[string]string{"dbhost.service": "/etc/systemd/system/multi-user.target.wants/dbhost.service",
		"dbhost.socket": "/etc/systemd/system/sockets.target.wants/dbhost.socket"} {
		if b, err := os.ReadFile(filepath.Join(dshState, unit+".dsh-also")); err != nil || !strings.Contains(string(b), link) {
			t.Errorf("deb-systemd-helper state of %s: %q, %v; want %s", unit, b, err, link)
		}
		// The operator enables the unit (what systemctl enable makes).
		if err := os.MkdirAll(filepath.Dir(filepath.Join(inst, link)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink("/lib/systemd/system/"+unit, filepath.Join(inst, link)); err != nil {
			t.Fatal(err)
		}
	}

	// Upgrade (the same version again: dpkg runs prerm upgrade, then
	// postinst configure with the old version), remove, purge.
	dpkgRun("--install", deb)
	if status, _, err := run(root, dpkgQuery, "--admindir="+admin, "-W", "-f=${Status}", "dbhost"); err != nil || status != "install ok installed" {
		t.Errorf("after the upgrade: %q, %v", status, err)
	}
	dpkgRun("--remove", "dbhost")
	if _, err := os.Stat(bin); err == nil {
		t.Error("dbhost left after remove")
	}
	if _, err := os.Stat(filepath.Join(inst, "etc/default/dbhost")); err != nil {
		t.Errorf("the conffile went with remove: %v", err)
	}
	// Removed, not purged: the units are masked, so that the operator's
	// links cannot start a unit whose binary is gone.
	for _, unit := range []string{"dbhost.service", "dbhost.socket"} {
		if l, err := os.Readlink(filepath.Join(inst, "etc/systemd/system", unit)); err != nil || l != "/dev/null" {
			t.Errorf("%s after remove: %q, %v; want masked", unit, l, err)
		}
	}
	// What dbhost wrote for itself, and what records host changes.
	state := filepath.Join(inst, "var/lib/dbhost")
	seedState(t, state, false)
	dpkgRun("--purge", "dbhost")
	for name := range files {
		if _, err := os.Lstat(filepath.Join(inst, name)); err == nil {
			t.Errorf("%s left after purge", name)
		}
	}
	// Purge disables: the operator's enabling links, the mask and the
	// helper's state are gone; so is dbhost's state.
	for _, p := range []string{"etc/systemd/system/multi-user.target.wants/dbhost.service", "etc/systemd/system/sockets.target.wants/dbhost.socket",
		"etc/systemd/system/dbhost.service", "etc/systemd/system/dbhost.socket", "var/lib/systemd/deb-systemd-helper-enabled/dbhost.service.dsh-also",
		"var/lib/systemd/deb-systemd-helper-masked/dbhost.service", "var/lib/dbhost"} {
		if _, err := os.Lstat(filepath.Join(inst, p)); err == nil {
			t.Errorf("%s left after purge", p)
		}
	}
	// Under DPKG_ROOT nothing acted on the running system.
	if b, _ := os.ReadFile(calls); len(b) > 0 {
		t.Errorf("maintainer scripts called, with DPKG_ROOT set:\n%s", b)
	}

	// Reproducible: the same commit gives the same bytes.
	r := <-second
	if r.err != nil {
		t.Fatalf("scripts/package-deb: %v\n%s", r.err, r.deb)
	}
	a, errA := os.ReadFile(deb)
	b, errB := os.ReadFile(r.deb)
	if errA != nil || errB != nil || !bytes.Equal(a, b) {
		t.Errorf("two builds differ (%v %v): not reproducible", errA, errB)
	}
}

func gunzip(b []byte) ([]byte, error) {
	r, err := gzip.NewReader(bytes.NewReader(b))
	if err != nil {
		return nil, err
	}
	return io.ReadAll(r)
}

// manPage reports a man page of a dbhost command in the package.
func manPage(name string) bool {
	return strings.HasPrefix(name, "usr/share/man/man1/dbhost") && strings.HasSuffix(name, ".1.gz")
}

// dropLine is b without its line i.
func dropLine(b []byte, i int) []byte {
	lines := bytes.Split(b, []byte("\n"))
	if i < len(lines) {
		lines = append(lines[:i], lines[i+1:]...)
	}
	return bytes.Join(lines, []byte("\n"))
}

// fakeSystemd is a directory of stand-ins for systemctl and
// deb-systemd-invoke, which act on the running system: each appends its
// name and arguments to the file calls.
func fakeSystemd(t *testing.T) (dir, calls string) {
	t.Helper()
	dir = t.TempDir()
	calls = filepath.Join(dir, "calls")
	for _, name := range []string{"systemctl", "deb-systemd-invoke"} {
		script := "#!/bin/sh\necho \"" + name + " $*\" >>'" + calls + "'\n"
		if err := os.WriteFile(filepath.Join(dir, name), []byte(script), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	return dir, calls
}

// seedState fills dir (a /var/lib/dbhost) with what dbhost writes there:
// its own files, and with records, a change set of fix --apply and an
// interrupted experiment's journal.
func seedState(t *testing.T, dir string, records bool) {
	t.Helper()
	if err := os.MkdirAll(filepath.Join(dir, "changes"), 0o700); err != nil {
		t.Fatal(err)
	}
	files := []string{"results.db", "results.db-wal", "results.db-shm", "contention-probe.json"}
	if records {
		files = append(files, "experiment.journal", "changes/20260101T000000Z/meta.json")
	}
	for _, f := range files {
		p := filepath.Join(dir, f)
		if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte("{}\n"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
}

// checkCopyright: the package's copyright file is machine-readable (DEP-5),
// dbhost's licence is the repository's (Apache-2.0), and it names every
// module the binary links with a licence and a copyright.
func checkCopyright(t *testing.T, file string) {
	t.Helper()
	b, err := os.ReadFile(file)
	if err != nil {
		t.Error(err)
		return
	}
	text := string(b)
	if !strings.HasPrefix(text, "Format: https://www.debian.org/doc/packaging-manuals/copyright-format/1.0/\n") ||
		!strings.Contains(text, "\n\nFiles: *\nCopyright: The dbhost Authors\nLicense: Apache-2.0\n") ||
		!strings.Contains(text, "\n\nLicense: Apache-2.0\n On Debian systems the full text of this licence is in\n /usr/share/common-licenses/Apache-2.0.\n") {
		t.Errorf("copyright: not DEP-5 with dbhost under Apache-2.0:\n%.600s", text)
	}
	// One paragraph per module, each with Copyright and License.
	paras := map[string]string{}
	for _, p := range strings.Split(text, "\n\n") {
		if first, _, _ := strings.Cut(p, "\n"); strings.HasPrefix(first, "Files: ") {
			paras[strings.TrimPrefix(first, "Files: ")] = p
		}
	}
	out, err := exec.Command("go", "list", "-deps", "-f", "{{with .Module}}{{if not .Main}}{{.Path}}@{{.Version}}{{end}}{{end}}", "../cmd/dbhost").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	mods := strings.Fields(string(out))
	if len(mods) < 10 {
		t.Fatalf("go list: %d modules", len(mods))
	}
	for _, m := range append(mods, "go/src") {
		p, ok := paras[m+"/*"]
		if !ok {
			t.Errorf("copyright: no Files paragraph for %s", m)
			continue
		}
		if !strings.Contains(p, "\nCopyright: ") || !strings.Contains(p, "\nLicense: ") {
			t.Errorf("copyright: %s lacks Copyright or License:\n%s", m, p)
		}
	}
	// Known licences where they are known.
	for m, lic := range map[string]string{"github.com/jackc/pgx/v5": "Expat", "github.com/prometheus/client_golang": "Apache-2.0",
		"github.com/go-sql-driver/mysql": "MPL-2.0", "golang.org/x/sys": "BSD-3-clause"} {
		for f, p := range paras {
			if strings.HasPrefix(f, m+"@") && !strings.Contains(p+"\n", "\nLicense: "+lic+"\n") {
				t.Errorf("copyright: %s is not under %s:\n%.300s", m, lic, p)
			}
		}
	}
}

// TestLicence: the repository's licence is the Apache License 2.0, word
// for word (Debian keeps the text in /usr/share/common-licenses).
func TestLicence(t *testing.T) {
	got, err := os.ReadFile(filepath.Join(repoRoot(t), "LICENSE"))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(got, []byte("Apache License\n                           Version 2.0, January 2004")) {
		t.Errorf("LICENSE is not the Apache License 2.0")
	}
	want, err := os.ReadFile("/usr/share/common-licenses/Apache-2.0")
	testdb.Need(t, "/usr/share/common-licenses/Apache-2.0 (Debian package base-files)", err == nil)
	if !bytes.Equal(got, want) {
		t.Errorf("LICENSE differs from /usr/share/common-licenses/Apache-2.0")
	}
}

// TestMaintainer: the Maintainer field comes from DEB_MAINTAINER, else
// DEBFULLNAME and DEBEMAIL, else the last commit's author; a value that is
// not one name and address, or none at all, fails the build naming it.
func TestMaintainer(t *testing.T) {
	git := tool(t, "git", "git")
	root := repoRoot(t)
	author, _, err := run(root, git, "log", "-1", "--format=%an <%ae>")
	if err != nil {
		t.Skipf("not a git checkout: %v", err)
	}
	author = strings.TrimSpace(author)
	for _, c := range []struct {
		env       []string
		want, err string
	}{
		{nil, author, ""},
		{[]string{"DEBFULLNAME=Jane Doe", "DEBEMAIL=jane@example.org"}, "Jane Doe <jane@example.org>", ""},
		{[]string{"DEBEMAIL=Jane Doe <jane@example.org>"}, "Jane Doe <jane@example.org>", ""},
		{[]string{"DEB_MAINTAINER=Ops Team <ops@example.org>", "DEBFULLNAME=Jane Doe", "DEBEMAIL=jane@example.org"}, "Ops Team <ops@example.org>", ""},
		{[]string{"DEBEMAIL=jane@example.org"}, "", `DEBEMAIL="jane@example.org" has no name`},
		{[]string{"DEB_MAINTAINER=Jane, Joe <j@example.org>"}, "", `maintainer "Jane, Joe <j@example.org>" (from DEB_MAINTAINER) is not`},
		{[]string{"DEB_MAINTAINER=jane@example.org"}, "", `maintainer "jane@example.org" (from DEB_MAINTAINER) is not`},
		{[]string{"DEBFULLNAME=Jane", "DEBEMAIL=<jane@example.org>"}, "", `(from DEBFULLNAME and DEBEMAIL) is not`},
	} {
		got, err := packageScript(root, scriptEnv(c.env...), "--maintainer")
		switch {
		case c.err == "" && (err != nil || got != c.want):
			t.Errorf("%q: %q, %v; want %q", c.env, got, err, c.want)
		case c.err != "" && (err == nil || !strings.Contains(got, c.err)):
			t.Errorf("%q: %q, %v; want an error with %q", c.env, got, err, c.err)
		}
	}
	// Outside a git checkout and without the variables: no maintainer.
	dir := t.TempDir()
	if err := os.MkdirAll(filepath.Join(dir, "scripts"), 0o755); err != nil {
		t.Fatal(err)
	}
	script, err := os.ReadFile(filepath.Join(root, "scripts", "package-deb"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "scripts", "package-deb"), script, 0o755); err != nil {
		t.Fatal(err)
	}
	got, err := packageScript(dir, scriptEnv("VERSION=1.0", "GIT_CEILING_DIRECTORIES="+filepath.Dir(dir)), "--maintainer")
	if err == nil || !strings.Contains(got, "no maintainer: set DEBFULLNAME and DEBEMAIL") {
		t.Errorf("no git, no variables: %q, %v; want an error", got, err)
	}
}

// TestLintian builds the package and runs lintian on it: no tag at any
// level (pedantic and experimental too), but those of the package's
// overrides file, each explained there.
func TestLintian(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("builds dbhost and a package (-short)")
	}
	lintian := tool(t, "lintian", "lintian")
	root := repoRoot(t)
	deb, err := packageScript(root, scriptEnv("DEB_COMPRESSION=gzip"), t.TempDir())
	if err != nil {
		t.Fatalf("scripts/package-deb: %v\n%s", err, deb)
	}
	out, errOut, err := run(root, lintian, "--pedantic", "--display-info", "--display-experimental", "--fail-on", "error,warning,info,pedantic,experimental", deb)
	// Lintian warns on stderr that it runs as root; that is all it may say.
	errOut = strings.TrimSpace(strings.ReplaceAll(errOut, "running with root privileges is not recommended!", ""))
	if err != nil || out != "" || errOut != "" {
		t.Errorf("lintian %s: %v\n%s%s", filepath.Base(deb), err, out, errOut)
	}
	// Every override has its reason: a comment right above it.
	b, err := os.ReadFile(filepath.Join(root, "packaging", "debian", "lintian-overrides"))
	if err != nil {
		t.Fatal(err)
	}
	prev := ""
	for _, ln := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		if strings.HasPrefix(ln, "dbhost: ") && !strings.HasPrefix(prev, "#") && !strings.HasPrefix(prev, "dbhost: ") {
			t.Errorf("lintian override without a reason: %s", ln)
		}
		prev = ln
	}
}
