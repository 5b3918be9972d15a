package facts

import (
	"context"

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

// AppArmor state: Enabled is /sys/module/apparmor/parameters/enabled ("Y");
// Profiles maps profile name → mode (enforce, complain) from
// /sys/kernel/security/apparmor/profiles (root only).
type AppArmor struct {
	Enabled     host.Reading      `json:"enabled"`
	Profiles    map[string]string `json:"profiles,omitempty"`
	ProfilesErr string            `json:"profiles_error,omitempty"`
}

func init() { registerHost("security", gatherSecurity) }

func gatherSecurity(_ context.Context, h *host.Host, f *Facts) {}
