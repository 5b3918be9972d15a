package check_test

import (
	"strings"
	"testing"

	"github.com/dbhost/dbhost/internal/check"
)

// container-memlimit moved a private PostgreSQL (shared_buffers 256MB) and a
// private Redis (no maxmemory) into a real cgroup v1 group limited to
// 300 MiB and half a CPU.
func TestContainerLimits(t *testing.T) {
	name := "container-memlimit"
	pg := hxPrivate(t, name, "postgres")
	fd := hxFind(t, name, "container.limits", pg, check.Fail)
	hxHas(t, "reason", fd.Reason, "shared_buffers is 256.0 MiB", "85%", "300.0 MiB", "0.5 CPUs")
	if len(fd.Fix.Config) != 1 || fd.Fix.Config[0].Key != "shared_buffers" || fd.Fix.Config[0].Value != "75MB" {
		t.Errorf("fix %+v", fd.Fix.Config)
	}
	if e, ok := hxEvidence(fd, "memory limit"); !ok || !strings.HasSuffix(e.Source, "/memory/dbhost-test/memory.limit_in_bytes") {
		t.Errorf("evidence %+v", fd.Evidence)
	}
	rd := hxPrivate(t, name, "redis")
	fd = hxFind(t, name, "container.limits", rd, check.Fail)
	hxHas(t, "reason", fd.Reason, "no maxmemory")
	hxFind(t, name, "container.limits", "postgres:5432", check.Pass)

	name = "container-memlimit-ok"
	hxFind(t, name, "container.limits", hxPrivate(t, name, "postgres"), check.Pass)
	fd = hxFind(t, name, "container.limits", hxPrivate(t, name, "redis"), check.Pass)
	hxHas(t, "reason", fd.Reason, "maxmemory is 100.0 MiB")

	hxFind(t, "limits-unreadable", "container.limits", hxPrivate(t, "limits-unreadable", "postgres"), check.Unknown)

	// dbhost in a container: kernel settings are the host's.
	fd = hxFind(t, "container-docker", "container.limits", "host", check.Pass)
	hxHas(t, "reason", fd.Reason, "docker", "only be changed on the host")
	sw, ok := hxFindAny(t, "container-docker", "mem.swappiness")
	if ok && sw.Status == check.Fail && !sw.Fix.HostOnly {
		t.Error("a vm.* fix inside a container is not marked for the host")
	}
	ka := hxFind(t, "container-docker", "net.keepalive", "host", check.Fail)
	if ka.Fix.HostOnly || !strings.Contains(ka.Fix.Manual, "network namespace") {
		t.Errorf("net.* fix in a container: %+v", ka.Fix)
	}
}

func hxFindAny(t *testing.T, name, id string) (check.Finding, bool) {
	t.Helper()
	for s := range hxStatuses(t, name, id) {
		return hxFind(t, name, id, s, hxStatuses(t, name, id)[s]), true
	}
	return check.Finding{}, false
}
