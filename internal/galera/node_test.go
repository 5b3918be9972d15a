package galera

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"reflect"
	"strings"
	"testing"

	"github.com/dbhost/dbhost/internal/engine"
)

// recorded is a node's variables and wsrep status as dbhost read them.
type recorded struct {
	Variables map[string]string    `json:"variables"`
	Status    *engine.GaleraStatus `json:"status"`
}

func load(t *testing.T, name string) recorded {
	t.Helper()
	b, err := os.ReadFile("testdata/" + name)
	if err != nil {
		t.Fatal(err)
	}
	var r recorded
	if err := json.Unmarshal(b, &r); err != nil {
		t.Fatal(err)
	}
	return r
}

func TestFromNodeRecorded(t *testing.T) {
	single := load(t, "node-single.json")
	l := FromNode(single.Variables, single.Status)
	want := []Member{{Name: "vm", Address: "127.0.0.1", Weight: 1}}
	if !reflect.DeepEqual(l.Members, want) || len(l.Notes) != 0 {
		t.Errorf("single: %+v", l)
	}
	if tol := Analyze(l); tol.AtOnce != 0 || tol.OneByOne != 0 || !tol.Serious() {
		t.Errorf("single: %+v", tol)
	}

	// garbd lists no client address: an arbitrator; the data node's AUTO
	// is no sign of one.
	withGarbd := load(t, "node-garbd.json")
	l = FromNode(withGarbd.Variables, withGarbd.Status)
	want = []Member{{Name: "vm", Address: "127.0.0.1", Weight: 1}, {Name: "garb", Weight: 1, Arbitrator: true, Assumed: true}}
	if !reflect.DeepEqual(l.Members, want) {
		t.Errorf("with garbd: %+v", l.Members)
	}
	if !hasNote(l, "garb: no client address, counted as arbitrator") || !hasNote(l, "weight and segment of garb not read") {
		t.Errorf("with garbd notes: %q", l.Notes)
	}
	tol := Analyze(l)
	if tol.DataNodes != 1 || tol.Arbitrators != 1 || tol.AtOnce != 0 || tol.OneByOne != 0 || tol.Worst != "vm" {
		t.Errorf("with garbd: %+v", tol)
	}
}

func hasNote(l Layout, sub string) bool {
	for _, n := range l.Notes {
		if strings.Contains(n, sub) {
			return true
		}
	}
	return false
}

