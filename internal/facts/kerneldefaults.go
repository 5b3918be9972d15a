package facts

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"context"
	"fmt"
	"io"
	"sort"
	"strings"

	"github.com/dbhost/dbhost/internal/engine"
	"github.com/dbhost/dbhost/internal/host"
)

// KernelDefault is the value a kernel parameter has after boot when no
// sysctl.d file, TuneD profile or command line sets it.
type KernelDefault struct {
	// Value is the documented default ("60"), multi-word values joined by
	// single spaces as the kernel prints them; empty for a parameter that
	// is not comparable.
	Value string
	// Since is the kernel release from which Value holds; Before is the
	// default of older kernels ("" not comparable there).
	Since, Before string
	// Computed says why the boot value cannot be known from a table (the
	// kernel computes it from RAM or CPUs, or systemd raises it at boot).
	Computed string
	// Doc is where the default is documented.
	Doc string
}

const (
	docVM      = "Documentation/admin-guide/sysctl/vm.rst"
	docKernel  = "Documentation/admin-guide/sysctl/kernel.rst"
	docFS      = "Documentation/admin-guide/sysctl/fs.rst"
	docNetIP   = "Documentation/networking/ip-sysctl.rst"
	docNetCore = "Documentation/admin-guide/sysctl/net.rst"
)

// kernelDefaults holds the documented defaults of the parameters the
// catalog reads (TestKernelDefaultsCoverCatalog keeps the two in step).
var kernelDefaults = map[string]KernelDefault{
	"vm.swappiness":                    {Value: "60", Doc: docVM + " (swappiness)"},
	"vm.dirty_ratio":                   {Value: "20", Doc: docVM + " (dirty_ratio)"},
	"vm.dirty_background_ratio":        {Value: "10", Doc: docVM + " (dirty_background_ratio)"},
	"vm.dirty_bytes":                   {Value: "0", Doc: docVM + " (dirty_bytes: 0 means dirty_ratio applies)"},
	"vm.dirty_background_bytes":        {Value: "0", Doc: docVM + " (dirty_background_bytes)"},
	"vm.dirty_expire_centisecs":        {Value: "3000", Doc: docVM + " (dirty_expire_centisecs)"},
	"vm.overcommit_memory":             {Value: "0", Doc: docVM + " (overcommit_memory)"},
	"vm.overcommit_ratio":              {Value: "50", Doc: docVM + " (overcommit_ratio)"},
	"vm.overcommit_kbytes":             {Value: "0", Doc: docVM + " (overcommit_kbytes)"},
	"vm.zone_reclaim_mode":             {Value: "0", Since: "3.16", Doc: docVM + " (zone_reclaim_mode; older kernels enabled it on NUMA hosts with distant nodes)"},
	"vm.nr_hugepages":                  {Value: "0", Doc: "Documentation/admin-guide/mm/hugetlbpage.rst (no pool unless hugepages= on the kernel command line)"},
	"vm.hugetlb_shm_group":             {Value: "0", Doc: docVM + " (hugetlb_shm_group)"},
	"vm.max_map_count":                 {Value: "65530", Doc: docVM + " (max_map_count)"},
	"vm.vfs_cache_pressure":            {Value: "100", Doc: docVM + " (vfs_cache_pressure)"},
	"vm.min_free_kbytes":               {Computed: "the kernel computes it at boot from the size of RAM", Doc: docVM + " (min_free_kbytes)"},
	"kernel.shmmax":                    {Value: "18446744073692774399", Since: "3.16", Doc: docKernel + " (shmmax: ULONG_MAX - 2^24 since 3.16)"},
	"kernel.shmall":                    {Value: "18446744073692774399", Since: "3.16", Doc: docKernel + " (shmall: ULONG_MAX - 2^24 since 3.16)"},
	"kernel.shmmni":                    {Value: "4096", Doc: docKernel + " (shmmni)"},
	"kernel.sem":                       {Value: "32000 1024000000 500 32000", Since: "3.19", Before: "250 32000 32 128", Doc: "include/uapi/linux/sem.h (SEMMSL SEMMNS SEMOPM SEMMNI, raised in 3.19)"},
	"kernel.msgmni":                    {Value: "32000", Since: "3.19", Doc: "include/uapi/linux/msg.h (MSGMNI, fixed since 3.19; earlier computed from RAM)"},
	"kernel.pid_max":                   {Computed: "the kernel raises it above 32768 on hosts with more than 32 CPUs (1024 per possible CPU)", Doc: docKernel + " (pid_max)"},
	"kernel.threads-max":               {Computed: "the kernel computes it at boot from the size of RAM", Doc: docKernel + " (threads-max)"},
	"kernel.numa_balancing":            {Computed: "it depends on the build (CONFIG_NUMA_BALANCING_DEFAULT_ENABLED) and is on only on hosts with several NUMA nodes", Doc: docKernel + " (numa_balancing)"},
	"fs.file-max":                      {Computed: "the kernel computes it at boot from the size of RAM (and systemd raises it)", Doc: docFS + " (file-max)"},
	"fs.file-nr":                       {Computed: "it is a counter, not a setting", Doc: docFS + " (file-nr)"},
	"fs.nr_open":                       {Computed: "systemd (PID 1) raises it to the kernel's maximum at boot; the kernel's own default is 1048576", Doc: docFS + " (nr_open)"},
	"net.core.somaxconn":               {Value: "4096", Since: "5.4", Before: "128", Doc: docNetCore + " (somaxconn: 4096 since 5.4, 128 before)"},
	"net.ipv4.tcp_max_syn_backlog":     {Computed: "the kernel scales it at boot with the memory of the host", Doc: docNetIP + " (tcp_max_syn_backlog)"},
	"net.ipv4.tcp_fin_timeout":         {Value: "60", Doc: docNetIP + " (tcp_fin_timeout)"},
	"net.ipv4.tcp_keepalive_time":      {Value: "7200", Doc: docNetIP + " (tcp_keepalive_time)"},
	"net.ipv4.tcp_keepalive_intvl":     {Value: "75", Doc: docNetIP + " (tcp_keepalive_intvl)"},
	"net.ipv4.tcp_keepalive_probes":    {Value: "9", Doc: docNetIP + " (tcp_keepalive_probes)"},
	"net.ipv4.tcp_syncookies":          {Value: "1", Doc: docNetIP + " (tcp_syncookies)"},
	"net.ipv4.ip_local_port_range":     {Value: "32768 60999", Since: "4.1", Doc: docNetIP + " (ip_local_port_range)"},
	"net.ipv4.ip_local_reserved_ports": {Value: "", Doc: docNetIP + " (ip_local_reserved_ports: empty)"},
}

