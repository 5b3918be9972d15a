// Command derive-host writes the host fixtures this VM cannot record: its
// root lacks CAP_SYS_RESOURCE (no open-files hard limit above 20000, no
// negative oom_score_adj), its kernel has neither SELinux nor AppArmor, dbhost
// does not run in a container here, and /proc/sys is fully readable. Each
// fixture starts from a real recording of tools/record and edits only the
// entries named in its manifest note, which starts with "derived:".
//
//	go run ./tools/derive-host            # all derived fixtures
//	go run ./tools/derive-host sec-apparmor
package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"sort"
	"strconv"
	"strings"

	"github.com/dbhost/dbhost/internal/fixture/derive"
)

// privatePG finds the private PostgreSQL of limits-nofile-1024: the
// postmaster whose open-files limit is 1024.
func privatePG(a *derive.Archive) (int, error) {
	for name, b := range a.Files {
		if m := procFile.FindStringSubmatch(name); m != nil && m[2] == "limits" && nofile1024.Match(b) {
			return strconv.Atoi(m[1])
		}
	}
	return 0, errors.New("no process with an open-files limit of 1024")
}

// protectPG gives the private PostgreSQL's postmaster oom_score_adj -1000,
// as OOMScoreAdjust=-1000 does, and returns its PID.
func protectPG(a *derive.Archive) (int, error) {
	pid, err := privatePG(a)
	if err != nil {
		return 0, err
	}
	a.SetFile(fmt.Sprintf("proc/%d/oom_score_adj", pid), "-1000\n")
	return pid, nil
}

var (
	procFile   = regexp.MustCompile(`^fs/proc/(\d+)/(.+)$`)
	nofile1024 = regexp.MustCompile(`(?m)^Max open files\s+1024\s+1024\s+files`)
)

