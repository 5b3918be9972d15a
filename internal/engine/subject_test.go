package engine

import "testing"

// The trusted server keeps its plain subject name when a look-alike claims
// the same port, whether or not it is seen holding it; when several
// trusted servers share a name, every one is tagged, an untrusted one
// always by its PID.
func TestUniqueNamesKeepsTheServersName(t *testing.T) {
	tcp := func(port int) []Listener { return []Listener{{Proto: "tcp", Addr: "127.0.0.1", Port: port}} }
	pgSock := func(dir string, port int) []Listener {
		return []Listener{{Proto: "unix", Addr: dir + "/.s.PGSQL." + itoa(port)}}
	}
	ok := Trust{Trusted: true, Basis: TrustRule}
	for _, tc := range []struct {
		name  string
		insts []*Instance
		want  []string
	}{
		{"a user's look-alike", []*Instance{
			{Engine: Postgres, Port: 5432, PID: 10, UID: 116, User: "postgres", DataDir: "/var/lib/postgresql/15/main", Listen: tcp(5432), Trust: ok},
			{Engine: Postgres, Port: 5432, PID: 20, UID: 65534, User: "nobody", DataDir: "/home/u/data", Listen: pgSock("/tmp", 5432)},
		}, []string{"postgres:5432", "postgres:5432@pid20"}},
		{"sockets only", []*Instance{
			{Engine: Postgres, Port: 5433, PID: 10, UID: 116, User: "postgres", DataDir: "/srv/a", Listen: pgSock("/run/postgresql", 5433), Trust: ok},
			{Engine: Postgres, Port: 5433, PID: 20, UID: 65534, User: "nobody", DataDir: "/srv/a"},
		}, []string{"postgres:5433", "postgres:5433@pid20"}},
		{"the holder is not trusted", []*Instance{
			{Engine: MySQL, Port: 3306, PID: 10, UID: 999, User: "mysql", DataDir: "/var/lib/mysql", Trust: ok},
			{Engine: MySQL, Port: 3306, PID: 20, UID: 65534, User: "nobody", DataDir: "/home/u/my", Listen: tcp(3306)},
		}, []string{"mysql:3306", "mysql:3306@pid20"}},
		{"two trusted holders (network namespaces)", []*Instance{
			{Engine: Redis, Port: 6379, PID: 10, UID: 0, DataDir: "/var/lib/redis", Listen: tcp(6379), Trust: ok},
			{Engine: Redis, Port: 6379, PID: 20, UID: 0, DataDir: "/var/lib/redis", Listen: tcp(6379), Trust: ok},
		}, []string{"redis:6379@pid10", "redis:6379@pid20"}},
	} {
		uniqueNames(tc.insts)
		for k, in := range tc.insts {
			if got := in.Name(); got != tc.want[k] {
				t.Errorf("%s: instance %d is %q, want %q", tc.name, k, got, tc.want[k])
			}
		}
	}
}

// TestNamesAlikeWithoutRoot: the same host seen by root and by a user
// without privileges (no listening sockets: /proc/PID/fd is closed; the
// second cluster's postgresql.conf unreadable, so its port unknown, and a
// user's look-alike on 5432) gives the servers both runs can name the
// same names, and the one only root can name no stable name.
func TestNamesAlikeWithoutRoot(t *testing.T) {
	ok := Trust{Trusted: true, Basis: TrustRule}
	tcp := func(port int) []Listener { return []Listener{{Proto: "tcp", Addr: "127.0.0.1", Port: port}} }
	view := func(root bool) []*Instance {
		main := &Instance{Engine: Postgres, Port: 5432, PID: 10, UID: 116, DataDir: "/var/lib/postgresql/15/main", Trust: ok}
		second := &Instance{Engine: Postgres, Port: 5433, PID: 20, UID: 116, DataDir: "/var/lib/postgresql/16/main", Trust: ok}
		fake := &Instance{Engine: Postgres, Port: 5432, PID: 30, UID: 65534, DataDir: "/home/u/pg"}
		if root {
			main.Listen, second.Listen = tcp(5432), tcp(5433)
		} else {
			second.Port = 0
		}
		insts := []*Instance{main, second, fake}
		uniqueNames(insts)
		return insts
	}
	asRoot, asUser := view(true), view(false)
	for k, want := range []string{"postgres:5432", "postgres:5433", "postgres:5432@pid30"} {
		if got := asRoot[k].Name(); got != want {
			t.Errorf("as root, instance %d is %q, want %q", k, got, want)
		}
	}
	for _, k := range []int{0, 2} {
		if a, b := asRoot[k].Name(), asUser[k].Name(); a != b {
			t.Errorf("instance %d is %q as root, %q without", k, a, b)
		}
	}
	if !asRoot[1].StableName() || asUser[1].StableName() {
		t.Errorf("the second cluster's name %q (root) / %q (user): stable %v / %v, want true / false",
			asRoot[1].Name(), asUser[1].Name(), asRoot[1].StableName(), asUser[1].StableName())
	}
	for _, tc := range []struct {
		in   Instance
		want bool
	}{
		{Instance{Engine: MySQL, DataDir: "/var/lib/mysql"}, true}, // skip-networking: named by its directory
		{Instance{Engine: Redis, PID: 5}, false},
		{Instance{Engine: MongoDB, DataDir: "/var/lib/mongodb"}, false},
	} {
		if got := tc.in.StableName(); got != tc.want {
			t.Errorf("%s: StableName %v, want %v", tc.in.Name(), got, tc.want)
		}
	}
}