// KernelDefaultNames lists the parameters with a table entry, sorted.
func KernelDefaultNames() []string {
	out := make([]string, 0, len(kernelDefaults))
	for n := range kernelDefaults {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

// KernelDefaultFor returns the value a kernel of release (uname -r) gives
// a parameter at boot when nothing sets it. why is set when that cannot be
// compared with the running value (computed at boot, release unknown or
// too old for the table); ok is false when the table has no entry.
func KernelDefaultFor(name, release string) (d KernelDefault, why string, ok bool) {
	d, ok = kernelDefaults[name]
	if !ok {
		return d, "", false
	}
	if d.Computed != "" {
		return d, d.Computed, true
	}
	if d.Since == "" {
		return d, "", true
	}
	if release == "" {
		return d, "the running kernel's release is unknown and the default changed in " + d.Since, true
	}
	if engine.VersionAtLeast(release, d.Since) {
		return d, "", true
	}
	if d.Before == "" {
		return d, fmt.Sprintf("kernel %s predates %s, before which the default differs", release, d.Since), true
	}
	d.Value = d.Before
	return d, "", true
}

// KernelConfig is what the running kernel's build configuration says about
// the defaults dbhost judges.
type KernelConfig struct {
	// Source is the file read (/proc/config.gz, /boot/config-RELEASE).
	Source string `json:"source,omitempty"`
	// THP is the build's transparent_hugepage/enabled default: always,
	// madvise, never, or "none" when THP is not built in.
	THP string `json:"thp,omitempty"`
	// Err says why the build default is unknown.
	Err string `json:"error,omitempty"`
}

// maxKernelConfig caps the decompressed configuration (real ones are
// 100-300 kB).
const maxKernelConfig = 4 << 20

// gatherKernelConfig reads the build configuration: /proc/config.gz
// (CONFIG_IKCONFIG_PROC) or else the distribution's /boot/config-RELEASE,
// which must be root's (anyone else could write what dbhost believes).
func gatherKernelConfig(h *host.Host, release string) KernelConfig {
	var whys []string
	if b, err := h.ReadFile("/proc/config.gz"); err == nil {
		text, err := gunzipCapped(b, maxKernelConfig)
		if err == nil {
			return parseKernelConfig("/proc/config.gz", text)
		}
		whys = append(whys, "/proc/config.gz: "+err.Error())
	} else {
		whys = append(whys, host.Explain(err))
	}
	if release == "" || strings.ContainsAny(release, "/\x00") {
		return KernelConfig{Err: strings.Join(append(whys, "the kernel release is unknown, so /boot/config-RELEASE cannot be found"), "; ")}
	}
	p := "/boot/config-" + release
	if fi, err := h.Lstat(p); err == nil && (fi.UID != 0 || fi.Mode&0o022 != 0 || !fi.Mode.IsRegular()) {
		return KernelConfig{Err: strings.Join(append(whys, fmt.Sprintf("%s is not a regular file owned and writable only by root (uid %d, mode %v): not trusted", p, fi.UID, fi.Mode)), "; ")}
	}
	b, err := h.ReadFile(p)
	if err != nil {
		return KernelConfig{Err: strings.Join(append(whys, host.Explain(err)), "; ")}
	}
	return parseKernelConfig(p, b)
}

func gunzipCapped(b []byte, limit int64) ([]byte, error) {
	zr, err := gzip.NewReader(bytes.NewReader(b))
	if err != nil {
		return nil, fmt.Errorf("not gzip: %v", err)
	}
	out, err := io.ReadAll(io.LimitReader(zr, limit+1))
	if err != nil {
		return nil, fmt.Errorf("truncated or corrupt: %v", err)
	}
	if int64(len(out)) > limit {
		return nil, fmt.Errorf("more than %d bytes decompressed", limit)
	}
	return out, nil
}

// parseKernelConfig reads the THP choice of a kernel .config.
func parseKernelConfig(source string, b []byte) KernelConfig {
	c := KernelConfig{Source: source}
	set := map[string]bool{}
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	seen := false
	for sc.Scan() {
		ln := strings.TrimSpace(sc.Text())
		if strings.HasPrefix(ln, "CONFIG_") || strings.HasPrefix(ln, "# CONFIG_") {
			seen = true
		}
		if k, v, ok := strings.Cut(ln, "="); ok && v == "y" {
			set[k] = true
		}
	}
	if !seen {
		c.Err = source + " holds no CONFIG_ lines: not a kernel configuration"
		return c
	}
	switch {
	case !set["CONFIG_TRANSPARENT_HUGEPAGE"]:
		c.THP = "none"
	case set["CONFIG_TRANSPARENT_HUGEPAGE_ALWAYS"]:
		c.THP = "always"
	case set["CONFIG_TRANSPARENT_HUGEPAGE_MADVISE"]:
		c.THP = "madvise"
	case set["CONFIG_TRANSPARENT_HUGEPAGE_NEVER"]:
		c.THP = "never"
	default:
		c.Err = source + " enables THP but names no default mode (CONFIG_TRANSPARENT_HUGEPAGE_ALWAYS/_MADVISE/_NEVER)"
	}
	return c
}

// gatherKernelConfigFor fills Persist.KernelConfig.
func gatherKernelConfigFor(_ context.Context, h *host.Host, p *Persist) {
	rel := h.Read("/proc/sys/kernel/osrelease")
	release := ""
	if rel.OK() {
		release = strings.TrimSpace(rel.Value)
	}
	p.KernelConfig = gatherKernelConfig(h, release)
}