var derivations = []derive.Derivation{
	{
		Name: "limits-nofile-65536",
		Base: "limits-nofile-1024",
		Note: "derived from limits-nofile-1024: the private PostgreSQL's /proc/PID/limits says Max open files 65536 65536 instead of 1024 1024 (this VM's root lacks CAP_SYS_RESOURCE and cannot grant more than 20000)",
		Edit: func(a *derive.Archive) error {
			pid, err := privatePG(a)
			if err != nil {
				return err
			}
			return replace(a, fmt.Sprintf("proc/%d/limits", pid), nofile1024, "Max open files            65536                65536                files")
		},
	},
	{
		Name: "limits-pg-oom-protected",
		Base: "limits-nofile-1024",
		Note: "derived from limits-nofile-1024: the private PostgreSQL's postmaster has oom_score_adj -1000 (as OOMScoreAdjust=-1000 leaves it); its children keep their recorded 0, as PG_OOM_ADJUST_VALUE=0 resets them (this VM's root lacks CAP_SYS_RESOURCE and cannot lower oom_score_adj)",
		Edit: func(a *derive.Archive) error {
			_, err := protectPG(a)
			return err
		},
	},
	{
		Name: "limits-pg-oom-children",
		Base: "limits-nofile-1024",
		Note: "derived from limits-nofile-1024: the private PostgreSQL's postmaster and every child have oom_score_adj -1000, as when it is started protected without PG_OOM_ADJUST_FILE",
		Edit: func(a *derive.Archive) error {
			pid, err := protectPG(a)
			if err != nil {
				return err
			}
			n := 0
			for _, c := range children(a, pid) {
				if _, ok := a.Files[fmt.Sprintf("fs/proc/%d/oom_score_adj", c)]; ok {
					a.SetFile(fmt.Sprintf("proc/%d/oom_score_adj", c), "-1000\n")
					n++
				}
			}
			if n == 0 {
				return errors.New("no child oom_score_adj recorded")
			}
			return nil
		},
	},
	{
		Name: "limits-unreadable",
		Base: "limits-nofile-1024",
		Note: "derived from limits-nofile-1024: /proc/PID/limits, oom_score_adj and cgroup of every database process, kernel.pid_max and kernel.threads-max, and /usr/lib/systemd/system/mariadb.service read as permission denied (as under hidepid or a restrictive LSM)",
		Edit: func(a *derive.Archive) error {
			for _, p := range []string{"proc/sys/kernel/pid_max", "proc/sys/kernel/threads-max", "usr/lib/systemd/system/mariadb.service"} {
				if _, ok := a.Files["fs/"+p]; !ok {
					return fmt.Errorf("%s not recorded", p)
				}
				a.Deny(p)
			}
			n := 0
			for name := range a.Files {
				m := procFile.FindStringSubmatch(name)
				if m == nil || (m[2] != "limits" && m[2] != "oom_score_adj" && m[2] != "cgroup") || m[1] == "1" {
					continue
				}
				if m[2] == "limits" {
					n++
				}
				a.Deny("proc/" + m[1] + "/" + m[2])
			}
			if n == 0 {
				return errors.New("no limits recorded")
			}
			return nil
		},
	},
	{
		Name: "persist-unreadable",
		Base: "persist-files",
		Note: "derived from persist-files: the sysctl.d directories and /etc/sysctl.conf read as permission denied",
		Edit: func(a *derive.Archive) error {
			for _, d := range []string{"etc/sysctl.d", "run/sysctl.d", "usr/local/lib/sysctl.d", "usr/lib/sysctl.d", "lib/sysctl.d"} {
				a.Probes["readdir:"+d] = derive.Probe{Err: "open /" + d + ": permission denied", Errno: 13}
			}
			for name := range a.Files {
				if strings.HasPrefix(name, "fs/etc/sysctl.d/") || strings.HasPrefix(name, "fs/usr/lib/sysctl.d/") || strings.HasPrefix(name, "fs/lib/sysctl.d/") {
					delete(a.Files, name)
				}
			}
			a.Deny("etc/sysctl.conf")
			return nil
		},
	},
	{
		Name: "net-unreadable",
		Base: "net-tuned",
		Note: "derived from net-tuned: the net.core and net.ipv4 parameters under /proc/sys read as permission denied (as in a container whose /proc/sys is masked)",
		Edit: denyFiles("proc/sys/net/core/somaxconn", "proc/sys/net/ipv4/tcp_max_syn_backlog", "proc/sys/net/ipv4/tcp_keepalive_time",
			"proc/sys/net/ipv4/tcp_keepalive_intvl", "proc/sys/net/ipv4/tcp_keepalive_probes", "proc/sys/net/ipv4/tcp_fin_timeout",
			"proc/sys/net/ipv4/ip_local_port_range", "proc/sys/net/ipv4/ip_local_reserved_ports", "proc/sys/net/ipv4/tcp_syncookies"),
	},
	{
		Name: "time-unreadable",
		Base: "time-chrony-nosource",
		Note: "derived from time-chrony-nosource: adjtimex(2) failed with EPERM (as under a seccomp profile that denies it) and /sys/devices/system/clocksource is absent (sysfs not mounted)",
		Edit: func(a *derive.Archive) error {
			if _, ok := a.Probes["probe:adjtimex"]; !ok {
				return errors.New("no adjtimex probe recorded")
			}
			a.Probes["probe:adjtimex"] = derive.Probe{Err: "operation not permitted", Errno: 1}
			delete(a.Files, "fs/sys/devices/system/clocksource/clocksource0/current_clocksource")
			delete(a.Files, "fs/sys/devices/system/clocksource/clocksource0/available_clocksource")
			return nil
		},
	},
	{
		Name: "time-clocksource-hpet",
		Base: "time-chrony",
		Note: "derived from time-chrony: current_clocksource hpet and available_clocksource \"tsc hpet acpi_pm\", as on a KVM guest whose kernel fell back from tsc",
		Edit: setFiles(
			"sys/devices/system/clocksource/clocksource0/current_clocksource", "hpet\n",
			"sys/devices/system/clocksource/clocksource0/available_clocksource", "tsc hpet acpi_pm \n"),
	},
	{
		Name: "sec-unreadable",
		Base: "limits-nofile-1024",
		Note: "derived from limits-nofile-1024: /sys/fs/selinux/enforce and /sys/module/apparmor/parameters/enabled read as permission denied",
		Edit: denyFiles("sys/fs/selinux/enforce", "sys/module/apparmor/parameters/enabled"),
	},
	{
		Name: "sec-apparmor",
		Base: "limits-nofile-1024",
		Note: "derived from limits-nofile-1024: AppArmor enabled (/sys/module/apparmor/parameters/enabled Y) with an Ubuntu 22.04 host's profile list, /usr/sbin/mysqld in enforce mode",
		Edit: setFiles(
			"sys/module/apparmor/parameters/enabled", "Y\n",
			"sys/kernel/security/apparmor/profiles", "/usr/sbin/mysqld (enforce)\n/usr/sbin/tcpdump (enforce)\n/usr/lib/snapd/snap-confine (enforce)\n/usr/lib/snapd/snap-confine//mount-namespace-capture-helper (enforce)\n/usr/bin/man (enforce)\nman_filter (enforce)\nman_groff (enforce)\nlsb_release (enforce)\nnvidia_modprobe (enforce)\nnvidia_modprobe//kmod (enforce)\n"),
	},
	{
		Name: "sec-selinux-enforcing",
		Base: "limits-nofile-1024",
		Note: "derived from limits-nofile-1024: SELinux enforcing (/sys/fs/selinux/enforce 1, /etc/selinux/config SELINUX=enforcing) and the data directories' security.selinux labels of a RHEL host: the shared PostgreSQL's postgresql_db_t, MariaDB's mysqld_db_t, the private PostgreSQL's /tmp directory user_tmp_t, Redis's /var/lib/redis var_lib_t",
		Edit: func(a *derive.Archive) error {
			a.SetFile("sys/fs/selinux/enforce", "1")
			a.SetFile("etc/selinux/config", "# This file controls the state of SELinux on the system.\nSELINUX=enforcing\nSELINUXTYPE=targeted\n")
			return labels(a, map[string]string{
				"var/lib/postgresql/15/main": "system_u:object_r:postgresql_db_t:s0",
				"var/lib/mysql":              "system_u:object_r:mysqld_db_t:s0",
				"var/lib/redis":              "system_u:object_r:var_lib_t:s0",
				"tmp/":                       "unconfined_u:object_r:user_tmp_t:s0",
			}, "")
		},
	},
	{
		Name: "sec-selinux-permissive",
		Base: "limits-nofile-1024",
		Note: "derived from limits-nofile-1024: SELinux permissive (/sys/fs/selinux/enforce 0, SELINUX=permissive), the shared PostgreSQL's data directory labelled postgresql_db_t, the other data directories' labels unreadable (getxattr: permission denied)",
		Edit: func(a *derive.Archive) error {
			a.SetFile("sys/fs/selinux/enforce", "0")
			a.SetFile("etc/selinux/config", "SELINUX=permissive\nSELINUXTYPE=targeted\n")
			return labels(a, map[string]string{"var/lib/postgresql/15/main": "system_u:object_r:postgresql_db_t:s0"}, "permission denied")
		},
	},
	{
		Name: "kernel-glibc-2.17",
		Base: "pg-private",
		Note: "derived from pg-private (a private PostgreSQL with an en_US.UTF-8 database): getconf GNU_LIBC_VERSION answers glibc 2.17 (RHEL/CentOS 7) instead of 2.36",
		Edit: func(a *derive.Archive) error { return setGlibc(a, "glibc 2.17\n", "") },
	},
	{
		Name: "kernel-mongo-old",
		Base: "mongo-6",
		Note: "derived from mongo-6 (the mongod stand-in, version 6.0): kernel release 2.6.32-754.el6.x86_64 and glibc 2.12, as on CentOS 6",
		Edit: func(a *derive.Archive) error {
			a.SetFile("proc/sys/kernel/osrelease", "2.6.32-754.el6.x86_64\n")
			return setGlibc(a, "glibc 2.12\n", "")
		},
	},
	{
		Name: "kernel-mongo-noglibc",
		Base: "mongo-6",
		Note: "derived from mongo-6: getconf is missing (a minimal image), so the C library version is unknown",
		Edit: func(a *derive.Archive) error {
			return setGlibc(a, "", "getconf: exec: \"getconf\": executable file not found in $PATH")
		},
	},
	{
		Name: "container-docker",
		Base: "limits-nofile-1024",
		Note: "derived from limits-nofile-1024: PID 1's /proc/1/cgroup lines point into /docker/<id> and its root mount is overlay, as when dbhost runs inside a Docker container; the database processes' own cgroups are as recorded",
		Edit: func(a *derive.Archive) error {
			const id = "4f1c0e2b9a7d6c5e3f2a1b0c9d8e7f6a5b4c3d2e1f0a9b8c7d6e5f4a3b2c1d0e"
			cg, ok := a.Files["fs/proc/1/cgroup"]
			if !ok {
				return errors.New("no /proc/1/cgroup recorded")
			}
			var lines []string
			for _, ln := range strings.Split(strings.TrimSpace(string(cg)), "\n") {
				if i := strings.LastIndexByte(ln, ':'); i >= 0 {
					ln = ln[:i+1] + "/docker/" + id
				}
				lines = append(lines, ln)
			}
			a.SetFile("proc/1/cgroup", strings.Join(lines, "\n")+"\n")
			mi, ok := a.Files["fs/proc/1/mountinfo"]
			if !ok {
				return errors.New("no /proc/1/mountinfo recorded")
			}
			var out []string
			replaced := false
			for _, ln := range strings.Split(strings.TrimRight(string(mi), "\n"), "\n") {
				f := strings.Fields(ln)
				if len(f) > 9 && f[4] == "/" && !replaced {
					sep := 6
					for sep < len(f) && f[sep] != "-" {
						sep++
					}
					if sep+3 < len(f) {
						f[sep+1], f[sep+2] = "overlay", "overlay"
						f[sep+3] = "rw,lowerdir=/var/lib/docker/overlay2/l/ABCDEF:/var/lib/docker/overlay2/l/GHIJKL,upperdir=/var/lib/docker/overlay2/" + id[:12] + "/diff,workdir=/var/lib/docker/overlay2/" + id[:12] + "/work"
						ln = strings.Join(f, " ")
						replaced = true
					}
				}
				out = append(out, ln)
			}
			if !replaced {
				return errors.New("no root mount in /proc/1/mountinfo")
			}
			a.SetFile("proc/1/mountinfo", strings.Join(out, "\n")+"\n")
			return nil
		},
	},
	{
		// A second cluster whose port only its configuration names, as a
		// Debian cluster started by pg_ctlcluster: a run without root
		// cannot learn it (the data directory is 0700).
		Name: "pg-nonroot-cluster",
		Base: "pg-nonroot",
		Note: "derived from pg-nonroot: the private PostgreSQL's command line has no -p (its port is set only in its unreadable postgresql.conf)",
		Edit: func(a *derive.Archive) error { return dropArg(a, "/tmp/dbhost-pg-", "-p") },
	},
	{
		// The same for MariaDB: the port only in its unreadable option file.
		Name: "mysql-nonroot-port",
		Base: "mysql-nonroot",
		Note: "derived from mysql-nonroot: the private MariaDB's command line has no --port (its port would be in its unreadable --defaults-file)",
		Edit: func(a *derive.Archive) error { return dropArg(a, "/tmp/dbhost-mycnf-", "--port=") },
	},
}

