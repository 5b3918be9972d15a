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
)

// scriptEnv is the environment for scripts/package-deb: the test's, less
// what would change what the script builds, plus env.
func scriptEnv(env ...string) []string {
	var out []string
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		switch k {
		case "VERSION", "SOURCE_DATE_EPOCH", "DEB_MAINTAINER", "DEB_COMPRESSION", "GOARCH", "GOOS":
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

	// Control archive: no maintainer script (nothing enables or starts the
	// service), the file in /etc is a conffile.
	ctrl := filepath.Join(tmp, "control")
	if _, errOut, err := run(root, dpkgDeb, "-e", deb, ctrl); err != nil {
		t.Fatalf("dpkg-deb -e: %v %s", err, errOut)
	}
	for _, s := range []string{"preinst", "postinst", "prerm", "postrm", "config", "triggers"} {
		if _, err := os.Stat(filepath.Join(ctrl, s)); err == nil {
			t.Errorf("the package has a %s script", s)
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
	dpkgArgs := []string{"--root=" + inst, "--force-not-root", "--force-script-chrootless", "--log=/dev/null"}
	if out, errOut, err := run(root, dpkg, append(dpkgArgs, "--install", deb)...); err != nil {
		t.Fatalf("dpkg --install: %v\n%s%s", err, out, errOut)
	}
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
	if b, err := os.ReadFile(filepath.Join(inst, "usr/share/doc/dbhost/copyright")); err != nil ||
		!bytes.Contains(b, []byte("== github.com/jackc/pgx/v5 ")) || !bytes.Contains(b, []byte("== Go standard library")) {
		t.Errorf("copyright does not give the licences of what the binary links (%v)", err)
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

	// Purge: everything goes, the conffile too.
	if out, errOut, err := run(root, dpkg, append(dpkgArgs, "--purge", "dbhost")...); err != nil {
		t.Fatalf("dpkg --purge: %v\n%s%s", err, out, errOut)
	}
	for name := range files {
		if _, err := os.Lstat(filepath.Join(inst, name)); err == nil {
			t.Errorf("%s left after purge", name)
		}
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
