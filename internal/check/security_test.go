package check_test

import (
	"strings"
	"testing"

	"github.com/dbhost/dbhost/internal/check"
)

func TestSecurityMAC(t *testing.T) {
	fd := hxFind(t, "limits-nofile-1024", "security.mac", "host", check.Fail)
	hxHas(t, "fix", fd.Fix.Manual, "apparmor") // Debian: AppArmor is the native choice
	fd = hxFind(t, "sec-apparmor", "security.mac", "host", check.Pass)
	hxHas(t, "reason", fd.Reason, "/usr/sbin/mysqld (enforce)")
	hxFind(t, "sec-selinux-enforcing", "security.mac", "host", check.Pass)
	fd = hxFind(t, "sec-selinux-permissive", "security.mac", "host", check.Fail)
	if len(fd.Fix.Runtime) == 0 || fd.Fix.Runtime[0] != "setenforce 1" {
		t.Errorf("runtime %v", fd.Fix.Runtime)
	}
	hxFind(t, "sec-unreadable", "security.mac", "host", check.Unknown)
}

func TestSecuritySELinuxLabels(t *testing.T) {
	if st := hxStatuses(t, "limits-nofile-1024", "security.selinux_labels"); len(st) != 0 {
		t.Errorf("SELinux off, yet judged: %v", st)
	}
	name := "sec-selinux-enforcing"
	hxFind(t, name, "security.selinux_labels", "postgres:5432", check.Pass)
	hxFind(t, name, "security.selinux_labels", "mysql:3306", check.Pass)
	pg := hxPrivate(t, name, "postgres")
	fd := hxFind(t, name, "security.selinux_labels", pg, check.Fail)
	hxHas(t, "reason", fd.Reason, "user_tmp_t", "postgresql_db_t")
	if !strings.HasPrefix(fd.Fix.Manual, "semanage fcontext -a -t postgresql_db_t") || !strings.Contains(fd.Fix.Manual, "restorecon -Rv") {
		t.Errorf("fix %q", fd.Fix.Manual)
	}
	// The default path only needs relabelling.
	fd = hxFind(t, name, "security.selinux_labels", "redis:6379", check.Fail)
	if strings.Contains(fd.Fix.Manual, "semanage") || !strings.HasPrefix(fd.Fix.Manual, "restorecon -Rv /var/lib/redis") {
		t.Errorf("fix %q", fd.Fix.Manual)
	}
	hxFind(t, "sec-selinux-permissive", "security.selinux_labels", "mysql:3306", check.Unknown)
}

func TestSecurityDBAsRoot(t *testing.T) {
	// This VM's Redis really runs as root.
	fd := hxFind(t, "limits-nofile-1024", "security.db_as_root", "redis:6379", check.Fail)
	hxHas(t, "reason", fd.Reason, "CONFIG SET dir")
	hxHas(t, "fix", fd.Fix.Manual, "chown -R redis:", "/var/lib/redis")
	hxFind(t, "limits-nofile-1024", "security.db_as_root", "postgres:5432", check.Pass)
	hxFind(t, "limits-nofile-1024", "security.db_as_root", "mysql:3306", check.Pass)
}
