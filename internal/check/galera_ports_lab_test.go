package check_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/dbhost/dbhost/internal/check"
	"github.com/dbhost/dbhost/internal/engine"
	"github.com/dbhost/dbhost/internal/facts"
	"github.com/dbhost/dbhost/internal/galeralab"
	"github.com/dbhost/dbhost/internal/host"
)

// The lab's nodes run in network namespaces of their own: their sockets
// are read there, so galera.ports judges each node on what it really
// listens on (group communication bound to the node's address), never
// "could not be read".
func TestGaleraPortsLab(t *testing.T) {
	if testing.Short() {
		t.Skip("integration: starts a Galera lab")
	}
	t.Parallel() // beside TestGaleraChecksLab: see startLab
	lab := startLab(t, galeralab.Config{Name: "ports", Nodes: 3})
	h, err := host.Open("/")
	if err != nil {
		t.Fatal(err)
	}
	f := facts.Gather(context.Background(), h, check.GatherOptions(engine.Options{}))
	addr := map[string]string{}
	for _, n := range lab.Nodes() {
		addr[fmt.Sprintf("mysql:%d", n.Port)] = n.Addr
	}
	seen := 0
	for _, fd := range check.Run(f, check.Selector{Only: []string{"galera.ports"}}) {
		a, ours := addr[fd.Subject]
		if !ours {
			continue // another server on this host
		}
		seen++
		if fd.Status != check.Pass || !strings.Contains(fd.Reason, a+":4567") {
			t.Errorf("%s: %s: %s; want a pass on %s:4567", fd.Subject, fd.Status, fd.Reason, a)
		}
	}
	if seen != len(addr) {
		t.Errorf("galera.ports judged %d of the lab's %d nodes", seen, len(addr))
	}
}
