package engine

import "testing"

func TestUniqueNames(t *testing.T) {
	a := &Instance{Engine: Postgres, Port: 5432, PID: 10, DataDir: "/var/lib/postgresql/15/main"}
	b := &Instance{Engine: Postgres, Port: 5432, PID: 20, DataDir: "/srv/pg2"}
	c := &Instance{Engine: Postgres, Port: 5433, PID: 30, DataDir: "/srv/pg3"}
	d := &Instance{Engine: Redis, PID: 40}
	e := &Instance{Engine: Redis, PID: 50}
	f := &Instance{Engine: MySQL, Port: 3306, PID: 60, DataDir: "/same"}
	g := &Instance{Engine: MySQL, Port: 3306, PID: 70, DataDir: "/same"}
	uniqueNames([]*Instance{a, b, c, d, e, f, g})
	want := map[*Instance]string{
		a: "postgres:5432@/var/lib/postgresql/15/main", b: "postgres:5432@/srv/pg2", c: "postgres:5433",
		d: "redis:pid40", e: "redis:pid50", f: "mysql:3306@pid60", g: "mysql:3306@pid70",
	}
	for in, w := range want {
		if got := in.Name(); got != w {
			t.Errorf("Name() = %q, want %q", got, w)
		}
	}
}
