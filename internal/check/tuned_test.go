package check_test

import (
	"strings"
	"testing"

	"github.com/dbhost/dbhost/internal/check"
)

func TestTunedOverrides(t *testing.T) {
	if st := hxStatuses(t, "limits-nofile-1024", "tuned.overrides"); len(st) != 0 {
		t.Errorf("no TuneD, yet judged: %v", st)
	}
	fd := hxFind(t, "tuned-profile", "tuned.overrides", "host", check.Fail)
	hxHas(t, "reason", fd.Reason, "vm.swappiness = 30", "transparent_hugepages = always", "readahead = >4096", "tuned is not running now")
	var child string
	for _, f := range fd.Fix.Files {
		if f.Path == "/etc/tuned/dbhost/tuned.conf" {
			child = f.Content
		}
	}
	hxHas(t, "child profile", child, "include=dbhost-test-guest", "transparent_hugepages=never", "readahead=128", "vm.swappiness=1")

	// reapply_sysctl=0: sysctl.d's vm.swappiness = 1 loses to TuneD's 30.
	fd = hxFind(t, "tuned-noreapply", "tuned.overrides", "host", check.Fail)
	hxHas(t, "reason", fd.Reason, "reapply_sysctl=0 lets TuneD win")

	// The child profile dbhost rendered, made active: nothing left.
	fd = hxFind(t, "tuned-fixed", "tuned.overrides", "host", check.Pass)
	if e, ok := hxEvidence(fd, "profile chain"); !ok || !strings.HasSuffix(e.Value, "dbhost-test-guest → dbhost") {
		t.Errorf("chain %+v", fd.Evidence)
	}
	hxFind(t, "tuned-missing", "tuned.overrides", "host", check.Unknown)
}
