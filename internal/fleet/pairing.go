package fleet

import (
	"fmt"
	"sort"
	"strconv"
	"strings"
)

// DatabasePair is a database of A and one of B compared as one: their
// settings, limits and findings are compared under Name.
type DatabasePair struct {
	// Name is A's name, or "A=B" when the names differ.
	Name string `json:"name"`
	A    string `json:"a"`
	B    string `json:"b"`
	// By is how they were paired: "data_directory" (same engine and data
	// directory), "port" (same engine and port) or "engine" (the only
	// unpaired database of that engine on each side).
	By string `json:"paired_by"`
	// Why says it for people: "same data directory /var/lib/mysql".
	Why string `json:"why"`
}

// DevicePair is a stack of devices of A and one of B compared as one.
type DevicePair struct {
	// Name is A's devices ("vda", "dm-0+vdb"), or "A=B" when they differ.
	Name string `json:"name"`
	A    string `json:"a"`
	B    string `json:"b"`
	// By is "role" (they hold the same database paths, Roles) or "name".
	By string `json:"paired_by"`
	// Roles are the database paths either holds, under the pairs' names.
	Roles []string `json:"roles"`
}

// databases returns a snapshot's databases; a Snapshot made without them
// (by hand, in a test) has them read from its instance names.
func databases(s Snapshot) []Database {
	if len(s.Databases) == len(s.Instances) {
		return s.Databases
	}
	out := make([]Database, 0, len(s.Instances))
	for _, n := range s.Instances {
		e, rest, _ := strings.Cut(n, ":")
		port, _ := strconv.Atoi(rest)
		out = append(out, Database{Name: n, Engine: e, Port: port})
	}
	return out
}

// pairDatabases pairs the databases of a and b like for like: by engine
// and data directory, then by engine and port, then — when each side has
// exactly one unpaired database of an engine left — by engine. Instance
// names say little across hosts or restarts: a private cluster on a random
// port is the same cluster, and postgres:5432 is another server after an
// upgrade moved its data directory only when its port moved too.
func pairDatabases(a, b []Database) (pairs []DatabasePair, onlyA, onlyB []string) {
	usedA, usedB := make([]bool, len(a)), make([]bool, len(b))
	add := func(i, j int, by, why string) {
		usedA[i], usedB[j] = true, true
		name := a[i].Name
		if a[i].Name != b[j].Name {
			name = a[i].Name + "=" + b[j].Name
		}
		pairs = append(pairs, DatabasePair{Name: name, A: a[i].Name, B: b[j].Name, By: by, Why: why})
	}
	match := func(by string, key func(Database) string, why func(Database) string) {
		idx := map[string][]int{}
		for j, d := range b {
			if k := key(d); k != "" && !usedB[j] {
				idx[k] = append(idx[k], j)
			}
		}
		for i, d := range a {
			k := key(d)
			if k == "" || usedA[i] {
				continue
			}
			for n, j := range idx[k] {
				if !usedB[j] {
					add(i, j, by, why(d))
					idx[k] = idx[k][n+1:]
					break
				}
			}
		}
	}
	match("data_directory", func(d Database) string {
		if d.DataDir == "" {
			return ""
		}
		return d.Engine + "\x00" + cleanPath(d.DataDir)
	}, func(d Database) string { return "same data directory " + cleanPath(d.DataDir) })
	match("port", func(d Database) string {
		if d.Port <= 0 {
			return ""
		}
		return d.Engine + "\x00" + strconv.Itoa(d.Port)
	}, func(d Database) string { return "same port " + strconv.Itoa(d.Port) })
	// Then the same name (an instance without port or data directory).
	match("name", func(d Database) string { return d.Name }, func(Database) string { return "same name" })
	left := func(list []Database, used []bool) map[string][]int {
		m := map[string][]int{}
		for i, d := range list {
			if !used[i] {
				m[d.Engine] = append(m[d.Engine], i)
			}
		}
		return m
	}
	la, lb := left(a, usedA), left(b, usedB)
	for e, is := range la {
		if js := lb[e]; len(is) == 1 && len(js) == 1 {
			add(is[0], js[0], "engine", fmt.Sprintf("the only %s on each side", e))
		}
	}
	for i, d := range a {
		if !usedA[i] {
			onlyA = append(onlyA, d.Name)
		}
	}
	for j, d := range b {
		if !usedB[j] {
			onlyB = append(onlyB, d.Name)
		}
	}
	sort.Slice(pairs, func(i, j int) bool { return pairs[i].Name < pairs[j].Name })
	return pairs, onlyA, onlyB
}

// pairStacks pairs the device stacks of a and b: first those holding the
// same database paths (roles, under the database pairs' names; the pair
// sharing most roles first), then by name. roleA and roleB rename a role's
// database to its pair's name ("" when the database is on one side only).
func pairStacks(a, b []Stack, renA, renB func(string) string) (pairs []DevicePair, ia, ib []int, onlyA, onlyB []int) {
	roles := func(s Stack, ren func(string) string) map[string]bool {
		m := map[string]bool{}
		for _, r := range s.Roles {
			inst, role := splitRole(r)
			if n := ren(inst); n != "" {
				m[n+"/"+role] = true
			}
		}
		return m
	}
	ra, rb := make([]map[string]bool, len(a)), make([]map[string]bool, len(b))
	for i := range a {
		ra[i] = roles(a[i], renA)
	}
	for j := range b {
		rb[j] = roles(b[j], renB)
	}
	type cand struct{ i, j, n int }
	var cands []cand
	for i := range a {
		for j := range b {
			n := 0
			for r := range ra[i] {
				if rb[j][r] {
					n++
				}
			}
			if n > 0 {
				cands = append(cands, cand{i, j, n})
			}
		}
	}
	sort.SliceStable(cands, func(x, y int) bool {
		if cands[x].n != cands[y].n {
			return cands[x].n > cands[y].n
		}
		// Equal overlap: the same devices first.
		return a[cands[x].i].Name() == b[cands[x].j].Name() && a[cands[y].i].Name() != b[cands[y].j].Name()
	})
	usedA, usedB := make([]bool, len(a)), make([]bool, len(b))
	add := func(i, j int, by string) {
		usedA[i], usedB[j] = true, true
		p := DevicePair{Name: a[i].Name(), A: a[i].Name(), B: b[j].Name(), By: by, Roles: []string{}}
		if p.A != p.B {
			p.Name = p.A + "=" + p.B
		}
		all := map[string]bool{}
		for r := range ra[i] {
			all[r] = true
		}
		for r := range rb[j] {
			all[r] = true
		}
		for r := range all {
			p.Roles = append(p.Roles, r)
		}
		sort.Slice(p.Roles, func(x, y int) bool { return lessRole(p.Roles[x], p.Roles[y]) })
		pairs = append(pairs, p)
		ia, ib = append(ia, i), append(ib, j)
	}
	for _, c := range cands {
		if !usedA[c.i] && !usedB[c.j] {
			add(c.i, c.j, "role")
		}
	}
	byName := map[string]int{}
	for j := range b {
		if !usedB[j] {
			byName[b[j].Name()] = j
		}
	}
	for i := range a {
		if j, ok := byName[a[i].Name()]; ok && !usedA[i] && !usedB[j] {
			add(i, j, "name")
		}
	}
	for i := range a {
		if !usedA[i] {
			onlyA = append(onlyA, i)
		}
	}
	for j := range b {
		if !usedB[j] {
			onlyB = append(onlyB, j)
		}
	}
	return pairs, ia, ib, onlyA, onlyB
}
