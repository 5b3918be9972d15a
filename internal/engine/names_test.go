package engine

import "testing"

func TestUniqueNames(t *testing.T) {
	trusted := Trust{Trusted: true, Basis: TrustRule}
	a := &Instance{Engine: Postgres, Port: 5432, PID: 10, DataDir: "/var/lib/postgresql/15/main", Trust: trusted}
	b := &Instance{Engine: Postgres, Port: 5432, PID: 20, DataDir: "/srv/pg2", Trust: trusted}
	c := &Instance{Engine: Postgres, Port: 5433, PID: 30, DataDir: "/srv/pg3"}
	d := &Instance{Engine: Redis, PID: 40}
	e := &Instance{Engine: Redis, PID: 50}
	f := &Instance{Engine: MySQL, Port: 3306, PID: 60, DataDir: "/same", Trust: trusted}
	g := &Instance{Engine: MySQL, Port: 3306, PID: 70, DataDir: "/same", Trust: trusted}
	// An untrusted instance's data directory never names it; the only
	// trusted one of a name keeps it plain.
	u := &Instance{Engine: MySQL, Port: 3307, PID: 80, DataDir: "/home/u/x\nkernel.core_pattern = |/tmp/pwn"}
	v := &Instance{Engine: MySQL, Port: 3307, PID: 90, DataDir: "/srv/a\nb", Trust: trusted}
	w := &Instance{Engine: Postgres, PID: 100, DataDir: "/srv/c\n[Service]"}
	uniqueNames([]*Instance{a, b, c, d, e, f, g, u, v, w})
	want := map[*Instance]string{
		a: "postgres:5432@/var/lib/postgresql/15/main", b: "postgres:5432@/srv/pg2", c: "postgres:5433",
		d: "redis:pid40", e: "redis:pid50", f: "mysql:3306@pid60", g: "mysql:3306@pid70",
		u: "mysql:3307@pid80", v: "mysql:3307", w: `postgres:/srv/c\n[Service]`,
	}
	for in, w := range want {
		if got := in.Name(); got != w {
			t.Errorf("Name() = %q, want %q", got, w)
		}
	}
}

func TestValidVersion(t *testing.T) {
	for s, want := range map[string]bool{
		"15": true, "15.4": true, "9.6": true, "10.11.19-MariaDB-0+deb12u1": true, "7.0.15": true, "v8.0.4": true,
		"8.0.36-28.1": true, "8.0.4-rc0": true, "": false, "root:$y$j9T$...:19000:0:99999:7:::": false,
		"15\nkernel.core_pattern=|/x": false, "15 ": false, "abc": false, "15;DROP": false,
	} {
		if got := ValidVersion(s); got != want {
			t.Errorf("ValidVersion(%q) = %v, want %v", s, got, want)
		}
	}
}
