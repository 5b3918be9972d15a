package check_test

import (
	"github.com/dbhost/dbhost/internal/check"
	"github.com/dbhost/dbhost/internal/facts"
)

// Cases for what a reboot loses. persist-sysctl-match is a host where every
// judged parameter holds its next-boot value (sysctl.drift passes);
// persist-hugepages-persisted-pg-on a PostgreSQL (postgres:37221, started by
// a unit) with huge_pages=on whose 275 pages sysctl.d persists; it needs
// 274.

// cmdline replaces the kernel command line.
func cmdline(args ...string) func(*facts.Facts) {
	return func(f *facts.Facts) { f.System.Cmdline = args }
}

// noBootPages drops the sysctl.d assignments of vm.nr_hugepages, so that
// only the running pool has the pages.
func noBootPages(f *facts.Facts) {
	var keep []facts.SysctlEntry
	for _, e := range f.Persist.Sysctl {
		if e.Key != "vm.nr_hugepages" {
			keep = append(keep, e)
		}
	}
	f.Persist.Sysctl = keep
}

// transient detaches an instance from the unit that starts it at boot.
func transient(subject string) func(*facts.Facts) {
	return func(f *facts.Facts) { instance(f, subject).Unit = nil }
}

// bootUnit adds an enabled unit that reserves n default-size pages at boot
// ("" : in a script dbhost does not read).
func bootUnit(n string) func(*facts.Facts) {
	return func(f *facts.Facts) {
		f.Persist.HugePagesBoot = append(f.Persist.HugePagesBoot, facts.Persisted{Key: "vm.nr_hugepages", Value: n, File: "/etc/systemd/system/hugepages.service", Line: 3})
	}
}

// grub sets the kernel arguments the GRUB configuration gives the next boot.
func grub(args ...string) func(*facts.Facts) {
	return func(f *facts.Facts) {
		f.Persist.GrubArgs = nil
		for _, a := range args {
			f.Persist.GrubArgs = append(f.Persist.GrubArgs, facts.Persisted{Key: a, File: "/etc/default/grub", Line: 6})
		}
	}
}

// startConf gives an instance a packaged cluster's start.conf.
func startConf(subject, value, note string) func(*facts.Facts) {
	return func(f *facts.Facts) {
		instance(f, subject).StartConf = &facts.Persisted{Key: "start.conf", Value: value, File: "/etc/postgresql/15/x/start.conf", Line: 8, Note: note}
	}
}

// thpBuild sets the kernel build's THP default.
func thpBuild(mode, err string) func(*facts.Facts) {
	return func(f *facts.Facts) {
		f.Persist.KernelConfig = facts.KernelConfig{Source: "/proc/config.gz", THP: mode, Err: err}
	}
}

// keep answers sysctl.drift for one parameter (--keep-running NAME is
// keep(NAME, "running")).
func keep(name, how string) func(*facts.Facts) {
	return func(f *facts.Facts) {
		if f.SysctlKeep == nil {
			f.SysctlKeep = map[string]string{}
		}
		f.SysctlKeep[name] = how
	}
}

// old310 is a RHEL 7 kernel with the somaxconn it boots with.
var old310 = all(system("3.10.0-1160.el7.x86_64", ""), sysctl("net.core.somaxconn", "128"))

