package report

import (
	"fmt"
	"io"
	"strings"

	"github.com/dbhost/dbhost/internal/check"
	"github.com/dbhost/dbhost/internal/engine"
	"github.com/dbhost/dbhost/internal/results"
	"github.com/dbhost/dbhost/internal/termsafe"
	"github.com/dbhost/dbhost/internal/textio"
	"github.com/dbhost/dbhost/internal/waiver"
)

type palette struct{ red, yellow, blue, green, grey, bold, reset string }

func colors(on bool) palette {
	if !on {
		return palette{}
	}
	return palette{red: "\x1b[31m", yellow: "\x1b[33m", blue: "\x1b[34m", green: "\x1b[32m", grey: "\x1b[90m", bold: "\x1b[1m", reset: "\x1b[0m"}
}

// renderText groups failures by severity, then what could not be judged,
// then (with -v) what passed. Evidence and fixes are indented under each.
func renderText(w io.Writer, a *Audit, o Options) error {
	ew := &textio.ErrWriter{W: w}
	t := &textAudit{a: a, o: o, c: colors(o.Color), p: func(format string, args ...any) { fmt.Fprintf(ew, format, args...) }}
	t.header()
	c := t.c
	groups := []struct {
		title  string
		status check.Status
		sev    check.Severity
		color  string
		mark   string
	}{
		{"CRITICAL", check.Fail, check.Critical, c.red, "✗"},
		{"WARNING", check.Fail, check.Warning, c.yellow, "✗"},
		{"INFO", check.Fail, check.Info, c.blue, "✗"},
		{"COULD NOT JUDGE", check.Unknown, 0, c.grey, "?"},
		{"PASSED", check.Pass, 0, c.green, "✓"},
	}
	for _, g := range groups {
		if g.status == check.Unknown {
			t.waived() // after the live failures, apart from them
		}
		if g.status == check.Pass && !o.Verbose {
			continue
		}
		var in []check.Finding
		for _, fd := range a.Findings {
			if fd.Status == g.status && fd.Waiver == nil && (g.sev == 0 || fd.Severity == g.sev) {
				in = append(in, fd)
			}
		}
		if len(in) == 0 {
			continue
		}
		t.p("\n%s%s%s (%d)\n", c.bold+g.color, g.title, c.reset, len(in))
		for _, fd := range in {
			t.finding(fd, g.color, g.mark)
		}
	}
	t.footer()
	return ew.Err
}

// textAudit writes one audit as text.
type textAudit struct {
	a *Audit
	o Options
	c palette
	p func(format string, args ...any)
}

// header names the host, how it was read, and its databases.
func (t *textAudit) header() {
	c, f, p := t.c, t.a.Facts, t.p
	how := "live"
	if f.Source != "live" {
		how = "snapshot " + f.Source
	}
	root := "as root"
	if !f.AsRoot {
		root = "not as root: some facts need root and are reported as unknown"
	}
	p("%sdbhost audit%s of %s (%s, kernel %s), %s, %s\n", c.bold, c.reset, f.System.Hostname, orDash(f.System.OS), orDash(f.System.Kernel.Value), how, root)
	if len(f.Instances) == 0 {
		p("Databases: none found running\n")
		return
	}
	p("Databases:\n")
	for _, in := range f.Instances {
		src := in.SettingsSource
		if in.LiveErr != "" {
			src += " (live read failed: " + in.LiveErr + ")"
		}
		// Values an instance claims stay on their line.
		p("  %-16s %s %s, pid %d, user %s, data %s, settings from %s\n", in.Name(), in.Flavor, termsafe.Line(orDash(in.Version)), in.PID, orDash(in.User), termsafe.Line(orDash(in.DataDir)), termsafe.Line(src))
		if why := trustLine(in.Trust); why != "" {
			p("  %-16s %s\n", "", why)
		}
	}
}

// finding writes one finding: its line, reason, evidence (-v), stored
// experiment verdict (-v) and fix.
func (t *textAudit) finding(fd check.Finding, color, mark string) {
	c, o, p := t.c, t.o, t.p
	p("  %s%s%s %s%s%s  [%s] %s\n", color, mark, c.reset, c.bold, fd.ID, c.reset, termsafe.Line(fd.Subject), fd.Headline())
	// What an untrusted instance claims may hold newlines made to
	// look like lines of their own: its text stays one paragraph.
	para := func(s string) string { return s }
	if fd.Untrusted {
		para = termsafe.Line
	}
	if fd.Status != check.Pass || o.Verbose {
		p("%s", indent(para(fd.Reason), "      "))
	}
	if o.Verbose {
		for _, e := range fd.Evidence {
			src := ""
			if e.Source != "" {
				src = c.grey + "  (" + e.Source + ")" + c.reset
			}
			p("      %s• %s = %s%s%s\n", c.grey, e.Key, c.reset, termsafe.Line(e.Value), termsafe.Line(src))
		}
	}
	if v := t.a.experiment(fd.ID); v != nil && o.Verbose {
		p("      %sexperiment:%s %s\n", c.bold, c.reset, experimentLine(v))
	}
	if fd.Fix == nil || fd.Status != check.Fail {
		return
	}
	if fd.Fix.HostOnly {
		p("      %sfix on the container's host:%s %s\n", c.bold, c.reset, fd.Fix.Summary)
	} else {
		p("      %sfix:%s %s\n", c.bold, c.reset, fd.Fix.Summary)
	}
	// Files first: the commands after them may depend on them.
	for _, fl := range fd.Fix.Files {
		p("        persist: %s\n", fl.Path)
	}
	for _, r := range fd.Fix.Runtime {
		p("        now:     %s\n", r)
	}
	if fd.Fix.Manual != "" {
		p("%s", indent(para(fd.Fix.Manual), "        "))
	}
}

