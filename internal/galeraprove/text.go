package galeraprove

import (
	"fmt"
	"io"
	"sort"
	"strings"
	"text/tabwriter"

	"github.com/dbhost/dbhost/internal/termsafe"
	"github.com/dbhost/dbhost/internal/textio"
)

// WriteText writes the proof as a table: scenario, predicted, observed,
// match. Names are escaped (termsafe): a lab's members are named by the
// user.
func (r *Report) WriteText(w io.Writer) error {
	ew := &textio.ErrWriter{W: w}
	fmt.Fprintf(ew, "Galera proof%s: %s; evs.suspect_timeout %s\n", labName(r.Lab.Name), members(r), r.Lab.SuspectTimeout)
	t := r.Tolerance
	fmt.Fprintf(ew, "Model: survives %d at once, %d one by one, %d shut down cleanly\n\n", t.AtOnce, t.OneByOne, t.CleanShutdown)
	tw := tabwriter.NewWriter(ew, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "SCENARIO\tPREDICTED\tOBSERVED\tMATCH\tREACTED")
	for _, res := range r.Results {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", termsafe.Line(res.Scenario.Name), predicted(res), observed(res), yesNo(res.Match), reacted(res))
	}
	tw.Flush()
	fmt.Fprintln(ew)
	for _, res := range r.Results {
		fmt.Fprintf(ew, "%s: %s. %s\n", termsafe.Line(res.Scenario.Name), termsafe.Line(describe(res.Scenario)), termsafe.Line(res.Prediction.Why))
		writeNotes(ew, res.Notes)
	}
	for _, res := range r.Reruns {
		fmt.Fprintf(ew, "%s was run again, its first attempt void:\n", termsafe.Line(res.Scenario.Name))
		writeNotes(ew, res.Notes)
	}
	if r.Error != "" {
		// The error may end in a node's log: its lines stay lines.
		msg := strings.TrimRight(termsafe.Escape(r.Error), "\n")
		fmt.Fprintf(ew, "\nStopped early: %s\n", strings.ReplaceAll(msg, "\n", "\n  "))
	}
	fmt.Fprintf(ew, "\nMatched %d of %d scenarios. Lab start %s, stop %s; the proof took %s.\n",
		r.Matched, r.Total, r.Lab.Start, stopped(r.Lab.Stop), r.Elapsed)
	return ew.Err
}

func labName(n string) string {
	if n == "" {
		return ""
	}
	return " of lab " + termsafe.Line(n)
}

// members counts the lab's members: "3 data nodes + garbd".
func members(r *Report) string {
	data, arb := 0, []string{}
	for _, n := range r.Lab.Nodes {
		if n.Arbitrator {
			arb = append(arb, termsafe.Line(n.Name))
		} else {
			data++
		}
	}
	s := fmt.Sprintf("%d data nodes", data)
	if len(arb) > 0 {
		s += " + " + strings.Join(arb, " + ")
	}
	return s
}

// predicted groups the running members by the model's verdict:
// "Primary: node2,node3; non-Primary: node1".
func predicted(res Result) string {
	groups := map[bool][]string{}
	for _, name := range sortedNames(res.Prediction.Primary) {
		p := res.Prediction.Primary[name]
		groups[p] = append(groups[p], termsafe.Line(name))
	}
	var parts []string
	if len(groups[true]) > 0 {
		parts = append(parts, "Primary: "+strings.Join(groups[true], ","))
	}
	if len(groups[false]) > 0 {
		parts = append(parts, "non-Primary: "+strings.Join(groups[false], ","))
	}
	if len(parts) == 0 {
		return "-"
	}
	return strings.Join(parts, "; ")
}

// observed groups the data nodes by the view they showed:
// "Primary/2: node2,node3; non-Primary/1: node1".
func observed(res Result) string {
	groups := map[string][]string{}
	for _, n := range res.Nodes {
		k := "unreadable"
		if n.Error == "" {
			k = fmt.Sprintf("%s/%d", termsafe.Line(n.ClusterStatus), n.ClusterSize)
		}
		groups[k] = append(groups[k], termsafe.Line(n.Name))
	}
	keys := sortedNames(groups)
	// Primary first, as in the prediction.
	sort.SliceStable(keys, func(i, j int) bool {
		return strings.HasPrefix(keys[i], "Primary/") && !strings.HasPrefix(keys[j], "Primary/")
	})
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = k + ": " + strings.Join(groups[k], ",")
	}
	if len(parts) == 0 {
		return "-"
	}
	return strings.Join(parts, "; ")
}

func reacted(res Result) string {
	if !res.Settled {
		return "not settled"
	}
	return res.React.String()
}

func stopped(m Millis) string {
	if m == 0 {
		return "(still running)"
	}
	return m.String()
}

func yesNo(b bool) string {
	if b {
		return "yes"
	}
	return "NO"
}

// writeNotes writes a result's notes, a log's lines each on a line.
func writeNotes(w io.Writer, notes []string) {
	for _, n := range notes {
		lines := strings.Split(n, "\n")
		fmt.Fprintf(w, "  note: %s\n", termsafe.Line(lines[0]))
		for _, l := range lines[1:] {
			fmt.Fprintf(w, "    %s\n", termsafe.Line(l))
		}
	}
}
