package facts

import (
	"context"
	"strconv"
	"strings"

	"github.com/dbhost/dbhost/internal/host"
	"github.com/dbhost/dbhost/internal/textio"
)

// System describes the kernel, C library, distribution and virtualisation.
type System struct {
	Hostname string `json:"hostname"`
	// Kernel is the release string (uname -r).
	Kernel host.Reading `json:"kernel"`
	// OS is the distribution's PRETTY_NAME; OSID and OSLike its ID and
	// ID_LIKE from os-release (debian, rhel fedora, ...).
	OS     string `json:"os,omitempty"`
	OSID   string `json:"os_id,omitempty"`
	OSLike string `json:"os_like,omitempty"`
	// Glibc is the GNU C library version ("2.36"); Err when not glibc.
	Glibc host.Reading `json:"glibc"`
	// Hypervisor is set when the CPU reports running under one
	// ("KVM", "VMware", "Microsoft Hv", "Xen"...), empty on bare metal.
	Hypervisor string `json:"hypervisor,omitempty"`
	// Container names the container runtime when dbhost itself runs in
	// one (docker, podman, lxc, kubernetes), with the evidence.
	Container         string `json:"container,omitempty"`
	ContainerEvidence string `json:"container_evidence,omitempty"`
	// Cmdline is the kernel command line.
	Cmdline    []string `json:"cmdline,omitempty"`
	CmdlineErr string   `json:"cmdline_error,omitempty"`
	CPUs       int      `json:"cpus"`
	// CPUsOnline is the kernel's list of online CPUs ("0-3,8"); see
	// OnlineCPUs.
	CPUsOnline host.Reading `json:"cpus_online"`
	// Systemd reports whether PID 1 is systemd (units are then live).
	Systemd bool `json:"systemd"`
}

// CmdlineParam returns the value of a kernel parameter (key=value) and
// whether it is present.
func (s System) CmdlineParam(key string) (string, bool) {
	for _, a := range s.Cmdline {
		if a == "--" {
			break // what follows goes to init, not the kernel
		}
		k, v, _ := strings.Cut(a, "=")
		if k == key {
			return v, true
		}
	}
	return "", false
}

// OnlineCPUs counts CPUsOnline; 0 when it is unreadable or not a CPU list.
func (s System) OnlineCPUs() int {
	if !s.CPUsOnline.OK() {
		return 0
	}
	return countCPUList(s.CPUsOnline.Value)
}

// countCPUList counts the CPUs in a list such as "0-3,8,10-11".
func countCPUList(s string) int {
	n := 0
	for _, part := range strings.Split(s, ",") {
		lo, hi, isRange := strings.Cut(part, "-")
		a, err := strconv.Atoi(lo)
		if err != nil {
			return 0
		}
		b := a
		if isRange {
			if b, err = strconv.Atoi(hi); err != nil || b < a {
				return 0
			}
		}
		n += b - a + 1
	}
	return n
}

func init() { registerHost(DomainSystem, gatherSystem) }

var glibcVersion = textio.LazyRegexp(`\b(\d+\.\d+)\b`)

func gatherSystem(ctx context.Context, h *host.Host, f *Facts) {
	s := &f.System
	s.Hostname, _ = h.ReadString("/proc/sys/kernel/hostname")
	s.Kernel = h.Read("/proc/sys/kernel/osrelease")
	if b, err := h.ReadFile("/etc/os-release"); err == nil {
		kv := parseEnvFile(string(b))
		s.OS, s.OSID, s.OSLike = kv["PRETTY_NAME"], kv["ID"], kv["ID_LIKE"]
	}
	if cmd, err := h.CmdLine(); err != nil {
		s.CmdlineErr = host.Explain(err)
	} else {
		s.Cmdline = cmd
	}
	s.CPUsOnline = h.Read("/sys/devices/system/cpu/online")
	if cpus, err := h.CPUInfo(); err == nil {
		s.CPUs = len(cpus)
		if len(cpus) > 0 {
			for _, fl := range cpus[0].Flags {
				if fl == "hypervisor" {
					s.Hypervisor = "unknown hypervisor"
				}
			}
		}
	}
	if s.Hypervisor != "" {
		if v, err := h.ReadString("/sys/class/dmi/id/sys_vendor"); err == nil && v != "" {
			s.Hypervisor = v
		}
	}
	s.Glibc = glibc(ctx, h)
	if comm, err := h.Comm(1); err == nil {
		s.Systemd = comm == "systemd"
	}
	s.Container, s.ContainerEvidence = detectContainer(h)
}

// glibc is getconf's answer, the C library's own (host.GlibcVersion reads
// it without running getconf where it can).
func glibc(ctx context.Context, h *host.Host) host.Reading {
	r := host.Reading{Source: "getconf GNU_LIBC_VERSION"}
	out, err := h.GlibcVersion(ctx)
	if err != nil {
		r.Err = host.Explain(err)
		return r
	}
	m := glibcVersion.FindString(string(out))
	if !strings.HasPrefix(string(out), "glibc") || m == "" {
		r.Err = "not glibc: " + strings.TrimSpace(string(out))
		return r
	}
	r.Value = m
	return r
}

// detectContainer looks for the marks container runtimes leave. A marker
// file alone is not enough: VMs are often built from container images and
// keep /.dockerenv, yet have their own kernel. A container shares the host's
// kernel, which shows as an overlay root, a runtime's cgroup path, or
// systemd's own container note.
func detectContainer(h *host.Host) (string, string) {
	if v, err := h.ReadString("/run/systemd/container"); err == nil && v != "" {
		return v, "/run/systemd/container: " + v
	}
	if b, err := h.ReadFile("/proc/1/cgroup"); err == nil {
		for _, ln := range strings.Split(string(b), "\n") {
			for _, k := range []string{"docker", "kubepods", "lxc", "libpod", "containerd"} {
				if strings.Contains(ln, "/"+k) {
					return k, "/proc/1/cgroup: " + ln
				}
			}
		}
	}
	rootFS := ""
	if mounts, err := h.MountInfo(1); err == nil {
		for _, m := range mounts {
			if m.MountPoint == "/" {
				rootFS = m.FSType // the last "/" mount is the visible one
			}
		}
	}
	overlay := rootFS == "overlay" || rootFS == "aufs" || strings.HasPrefix(rootFS, "fuse")
	for _, c := range []struct{ marker, name string }{
		{"/.dockerenv", "docker"}, {"/run/.containerenv", "podman"}, {"/var/run/secrets/kubernetes.io", "kubernetes"},
	} {
		if h.Exists(c.marker) && overlay {
			return c.name, c.marker + " exists and / is " + rootFS
		}
	}
	return "", ""
}

// parseEnvFile reads KEY=value lines (os-release, /etc/default files).
func parseEnvFile(s string) map[string]string {
	m := map[string]string{}
	for _, ln := range strings.Split(s, "\n") {
		ln = strings.TrimSpace(ln)
		if ln == "" || ln[0] == '#' {
			continue
		}
		k, v, ok := strings.Cut(ln, "=")
		if !ok {
			continue
		}
		m[strings.TrimSpace(k)] = strings.Trim(strings.TrimSpace(v), `"'`)
	}
	return m
}
