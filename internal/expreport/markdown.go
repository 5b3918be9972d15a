package expreport

import (
	"bufio"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/dbhost/dbhost/internal/results"
)

// Markdown writes a summary to paste into a ticket: the verdict per arm,
// the arms with their medians, time used and warnings. Text from the
// database is escaped so that names cannot break the table or inject
// markup.
func Markdown(w io.Writer, in Input) error {
	m, err := newModel(in)
	if err != nil {
		return err
	}
	b := bufio.NewWriter(w)
	e := m.e
	title := "dbhost experiment"
	if e.Name != "" {
		title += ": " + md(e.Name)
	}
	fmt.Fprintf(b, "### %s\n\n", title)
	fmt.Fprintf(b, "Experiment %s · %s · started %s\n\n", md(e.ID), md(e.Status), fmtTime(e.Created))

	base := m.base()
	for _, e := range m.effects {
		a := e.arm
		at := ""
		if e.clients > 0 {
			at = " at " + clientsLabel(e.clients)
		}
		if d := e.decision; d != nil {
			fmt.Fprintf(b, "- **%s** vs **%s**%s: **%s** — %s %sx (%s %s), %s, p=%s, %d vs %d trials\n",
				md(a.Name), md(base.Name), at, md(string(d.Verdict)), md(m.metric), fmtRatio(d.Ratio), m.ciLabel(), interval(d),
				fmtChange(d.Ratio), fmtP(d.P), d.NTreatment, d.NBase)
		} else {
			fmt.Fprintf(b, "- **%s** vs **%s**%s: no decision recorded (%d vs %d trials counted)\n",
				md(a.Name), md(base.Name), at, len(a.counted), len(base.counted))
		}
	}
	if len(m.arms) > 1 {
		b.WriteString("\n")
	}

	wall, ongoing := m.wall()
	counted := m.countedTrials()
	line := fmt.Sprintf("Wall time %s", fmtWall(wall))
	if ongoing && wall > 0 {
		line += " (not finished)"
	}
	line += fmt.Sprintf(" · %d trials run, %d counted, %d excluded", len(m.trials), counted, len(m.trials)-counted)
	if len(m.aa) > 0 {
		line += fmt.Sprintf(" (+%d A/A calibration)", len(m.aa))
	}
	if m.budget > 0 {
		line += fmt.Sprintf(" · budget %d per arm", m.budget)
		if m.sweep {
			line += " and client count"
		}
	}
	if m.cal != nil {
		line += fmt.Sprintf(" · noise ±%s, smallest detectable effect %s", fmtPct(m.cal.NoiseCV), fmtPct(m.cal.MDE))
	}
	if m.replacement != "" {
		line += " · " + md(m.replacement)
	}
	b.WriteString(line + "\n\n")

	if len(m.arms) > 0 {
		b.WriteString("| Arm | Knobs | Trials | Median ops/s | p95 | Ratio | Verdict |\n")
		b.WriteString("|---|---|--:|--:|--:|--:|---|\n")
		for _, a := range m.arms {
			knobs := make([]string, len(a.Knobs))
			for i, k := range a.Knobs {
				knobs[i] = md(k)
			}
			kn := strings.Join(knobs, ", ")
			if kn == "" {
				kn = "(as found)"
			}
			name := md(a.Name)
			ratio, verdict := "", ""
			if a.Base {
				name += " (base)"
			} else if d := a.Decision; d != nil {
				ratio, verdict = fmtRatio(d.Ratio)+"x", md(string(d.Verdict))
			} else {
				ratio, verdict = "–", "no decision"
			}
			trials := strconv.Itoa(len(a.counted))
			if a.excluded > 0 {
				trials += fmt.Sprintf(" (+%d excluded)", a.excluded)
			}
			xs, ts := m.atHead(a)
			fmt.Fprintf(b, "| %s | %s | %s | %s | %s | %s | %s |\n", name, kn, trials, fmtOps(summarize(xs).Med),
				fmtDur(medianDur(ts, func(t *results.Trial) time.Duration { return t.P95 })), ratio, verdict)
		}
		if m.sweep {
			fmt.Fprintf(b, "\nMedian and p95 at %s; ratio and verdict of the headline decision.\n", clientsLabel(m.head()))
		}
		b.WriteString("\n")
	}

	if m.sweep {
		b.WriteString("| Clients |")
		for _, a := range m.arms {
			b.WriteString(" " + md(a.Name) + " |")
		}
		b.WriteString("\n|--:|" + strings.Repeat("--:|", len(m.arms)) + "\n")
		for _, cl := range m.clients {
			fmt.Fprintf(b, "| %d |", cl)
			for _, a := range m.arms {
				var xs []float64
				for _, t := range a.trials {
					if t.Clients == cl && t.Excluded == "" {
						xs = append(xs, t.OpsPerSec)
					}
				}
				b.WriteString(" " + fmtOps(summarize(xs).Med) + " |")
			}
			b.WriteString("\n")
		}
		b.WriteString("\nMedian ops/s per client count.\n\n")
	}

	if ws := m.warnings(); len(ws) > 0 {
		b.WriteString("**Warnings**\n\n")
		for _, s := range ws {
			b.WriteString("- " + md(s) + "\n")
		}
		b.WriteString("\n")
	}
	return b.Flush()
}

// mdEscaper backslash-escapes the Markdown punctuation that can start
// markup (emphasis, code, links, HTML, headings, table cells; CommonMark
// allows the backslash before any ASCII punctuation) and flattens line
// breaks, so a stored string stays one piece of plain text, also inside
// a table cell.
var mdEscaper = strings.NewReplacer(
	"\\", "\\\\", "`", "\\`", "*", "\\*", "_", "\\_", "[", "\\[", "]", "\\]",
	"<", "\\<", ">", "\\>", "#", "\\#", "|", "\\|", "~", "\\~", "&", "\\&",
	"\r\n", " ", "\n", " ", "\r", " ",
)

func md(s string) string { return mdEscaper.Replace(s) }