// waived writes the failing findings a waiver accepts, each with the
// waiver's reason, expiry and place: what was accepted stays in sight.
func (t *textAudit) waived() {
	c, p := t.c, t.p
	var in []check.Finding
	for _, fd := range t.a.Findings {
		if fd.Status == check.Fail && fd.Waiver != nil {
			in = append(in, fd)
		}
	}
	if len(in) == 0 {
		return
	}
	p("\n%s%sWAIVED%s (%d): failing, accepted by a waiver; not counted as failures\n", c.bold, c.grey, c.reset, len(in))
	for _, fd := range in {
		w := fd.Waiver
		until := "no expiry"
		if !w.Expires.IsZero() {
			until = "until " + waiver.When(w.Expires)
		}
		p("  %s~%s %s%s%s  [%s] %s (%s)\n", c.grey, c.reset, c.bold, fd.ID, c.reset, termsafe.Line(fd.Subject), fd.Headline(), fd.Severity)
		p("%s", indent("waived: "+termsafe.Line(w.Reason)+" ("+until+", "+termsafe.Line(w.Source)+")", "      "))
		if t.o.Verbose {
			p("%s", indent(termsafe.Line(fd.Reason), "      "))
		}
	}
}

// footer writes the waiver file's notes, the notes (-v) and the summary.
func (t *textAudit) footer() {
	a, c, o, p := t.a, t.c, t.o, t.p
	if notes := a.Waivers.Notes(); len(notes) > 0 {
		p("\n%sWAIVERS%s (%s)\n", c.bold, c.reset, termsafe.Line(a.Waivers.Source))
		for _, n := range notes {
			p("  - %s", strings.TrimPrefix(indent(termsafe.Line(n), "    "), "    "))
		}
	}
	if len(a.Facts.Notes) > 0 && o.Verbose {
		p("\n%sNOTES%s\n", c.bold, c.reset)
		for _, n := range a.Facts.Notes {
			p("  - %s\n", n)
		}
	}
	s := Summarize(a)
	waived := ""
	if a.Waivers != nil {
		waived = fmt.Sprintf(", %d waived", s.Waived)
	}
	p("\n%sSummary:%s %d failed (%d critical, %d warning, %d info)%s, %d could not be judged, %d passed; %d checks on %d subjects",
		c.bold, c.reset, s.Fail, s.BySev["critical"], s.BySev["warning"], s.BySev["info"], waived, s.Unknown, s.Pass, s.Checks, s.Subjects)
	if a.Duration > 0 {
		p(" in %.0f ms", float64(a.Duration.Microseconds())/1000)
	}
	p(".\n")
	if !o.Verbose {
		p("Run with -v for evidence and passed checks; `dbhost fix --out DIR` writes the persistent fixes.\n")
	}
}

// experimentLine describes a stored verdict on a finding: "fixed vs now
// better, 1.19x (95 % CI 1.05–1.35), 2026-11-26, 'dbhost results show ID'".
func experimentLine(v *results.FindingVerdict) string {
	bound := func(b *float64) string {
		if b == nil {
			return "open"
		}
		return fmt.Sprintf("%.2f", *b)
	}
	return fmt.Sprintf("fixed vs now %s, %.2fx (95 %% CI %s–%s), %s, 'dbhost results show %s'",
		v.Verdict, v.Ratio, bound(v.Interval[0]), bound(v.Interval[1]), v.Date.Format("2006-01-02"), v.Experiment)
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// indent wraps text at 100 columns under a prefix.
func indent(s, prefix string) string {
	var b strings.Builder
	for _, para := range strings.Split(strings.TrimSpace(s), "\n") {
		line := prefix
		for _, word := range strings.Fields(para) {
			if len(line) > len(prefix) && len(line)+1+len(word) > 100 {
				b.WriteString(line + "\n")
				line = prefix
			}
			if len(line) > len(prefix) {
				line += " "
			}
			line += word
		}
		b.WriteString(line + "\n")
	}
	return b.String()
}

// trustLine says what a reader must know of an instance's trust: that
// dbhost acts on nothing it claims, or who vouched for it.
func trustLine(t engine.Trust) string {
	if t.Basis == engine.TrustNone {
		return "NOT TRUSTED: " + termsafe.Line(t.Why) + "; judged, but dbhost writes, sets and runs nothing for it (--trust-server vouches for a server)"
	}
	if t.Basis == engine.TrustVouched {
		return "trusted: " + termsafe.Line(t.Why)
	}
	return ""
}
