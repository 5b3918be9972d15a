package fleet

import (
	"path/filepath"
	"sort"
	"strconv"
	"strings"

	"github.com/dbhost/dbhost/internal/check"
	"github.com/dbhost/dbhost/internal/host"
)

// DiffSchema names the JSON shape of a Result.
const DiffSchema = "dbhost.diff/2"

// Result is what differs between two observations, A and B.
type Result struct {
	Schema string `json:"schema"`
	A      Side   `json:"a"`
	B      Side   `json:"b"`
	// DatabasePairs are the databases of A and B compared as one, and
	// how each pair was made.
	DatabasePairs []DatabasePair `json:"database_pairs"`
	// Databases are those left unpaired: on one side only. Their settings,
	// limits, storage and the findings about them are not listed again.
	Databases []Presence `json:"databases"`
	// DevicePairs are the device stacks compared as one: by the database
	// paths they hold, then by name.
	DevicePairs []DevicePair `json:"device_pairs"`
	// Devices are the device stacks left unpaired ("vda", "dm-0+vdb");
	// their settings are not listed again.
	Devices  []Presence     `json:"devices"`
	Settings []SettingDiff  `json:"settings"`
	Findings []FindingDiff  `json:"findings"`
	Summary  map[string]int `json:"summary"`
}

// Side describes one of the two observations.
type Side struct {
	File        string `json:"file"`
	Label       string `json:"label"`
	Hostname    string `json:"hostname"`
	CollectedAt string `json:"collected_at,omitempty"`
	AsRoot      bool   `json:"as_root"`
}

// Presence is a database or device seen on one side only: In is "a" or "b".
type Presence struct {
	Name string `json:"name"`
	In   string `json:"in"`
}

// SettingDiff is a setting whose values differ. A or B is nil when the side
// did not observe the setting (unreadable there, or absent).
//
// Key names a paired database or device by its pair's name
// (db/postgres:36605=postgres:46757/work_mem, device/vda/scheduler). A and
// B are the compared values; RawA and RawB the values read when those
// differ from them (a kernel default derived from RAM, a path with a
// trailing slash).
type SettingDiff struct {
	Key  string  `json:"key"`
	Kind string  `json:"kind"`
	A    *string `json:"a"`
	B    *string `json:"b"`
	RawA string  `json:"a_raw,omitempty"`
	RawB string  `json:"b_raw,omitempty"`
}

// FindingDiff is a check whose verdict on a subject differs. A status is ""
// when the check gave no verdict on that subject on that side (it did not
// apply there).
type FindingDiff struct {
	ID       string         `json:"id"`
	Subject  string         `json:"subject"`
	Severity check.Severity `json:"severity"`
	A        check.Status   `json:"a"`
	B        check.Status   `json:"b"`
}

// Empty reports whether the two observations are the same in everything
// compared.
func (r *Result) Empty() bool {
	return len(r.Databases) == 0 && len(r.Devices) == 0 && len(r.Settings) == 0 && len(r.Findings) == 0
}

func side(s Snapshot) Side {
	out := Side{File: s.File, Label: s.Label(), Hostname: s.Hostname, AsRoot: s.AsRoot}
	if !s.CollectedAt.IsZero() {
		out.CollectedAt = s.CollectedAt.UTC().Format("2006-01-02T15:04:05Z")
	}
	return out
}

