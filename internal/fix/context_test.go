package fix_test

import (
	"context"
	"strings"
	"testing"

	"github.com/dbhost/dbhost/internal/facts"
	"github.com/dbhost/dbhost/internal/fix"
	"github.com/dbhost/dbhost/internal/host/hosttest"
)

// TestContextFstab: the host's /etc/fstab reaches rendering exactly, blanks
// included, and its absence is said.
func TestContextFstab(t *testing.T) {
	const fstab = "LABEL=data\t/srv/data\txfs\tdefaults\t0\t2\n"
	h := hosttest.Tree(t, map[string]string{"etc/fstab": fstab})
	ctx := fix.ContextFrom(facts.GatherHost(context.Background(), h, facts.Options{}, facts.DomainStorage))
	if ctx.Fstab.Value != fstab || ctx.Fstab.Source != "/etc/fstab" {
		t.Fatalf("fstab %+v", ctx.Fstab)
	}
	files := fix.Render(ctx, []fix.Item{{ID: "storage.noatime", Fix: &fix.Fix{Mount: []fix.MountChange{{MountPoint: "/srv/data", Add: []string{"noatime"}}}}}})
	if len(files) != 1 || !strings.Contains(files[0].Content, "\nLABEL=data\t/srv/data\txfs\tdefaults,noatime\t0\t2\n") {
		t.Errorf("files %+v", files)
	}

	ctx = fix.ContextFrom(facts.GatherHost(context.Background(), hosttest.Tree(t, map[string]string{}), facts.Options{}, facts.DomainStorage))
	if ctx.Fstab.OK() || ctx.Fstab.Err == "" {
		t.Errorf("missing fstab read as %+v", ctx.Fstab)
	}
}
