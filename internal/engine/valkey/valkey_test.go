package valkey

import (
	"strings"
	"testing"

	"github.com/dbhost/dbhost/internal/engine"
	_ "github.com/dbhost/dbhost/internal/engine/redis"
	"github.com/dbhost/dbhost/internal/host"
	"github.com/dbhost/dbhost/internal/host/hosttest"
)

func TestParse(t *testing.T) {
	for _, name := range []string{"valkey", "Valkey", " valkey "} {
		if e, err := engine.Parse(name); err != nil || e != engine.Redis {
			t.Errorf("Parse(%q) = %q, %v; want redis", name, e, err)
		}
	}
}

// TestProfile: a valkey-server process is matched by the Valkey profile
// only, a background-save child is not, and the instance's profile names
// Valkey's own account, units and files.
func TestProfile(t *testing.T) {
	var vk engine.Profile
	for _, p := range engine.Profiles() {
		if p.Name() == "valkey" {
			vk = p
		}
	}
	if vk == nil {
		t.Fatal("no valkey profile registered")
	}
	h, err := host.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	tab := engine.TableFrom(h, []engine.Process{
		{PID: 10, PPID: 1, Comm: "valkey-server"},
		{PID: 11, PPID: 10, Comm: "valkey-server"},
		{PID: 20, PPID: 1, Comm: "redis-server"},
	})
	for _, p := range engine.Profiles() {
		for _, pr := range tab.Procs {
			got := p.Match(pr, tab)
			want := p.Name() == "valkey" && pr.PID == 10 || p.Name() == "redis" && pr.PID == 20
			if got != want {
				t.Errorf("profile %s matched pid %d (%s): %v, want %v", p.Name(), pr.PID, pr.Comm, got, want)
			}
		}
	}
	in := &engine.Instance{Engine: engine.Redis, Flavor: "Valkey", PID: 10, User: "redis", UID: 999}
	in.SetProfile(vk)
	if got := in.Profile().Units(in); strings.Join(got, " ") != "valkey-server.service valkey.service" {
		t.Errorf("units %q", got)
	}
	if r := in.MayReceiveCredentials(); !strings.Contains(r, "not root or valkey") {
		t.Errorf("a Valkey server run by user redis: %q, want a refusal naming valkey", r)
	}
	if a := in.Profile().BindAdvice(in); !strings.Contains(a, "valkey.conf") {
		t.Errorf("bind advice %q does not name valkey.conf", a)
	}
	if n := in.Profile().Descriptors(in); n.N != 10032 {
		t.Errorf("descriptors %d, want maxclients 10000 + 32", n.N)
	}
}

// TestInspectFromProc: the Redis package's discovery describes a Valkey
// process found in a recorded /proc tree with Valkey's flavour.
func TestInspectFromProc(t *testing.T) {
	const stat = "4242 (valkey-server) S 1 4242 4242 0 -1 4194560 0 0 0 0 0 0 0 0 20 0 1 0 100 1000 10 18446744073709551615 1 1 0 0 0 0 0 0 0 0 0 0 17 0 0 0 0 0 0 0 0 0 0 0 0 0 0\n"
	h := hosttest.Tree(t, map[string]string{
		"proc/4242/cmdline": "valkey-server\x00--port\x006380\x00--dir\x00/var/lib/valkey\x00",
		"proc/4242/comm":    "valkey-server\n",
		"proc/4242/status":  "Name:\tvalkey-server\nState:\tS (sleeping)\nPPid:\t1\nUid:\t0\t0\t0\t0\nGid:\t0\t0\t0\t0\n",
		"proc/4242/stat":    stat,
		"etc/passwd":        "root:x:0:0:root:/root:/bin/sh\n",
	})
	tab, err := engine.ReadTable(h)
	if err != nil {
		t.Fatal(err)
	}
	insts, notes := engine.Discover(t.Context(), h, tab, engine.Options{NoConnect: true})
	if len(insts) != 1 {
		t.Fatalf("instances %+v, notes %q: want the one valkey-server", insts, notes)
	}
	in := insts[0]
	if in.Flavor != "Valkey" || in.Engine != engine.Redis || in.Port != 6380 || in.Profile().Name() != "valkey" {
		t.Errorf("got flavor %q engine %q port %d profile %s", in.Flavor, in.Engine, in.Port, in.Profile().Name())
	}
}
