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
	"archive/tar"
	"bytes"
	"compress/gzip"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"time"
)

type derivation struct {
	name, base, note string
	edit             func(a *archive) error
}

// privatePG finds the private PostgreSQL of limits-nofile-1024: the
// postmaster whose open-files limit is 1024.
func privatePG(a *archive) (int, error) {
	for name, b := range a.files {
		if m := procFile.FindStringSubmatch(name); m != nil && m[2] == "limits" && nofile1024.Match(b) {
			return strconv.Atoi(m[1])
		}
	}
	return 0, errors.New("no process with an open-files limit of 1024")
}

var (
	procFile   = regexp.MustCompile(`^fs/proc/(\d+)/(.+)$`)
	nofile1024 = regexp.MustCompile(`(?m)^Max open files\s+1024\s+1024\s+files`)
)

var derivations = []derivation{
	{
		name: "limits-nofile-65536",
		base: "limits-nofile-1024",
		note: "derived from limits-nofile-1024: the private PostgreSQL's /proc/PID/limits says Max open files 65536 65536 instead of 1024 1024 (this VM's root lacks CAP_SYS_RESOURCE and cannot grant more than 20000)",
		edit: func(a *archive) error {
			pid, err := privatePG(a)
			if err != nil {
				return err
			}
			return a.replace(fmt.Sprintf("proc/%d/limits", pid), nofile1024, "Max open files            65536                65536                files")
		},
	},
	{
		name: "limits-pg-oom-protected",
		base: "limits-nofile-1024",
		note: "derived from limits-nofile-1024: the private PostgreSQL's postmaster has oom_score_adj -1000 (as OOMScoreAdjust=-1000 leaves it); its children keep their recorded 0, as PG_OOM_ADJUST_VALUE=0 resets them (this VM's root lacks CAP_SYS_RESOURCE and cannot lower oom_score_adj)",
		edit: func(a *archive) error {
			pid, err := privatePG(a)
			if err != nil {
				return err
			}
			a.file(fmt.Sprintf("proc/%d/oom_score_adj", pid), "-1000\n")
			return nil
		},
	},
	{
		name: "limits-pg-oom-children",
		base: "limits-nofile-1024",
		note: "derived from limits-nofile-1024: the private PostgreSQL's postmaster and every child have oom_score_adj -1000, as when it is started protected without PG_OOM_ADJUST_FILE",
		edit: func(a *archive) error {
			pid, err := privatePG(a)
			if err != nil {
				return err
			}
			a.file(fmt.Sprintf("proc/%d/oom_score_adj", pid), "-1000\n")
			n := 0
			for _, c := range a.children(pid) {
				if _, ok := a.files[fmt.Sprintf("fs/proc/%d/oom_score_adj", c)]; ok {
					a.file(fmt.Sprintf("proc/%d/oom_score_adj", c), "-1000\n")
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
		name: "limits-unreadable",
		base: "limits-nofile-1024",
		note: "derived from limits-nofile-1024: /proc/PID/limits, oom_score_adj and cgroup of every database process, kernel.pid_max and kernel.threads-max, and /usr/lib/systemd/system/mariadb.service read as permission denied (as under hidepid or a restrictive LSM)",
		edit: func(a *archive) error {
			for _, p := range []string{"proc/sys/kernel/pid_max", "proc/sys/kernel/threads-max", "usr/lib/systemd/system/mariadb.service"} {
				if _, ok := a.files["fs/"+p]; !ok {
					return fmt.Errorf("%s not recorded", p)
				}
				a.deny(p)
			}
			n := 0
			for name := range a.files {
				m := procFile.FindStringSubmatch(name)
				if m == nil || (m[2] != "limits" && m[2] != "oom_score_adj" && m[2] != "cgroup") || m[1] == "1" {
					continue
				}
				if m[2] == "limits" {
					n++
				}
				a.deny("proc/" + m[1] + "/" + m[2])
			}
			if n == 0 {
				return errors.New("no limits recorded")
			}
			return nil
		},
	},
	{
		name: "persist-unreadable",
		base: "persist-files",
		note: "derived from persist-files: the sysctl.d directories and /etc/sysctl.conf read as permission denied",
		edit: func(a *archive) error {
			for _, d := range []string{"etc/sysctl.d", "run/sysctl.d", "usr/local/lib/sysctl.d", "usr/lib/sysctl.d", "lib/sysctl.d"} {
				a.probes["readdir:"+d] = probe{Err: "open /" + d + ": permission denied", Errno: 13}
			}
			for name := range a.files {
				if strings.HasPrefix(name, "fs/etc/sysctl.d/") || strings.HasPrefix(name, "fs/usr/lib/sysctl.d/") || strings.HasPrefix(name, "fs/lib/sysctl.d/") {
					delete(a.files, name)
				}
			}
			a.deny("etc/sysctl.conf")
			return nil
		},
	},
	{
		name: "net-unreadable",
		base: "net-tuned",
		note: "derived from net-tuned: the net.core and net.ipv4 parameters under /proc/sys read as permission denied (as in a container whose /proc/sys is masked)",
		edit: func(a *archive) error {
			for _, p := range []string{"core/somaxconn", "ipv4/tcp_max_syn_backlog", "ipv4/tcp_keepalive_time", "ipv4/tcp_keepalive_intvl",
				"ipv4/tcp_keepalive_probes", "ipv4/tcp_fin_timeout", "ipv4/ip_local_port_range", "ipv4/ip_local_reserved_ports", "ipv4/tcp_syncookies"} {
				a.deny("proc/sys/net/" + p)
			}
			return nil
		},
	},
	{
		name: "time-unreadable",
		base: "time-chrony-nosource",
		note: "derived from time-chrony-nosource: adjtimex(2) failed with EPERM (as under a seccomp profile that denies it) and /sys/devices/system/clocksource is absent (sysfs not mounted)",
		edit: func(a *archive) error {
			if _, ok := a.probes["probe:adjtimex"]; !ok {
				return errors.New("no adjtimex probe recorded")
			}
			a.probes["probe:adjtimex"] = probe{Err: "operation not permitted", Errno: 1}
			delete(a.files, "fs/sys/devices/system/clocksource/clocksource0/current_clocksource")
			delete(a.files, "fs/sys/devices/system/clocksource/clocksource0/available_clocksource")
			return nil
		},
	},
	{
		name: "time-clocksource-hpet",
		base: "time-chrony",
		note: "derived from time-chrony: current_clocksource hpet and available_clocksource \"tsc hpet acpi_pm\", as on a KVM guest whose kernel fell back from tsc",
		edit: func(a *archive) error {
			a.file("sys/devices/system/clocksource/clocksource0/current_clocksource", "hpet\n")
			a.file("sys/devices/system/clocksource/clocksource0/available_clocksource", "tsc hpet acpi_pm \n")
			return nil
		},
	},
	{
		name: "sec-unreadable",
		base: "limits-nofile-1024",
		note: "derived from limits-nofile-1024: /sys/fs/selinux/enforce and /sys/module/apparmor/parameters/enabled read as permission denied",
		edit: func(a *archive) error {
			a.deny("sys/fs/selinux/enforce")
			a.deny("sys/module/apparmor/parameters/enabled")
			return nil
		},
	},
	{
		name: "sec-apparmor",
		base: "limits-nofile-1024",
		note: "derived from limits-nofile-1024: AppArmor enabled (/sys/module/apparmor/parameters/enabled Y) with an Ubuntu 22.04 host's profile list, /usr/sbin/mysqld in enforce mode",
		edit: func(a *archive) error {
			a.file("sys/module/apparmor/parameters/enabled", "Y\n")
			a.file("sys/kernel/security/apparmor/profiles", "/usr/sbin/mysqld (enforce)\n/usr/sbin/tcpdump (enforce)\n/usr/lib/snapd/snap-confine (enforce)\n/usr/lib/snapd/snap-confine//mount-namespace-capture-helper (enforce)\n/usr/bin/man (enforce)\nman_filter (enforce)\nman_groff (enforce)\nlsb_release (enforce)\nnvidia_modprobe (enforce)\nnvidia_modprobe//kmod (enforce)\n")
			return nil
		},
	},
	{
		name: "sec-selinux-enforcing",
		base: "limits-nofile-1024",
		note: "derived from limits-nofile-1024: SELinux enforcing (/sys/fs/selinux/enforce 1, /etc/selinux/config SELINUX=enforcing) and the data directories' security.selinux labels of a RHEL host: the shared PostgreSQL's postgresql_db_t, MariaDB's mysqld_db_t, the private PostgreSQL's /tmp directory user_tmp_t, Redis's /var/lib/redis var_lib_t",
		edit: func(a *archive) error {
			a.file("sys/fs/selinux/enforce", "1")
			a.file("etc/selinux/config", "# This file controls the state of SELinux on the system.\nSELINUX=enforcing\nSELINUXTYPE=targeted\n")
			return a.labels(map[string]string{
				"var/lib/postgresql/15/main": "system_u:object_r:postgresql_db_t:s0",
				"var/lib/mysql":              "system_u:object_r:mysqld_db_t:s0",
				"var/lib/redis":              "system_u:object_r:var_lib_t:s0",
				"tmp/":                       "unconfined_u:object_r:user_tmp_t:s0",
			}, "")
		},
	},
	{
		name: "sec-selinux-permissive",
		base: "limits-nofile-1024",
		note: "derived from limits-nofile-1024: SELinux permissive (/sys/fs/selinux/enforce 0, SELINUX=permissive), the shared PostgreSQL's data directory labelled postgresql_db_t, the other data directories' labels unreadable (getxattr: permission denied)",
		edit: func(a *archive) error {
			a.file("sys/fs/selinux/enforce", "0")
			a.file("etc/selinux/config", "SELINUX=permissive\nSELINUXTYPE=targeted\n")
			return a.labels(map[string]string{"var/lib/postgresql/15/main": "system_u:object_r:postgresql_db_t:s0"}, "permission denied")
		},
	},
	{
		name: "kernel-glibc-2.17",
		base: "limits-nofile-1024",
		note: "derived from limits-nofile-1024: getconf GNU_LIBC_VERSION answers glibc 2.17 (RHEL/CentOS 7) instead of 2.36",
		edit: func(a *archive) error {
			const key = "cmd:getconf\x00GNU_LIBC_VERSION"
			if _, ok := a.probes[key]; !ok {
				return errors.New("no getconf probe recorded")
			}
			a.probes[key] = probe{Out: []byte("glibc 2.17\n")}
			return nil
		},
	},
	{
		name: "container-docker",
		base: "limits-nofile-1024",
		note: "derived from limits-nofile-1024: PID 1's /proc/1/cgroup lines point into /docker/<id> and its root mount is overlay, as when dbhost runs inside a Docker container; the database processes' own cgroups are as recorded",
		edit: func(a *archive) error {
			const id = "4f1c0e2b9a7d6c5e3f2a1b0c9d8e7f6a5b4c3d2e1f0a9b8c7d6e5f4a3b2c1d0e"
			cg, ok := a.files["fs/proc/1/cgroup"]
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
			a.file("proc/1/cgroup", strings.Join(lines, "\n")+"\n")
			mi, ok := a.files["fs/proc/1/mountinfo"]
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
			a.file("proc/1/mountinfo", strings.Join(out, "\n")+"\n")
			return nil
		},
	},
}

func main() {
	dir := flag.String("dir", "testdata/hosts", "fixture directory")
	flag.Parse()
	want := map[string]bool{}
	for _, n := range flag.Args() {
		want[n] = true
	}
	failed := false
	for _, d := range derivations {
		if len(want) > 0 && !want[d.name] {
			continue
		}
		if err := derive(*dir, d); err != nil {
			fmt.Fprintf(os.Stderr, "derive %s: %v\n", d.name, err)
			failed = true
			continue
		}
		fmt.Printf("derived %s\n", filepath.Join(*dir, d.name+".tar.gz"))
	}
	if failed {
		os.Exit(1)
	}
}

func derive(dir string, d derivation) error {
	a, err := readArchive(filepath.Join(dir, d.base+".tar.gz"))
	if err != nil {
		return err
	}
	if err := d.edit(a); err != nil {
		return err
	}
	a.manifest["note"] = d.note
	return a.write(filepath.Join(dir, d.name+".tar.gz"))
}

// archive is an unpacked snapshot: the files under fs/, the recorded probes
// and errors, and the manifest.
type archive struct {
	files    map[string][]byte
	probes   map[string]probe
	errs     map[string]string
	manifest map[string]any
	mtime    time.Time
}

// probe is host.probeResult's JSON form.
type probe struct {
	Out   []byte `json:"out,omitempty"`
	Err   string `json:"err,omitempty"`
	Errno int    `json:"errno,omitempty"`
}

func (a *archive) file(p, content string) { a.files["fs/"+p] = []byte(content) }

// deny makes a recorded file read as "permission denied".
func (a *archive) deny(p string) {
	delete(a.files, "fs/"+p)
	a.errs[p] = "permission denied"
}

func (a *archive) replace(p string, re *regexp.Regexp, with string) error {
	b, ok := a.files["fs/"+p]
	if !ok {
		return fmt.Errorf("%s not recorded", p)
	}
	if !re.Match(b) {
		return fmt.Errorf("%s: no match for %s", p, re)
	}
	a.files["fs/"+p] = re.ReplaceAll(b, []byte(with))
	return nil
}

// children lists the PIDs whose /proc/PID/stat names ppid as parent.
func (a *archive) children(ppid int) []int {
	var out []int
	for name, b := range a.files {
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
func (a *archive) labels(byPrefix map[string]string, errMsg string) error {
	const prefix = "xattr:security.selinux:"
	n := 0
	for key := range a.probes {
		p, ok := strings.CutPrefix(key, prefix)
		if !ok {
			continue
		}
		set := false
		for pre, label := range byPrefix {
			if strings.HasPrefix(p, pre) {
				a.probes[key] = probe{Out: []byte(label)}
				set, n = true, n+1
			}
		}
		if !set && errMsg != "" {
			a.probes[key] = probe{Err: "getxattr /" + p + ": " + errMsg, Errno: 13}
		}
	}
	if n == 0 {
		return errors.New("no data directory label recorded")
	}
	return nil
}

func readArchive(p string) (*archive, error) {
	f, err := os.Open(p)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	gz, err := gzip.NewReader(f)
	if err != nil {
		return nil, err
	}
	a := &archive{files: map[string][]byte{}}
	tr := tar.NewReader(gz)
	for {
		hdr, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, err
		}
		b, err := io.ReadAll(tr)
		if err != nil {
			return nil, err
		}
		a.mtime = hdr.ModTime
		switch hdr.Name {
		case "manifest.json":
			err = json.Unmarshal(b, &a.manifest)
		case "probes.json":
			err = json.Unmarshal(b, &a.probes)
		case "errors.json":
			err = json.Unmarshal(b, &a.errs)
		default:
			a.files[hdr.Name] = b
		}
		if err != nil {
			return nil, fmt.Errorf("%s: %w", hdr.Name, err)
		}
	}
	if a.manifest == nil || a.probes == nil {
		return nil, fmt.Errorf("%s is not a dbhost snapshot", p)
	}
	if a.errs == nil {
		a.errs = map[string]string{}
	}
	return a, nil
}

func (a *archive) write(p string) error {
	var buf bytes.Buffer
	gz := gzip.NewWriter(&buf)
	tw := tar.NewWriter(gz)
	add := func(name string, b []byte) error {
		hdr := &tar.Header{Name: name, Mode: 0o600, Size: int64(len(b)), ModTime: a.mtime, Typeflag: tar.TypeReg, Format: tar.FormatPAX}
		if err := tw.WriteHeader(hdr); err != nil {
			return err
		}
		_, err := tw.Write(b)
		return err
	}
	for _, part := range []struct {
		name string
		v    any
	}{{"manifest.json", a.manifest}, {"probes.json", a.probes}, {"errors.json", a.errs}} {
		b, err := json.MarshalIndent(part.v, "", " ")
		if err != nil {
			return err
		}
		if err := add(part.name, b); err != nil {
			return err
		}
	}
	names := make([]string, 0, len(a.files))
	for n := range a.files {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		if err := add(n, a.files[n]); err != nil {
			return err
		}
	}
	if err := tw.Close(); err != nil {
		return err
	}
	if err := gz.Close(); err != nil {
		return err
	}
	return os.WriteFile(p, buf.Bytes(), 0o644)
}
