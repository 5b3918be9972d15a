package facts

import (
	"errors"
	"sort"
	"strconv"
	"strings"

	"github.com/dbhost/dbhost/internal/host"
)

const nodeDir = "/sys/devices/system/node"

// gatherNUMA reads the memory nodes. A kernel without NUMA support has no
// node directory: that is one node, not an error.
func gatherNUMA(h *host.Host) NUMA {
	var n NUMA
	names, err := h.ReadDir(nodeDir)
	if err != nil {
		if !host.IsNotExist(err) {
			n.Err = host.Explain(err)
		}
		return n
	}
	for _, name := range names {
		s, ok := strings.CutPrefix(name, "node")
		if !ok {
			continue
		}
		id, err := strconv.Atoi(s)
		if err != nil {
			continue
		}
		n.Nodes = append(n.Nodes, readNode(h, id, nodeDir+"/"+name))
	}
	sort.Slice(n.Nodes, func(a, b int) bool { return n.Nodes[a].ID < n.Nodes[b].ID })
	return n
}

func readNode(h *host.Host, id int, dir string) NUMANode {
	nd := NUMANode{ID: id}
	cpus := h.Read(dir + "/cpulist")
	nd.CPUs = cpus.Value
	if b, err := h.ReadFile(dir + "/meminfo"); err != nil {
		nd.Err = host.Explain(err)
	} else {
		mi := ParseNodeMeminfo(string(b))
		nd.MemTotal, nd.MemFree = mi["MemTotal"], mi["MemFree"]
		if nd.MemTotal == 0 {
			nd.Err = dir + "/meminfo holds no MemTotal"
		}
	}
	if r := h.Read(dir + "/distance"); r.OK() {
		for _, f := range r.Fields() {
			if d, err := strconv.Atoi(f); err == nil {
				nd.Distances = append(nd.Distances, d)
			}
		}
	}
	return nd
}

// ParseNodeMeminfo reads a node's meminfo ("Node 0 MemTotal:  5204180 kB")
// into bytes by field name. Counters without a unit (HugePages_Total) are
// kept as they are.
func ParseNodeMeminfo(s string) map[string]uint64 {
	out := map[string]uint64{}
	for _, ln := range strings.Split(s, "\n") {
		f := strings.Fields(ln)
		if len(f) < 4 || f[0] != "Node" {
			continue
		}
		if v, ok := kBytes(f[3:]); ok {
			out[strings.TrimSuffix(f[2], ":")] = v
		}
	}
	return out
}

// NUMAMapping is one line of /proc/PID/numa_maps.
type NUMAMapping struct {
	Start  uint64
	Policy string
	// Pages per node, in units of PageSizeKB.
	Pages      map[int]uint64
	PageSizeKB int
	File       string
	Huge       bool
}

// Bytes is the mapping's resident size over all nodes.
func (m NUMAMapping) Bytes() uint64 {
	var t uint64
	for _, p := range m.Pages {
		t += p
	}
	return t * uint64(m.PageSizeKB) << 10
}

var errNUMAMaps = errors.New("numa_maps: malformed line")

// ParseNUMAMaps parses /proc/PID/numa_maps:
//
//	7f3c2a000000 default file=/dev/zero\040(deleted) dirty=3 N0=3 kernelpagesize_kB=4
//	7f3c00000000 interleave:0-1 file=/anon_hugepage\040(deleted) huge dirty=2 N0=1 N1=1 kernelpagesize_kB=2048
//
// Lines that do not start with an address and a policy are an error: a
// partial parse would misstate where the memory lives.
func ParseNUMAMaps(s string) ([]NUMAMapping, error) {
	var out []NUMAMapping
	for _, ln := range strings.Split(s, "\n") {
		f := strings.Fields(ln)
		if len(f) == 0 {
			continue
		}
		if len(f) < 2 {
			return nil, errNUMAMaps
		}
		start, err := strconv.ParseUint(f[0], 16, 64)
		if err != nil {
			return nil, errNUMAMaps
		}
		m := NUMAMapping{Start: start, Policy: f[1], PageSizeKB: 4}
		for _, kv := range f[2:] {
			k, v, ok := strings.Cut(kv, "=")
			if !ok {
				if kv == "huge" {
					m.Huge = true
				}
				continue
			}
			switch {
			case k == "kernelpagesize_kB":
				if n, err := strconv.Atoi(v); err == nil && n > 0 {
					m.PageSizeKB = n
				}
			case k == "file":
				m.File = strings.ReplaceAll(v, `\040`, " ")
			case len(k) > 1 && k[0] == 'N':
				node, err1 := strconv.Atoi(k[1:])
				pages, err2 := strconv.ParseUint(v, 10, 64)
				if err1 != nil || err2 != nil || node < 0 {
					continue
				}
				if m.Pages == nil {
					m.Pages = map[int]uint64{}
				}
				m.Pages[node] += pages
			}
		}
		out = append(out, m)
	}
	return out, nil
}

// summarizeNUMA sums resident bytes per node and picks the policy of the
// largest mapping: by virtual size where maps gave one (sizes, keyed by
// start address), else by resident size.
func summarizeNUMA(ms []NUMAMapping, sizes map[uint64]uint64) (string, map[int]uint64) {
	nodes := map[int]uint64{}
	var policy string
	var best uint64
	for _, m := range ms {
		for n, p := range m.Pages {
			nodes[n] += p * uint64(m.PageSizeKB) << 10
		}
		size, ok := sizes[m.Start]
		if !ok {
			size = m.Bytes()
		}
		if policy == "" || size > best {
			policy, best = m.Policy, size
		}
	}
	if len(nodes) == 0 {
		nodes = nil
	}
	return policy, nodes
}

// MultiNode reports whether the host has more than one memory node.
func (n NUMA) MultiNode() bool { return len(n.Nodes) > 1 }