// Diff compares two observations: their settings, the databases and
// devices on each, and the verdicts of the checks. It is a pure function;
// Diff(s, s) is empty.
//
// Databases are paired like for like (pairDatabases) and devices by the
// database paths they hold, then by name (pairStacks): a pair's settings
// and findings are compared under the pair's name, and only what is left
// unpaired is on one side only.
//
// Secrets are redacted before they reach a Snapshot, so none is shown. A
// value redacted on one side only (an older snapshot redacted a setting
// that holds no secret) is not compared: its value is not known.
func Diff(a, b Snapshot) Result {
	r := Result{Schema: DiffSchema, A: side(a), B: side(b),
		DatabasePairs: []DatabasePair{}, Databases: []Presence{}, DevicePairs: []DevicePair{}, Devices: []Presence{},
		Settings: []SettingDiff{}, Findings: []FindingDiff{}}

	dbPairs, onlyA, onlyB := pairDatabases(databases(a), databases(b))
	r.DatabasePairs = append(r.DatabasePairs, dbPairs...)
	renA, renB := map[string]string{}, map[string]string{}
	for _, p := range dbPairs {
		renA[p.A], renB[p.B] = p.Name, p.Name
	}
	for _, n := range onlyA {
		r.Databases = append(r.Databases, Presence{Name: n, In: "a"})
	}
	for _, n := range onlyB {
		r.Databases = append(r.Databases, Presence{Name: n, In: "b"})
	}

	devPairs, ia, ib, devOnlyA, devOnlyB := pairStacks(a.Stacks, b.Stacks,
		func(n string) string { return renA[n] }, func(n string) string { return renB[n] })
	r.DevicePairs = append(r.DevicePairs, devPairs...)
	// Device findings ("device:vda") are compared under the pair's name: a
	// device is renamed to the pair of the stack it is mounted from, else
	// to that of a stack it is a disk of.
	devA, devB := map[string]string{}, map[string]string{}
	for _, below := range []bool{false, true} {
		for n, p := range devPairs {
			for side, st := range []Stack{a.Stacks[ia[n]], b.Stacks[ib[n]]} {
				m := devA
				if side == 1 {
					m = devB
				}
				for x, d := range st.Devices {
					if _, ok := m[d]; !ok && (x > 0) == below {
						m[d] = p.Name
					}
				}
			}
		}
	}
	// A stack that holds only paths of databases on one side only is
	// said by those databases.
	ownOnly := func(st Stack, ren map[string]string) bool {
		for _, role := range st.Roles {
			if inst, _ := splitRole(role); ren[inst] != "" {
				return false
			}
		}
		return len(st.Roles) > 0
	}
	for _, i := range devOnlyA {
		if !ownOnly(a.Stacks[i], renA) {
			r.Devices = append(r.Devices, Presence{Name: a.Stacks[i].Name(), In: "a"})
		}
	}
	for _, j := range devOnlyB {
		if !ownOnly(b.Stacks[j], renB) {
			r.Devices = append(r.Devices, Presence{Name: b.Stacks[j].Name(), In: "b"})
		}
	}
	sortPresenceList(r.Databases)
	sortPresenceList(r.Devices)

	// A pair made by engine alone differs in its identity by construction
	// (a private cluster in a temporary directory, on a random port): the
	// pair says so, and values that only restate it compare equal. A pair
	// made by data directory or port shows the other moving: a change.
	idA, idB := identities(dbPairs, databases(a), databases(b))

	// Every key of each side under the name it is compared by: host-wide
	// keys as they are, a paired database's under the pair's name, a
	// paired device stack's as device/PAIR/KEY; keys of what is on one side
	// only are left out.
	type val struct{ v, raw string }
	rekey := func(s Snapshot, ren map[string]string, idx []int, ids map[string]identity) map[string]val {
		settings := s.settingMap()
		m := make(map[string]val, len(settings))
		stackOf := map[string]string{} // stack key prefix → pair name
		for n, i := range idx {
			stackOf[s.Stacks[i].Key] = devPairs[n].Name
		}
		for k, v := range settings {
			nk := k
			switch Kind(k) {
			case KindDB, KindLimits:
				subj := instanceOf(k, s.Instances)
				pn, ok := ren[subj]
				if !ok {
					continue
				}
				nk = Kind(k) + "/" + pn + strings.TrimPrefix(k, Kind(k)+"/"+subj)
				if id, ok := ids[subj]; ok && Kind(k) == KindDB {
					if c := id.generic(k, v); c != v {
						raw := s.Raw[k]
						if raw == "" {
							raw = v
						}
						m[nk] = val{c, raw}
						continue
					}
				}
			case KindDevice, KindStorage:
				i := strings.LastIndexByte(k, '/')
				pn, ok := stackOf[k[:i]]
				if !ok {
					continue
				}
				nk = KindDevice + "/" + pn + k[i:]
			}
			m[nk] = val{v, s.Raw[k]}
		}
		return m
	}
	sa, sb := rekey(a, renA, ia, idA), rekey(b, renB, ib, idB)
	// A database path on other devices than its pair's (the WAL moved to
	// another disk) is a difference: storage/PAIR/ROLE/devices.
	pairOfA, pairOfB := map[int]string{}, map[int]string{}
	for n, p := range devPairs {
		pairOfA[ia[n]], pairOfB[ib[n]] = p.Name, p.Name
	}
	roleStacks := func(s Snapshot, ren map[string]string, pairOf map[int]string, m map[string]val) {
		for i, st := range s.Stacks {
			for _, role := range st.Roles {
				inst, r := splitRole(role)
				pn, ok := ren[inst]
				if !ok {
					continue
				}
				pair := pairOf[i]
				if pair == "" {
					pair = "\x00" + st.Name() // unpaired: differs from anything
				}
				m[KindStorage+"/"+pn+"/"+r+"/devices"] = val{pair, st.Name()}
			}
		}
	}
	roleStacks(a, renA, pairOfA, sa)
	roleStacks(b, renB, pairOfB, sb)
	for k, va := range sa {
		if Kind(k) != KindStorage {
			continue
		}
		if vb, ok := sb[k]; ok && va.v == vb.v {
			delete(sa, k)
			delete(sb, k)
			continue
		}
		// Shown and compared by the devices' names.
		sa[k] = val{va.raw, ""}
	}
	for k, vb := range sb {
		if Kind(k) == KindStorage {
			sb[k] = val{vb.raw, ""}
		}
	}
	keys := make([]string, 0, len(sa)+len(sb))
	for k := range sa {
		keys = append(keys, k)
	}
	for k := range sb {
		if _, ok := sa[k]; !ok {
			keys = append(keys, k)
		}
	}
	sortKeys(keys)
	for _, k := range keys {
		va, oka := sa[k]
		vb, okb := sb[k]
		if oka && okb && va.v == vb.v {
			continue
		}
		if oka && okb && redacted(va.v) != redacted(vb.v) {
			continue // a redacted value cannot be compared with a clear one
		}
		d := SettingDiff{Key: k, Kind: Kind(k)}
		if oka {
			d.A, d.RawA = &va.v, va.raw
		}
		if okb {
			d.B, d.RawB = &vb.v, vb.raw
		}
		r.Settings = append(r.Settings, d)
	}

	// Findings: a paired database's or device's under the pair's name; one
	// about what is on one side only is not listed (it is listed above).
	subject := func(subj string, ren, dev map[string]string) (string, bool) {
		if n, ok := ren[subj]; ok {
			return n, true
		}
		if d, ok := strings.CutPrefix(subj, "device:"); ok {
			if n, ok := dev[d]; ok {
				return "device:" + n, true
			}
		}
		return subj, false
	}
	onlyDB, onlyDev := map[string]bool{}, map[string]bool{}
	for _, n := range onlyA {
		onlyDB[n] = true
	}
	for _, n := range onlyB {
		onlyDB[n] = true
	}
	for _, i := range devOnlyA {
		for _, d := range a.Stacks[i].Devices {
			onlyDev["device:"+d] = devA[d] == ""
		}
	}
	for _, j := range devOnlyB {
		for _, d := range b.Stacks[j].Devices {
			onlyDev["device:"+d] = devB[d] == ""
		}
	}
	index := func(fs []Finding, ren, dev map[string]string) map[string]Finding {
		m := make(map[string]Finding, len(fs))
		for _, f := range fs {
			subj, paired := subject(f.Subject, ren, dev)
			if !paired && (onlyDB[f.Subject] || onlyDev[f.Subject]) {
				continue
			}
			f.Subject = subj
			if w, ok := m[f.key()]; ok && !worse(f, w) {
				continue
			}
			m[f.key()] = f
		}
		return m
	}
	fa, fb := index(a.Findings, renA, devA), index(b.Findings, renB, devB)
	fkeys := make([]string, 0, len(fa)+len(fb))
	for k := range fa {
		fkeys = append(fkeys, k)
	}
	for k := range fb {
		if _, ok := fa[k]; !ok {
			fkeys = append(fkeys, k)
		}
	}
	sort.Strings(fkeys)
	for _, k := range fkeys {
		x, y := fa[k], fb[k]
		if x.Status == y.Status {
			continue
		}
		d := FindingDiff{ID: x.ID, Subject: x.Subject, A: x.Status, B: y.Status, Severity: x.Severity}
		if d.ID == "" {
			d.ID, d.Subject = y.ID, y.Subject
		}
		if y.Severity > d.Severity {
			d.Severity = y.Severity
		}
		r.Findings = append(r.Findings, d)
	}
	sort.SliceStable(r.Findings, func(i, j int) bool {
		x, y := r.Findings[i], r.Findings[j]
		if x.Severity != y.Severity {
			return x.Severity > y.Severity
		}
		if x.ID != y.ID {
			return x.ID < y.ID
		}
		return x.Subject < y.Subject
	})
	r.Summary = map[string]int{
		"databases": len(r.Databases),
		"devices":   len(r.Devices),
		"settings":  len(r.Settings),
		"findings":  len(r.Findings),
	}
	return r
}