func init() {
	const h, base, pg = "host", "persist-sysctl-match", "postgres:37221"
	const pgOn = "persist-hugepages-persisted-pg-on"
	addCases(
		// sysctl.drift: a value nothing persists against the kernel's
		// default.
		tcase{name: "swappiness at the default 60", base: base, mutate: sysctl("vm.swappiness", "60"), id: "sysctl.drift", subject: h, want: check.Pass},
		tcase{name: "swappiness 59 at runtime only", base: base, mutate: sysctl("vm.swappiness", "59"), id: "sysctl.drift", subject: h, want: check.Fail,
			says: []string{"vm.swappiness is 59 now, but nothing persists it: the next boot gives 60 (kernel default, Documentation/admin-guide/sysctl/vm.rst"}},
		// The user's answers, on a parameter no other check sets; mem.swap
		// sets vm.swappiness 59 back to 1, and wins over the answer.
		tcase{name: "vfs_cache_pressure 50 kept running", base: base, mutate: all(sysctl("vm.vfs_cache_pressure", "50"), keep("vm.vfs_cache_pressure", "running")), id: "sysctl.drift", subject: h, want: check.Fail,
			says: []string{"vm.vfs_cache_pressure is 50 now, but nothing persists it", "(--keep-running: the fix persists 50)"}},
		tcase{name: "vfs_cache_pressure 50 kept as the file says", base: base, mutate: all(sysctl("vm.vfs_cache_pressure", "50"), keep("vm.vfs_cache_pressure", "file")), id: "sysctl.drift", subject: h, want: check.Fail,
			says: []string{"(--keep-file: the fix sets vm.vfs_cache_pressure back to 100 now, persisting nothing)"}},
		tcase{name: "swappiness 59 kept running, mem.swap wins", base: base, mutate: all(sysctl("vm.swappiness", "59"), keep("vm.swappiness", "running")), id: "sysctl.drift", subject: h, want: check.Fail,
			says: []string{"(mem.swap in this run sets 1: the fix persists 1, not the running value; --keep-running vm.swappiness is not followed, mem.swap wins)"}},
		tcase{name: "swappiness 1 kept running, mem.swap wants 1 too", base: base, mutate: all(sysctl("vm.swappiness", "1"), keep("vm.swappiness", "running")), id: "sysctl.drift", subject: h, want: check.Fail,
			says: []string{"(--keep-running: the fix persists 1)"}},
		tcase{name: "swappiness 59 in a container", base: base, mutate: all(sysctl("vm.swappiness", "59"), func(f *facts.Facts) { f.System.Container = "docker" }), id: "sysctl.drift", subject: h, want: check.Pass,
			says: []string{"not compared with the kernel's defaults: dbhost runs in a container"}},
		tcase{name: "swappiness 59, a sysctl.d file unreadable", base: base, mutate: all(sysctl("vm.swappiness", "59"), func(f *facts.Facts) { f.Persist.SysctlErr = "/etc/sysctl.d/x.conf: permission denied" }), id: "sysctl.drift", subject: h, want: check.Pass,
			says: []string{"cannot tell that nothing persists a value"}},
		tcase{name: "somaxconn 128 on 5.3", base: base, mutate: all(sysctl("net.core.somaxconn", "128"), system("5.3.18", "")), id: "sysctl.drift", subject: h, want: check.Pass},
		tcase{name: "somaxconn 4096 on 5.3", base: base, mutate: all(sysctl("net.core.somaxconn", "4096"), system("5.3.18", "")), id: "sysctl.drift", subject: h, want: check.Fail,
			says: []string{"the next boot gives 128"}},
		tcase{name: "somaxconn 4096 on 5.4", base: base, mutate: all(sysctl("net.core.somaxconn", "4096"), system("5.4.0-150-generic", "")), id: "sysctl.drift", subject: h, want: check.Pass},
		tcase{name: "somaxconn 128 on 5.4", base: base, mutate: all(sysctl("net.core.somaxconn", "128"), system("5.4.0-150-generic", "")), id: "sysctl.drift", subject: h, want: check.Fail,
			says: []string{"the next boot gives 4096"}},
		tcase{name: "sem of a 3.10 kernel", base: base, mutate: all(old310, sysctl("kernel.sem", "250\t32000\t32\t128")), id: "sysctl.drift", subject: h, want: check.Pass},
		tcase{name: "sem of 3.19 on a 3.10 kernel", base: base, mutate: all(old310, sysctl("kernel.sem", "32000\t1024000000\t500\t32000")), id: "sysctl.drift", subject: h, want: check.Fail,
			says: []string{"the next boot gives 250 32000 32 128"}},
		tcase{name: "min_free_kbytes is computed", base: base, mutate: sysctl("vm.min_free_kbytes", "1"), id: "sysctl.drift", subject: h, want: check.Pass,
			says: []string{"not comparable"}},
		tcase{name: "pid_max is computed", base: base, mutate: all(sysctl("kernel.pid_max", "4194304"), func(f *facts.Facts) { f.Persist.Sysctl = nil }), id: "sysctl.drift", subject: h, want: check.Pass},
		tcase{name: "a reserved port list set at runtime", base: base, mutate: sysctl("net.ipv4.ip_local_reserved_ports", "5432,8000-8010"), id: "sysctl.drift", subject: h, want: check.Fail},
		tcase{name: "nr_hugepages from hugepages= on the command line", base: base, mutate: all(sysctl("vm.nr_hugepages", "275"), cmdline("quiet", "hugepages=275")), id: "sysctl.drift", subject: h, want: check.Pass},
		tcase{name: "nr_hugepages from a boot unit", base: base, mutate: all(sysctl("vm.nr_hugepages", "275"), bootUnit("275")), id: "sysctl.drift", subject: h, want: check.Pass},
		tcase{name: "nr_hugepages beside hugepages= of another size", base: base, mutate: all(sysctl("vm.nr_hugepages", "275"), cmdline("hugepagesz=1G", "hugepages=275")), id: "sysctl.drift", subject: h, want: check.Fail,
			says: []string{"vm.nr_hugepages is 275 now, but nothing persists it: the next boot gives 0"}},

		// mem.hugepages.postgres: huge_pages=on, the pool not persisted.
		tcase{name: "pool persisted", base: pgOn, id: "mem.hugepages.postgres", subject: pg, want: check.Pass, says: []string{"The next boot reserves 275 pages"}},
		tcase{name: "pool at runtime only", base: pgOn, mutate: noBootPages, id: "mem.hugepages.postgres", subject: pg, want: check.Fail,
			says: []string{"the next boot gives 0 pages", "FATAL: could not map anonymous shared memory"}},
		tcase{name: "pool one page short at boot", base: pgOn, mutate: all(noBootPages, cmdline("hugepages=273")), id: "mem.hugepages.postgres", subject: pg, want: check.Fail,
			says: []string{"the next boot gives 273 pages"}},
		tcase{name: "pool just enough at boot", base: pgOn, mutate: all(noBootPages, cmdline("hugepages=274")), id: "mem.hugepages.postgres", subject: pg, want: check.Pass},
		tcase{name: "pool in the GRUB configuration", base: pgOn, mutate: all(noBootPages, grub("quiet", "hugepages=275")), id: "mem.hugepages.postgres", subject: pg, want: check.Pass,
			says: []string{"The next boot reserves 275 pages (/etc/default/grub:6 hugepages=275)"}},
		tcase{name: "GRUB changed since boot", base: pgOn, mutate: all(noBootPages, cmdline("hugepages=275"), grub("hugepages=10")), id: "mem.hugepages.postgres", subject: pg, want: check.Fail,
			says: []string{"the next boot gives 10 pages (/etc/default/grub:6 hugepages=10)"}},
		tcase{name: "pool reserved by a boot unit", base: pgOn, mutate: all(noBootPages, bootUnit("275")), id: "mem.hugepages.postgres", subject: pg, want: check.Pass,
			says: []string{"The next boot reserves 275 pages (/etc/systemd/system/hugepages.service:3)"}},
		tcase{name: "boot unit reserves too few", base: pgOn, mutate: all(noBootPages, bootUnit("100")), id: "mem.hugepages.postgres", subject: pg, want: check.Fail,
			says: []string{"the next boot gives 100 pages (/etc/systemd/system/hugepages.service:3)"}},
		tcase{name: "boot unit runs a script", base: pgOn, mutate: all(noBootPages, bootUnit("")), id: "mem.hugepages.postgres", subject: pg, want: check.Pass,
			says: []string{"What the next boot reserves is unknown"}},
		tcase{name: "pool at runtime only, server started by hand", base: pgOn, mutate: all(noBootPages, transient(pg)), id: "mem.hugepages.postgres", subject: pg, want: check.Pass,
			says: []string{"exists only at runtime", "started by hand"}},
		tcase{name: "pool at runtime only, start.conf manual", base: pgOn, mutate: all(noBootPages, startConf(pg, "manual", "")), id: "mem.hugepages.postgres", subject: pg, want: check.Pass,
			says: []string{"start.conf:8 says manual: the cluster does not start at boot"}},
		tcase{name: "pool at runtime only, start.conf auto without a unit", base: pgOn, mutate: all(noBootPages, transient(pg), startConf(pg, "auto", "")), id: "mem.hugepages.postgres", subject: pg, want: check.Fail,
			says: []string{"start.conf:8 says auto"}},
		tcase{name: "pool at runtime only, start.conf not trusted", base: pgOn, mutate: all(noBootPages, startConf(pg, "auto", "not trusted: owned by uid 1000")), id: "mem.hugepages.postgres", subject: pg, want: check.Pass,
			says: []string{"cannot be believed"}},
		tcase{name: "pool at runtime only, huge_pages=try", base: pgOn, mutate: all(noBootPages, setting(pg, "huge_pages", "try")), id: "mem.hugepages.postgres", subject: pg, want: check.Fail,
			says: []string{"silently falls back to 4 kB pages"}},

		// mem.thp.persisted: enabled "madvise" at runtime, nothing sets it
		// at boot: the build decides.
		tcase{name: "build default madvise", base: "persist-swappiness-runtime", mutate: thpBuild("madvise", ""), id: "mem.thp.persisted", subject: h, want: check.Pass},
		tcase{name: "build default always", base: "persist-swappiness-runtime", mutate: thpBuild("always", ""), id: "mem.thp.persisted", subject: h, want: check.Fail,
			says: []string{`reverts to the kernel's default "always" (kernel build default, CONFIG_TRANSPARENT_HUGEPAGE_ALWAYS in /proc/config.gz)`}},
		tcase{name: "build default unknown", base: "persist-swappiness-runtime", mutate: thpBuild("", "/proc/config.gz: not present on this host; /boot/config-6.1.0: permission denied"), id: "mem.thp.persisted", subject: h, want: check.Unknown,
			says: []string{"build default is unknown", "permission denied"}},
		tcase{name: "build default from the command line", base: "persist-swappiness-runtime", mutate: all(thpBuild("always", ""), cmdline("transparent_hugepage=madvise"), func(f *facts.Facts) {
			f.Memory.THP.Boot = append(f.Memory.THP.Boot, facts.Persisted{Key: "enabled", Value: "madvise", File: "/proc/cmdline"})
		}), id: "mem.thp.persisted", subject: h, want: check.Pass},
	)
}
