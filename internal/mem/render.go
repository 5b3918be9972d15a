package mem

import (
	"encoding/json"
	"fmt"
	"io"
	"sort"
	"strconv"
	"strings"

	"github.com/dbhost/dbhost/internal/textio"
)

// RenderOptions shape the text output.
type RenderOptions struct {
	Sort string // rss, pss (default), uss, swap
	Top  int    // processes shown; 0: all
}

// JSON writes the report as one indented JSON document.
func JSON(w io.Writer, r *Report, o RenderOptions) error {
	out := *r
	out.Processes = sorted(r.Processes, o)
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(&out)
}

func sorted(ps []Process, o RenderOptions) []Process {
	out := append([]Process(nil), ps...)
	SortProcesses(out, o.Sort)
	if o.Top > 0 && len(out) > o.Top {
		out = out[:o.Top]
	}
	return out
}

// Text writes the report as tables with human sizes.
func Text(w io.Writer, r *Report, o RenderOptions) error {
	ew := &textio.ErrWriter{W: w}
	ps := sorted(r.Processes, o)
	by := o.Sort
	if by == "" {
		by = "pss"
	}
	fmt.Fprintf(ew, "PROCESSES: %d shown of %d read, by %s\n", len(ps), r.Scanned, by)
	processesText(ew, r, ps)
	fmt.Fprintf(ew, "\nSHARED REGIONS: %d, each counted once\n", len(r.Regions))
	regionsText(ew, r.Regions)
	instancesText(ew, r.Instances)
	fmt.Fprintln(ew, "\nHOST (/proc/meminfo)")
	hostText(ew, r.Host)
	numaText(ew, r.NUMA, ps)
	for _, note := range r.Notes {
		fmt.Fprintln(ew, "note:", note)
	}
	return ew.Err
}

// processesText writes the processes shown, then why others were unread.
func processesText(w io.Writer, r *Report, ps []Process) {
	t := table{head: []string{"PID", "USER", "COMM", "RSS", "PSS", "USS", "SWAP", "ANON", "FILE", "SHMEM", "HUGETLB", "THP", "REGION PSS", "INSTANCE"},
		right: map[int]bool{0: true, 3: true, 4: true, 5: true, 6: true, 7: true, 8: true, 9: true, 10: true, 11: true, 12: true}}
	for _, p := range ps {
		t.add(strconv.Itoa(p.PID), p.User, p.Comm, Human(p.RSS), Human(p.PSS), Human(p.USS), Human(p.Swap),
			Human(p.Anon), Human(p.File), Human(p.Shmem), Human(p.Hugetlb), Human(p.THP), Human(p.RegionPSS), p.Instance)
	}
	t.write(w)
	for _, u := range r.Unreadable {
		fmt.Fprintf(w, "%s could not be read: %s\n", plural(u.Count, "process", "processes"), u.Reason)
	}
}

// regionsText writes the shared regions' table and their notes.
func regionsText(w io.Writer, regions []Region) {
	if len(regions) == 0 {
		return
	}
	t := table{head: []string{"KIND", "NAME", "ID", "SIZE", "RESIDENT", "MAPPED", "PIDS (PSS share)", "INSTANCE"},
		right: map[int]bool{3: true, 4: true, 5: true}}
	var notes []string
	for _, rg := range regions {
		id := fmt.Sprintf("ino %d", rg.Inode)
		if rg.ShmID != nil {
			id = fmt.Sprintf("shmid %d", *rg.ShmID)
		}
		res := Human(rg.Resident)
		if !rg.ResidentKnown {
			res = ">=" + res
		}
		pids := mappersText(rg)
		if rg.Orphaned {
			pids = "orphaned"
		}
		t.add(rg.Kind, rg.Name, id, Human(rg.Size), res, Human(rg.Mapped), pids, rg.Instance)
		if rg.Note != "" {
			notes = append(notes, fmt.Sprintf("%s %s: %s", rg.Kind, rg.Name, rg.Note))
		}
	}
	t.write(w)
	for _, n := range dedupNotes(notes) {
		fmt.Fprintln(w, "  "+n)
	}
}

// instancesText writes each database instance's totals.
func instancesText(w io.Writer, instances []Instance) {
	if len(instances) == 0 {
		return
	}
	fmt.Fprintf(w, "\nINSTANCES (total = shared regions resident, once + processes' PSS outside them)\n")
	for _, in := range instances {
		fmt.Fprintf(w, "%s (pid %d, %s) — shared regions %s, %s resident; processes private %s + share of libraries and copy-on-write pages %s; total %s\n",
			in.Name, in.PID, plural(len(in.PIDs), "process", "processes"), Human(in.RegionsSize), Human(in.RegionsResident), Human(in.Private),
			Human(sub(in.Own, in.Private)), Human(in.Total))
		if in.Unreadable > 0 {
			fmt.Fprintf(w, "  %d of its processes could not be read: the sums leave them out\n", in.Unreadable)
		}
	}
}