func TestFromNode(t *testing.T) {
	three := func(weight int, opts string) (map[string]string, *engine.GaleraStatus) {
		return map[string]string{"wsrep_node_name": "db2", "wsrep_node_address": "10.0.0.2", "wsrep_provider_options": opts},
			&engine.GaleraStatus{ClusterStatus: "Primary", ClusterSize: 3, ClusterWeight: weight, LocalIndex: 1,
				Members: []engine.GaleraMember{{Name: "db1", IncomingAddress: "10.0.0.1:3306"}, {Name: "db2", IncomingAddress: "10.0.0.2:3306"}, {Name: "db3", IncomingAddress: "10.0.0.3:3306"}}}
	}
	for _, tc := range []struct {
		name    string
		weight  int
		opts    string
		members []Member
		note    string
	}{
		{"equal weights", 3, "pc.weight = 1; gmcast.segment = 0", []Member{
			{Name: "db1", Address: "10.0.0.1:3306", Weight: 1, Assumed: true},
			{Name: "db2", Address: "10.0.0.2", Weight: 1},
			{Name: "db3", Address: "10.0.0.3:3306", Weight: 1, Assumed: true}}, "weight and segment of db1, db3 not read"},
		{"own weight and segment", 4, "pc.weight=2;gmcast.segment=1", []Member{
			{Name: "db1", Address: "10.0.0.1:3306", Weight: 1, Assumed: true},
			{Name: "db2", Address: "10.0.0.2", Weight: 2, Segment: 1},
			{Name: "db3", Address: "10.0.0.3:3306", Weight: 1, Assumed: true}}, ""},
		{"others split evenly", 5, "pc.weight = 1", []Member{
			{Name: "db1", Address: "10.0.0.1:3306", Weight: 2, Assumed: true},
			{Name: "db2", Address: "10.0.0.2", Weight: 1},
			{Name: "db3", Address: "10.0.0.3:3306", Weight: 2, Assumed: true}}, "taken as 2 each"},
		{"uneven", 4, "", []Member{
			{Name: "db1", Address: "10.0.0.1:3306", Weight: 1, Assumed: true},
			{Name: "db2", Address: "10.0.0.2", Weight: 1},
			{Name: "db3", Address: "10.0.0.3:3306", Weight: 1, Assumed: true}}, "does not split evenly"},
		{"no cluster weight", 0, "", nil, "no wsrep_cluster_weight"},
		{"bad weight", 3, "pc.weight = heavy", nil, `pc.weight "heavy" unreadable`},
	} {
		vals, st := three(tc.weight, tc.opts)
		l := FromNode(vals, st)
		if tc.members != nil && !reflect.DeepEqual(l.Members, tc.members) {
			t.Errorf("%s: %+v", tc.name, l.Members)
		}
		if len(l.Members) != 3 || l.Members[1].Name != "db2" {
			t.Errorf("%s: %+v", tc.name, l.Members)
		}
		if tc.note != "" && !hasNote(l, tc.note) {
			t.Errorf("%s: notes %q, want %q", tc.name, l.Notes, tc.note)
		}
	}

	// Only the incoming addresses: the node is found by its index, garbd
	// by its empty address.
	l := FromNode(map[string]string{"wsrep_node_address": "10.0.0.1"},
		&engine.GaleraStatus{ClusterStatus: "Primary", ClusterSize: 3, ClusterWeight: 3, LocalIndex: 0, IncomingAddresses: []string{"10.0.0.1:3306", "10.0.0.2:3306", ""}})
	if len(l.Members) != 3 || l.Members[0].Name != "10.0.0.1" || l.Members[0].Assumed || l.Members[1].Name != "10.0.0.2:3306" || !l.Members[2].Arbitrator || l.Members[2].Name != "member3" {
		t.Errorf("addresses only: %+v", l.Members)
	}
	// Only a size: the others are named by their place, and it is said.
	l = FromNode(map[string]string{"wsrep_node_name": "x"}, &engine.GaleraStatus{ClusterStatus: "non-Primary", ClusterSize: 2, LocalIndex: 1})
	if len(l.Members) != 2 || l.Members[1].Name != "x" || l.Members[0].Name != "member1" || l.Members[0].Arbitrator ||
		!hasNote(l, "only wsrep_cluster_size is known") || !hasNote(l, "the node is non-Primary") {
		t.Errorf("size only: %+v", l)
	}
	// Names repeat (the host name is the default): told apart.
	l = FromNode(map[string]string{"wsrep_node_name": "vm"}, &engine.GaleraStatus{ClusterStatus: "Primary", ClusterSize: 3, ClusterWeight: 3,
		Members: []engine.GaleraMember{{Name: "vm", IncomingAddress: "AUTO"}, {Name: "vm", IncomingAddress: "10.0.0.2:3306"}, {Name: "vm", IncomingAddress: "AUTO"}}})
	var names []string
	for _, m := range l.Members {
		names = append(names, m.Name)
	}
	if !reflect.DeepEqual(names, []string{"vm", "vm@10.0.0.2:3306", "vm#2"}) || !hasNote(l, "two members named vm: one is shown as vm#2") {
		t.Errorf("repeated names: %q %q", names, l.Notes)
	}
	if tol := Analyze(l); tol.AtOnce != 1 {
		t.Errorf("repeated names: %+v", tol)
	}
	// No status at all: the node alone, said.
	l = FromNode(map[string]string{}, nil)
	if len(l.Members) != 1 || l.Members[0].Name != "local" || !hasNote(l, "no wsrep status") {
		t.Errorf("no status: %+v", l)
	}
}

