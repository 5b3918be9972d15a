package engine

import (
	"strings"
	"testing"
)

func TestParse(t *testing.T) {
	for in, want := range map[string]Engine{
		"postgres": Postgres, "PostgreSQL": Postgres, "pg": Postgres,
		"mysql": MySQL, "MariaDB": MySQL, "percona": MySQL,
		"mongodb": MongoDB, "mongo": MongoDB, "mongod": MongoDB,
		"redis": Redis, " redis ": Redis,
	} {
		if got, err := Parse(in); err != nil || got != want {
			t.Errorf("Parse(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	for _, in := range []string{"", "oracle", "postgres,mysql", "pg " + "x"} {
		if got, err := Parse(in); err == nil || !strings.Contains(err.Error(), "unknown engine") {
			t.Errorf("Parse(%q) = %q, %v; want an unknown-engine error", in, got, err)
		}
	}
	// Every engine is reachable by its own name.
	for _, e := range Engines {
		if got, err := Parse(string(e)); err != nil || got != e {
			t.Errorf("Parse(%q) = %q, %v", e, got, err)
		}
	}
}