// dropArg removes an option (and, for a bare flag like -p, its value) from
// the recorded command line of the process whose line contains marker.
func dropArg(a *derive.Archive, marker, opt string) error {
	for key, p := range a.Probes {
		if !strings.HasPrefix(key, "cmdline:") || !strings.Contains(string(p.Out), marker) {
			continue
		}
		var args []string
		if err := json.Unmarshal(p.Out, &args); err != nil {
			return err
		}
		for i, arg := range args {
			n := 0
			switch {
			case arg == opt && i+1 < len(args):
				n = 2
			case strings.HasSuffix(opt, "=") && strings.HasPrefix(arg, opt):
				n = 1
			default:
				continue
			}
			args = append(args[:i], args[i+n:]...)
			b, err := json.Marshal(args)
			if err != nil {
				return err
			}
			a.Probes[key] = derive.Probe{Out: b}
			return nil
		}
	}
	return fmt.Errorf("no command line with %s and %s", marker, opt)
}

// setGlibc replaces the recorded answer of `getconf GNU_LIBC_VERSION`.
func setGlibc(a *derive.Archive, out, errMsg string) error {
	const key = "cmd:getconf\x00GNU_LIBC_VERSION"
	if _, ok := a.Probes[key]; !ok {
		return errors.New("no getconf probe recorded")
	}
	a.Probes[key] = derive.Probe{Out: []byte(out), Err: errMsg}
	return nil
}

