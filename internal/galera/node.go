package galera

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/dbhost/dbhost/internal/engine"
)

// assumedNote starts the note FromNode and Merge write about members whose
// weight and segment were not read from themselves.
const assumedNote = "weight and segment of "

// othersWeight is in every note about the weights of the members a node
// did not read itself.
const othersWeight = "the other members' pc.weight"

// FromNode builds the layout one node sees: itself from its variables
// (pc.weight and gmcast.segment from wsrep_provider_options, default 1 and
// 0; its name from wsrep_node_name, else wsrep_node_address), the other
// members from its status (the member list, else the incoming addresses,
// else only the cluster size). Their weights are known only as the sum
// wsrep_cluster_weight: split evenly when it splits, else assumed 1; their
// segments are assumed 0. A member without a client address is counted as
// an arbitrator (garbd lists ""; a data node its address, or AUTO). Notes
// say what was assumed.
func FromNode(vals map[string]string, st *engine.GaleraStatus) Layout {
	opts := ParseProviderOptions(vals["wsrep_provider_options"])
	self := Member{Weight: 1, Address: strings.TrimSpace(vals["wsrep_node_address"])}
	self.Name = strings.TrimSpace(vals["wsrep_node_name"])
	if self.Name == "" {
		self.Name = self.Address
	}
	var l Layout
	if v, ok := opts["pc.weight"]; ok {
		if n, err := strconv.Atoi(v); err == nil && n >= 0 && n <= MaxWeight {
			self.Weight = n
		} else {
			l.Notes = append(l.Notes, fmt.Sprintf("pc.weight %q unreadable: 1 assumed", v))
			self.Assumed = true
		}
	}
	if v, ok := opts["gmcast.segment"]; ok {
		if n, err := strconv.Atoi(v); err == nil && n >= 0 && n <= 255 {
			self.Segment = n
		} else {
			l.Notes = append(l.Notes, fmt.Sprintf("gmcast.segment %q unreadable: 0 assumed", v))
			self.Assumed = true
		}
	}
	if st == nil {
		if self.Name == "" {
			self.Name = "local"
		}
		l.Members = []Member{self}
		l.Notes = append(l.Notes, "no wsrep status: only this node is known")
		return l
	}

	// The others as the node lists them; the local one is found by name,
	// else by wsrep_local_index.
	type other struct{ name, addr string }
	var list []other
	switch {
	case len(st.Members) > 0:
		for _, m := range st.Members {
			list = append(list, other{strings.TrimSpace(m.Name), strings.TrimSpace(m.IncomingAddress)})
		}
	case len(st.IncomingAddresses) > 0:
		for _, a := range st.IncomingAddresses {
			list = append(list, other{"", strings.TrimSpace(a)})
		}
	default:
		for i := 0; i < st.ClusterSize; i++ {
			list = append(list, other{addr: "?"})
		}
		if st.ClusterSize > 1 {
			l.Notes = append(l.Notes, "members not listed: only wsrep_cluster_size is known")
		}
	}
	local := -1
	for i, o := range list {
		if o.name != "" && o.name == self.Name {
			local = i
			break
		}
	}
	if local < 0 && st.LocalIndex >= 0 && st.LocalIndex < len(list) {
		local = st.LocalIndex
	}
	if local >= 0 {
		if self.Name == "" {
			self.Name = list[local].name
		}
		if self.Address == "" && list[local].addr != "?" && !strings.EqualFold(list[local].addr, "AUTO") {
			self.Address = list[local].addr
		}
	}
	if self.Name == "" {
		self.Name = "local"
	}
	if st.ClusterStatus != "" && st.ClusterStatus != "Primary" {
		l.Notes = append(l.Notes, fmt.Sprintf("the node is %s: its members are its current component, not the last Primary one", st.ClusterStatus))
	}

	var others []Member
	var arbs []string
	for i, o := range list {
		if i == local {
			continue
		}
		m := Member{Name: o.name, Weight: 1, Assumed: true}
		if o.addr != "?" && !strings.EqualFold(o.addr, "AUTO") {
			m.Address = o.addr // AUTO names no address: never a match in Merge
		}
		if m.Name == "" {
			m.Name = m.Address
		}
		if m.Name == "" || m.Name == "?" {
			m.Name, m.Unnamed = "member"+strconv.Itoa(i+1), true
		}
		// garbd lists no client address (""); a data node its address or,
		// with wsrep_node_incoming_address unset, "AUTO".
		if o.addr == "" {
			m.Arbitrator = true
			m.Address = ""
			arbs = append(arbs, m.Name)
		}
		others = append(others, m)
	}
	if len(arbs) > 0 {
		l.Notes = append(l.Notes, fmt.Sprintf("%s: no client address, counted as arbitrator", strings.Join(arbs, ", ")))
	}
	if len(others) > 0 {
		rest := st.ClusterWeight - self.Weight
		switch {
		case st.ClusterWeight <= 0:
			l.Notes = append(l.Notes, "no wsrep_cluster_weight: "+othersWeight+" assumed 1")
		case rest >= 0 && rest%len(others) == 0:
			for i := range others {
				others[i].Weight = rest / len(others)
			}
			if rest != len(others) {
				l.Notes = append(l.Notes, fmt.Sprintf("wsrep_cluster_weight %d: %s taken as %d each", st.ClusterWeight, othersWeight, rest/len(others)))
			}
		default:
			l.Notes = append(l.Notes, fmt.Sprintf("wsrep_cluster_weight %d does not split evenly: %s assumed 1", st.ClusterWeight, othersWeight))
		}
	}
	if local < 0 && len(list) > 0 {
		// The node is not in its own list: drop one unnamed entry for it.
		l.Notes = append(l.Notes, "the node did not find itself in its member list")
		if len(others) > 0 && len(list) == st.ClusterSize {
			others = others[1:]
		}
	}
	l.Members = append([]Member{self}, others...)
	if local > 0 {
		// Keep the node's own list order.
		l.Members = append(append(append([]Member(nil), others[:local]...), self), others[local:]...)
	}
	uniqueNames(&l)
	l.Notes = append(l.Notes, assumedNotes(l.Members)...)
	return l
}