// redacted reports a value that holds a redacted secret.
func redacted(v string) bool { return strings.Contains(v, host.Redacted) }

func sortPresenceList(p []Presence) {
	sort.Slice(p, func(i, j int) bool {
		if p[i].In != p[j].In {
			return p[i].In < p[j].In
		}
		return p[i].Name < p[j].Name
	})
}

// identity is what a paired database's values may hold of its own
// identity when the pair was not made by it: the part of its data
// directory the other side's does not share, and its port.
type identity struct {
	root, port string
}

// Markers standing for a paired database's own identity in compared values.
const (
	rootMarker = "{server dir}"
	portMarker = "{port}"
)

// identities finds, for each pair made by engine alone whose data
// directories or ports differ, what stands for each side's identity: the data directories without
// their common trailing components ("/tmp/dbhost-pg-2458699978" of
// ".../data"), and the ports.
func identities(pairs []DatabasePair, a, b []Database) (idA, idB map[string]identity) {
	idA, idB = map[string]identity{}, map[string]identity{}
	find := func(list []Database, name string) Database {
		for _, d := range list {
			if d.Name == name {
				return d
			}
		}
		return Database{}
	}
	for _, p := range pairs {
		if p.By != "engine" {
			continue // a data directory or port that moved is a change
		}
		x, y := find(a, p.A), find(b, p.B)
		var ix, iy identity
		if x.DataDir != "" && y.DataDir != "" && x.DataDir != y.DataDir {
			ix.root, iy.root = distinctRoots(cleanPath(x.DataDir), cleanPath(y.DataDir))
		}
		if x.Port > 0 && y.Port > 0 && x.Port != y.Port {
			ix.port, iy.port = strconv.Itoa(x.Port), strconv.Itoa(y.Port)
		}
		if ix != (identity{}) {
			idA[p.A], idB[p.B] = ix, iy
		}
	}
	return idA, idB
}

