package mem

import (
	"sort"
	"strconv"
	"strings"

	"github.com/dbhost/dbhost/internal/facts"
	"github.com/dbhost/dbhost/internal/host"
)

const nodeDir = "/sys/devices/system/node"

// Imbalance rule (docs/mem.md): on a host with two or more memory nodes, a
// process with at least imbalanceMin resident whose pages sit more than
// imbalanceShare on one node, while its policy spreads or leaves placement
// to the kernel (default, interleave), is imbalanced: when that node fills,
// the kernel reclaims or swaps there although the others have free memory.
// A bind or preferred policy is a deliberate placement and is not flagged.
const (
	imbalanceMin   = 1 << 30
	imbalanceShare = 0.80
)

// numa reads the memory nodes and, where it is worth the cost, the
// processes' numa_maps: it walks every page, slow on a process with a
// large buffer pool. With --numa every shown process; otherwise only the
// instances' main processes, and only on a multi-node host.
func (s *scanner) numa(r *Report, opt Options, shown []*proc, byPID map[int]*proc) {
	v := &r.NUMA
	names, err := s.h.ReadDir(nodeDir)
	if err != nil && !host.IsNotExist(err) {
		v.Err = host.Explain(err)
	}
	withMem := 0
	for _, n := range names {
		id, err := strconv.Atoi(strings.TrimPrefix(n, "node"))
		if err != nil || !strings.HasPrefix(n, "node") {
			continue
		}
		nd := Node{ID: id}
		if b, err := s.h.ReadFile(nodeDir + "/" + n + "/meminfo"); err == nil {
			mi := facts.ParseNodeMeminfo(string(b))
			nd.MemTotal, nd.MemFree = mi["MemTotal"], mi["MemFree"]
		}
		if nd.MemTotal > 0 {
			withMem++
		}
		v.Nodes = append(v.Nodes, nd)
	}
	sort.Slice(v.Nodes, func(a, b int) bool { return v.Nodes[a].ID < v.Nodes[b].ID })
	multi := withMem > 1

	var read []*proc
	switch {
	case opt.NUMA:
		v.Read = "all shown processes (--numa)"
		read = shown
	case multi:
		v.Read = "instance main processes (--numa reads every shown process)"
		for _, in := range r.Instances {
			if p := byPID[in.PID]; p != nil {
				read = append(read, p)
			}
		}
	default:
		v.Read = "none: one memory node (--numa reads them anyway)"
	}
	for _, p := range read {
		p.NUMA = s.procNUMA(p.PID, multi)
	}
}

func (s *scanner) procNUMA(pid int, multi bool) *ProcNUMA {
	pn := &ProcNUMA{}
	b, err := s.h.ReadFile("/proc/" + strconv.Itoa(pid) + "/numa_maps")
	if err != nil {
		pn.Err = host.Explain(err)
		return pn
	}
	ms, err := facts.ParseNUMAMaps(string(b))
	if err != nil {
		pn.Err = err.Error()
		return pn
	}
	pn.Policy, pn.Nodes = summarize(ms)
	pn.Imbalanced = multi && Imbalanced(pn.Policy, pn.Nodes)
	return pn
}

// summarize sums resident bytes per node and picks the policy of the
// mapping with the most resident pages.
func summarize(ms []facts.NUMAMapping) (string, map[int]uint64) {
	nodes := map[int]uint64{}
	policy, best := "", uint64(0)
	for _, m := range ms {
		for n, pages := range m.Pages {
			nodes[n] += pages * uint64(m.PageSizeKB) << 10
		}
		if b := m.Bytes(); policy == "" || b > best {
			policy, best = m.Policy, b
		}
	}
	if len(nodes) == 0 {
		nodes = nil
	}
	return policy, nodes
}

// Imbalanced applies the rule above to a process's policy and per-node
// resident bytes (the caller checks the host has several nodes).
func Imbalanced(policy string, nodes map[int]uint64) bool {
	if !(policy == "default" || policy == "local" || strings.HasPrefix(policy, "interleave")) {
		return false
	}
	var total, top uint64
	for _, b := range nodes {
		total += b
		top = max(top, b)
	}
	return total >= imbalanceMin && float64(top) > imbalanceShare*float64(total)
}