// uniqueNames tells apart members that share a name (wsrep_node_name
// defaults to the host name: nodes of one host share it) by their address,
// else by their place.
func uniqueNames(l *Layout) {
	seen := map[string]bool{}
	for _, m := range l.Members {
		seen[m.Name] = false
	}
	for i := range l.Members {
		m := &l.Members[i]
		if !seen[m.Name] {
			seen[m.Name] = true
			continue
		}
		old := m.Name
		name := old + "@" + m.Address
		for k := 2; m.Address == "" || hasMember(*l, name); k++ {
			name = old + "#" + strconv.Itoa(k)
			if !hasMember(*l, name) {
				break
			}
		}
		m.Name = name
		seen[m.Name] = true
		l.Notes = append(l.Notes, fmt.Sprintf("two members named %s: one is shown as %s", old, m.Name))
	}
}

func assumedNotes(ms []Member) []string {
	var names []string
	for _, m := range ms {
		if m.Assumed {
			names = append(names, m.Name)
		}
	}
	if len(names) == 0 {
		return nil
	}
	return []string{assumedNote + strings.Join(names, ", ") + " not read from themselves"}
}

// Merge combines the views of several nodes of one cluster (read on this
// host): each member once, matched by name or address, its own reading
// (Assumed false) preferred over another node's view.
func Merge(views ...Layout) Layout {
	var out Layout
	seenNote := map[string]bool{}
	find := func(m Member) int {
		for i, o := range out.Members {
			if o.Name == m.Name || m.Address != "" && o.Address == m.Address ||
				o.Name == m.Address && m.Address != "" || m.Name == o.Address && o.Address != "" {
				return i
			}
		}
		return -1
	}
	// Unnamed members are only counted: the merged cluster has as many
	// as the view that counted most needs beyond the members named.
	most, mostArb := 0, 0
	for _, v := range views {
		arb := 0
		for _, m := range v.Members {
			if m.Arbitrator {
				arb++
			}
		}
		most, mostArb = max(most, len(v.Members)), max(mostArb, arb)
	}
	for _, v := range views {
		for _, m := range v.Members {
			if m.Unnamed {
				continue
			}
			i := find(m)
			switch {
			case i < 0:
				out.Members = append(out.Members, m)
			case out.Members[i].Assumed && !m.Assumed:
				out.Members[i] = m
			case out.Members[i].Address == "" && m.Address != "" && !out.Members[i].Arbitrator:
				out.Members[i].Address = m.Address
			}
		}
		for _, n := range v.Notes {
			if strings.HasPrefix(n, assumedNote) || seenNote[n] {
				continue
			}
			seenNote[n] = true
			out.Notes = append(out.Notes, n)
		}
	}
	arbs := 0
	for _, m := range out.Members {
		if m.Arbitrator {
			arbs++
		}
	}
	for k := 1; len(out.Members) < most; k++ {
		name := "member" + strconv.Itoa(k)
		if hasMember(out, name) {
			continue
		}
		m := Member{Name: name, Weight: 1, Assumed: true, Unnamed: true}
		if arbs < mostArb {
			m.Arbitrator = true
			arbs++
		}
		out.Members = append(out.Members, m)
	}
	assumed := assumedNotes(out.Members)
	if len(assumed) == 0 {
		// Every member read itself: what the views guessed of the others
		// no longer matters.
		kept := out.Notes[:0]
		for _, n := range out.Notes {
			if !strings.Contains(n, othersWeight) {
				kept = append(kept, n)
			}
		}
		out.Notes = kept
	}
	out.Notes = append(out.Notes, assumed...)
	if len(out.Notes) == 0 {
		out.Notes = nil
	}
	return out
}
