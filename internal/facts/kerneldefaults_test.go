package facts_test

import (
	"bytes"
	"compress/gzip"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/dbhost/dbhost/internal/facts"
	"github.com/dbhost/dbhost/internal/host"
	"github.com/dbhost/dbhost/internal/host/hosttest"
)

func gz(t *testing.T, s string) string {
	t.Helper()
	var b bytes.Buffer
	w := gzip.NewWriter(&b)
	w.Write([]byte(s))
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return b.String()
}

const (
	cfgMadvise = "CONFIG_TRANSPARENT_HUGEPAGE=y\n# CONFIG_TRANSPARENT_HUGEPAGE_ALWAYS is not set\nCONFIG_TRANSPARENT_HUGEPAGE_MADVISE=y\n"
	cfgAlways  = "CONFIG_TRANSPARENT_HUGEPAGE=y\nCONFIG_TRANSPARENT_HUGEPAGE_ALWAYS=y\n# CONFIG_TRANSPARENT_HUGEPAGE_MADVISE is not set\n"
	release    = "6.1.0-28-amd64"
)

func kernelConfig(t *testing.T, h *host.Host) facts.KernelConfig {
	t.Helper()
	return facts.GatherHost(context.Background(), h, facts.Options{}, facts.DomainPersist).Persist.KernelConfig
}

// TestKernelConfigTHP: the THP build default from /proc/config.gz, else
// /boot/config-RELEASE; a bad or missing file makes it unknown, with why.
func TestKernelConfigTHP(t *testing.T) {
	osrel := "proc/sys/kernel/osrelease"
	for _, c := range []struct {
		name     string
		files    map[string]string
		thp, src string
		errSays  string
	}{
		{"config.gz madvise", map[string]string{osrel: release, "proc/config.gz": "GZ" + cfgMadvise}, "madvise", "/proc/config.gz", ""},
		{"config.gz always beats /boot", map[string]string{osrel: release, "proc/config.gz": "GZ" + cfgAlways, "boot/config-" + release: cfgMadvise}, "always", "/proc/config.gz", ""},
		{"/boot/config only", map[string]string{osrel: release + "\n", "boot/config-" + release: cfgAlways}, "always", "/boot/config-" + release, ""},
		{"truncated config.gz, then /boot", map[string]string{osrel: release, "proc/config.gz": "CUT" + cfgAlways, "boot/config-" + release: cfgMadvise}, "madvise", "/boot/config-" + release, ""},
		{"THP not built", map[string]string{osrel: release, "proc/config.gz": "GZ# CONFIG_TRANSPARENT_HUGEPAGE is not set\n"}, "none", "/proc/config.gz", ""},
		{"not gzip", map[string]string{osrel: release, "proc/config.gz": cfgAlways}, "", "", "not gzip"},
		{"not a configuration", map[string]string{osrel: release, "boot/config-" + release: "hello\n"}, "", "/boot/config-" + release, "not a kernel configuration"},
		{"another release's config", map[string]string{osrel: release, "boot/config-6.1.0-27-amd64": cfgAlways}, "", "", "not present"},
		{"nothing", map[string]string{osrel: release}, "", "", "/boot/config-" + release},
		{"no release", map[string]string{}, "", "", "release is unknown"},
	} {
		t.Run(c.name, func(t *testing.T) {
			files := map[string]string{}
			for p, v := range c.files {
				switch {
				case strings.HasPrefix(v, "GZ"):
					v = gz(t, v[2:])
				case strings.HasPrefix(v, "CUT"):
					v = gz(t, v[3:])
					v = v[:len(v)-12]
				}
				files[p] = v
			}
			kc := kernelConfig(t, hosttest.Tree(t, files))
			if kc.THP != c.thp || kc.Source != c.src {
				t.Errorf("got %+v, want THP %q from %q", kc, c.thp, c.src)
			}
			if c.errSays != "" && !strings.Contains(kc.Err, c.errSays) {
				t.Errorf("error %q lacks %q", kc.Err, c.errSays)
			}
			if c.errSays == "" && kc.Err != "" {
				t.Errorf("unexpected error %q", kc.Err)
			}
		})
	}
}

