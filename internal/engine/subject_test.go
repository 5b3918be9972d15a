package engine

import "testing"

// The trusted server that holds its port keeps its plain subject name when
// a look-alike claims the same port; when that cannot be told, every
// instance of the name is tagged, an untrusted one by its PID.
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
		}, []string{"mysql:3306@/var/lib/mysql", "mysql:3306@pid20"}},
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
