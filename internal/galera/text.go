package galera

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	"github.com/dbhost/dbhost/internal/termsafe"
)

// WriteText prints the tolerance for people: the members, what failures
// it survives, the worst single failure, the segments, what would help and
// the problems. Names come from servers and users: escaped.
func WriteText(w io.Writer, t Tolerance) error {
	var b strings.Builder
	tw := tabwriter.NewWriter(&b, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "MEMBER\tKIND\tWEIGHT\tSEGMENT\tADDRESS")
	for _, m := range t.Layout.Members {
		kind := "data"
		if m.Arbitrator {
			kind = "arbitrator"
		}
		weight := fmt.Sprint(m.Weight)
		if m.Assumed {
			weight += "?"
		}
		addr := m.Address
		if addr == "" {
			addr = "-"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%s\n", termsafe.Line(m.Name), kind, weight, m.Segment, termsafe.Line(addr))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintf(&b, "\n%d data node(s), %d arbitrator(s), weight %d\n", t.DataNodes, t.Arbitrators, t.Weight)
	fmt.Fprintf(&b, "survives at once:     %d failure(s)\n", t.AtOnce)
	fmt.Fprintf(&b, "survives one by one:  %d failure(s)\n", t.OneByOne)
	fmt.Fprintf(&b, "clean shutdown:       %d member(s) may leave, one at a time\n", t.CleanShutdown)
	if t.Worst != "" {
		verdict := "the cluster stops"
		if t.WorstSurvives {
			verdict = "survived"
		}
		fmt.Fprintf(&b, "worst single failure: %s (%s)\n", termsafe.Line(t.Worst), verdict)
	}
	if t.EvenSplit {
		fmt.Fprintln(&b, "even split:           possible (both halves non-Primary)")
	}
	if len(t.Segments) > 0 {
		b.WriteString("\n")
		tw = tabwriter.NewWriter(&b, 0, 0, 2, ' ', 0)
		fmt.Fprintln(tw, "SEGMENT\tMEMBERS\tLOST WHOLE\tCUT OFF: PRIMARY SIDE")
		for _, s := range t.Segments {
			lose := "stops"
			if s.LoseSurvives {
				lose = "survives"
			}
			names := make([]string, len(s.Members))
			for i, n := range s.Members {
				names[i] = termsafe.Line(n)
			}
			fmt.Fprintf(tw, "%d\t%s\t%s\t%s\n", s.Segment, strings.Join(names, ","), lose, s.IsolatedPrimary)
		}
		if err := tw.Flush(); err != nil {
			return err
		}
	}
	if len(t.WhatIf) > 0 {
		fmt.Fprintln(&b, "\nwhat if:")
		for _, wi := range t.WhatIf {
			extra := ""
			if wi.EvenSplit {
				extra += ", even split possible"
			} else {
				extra += ", no even split"
			}
			if wi.SegmentSplitSurvives != nil {
				if *wi.SegmentSplitSurvives {
					extra += ", any segment cut off: a side keeps Primary"
				} else {
					extra += ", a segment cut off can stop both sides"
				}
			}
			fmt.Fprintf(&b, "  %s: at once %s, one by one %s%s\n", termsafe.Line(wi.Change), was(wi.AtOnce, t.AtOnce), was(wi.OneByOne, t.OneByOne), extra)
		}
	}
	if len(t.Findings) > 0 {
		fmt.Fprintln(&b, "\nfindings:")
		for _, f := range t.Findings {
			fmt.Fprintf(&b, "  - %s\n", termsafe.Line(f))
		}
	}
	if len(t.Layout.Notes) > 0 {
		fmt.Fprintln(&b, "\nnotes:")
		for _, n := range t.Layout.Notes {
			fmt.Fprintf(&b, "  - %s\n", termsafe.Line(n))
		}
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// was is a number after a change, with the one before when it differs.
func was(after, before int) string {
	if after == before {
		return fmt.Sprint(after)
	}
	return fmt.Sprintf("%d (now %d)", after, before)
}