// distinctRoots strips the trailing path components two paths share:
// "/tmp/a/data" and "/tmp/b/data" give "/tmp/a" and "/tmp/b". A root of
// fewer than two components ("/srv") is too general to stand for one
// server: none is returned.
func distinctRoots(x, y string) (string, string) {
	for filepath.Base(x) == filepath.Base(y) && x != "/" && y != "/" {
		x, y = filepath.Dir(x), filepath.Dir(y)
	}
	if strings.Count(x, "/") < 2 || strings.Count(y, "/") < 2 {
		return "", ""
	}
	return x, y
}

// generic returns a value with the database's identity replaced by
// markers: its data directory root inside paths, its port as the value of
// a port setting.
func (id identity) generic(key, v string) string {
	if id.port != "" && v == id.port && strings.HasSuffix(key, "port") {
		return portMarker
	}
	if id.root != "" && strings.Contains(v, id.root) {
		var b strings.Builder
		rest := v
		for {
			i := strings.Index(rest, id.root)
			if i < 0 {
				b.WriteString(rest)
				break
			}
			end := i + len(id.root)
			b.WriteString(rest[:i])
			if end == len(rest) || rest[end] == '/' || rest[end] == ',' || rest[end] == ' ' {
				b.WriteString(rootMarker)
			} else {
				b.WriteString(id.root)
			}
			rest = rest[end:]
		}
		return b.String()
	}
	return v
}

// instanceOf returns the instance a db/ or limits/ key is about. An
// instance name may hold a slash (postgres:5432@/srv/pg, told apart by its
// data directory), so the key is matched against the names, the longest
// first.
func instanceOf(key string, names []string) string {
	_, rest, _ := strings.Cut(key, "/")
	best := ""
	for _, n := range names {
		if len(n) > len(best) && strings.HasPrefix(rest, n+"/") {
			best = n
		}
	}
	if best == "" {
		return Subject(key)
	}
	return best
}