// hostText writes the reconciliation of /proc/meminfo (hostView).
func hostText(w io.Writer, h HostView) {
	if h.Err != "" {
		fmt.Fprintln(w, "  unreadable:", h.Err)
		return
	}
	fmt.Fprintf(w, "  MemTotal %s, MemFree %s, MemAvailable %s\n", Human(h.MemTotal), Human(h.MemFree), Human(h.MemAvailable))
	fmt.Fprintf(w, "  processes' PSS outside shared regions %s + shared regions resident %s = %s\n",
		Human(h.ProcessesOwn), Human(h.RegionsResident), Human(h.Accounted))
	for _, l := range h.Lines {
		fmt.Fprintf(w, "  %-17s %10s = ", l.Name, Human(l.Kernel))
		for i, it := range l.ExplainedBy {
			if i > 0 {
				fmt.Fprint(w, " + ")
			}
			fmt.Fprintf(w, "%s %s", it.Name, Human(it.Bytes))
		}
		fmt.Fprintf(w, " + unexplained %s\n", signed(l.Unexplained))
	}
	fmt.Fprint(w, "  kernel and caches:")
	for i, it := range h.Kernel {
		sep := ","
		if i == 0 {
			sep = ""
		}
		fmt.Fprintf(w, "%s %s %s", sep, it.Name, Human(it.Bytes))
	}
	fmt.Fprintf(w, "\n  used (MemTotal - MemFree) not itemised by /proc/meminfo: %s\n", signed(h.Unitemised))
}

// numaText writes the nodes and the shown processes' placement.
func numaText(w io.Writer, n NUMAView, ps []Process) {
	if len(n.Nodes) == 0 {
		return
	}
	fmt.Fprintf(w, "\nNUMA: %s;", plural(len(n.Nodes), "node", "nodes"))
	for _, nd := range n.Nodes {
		fmt.Fprintf(w, " node%d %s total, %s free;", nd.ID, Human(nd.MemTotal), Human(nd.MemFree))
	}
	fmt.Fprintf(w, " numa_maps read: %s\n", n.Read)
	for _, p := range ps {
		if p.NUMA == nil {
			continue
		}
		if p.NUMA.Err != "" {
			fmt.Fprintf(w, "  %d %s: %s\n", p.PID, p.Comm, p.NUMA.Err)
			continue
		}
		flag := ""
		if p.NUMA.Imbalanced {
			flag = "  IMBALANCED"
		}
		fmt.Fprintf(w, "  %d %s: policy %s, %s%s\n", p.PID, p.Comm, p.NUMA.Policy, nodesText(p.NUMA.Nodes), flag)
	}
}

func mappersText(rg Region) string {
	var parts []string
	for i, m := range rg.Mappers {
		if i == 6 {
			parts = append(parts, fmt.Sprintf("+%d more", len(rg.Mappers)-i))
			break
		}
		share := Human(m.PSS)
		if m.Hugetlb > 0 && m.PSS == 0 {
			share = Human(m.Hugetlb) + " huge"
		}
		parts = append(parts, fmt.Sprintf("%d (%s)", m.PID, share))
	}
	return strings.Join(parts, ", ")
}

func nodesText(nodes map[int]uint64) string {
	ids := make([]int, 0, len(nodes))
	var total uint64
	for id, b := range nodes {
		ids = append(ids, id)
		total += b
	}
	sort.Ints(ids)
	var parts []string
	for _, id := range ids {
		pct := 0.0
		if total > 0 {
			pct = 100 * float64(nodes[id]) / float64(total)
		}
		parts = append(parts, fmt.Sprintf("N%d %s (%.0f%%)", id, Human(nodes[id]), pct))
	}
	if len(parts) == 0 {
		return "no resident pages"
	}
	return strings.Join(parts, " ")
}

func dedupNotes(ns []string) []string {
	seen := map[string]bool{}
	var out []string
	for _, n := range ns {
		if !seen[n] {
			seen[n] = true
			out = append(out, n)
		}
	}
	return out
}

// Human formats a size with binary units: 512 B, 4.0 KiB, 1.5 GiB.
func Human(b uint64) string {
	const unit = 1024
	if b < unit {
		return fmt.Sprintf("%d B", b)
	}
	v := float64(b)
	for _, u := range []string{"KiB", "MiB", "GiB", "TiB"} {
		v /= unit
		if v < unit || u == "TiB" {
			return fmt.Sprintf("%.1f %s", v, u)
		}
	}
	return ""
}

func signed(v int64) string {
	if v < 0 {
		return "-" + Human(uint64(-v))
	}
	return Human(uint64(v))
}

// table aligns columns.
type table struct {
	head  []string
	rows  [][]string
	right map[int]bool
}

func (t *table) add(cells ...string) { t.rows = append(t.rows, cells) }

func (t *table) write(w io.Writer) {
	width := make([]int, len(t.head))
	for _, row := range append([][]string{t.head}, t.rows...) {
		for i, c := range row {
			width[i] = max(width[i], len([]rune(c)))
		}
	}
	for _, row := range append([][]string{t.head}, t.rows...) {
		var b strings.Builder
		for i, c := range row {
			pad := strings.Repeat(" ", width[i]-len([]rune(c)))
			if i == len(row)-1 {
				if t.right[i] {
					b.WriteString(pad + c)
				} else {
					b.WriteString(c)
				}
				break
			}
			if t.right[i] {
				b.WriteString(pad + c + "  ")
			} else {
				b.WriteString(c + pad + "  ")
			}
		}
		fmt.Fprintln(w, strings.TrimRight(b.String(), " "))
	}
}

func plural(n int, one, many string) string {
	if n == 1 {
		return "1 " + one
	}
	return fmt.Sprintf("%d %s", n, many)
}