// TestKernelConfigUntrusted: a /boot/config that someone other than root
// owns (or can write) is not believed.
func TestKernelConfigUntrusted(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("changing a file's owner needs root")
	}
	root := t.TempDir()
	for p, c := range map[string]string{"proc/sys/kernel/osrelease": release, "boot/config-" + release: cfgAlways} {
		full := filepath.Join(root, p)
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(full, []byte(c), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Chown(filepath.Join(root, "boot", "config-"+release), 1000, 1000); err != nil {
		t.Fatal(err)
	}
	h, err := host.Open(root)
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	kc := kernelConfig(t, h)
	if kc.THP != "" || !strings.Contains(kc.Err, "not trusted") {
		t.Errorf("%+v", kc)
	}
}

// TestKernelDefaultFor: version-dependent defaults follow the release;
// computed ones are not comparable.
func TestKernelDefaultFor(t *testing.T) {
	for _, c := range []struct {
		name, release, value, why string
	}{
		{"net.core.somaxconn", "5.4.0", "4096", ""},
		{"net.core.somaxconn", "5.3.18-lp152", "128", ""},
		{"net.core.somaxconn", "", "", "release is unknown"},
		{"vm.swappiness", "2.6.32", "60", ""},
		{"kernel.msgmni", "3.18.0", "", "predates 3.19"},
		{"kernel.msgmni", "4.18.0-553.el8_10.x86_64", "32000", ""},
		{"vm.min_free_kbytes", "6.1.0", "", "size of RAM"},
	} {
		d, why, ok := facts.KernelDefaultFor(c.name, c.release)
		if !ok {
			t.Errorf("%s: no entry", c.name)
			continue
		}
		if (c.why == "" && why != "") || !strings.Contains(why, c.why) || (c.why == "" && d.Value != c.value) {
			t.Errorf("%s on %q: %q (why %q), want %q (why %q)", c.name, c.release, d.Value, why, c.value, c.why)
		}
	}
	if _, _, ok := facts.KernelDefaultFor("vm.no_such", "6.1"); ok {
		t.Error("an entry for an unknown parameter")
	}
}

// TestHugePagesBootUnits: enabled units and an executable rc.local that
// reserve huge pages are found, with the count where the line says it.
func TestHugePagesBootUnits(t *testing.T) {
	h := hosttest.Tree(t, map[string]string{
		"etc/systemd/system/hp.service":                          "[Service]\nType=oneshot\nExecStart=/sbin/sysctl -w vm.nr_hugepages=300\n",
		"etc/systemd/system/gig.service":                         "[Unit]\nDescription=HugeTLB Gigantic Pages Reservation\n[Service]\nExecStart=/usr/lib/systemd/hugetlb-reserve-pages.sh\n",
		"etc/systemd/system/off.service":                         "[Service]\nExecStart=/bin/sh -c 'echo 9 > /proc/sys/vm/nr_hugepages'\n",
		"etc/systemd/system/one.service":                         "[Service]\nExecStart=/bin/sh -c 'echo 2 > /sys/kernel/mm/hugepages/hugepages-1048576kB/nr_hugepages'\n",
		"etc/systemd/system/multi-user.target.wants/hp.service":  "->../hp.service",
		"etc/systemd/system/multi-user.target.wants/gig.service": "->../gig.service",
		"etc/systemd/system/multi-user.target.wants/one.service": "->../one.service",
		"etc/rc.local": "#!/bin/sh\necho 7 > /proc/sys/vm/nr_hugepages\n",
	})
	got := map[string]string{}
	for _, p := range facts.GatherHost(context.Background(), h, facts.Options{}, facts.DomainPersist).Persist.HugePagesBoot {
		got[p.File+" "+p.Key] = p.Value
	}
	want := map[string]string{
		"/etc/systemd/system/hp.service vm.nr_hugepages":      "300",
		"/etc/systemd/system/gig.service vm.nr_hugepages":     "",
		"/etc/systemd/system/one.service hugepages-1048576kB": "2",
	}
	if len(got) != len(want) {
		t.Errorf("got %v, want %v (off.service is not enabled, rc.local not executable)", got, want)
	}
	for k, v := range want {
		if g, ok := got[k]; !ok || g != v {
			t.Errorf("%s: %q (found %v), want %q", k, g, ok, v)
		}
	}
}

func TestParseStartConf(t *testing.T) {
	for in, want := range map[string]string{
		"# Automatic startup configuration\n#   auto: ...\n\nauto\n": "auto 4 ",
		"manual\n":          "manual 1 ",
		"  disabled  \n":    "disabled 1 ",
		"sometimes\n":       "sometimes 1 not one of auto, manual, disabled",
		"# only comments\n": " 0 no setting (empty file)",
	} {
		p := facts.ParseStartConf("/etc/postgresql/15/main/start.conf", []byte(in))
		if got := fmt.Sprintf("%s %d %s", p.Value, p.Line, p.Note); got != want {
			t.Errorf("%q: %q, want %q", in, got, want)
		}
	}
}

func TestGrubArgs(t *testing.T) {
	h := hosttest.Tree(t, map[string]string{
		"etc/default/grub":            "GRUB_DEFAULT=0\n# GRUB_CMDLINE_LINUX=\"hugepages=1\"\nGRUB_CMDLINE_LINUX_DEFAULT=\"quiet\"\nGRUB_CMDLINE_LINUX=\"hugepagesz=1G hugepages=4\"\n",
		"etc/default/grub.d/50-x.cfg": "GRUB_CMDLINE_LINUX=\"$GRUB_CMDLINE_LINUX hugepages=512\"\n",
	})
	var got []string
	for _, a := range facts.GatherHost(context.Background(), h, facts.Options{}, facts.DomainPersist).Persist.GrubArgs {
		got = append(got, fmt.Sprintf("%s@%s:%d", a.Key, a.File, a.Line))
	}
	want := "quiet@/etc/default/grub:3 hugepagesz=1G@/etc/default/grub:4 hugepages=4@/etc/default/grub:4 $GRUB_CMDLINE_LINUX@/etc/default/grub.d/50-x.cfg:1 hugepages=512@/etc/default/grub.d/50-x.cfg:1"
	if strings.Join(got, " ") != want {
		t.Errorf("got  %s\nwant %s", strings.Join(got, " "), want)
	}
}
