package facts_test

import (
	"testing"

	"github.com/dbhost/dbhost/internal/fixture"
)

// TestPersistRecorded reads the persisted configuration of a recorded host
// whose files tools/record wrote for the occasion.
func TestPersistRecorded(t *testing.T) {
	f := fixture.Facts(t, "persist-files")
	p := f.Persist
	if v, ok := p.PersistedSysctl("net.ipv4.tcp_fin_timeout"); !ok || v.Value != "30" || v.File != "/etc/sysctl.d/99-dbhost-test.conf" {
		t.Errorf("tcp_fin_timeout (written with slashes): %+v %v", v, ok)
	}
	if v, ok := p.PersistedSysctl("net.ipv4.conf.lo.rp_filter"); !ok || v.Value != "2" {
		t.Errorf("glob: %+v %v", v, ok)
	}
	if _, ok := p.PersistedSysctl("net.ipv4.conf.all.rp_filter"); ok {
		t.Error("the excluded key matched the glob")
	}
	var sched, ra bool
	for _, u := range p.Udev {
		if u.File == "/etc/udev/rules.d/60-dbhost-test.rules" && u.Match == "vd[a-z]" {
			sched = sched || (u.Attr == "queue/scheduler" && u.Value == "none")
			ra = ra || (u.Attr == "bdi/read_ahead_kb" && u.Value == "64")
		}
	}
	if !sched || !ra {
		t.Errorf("udev rules %+v", p.Udev)
	}
	if s, h := p.LimitFor("mysql", nil, "nofile"); s == nil || h == nil || s.Value != "64000" {
		t.Errorf("limits.d mysql nofile: %+v %+v", s, h)
	}
	if s, _ := p.LimitFor("postgres", []string{"postgres"}, "nproc"); s == nil || s.Domain != "@postgres" {
		t.Errorf("limits.d @postgres nproc: %+v", s)
	}
}
