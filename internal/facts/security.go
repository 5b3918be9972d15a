package facts

import (
	"context"
	"strings"

	"github.com/dbhost/dbhost/internal/host"
)

// Security describes mandatory access control.
type Security struct {
	SELinux  SELinux  `json:"selinux"`
	AppArmor AppArmor `json:"apparmor"`
}

// SELinux state: Enforce is /sys/fs/selinux/enforce ("1" enforcing, "0"
// permissive, Err when SELinux is off); Config is SELINUX= from
// /etc/selinux/config (what the next boot will use).
type SELinux struct {
	Enforce host.Reading `json:"enforce"`
	Config  host.Reading `json:"config"`
}

// Mode is "enforcing", "permissive" or "disabled" (no selinuxfs).
func (s SELinux) Mode() string {
	switch {
	case s.Enforce.OK() && s.Enforce.Value == "1":
		return "enforcing"
	case s.Enforce.OK() && s.Enforce.Value == "0":
		return "permissive"
	}
	return "disabled"
}

// AppArmor state: Enabled is /sys/module/apparmor/parameters/enabled ("Y");
// Profiles maps profile name → mode (enforce, complain) from
// /sys/kernel/security/apparmor/profiles (root only).
type AppArmor struct {
	Enabled     host.Reading      `json:"enabled"`
	Profiles    map[string]string `json:"profiles,omitempty"`
	ProfilesErr string            `json:"profiles_error,omitempty"`
}

// On reports whether AppArmor is enabled in the kernel.
func (a AppArmor) On() bool { return a.Enabled.OK() && strings.HasPrefix(a.Enabled.Value, "Y") }

func init() { registerHost(DomainSecurity, gatherSecurity) }

func gatherSecurity(_ context.Context, h *host.Host, f *Facts) {
	s := &f.Security
	s.SELinux.Enforce = h.Read("/sys/fs/selinux/enforce")
	s.SELinux.Config = selinuxConfig(h)
	s.AppArmor.Enabled = h.Read("/sys/module/apparmor/parameters/enabled")
	if !s.AppArmor.On() {
		return
	}
	b, err := h.ReadFile("/sys/kernel/security/apparmor/profiles")
	if err != nil {
		s.AppArmor.ProfilesErr = host.Explain(err)
		return
	}
	s.AppArmor.Profiles = ParseAppArmorProfiles(b)
}

// selinuxConfig reads SELINUX= from /etc/selinux/config.
func selinuxConfig(h *host.Host) host.Reading {
	r := host.Reading{Source: "/etc/selinux/config"}
	b, err := h.ReadFile(r.Source)
	if err != nil {
		r.Err = host.Explain(err)
		return r
	}
	kv := parseEnvFile(string(b))
	v, ok := kv["SELINUX"]
	if !ok {
		r.Err = "/etc/selinux/config: no SELINUX= line"
		return r
	}
	r.Value = strings.ToLower(v)
	return r
}

// ParseAppArmorProfiles reads the kernel's profile list: "name (mode)" per
// line; names may contain spaces.
func ParseAppArmorProfiles(b []byte) map[string]string {
	out := map[string]string{}
	for _, ln := range strings.Split(string(b), "\n") {
		ln = strings.TrimSpace(ln)
		i := strings.LastIndex(ln, " (")
		if i <= 0 || !strings.HasSuffix(ln, ")") {
			continue
		}
		out[ln[:i]] = ln[i+2 : len(ln)-1]
	}
	return out
}