func main() { derive.Main(derivations) }

// setFiles is an Edit that only replaces recorded files (path, content
// pairs).
func setFiles(kv ...string) func(*derive.Archive) error {
	return func(a *derive.Archive) error {
		for i := 0; i+1 < len(kv); i += 2 {
			a.SetFile(kv[i], kv[i+1])
		}
		return nil
	}
}

// denyFiles is an Edit that only makes recorded files read as permission
// denied.
func denyFiles(paths ...string) func(*derive.Archive) error {
	return func(a *derive.Archive) error {
		for _, p := range paths {
			a.Deny(p)
		}
		return nil
	}
}

func replace(a *derive.Archive, p string, re *regexp.Regexp, with string) error {
	b, ok := a.Files["fs/"+p]
	if !ok {
		return fmt.Errorf("%s not recorded", p)
	}
	if !re.Match(b) {
		return fmt.Errorf("%s: no match for %s", p, re)
	}
	a.Files["fs/"+p] = re.ReplaceAll(b, []byte(with))
	return nil
}

// children lists the PIDs whose /proc/PID/stat names ppid as parent.
func children(a *derive.Archive, ppid int) []int {
	var out []int
	for name, b := range a.Files {
		m := procFile.FindStringSubmatch(name)
		if m == nil || m[2] != "stat" {
			continue
		}
		s := string(b)
		i := strings.LastIndexByte(s, ')')
		if i < 0 {
			continue
		}
		f := strings.Fields(s[i+1:])
		if len(f) > 1 && f[1] == strconv.Itoa(ppid) {
			pid, _ := strconv.Atoi(m[1])
			out = append(out, pid)
		}
	}
	sort.Ints(out)
	return out
}

// labels sets the recorded security.selinux attribute of data directories
// by path prefix; other recorded labels get the error errMsg (or keep
// theirs when errMsg is empty).
func labels(a *derive.Archive, byPrefix map[string]string, errMsg string) error {
	const prefix = "xattr:security.selinux:"
	n := 0
	for key := range a.Probes {
		p, ok := strings.CutPrefix(key, prefix)
		if !ok {
			continue
		}
		set := false
		for pre, label := range byPrefix {
			if strings.HasPrefix(p, pre) {
				a.Probes[key] = derive.Probe{Out: []byte(label)}
				set, n = true, n+1
			}
		}
		if !set && errMsg != "" {
			a.Probes[key] = derive.Probe{Err: "getxattr /" + p + ": " + errMsg, Errno: 13}
		}
	}
	if n == 0 {
		return errors.New("no data directory label recorded")
	}
	return nil
}
