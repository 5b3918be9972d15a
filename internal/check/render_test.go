package check_test

import (
	"encoding/json"
	"reflect"
	"testing"

	"github.com/dbhost/dbhost/internal/check"
	"github.com/dbhost/dbhost/internal/fix"
	"github.com/dbhost/dbhost/internal/fixture"
)

// TestRenderFixesAfterJudging: Run leaves fixes as the checks gave them (no
// files, no derived commands); RenderFixes adds exactly the commands and
// files of each fix alone, on its own copies, so the judged findings stay
// as they were.
func TestRenderFixesAfterJudging(t *testing.T) {
	rendered := 0
	for _, name := range []string{"baseline", "mem-hugepages-pg-on", "storage-zfs-seed", "mysql-hardening-fail"} {
		f := fixture.Facts(t, name)
		judged := check.Run(f, check.Selector{})
		before, err := json.Marshal(judged)
		if err != nil {
			t.Fatal(err)
		}
		shown := append([]check.Finding(nil), judged...)
		check.RenderFixes(shown, fix.ContextFrom(f))
		after, _ := json.Marshal(judged)
		if string(before) != string(after) {
			t.Errorf("%s: RenderFixes changed the judged findings", name)
		}
		for i, fd := range judged {
			if fd.Fix == nil {
				if shown[i].Fix != nil {
					t.Errorf("%s: %s %s: a fix appeared in rendering", name, fd.ID, fd.Subject)
				}
				continue
			}
			if fd.Fix.Files != nil {
				t.Errorf("%s: %s %s: Run rendered files", name, fd.ID, fd.Subject)
			}
			want := fix.RuntimeCommands(fd.Fix, fix.ContextFrom(f))
			if got := shown[i].Fix.Runtime; !reflect.DeepEqual(got, want) {
				t.Errorf("%s: %s %s: runtime %q, want %q", name, fd.ID, fd.Subject, got, want)
			}
			files := fix.Render(fix.ContextFrom(f), []fix.Item{{ID: fd.ID, Subject: fd.Subject, Fix: fd.Fix}})
			if got := shown[i].Fix.Files; !reflect.DeepEqual(got, files) {
				t.Errorf("%s: %s %s: files %+v, want %+v", name, fd.ID, fd.Subject, got, files)
			}
			if len(files) > 0 {
				rendered++
			}
		}
	}
	if rendered == 0 {
		t.Error("no finding rendered a file: the hosts show nothing")
	}
}