// Merge: each node's own reading wins over the others' assumptions; a
// member seen under its address in one view and its name in another is
// one member.
func TestMerge(t *testing.T) {
	view := func(self string, weight, seg int) Layout {
		st := &engine.GaleraStatus{ClusterStatus: "Primary", ClusterSize: 3, ClusterWeight: 4,
			Members: []engine.GaleraMember{{Name: "db1", IncomingAddress: "10.0.0.1:3306"}, {Name: "db2", IncomingAddress: "10.0.0.2:3306"}, {Name: "db3", IncomingAddress: "10.0.0.3:3306"}}}
		return FromNode(map[string]string{"wsrep_node_name": self, "wsrep_provider_options": "pc.weight=" + string(rune('0'+weight)) + "; gmcast.segment=" + string(rune('0'+seg))}, st)
	}
	m := Merge(view("db1", 2, 0), view("db2", 1, 1))
	var got []string
	for _, x := range m.Members {
		got = append(got, x.Name)
	}
	if !reflect.DeepEqual(got, []string{"db1", "db2", "db3"}) {
		t.Fatalf("merged %+v", m.Members)
	}
	if m.Members[0].Weight != 2 || m.Members[0].Assumed || m.Members[1].Segment != 1 || m.Members[1].Assumed || !m.Members[2].Assumed {
		t.Errorf("merged %+v", m.Members)
	}
	if !hasNote(m, "weight and segment of db3 not read") || hasNote(m, "of db1") {
		t.Errorf("merged notes %q", m.Notes)
	}
	// Data nodes without wsrep_node_incoming_address all list AUTO: no
	// address, so never one member.
	auto := &engine.GaleraStatus{ClusterStatus: "Primary", ClusterSize: 3, ClusterWeight: 3,
		Members: []engine.GaleraMember{{Name: "db1", IncomingAddress: "AUTO"}, {Name: "db2", IncomingAddress: "AUTO"}, {Name: "db3", IncomingAddress: "AUTO"}}}
	if m := Merge(FromNode(map[string]string{"wsrep_node_name": "db1"}, auto), FromNode(map[string]string{"wsrep_node_name": "db2"}, auto)); len(m.Members) != 3 || m.Members[2].Arbitrator {
		t.Errorf("AUTO: %+v", m.Members)
	}
	// Views that only count (wsrep_cluster_size): the nodes read are named,
	// the rest is counted once, not once per view.
	sized := func(name string) Layout {
		return FromNode(map[string]string{"wsrep_node_name": name}, &engine.GaleraStatus{ClusterStatus: "Primary", ClusterSize: 4, LocalIndex: -1})
	}
	m = Merge(sized("db1"), sized("db2"), sized("db3"))
	got = nil
	for _, x := range m.Members {
		got = append(got, fmt.Sprintf("%s/%v/%v", x.Name, x.Assumed, x.Unnamed))
	}
	if want := []string{"db1/false/false", "db2/false/false", "db3/false/false", "member1/true/true"}; !reflect.DeepEqual(got, want) {
		t.Errorf("counted only: %q, want %q", got, want)
	}
	// An unnamed arbitrator (no name, no address) stays one arbitrator.
	arbView := func(name string, idx int) Layout {
		return FromNode(map[string]string{"wsrep_node_name": name}, &engine.GaleraStatus{ClusterStatus: "Primary", ClusterSize: 3, ClusterWeight: 3, LocalIndex: idx,
			Members: []engine.GaleraMember{{Name: "db1", IncomingAddress: "AUTO"}, {Name: "db2", IncomingAddress: "AUTO"}, {}}})
	}
	m = Merge(arbView("db1", 0), arbView("db2", 1))
	if len(m.Members) != 3 || !m.Members[2].Arbitrator || !m.Members[2].Unnamed {
		t.Errorf("unnamed arbitrator: %+v", m.Members)
	}
	all := Merge(view("db1", 1, 0), view("db2", 1, 0), view("db3", 1, 0))
	for _, x := range all.Members {
		if x.Assumed {
			t.Errorf("all read: %+v", all)
		}
	}
	if len(all.Notes) != 0 {
		t.Errorf("all read: notes %q", all.Notes)
	}
}

// Names come from servers: printed escaped.
func TestWriteTextEscapes(t *testing.T) {
	l := Layout{Members: []Member{{Name: "evil\x1b]0;pwned\a", Weight: 1}, {Name: "b\u202e", Weight: 1}, {Name: "c", Weight: 1}},
		Notes: []string{"note\x1b[2J"}}
	var b bytes.Buffer
	if err := WriteText(&b, Analyze(l)); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	if strings.ContainsAny(out, "\x1b\a\u202e") || !strings.Contains(out, `evil\x1b]0;pwned\a`) || !strings.Contains(out, `b\u202e`) {
		t.Errorf("not escaped:\n%s", out)
	}
}

// FuzzFromNode: any status a server (or a snapshot) gives makes a layout
// with unique names that Analyze, Scenarios and Predict take.
func FuzzFromNode(f *testing.F) {
	f.Add("vm", "pc.weight = 1; gmcast.segment = 0", "vm,garb", "AUTO,", 2, 0, 2)
	f.Add("db2", "pc.weight=2", "db1,db2,db2,", "10.0.0.1:3306,,AUTO,x", 5, 7, 4)
	f.Add("", "", "", "", 3, -1, 0)
	f.Fuzz(func(t *testing.T, self, opts, names, addrs string, size, idx, weight int) {
		st := &engine.GaleraStatus{ClusterStatus: "Primary", ClusterSize: size % 40, LocalIndex: idx, ClusterWeight: weight}
		ns, as := strings.Split(names, ","), strings.Split(addrs, ",")
		if names != "" {
			for i, n := range ns {
				m := engine.GaleraMember{Name: n}
				if i < len(as) {
					m.IncomingAddress = as[i]
				}
				st.Members = append(st.Members, m)
			}
		} else if addrs != "" {
			st.IncomingAddresses = as
		}
		l := FromNode(map[string]string{"wsrep_node_name": self, "wsrep_provider_options": opts}, st)
		seen := map[string]bool{}
		for _, m := range l.Members {
			if seen[m.Name] {
				t.Fatalf("name %q twice: %+v", m.Name, l.Members)
			}
			seen[m.Name] = true
		}
		l = Merge(l, FromNode(map[string]string{"wsrep_node_name": "other"}, st))
		if len(l.Members) > MaxMembers {
			return
		}
		Analyze(l)
		for _, s := range Scenarios(l) {
			if p := l.Predict(s); strings.HasPrefix(p.Why, "not judged") {
				t.Fatalf("%s: %s", s.Name, p.Why)
			}
		}
	})
}
