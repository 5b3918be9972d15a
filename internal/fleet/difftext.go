package fleet

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	"github.com/dbhost/dbhost/internal/check"
	"github.com/dbhost/dbhost/internal/termsafe"
)

// kindTitles head the groups of settings in text and HTML.
var kindTitles = map[string]string{
	KindSysctl:    "Kernel parameters",
	KindTHP:       "Transparent huge pages",
	KindHugePages: "Huge page pools",
	KindStorage:   "Devices by the database paths they hold",
	KindDevice:    "Devices by name",
	KindLimits:    "Database process limits",
	KindDB:        "Database settings",
}

// KindTitle is the heading of a kind of settings.
func KindTitle(kind string) string {
	if t, ok := kindTitles[kind]; ok {
		return t
	}
	return kind
}

// cell makes a value safe and one line for an aligned column: terminal
// controls escaped (termsafe), and tabs and newlines, which termsafe lets
// through but would break the columns, written as \t and \n.
func cell(s string) string {
	s = termsafe.Escape(s)
	if strings.ContainsAny(s, "\t\n") {
		s = strings.NewReplacer("\t", `\t`, "\n", `\n`).Replace(s)
	}
	return s
}

const notObserved = "(not observed)"

func optValue(p *string) string {
	if p == nil {
		return notObserved
	}
	if *p == "" {
		return `""`
	}
	return cell(*p)
}

// shownValue is a side's value for people: the value read, and what it
// compares as when that is a kernel default ("2466177 = default (derived
// from RAM)"); a cleaned path shows as it was read.
func shownValue(p *string, raw string) string {
	switch {
	case p == nil || raw == "":
		return optValue(p)
	case IsDerived(*p):
		return cell(raw) + " = " + cell(*p)
	}
	return cell(raw)
}

func statusText(s check.Status) string {
	if s == "" {
		return "-"
	}
	return string(s)
}

// WriteDiffText writes a Result for people: grouped, aligned, and escaped
// (values come from other hosts). Settings observed on one side only are
// counted per kind; verbose lists them.
func WriteDiffText(w io.Writer, r *Result, verbose bool) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "a:\t%s\t%s\n", cell(r.A.File), cell(sideDesc(r.A)))
	fmt.Fprintf(tw, "b:\t%s\t%s\n", cell(r.B.File), cell(sideDesc(r.B)))
	if err := tw.Flush(); err != nil {
		return err
	}
	if r.Empty() {
		_, err := fmt.Fprintln(w, "\nNo differences in settings, databases, devices or findings.")
		return err
	}
	if len(r.DatabasePairs) > 0 {
		fmt.Fprintf(w, "\nDatabases paired (%d)\n", len(r.DatabasePairs))
		for _, p := range r.DatabasePairs {
			name := cell(p.A)
			if p.A != p.B {
				name += " = " + cell(p.B)
			}
			fmt.Fprintf(tw, "  %s\t(paired by %s: %s)\n", name, pairedBy(p.By), cell(p.Why))
		}
		tw.Flush()
	}
	for _, sec := range []struct {
		title string
		list  []Presence
	}{{"Databases", r.Databases}, {"Devices", r.Devices}} {
		if len(sec.list) == 0 {
			continue
		}
		fmt.Fprintf(w, "\n%s on one side only (%d)\n", sec.title, len(sec.list))
		for _, p := range sec.list {
			fmt.Fprintf(tw, "  only in %s\t%s\n", p.In, cell(p.Name))
		}
		tw.Flush()
	}
	var both, oneSide []SettingDiff
	for _, d := range r.Settings {
		if d.A != nil && d.B != nil {
			both = append(both, d)
		} else {
			oneSide = append(oneSide, d)
		}
	}
	if len(both) > 0 {
		fmt.Fprintf(w, "\nSettings that differ (%d)\n", len(both))
		writeSettings(w, both, r.DevicePairs)
	}
	if len(oneSide) > 0 {
		fmt.Fprintf(w, "\nSettings observed on one side only (%d)\n", len(oneSide))
		if verbose {
			writeSettings(w, oneSide, r.DevicePairs)
		} else {
			writeOneSideCounts(tw, oneSide)
			tw.Flush()
			fmt.Fprintln(w, "  (-v lists them)")
		}
	}
	if len(r.Findings) > 0 {
		fmt.Fprintf(w, "\nFindings whose verdict differs (%d)\n", len(r.Findings))
		fmt.Fprintf(tw, "  check\tsubject\tseverity\ta\tb\n")
		for _, d := range r.Findings {
			fmt.Fprintf(tw, "  %s\t%s\t%s\t%s\t%s\n", cell(d.ID), cell(d.Subject), d.Severity, statusText(d.A), statusText(d.B))
		}
		tw.Flush()
	}
	_, err := fmt.Fprintf(w, "\nDifferences: %s.\n", summaryLine(r))
	return err
}

func pairedBy(by string) string {
	switch by {
	case "data_directory":
		return "data directory"
	}
	return by
}

func sideDesc(s Side) string {
	d := s.Label
	if !s.AsRoot {
		d += " (observed without root: some settings were not readable)"
	}
	return d
}

func summaryLine(r *Result) string {
	var parts []string
	add := func(n int, one, many string) {
		switch {
		case n == 1:
			parts = append(parts, "1 "+one)
		case n > 1:
			parts = append(parts, fmt.Sprintf("%d %s", n, many))
		}
	}
	add(len(r.Databases), "database", "databases")
	add(len(r.Devices), "device", "devices")
	add(len(r.Settings), "setting", "settings")
	add(len(r.Findings), "finding", "findings")
	return strings.Join(parts, ", ")
}

// longValue is the width past which a value is not put in a column: it is
// written on a line of its own below the key.
const longValue = 48

// writeSettings writes settings grouped by kind, each group aligned; a row
// with a long value is written below the group, one value a line. Below
// the devices, the database paths each device shown holds.
func writeSettings(w io.Writer, list []SettingDiff, devs []DevicePair) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	var long []SettingDiff
	shown := map[string]bool{}
	flushGroup := func() {
		tw.Flush()
		for _, d := range long {
			fmt.Fprintf(w, "    %s\n      a: %s\n      b: %s\n", cell(shortKey(d)), shownValue(d.A, d.RawA), shownValue(d.B, d.RawB))
		}
		long = long[:0]
		for _, p := range devs {
			if shown[p.Name] && len(p.Roles) > 0 {
				fmt.Fprintf(w, "    %s holds %s\n", cell(p.Name), cell(rolesText(p.Roles)))
			}
		}
		clear(shown)
	}
	kind := ""
	for _, d := range list {
		if d.Kind != kind {
			flushGroup()
			kind = d.Kind
			title := KindTitle(kind)
			if kind == KindDevice {
				title = "Devices, paired by the database paths they hold, then by name"
			}
			fmt.Fprintf(w, "  %s\n", title)
			fmt.Fprintf(tw, "    \ta\tb\n")
		}
		if d.Kind == KindDevice {
			shown[Subject(d.Key)] = true
		}
		a, b := shownValue(d.A, d.RawA), shownValue(d.B, d.RawB)
		if len(a) > longValue || len(b) > longValue {
			long = append(long, d)
			continue
		}
		fmt.Fprintf(tw, "    %s\t%s\t%s\n", cell(shortKey(d)), a, b)
	}
	flushGroup()
}

// rolesText writes database paths by database: "mysql:3306 data, redo;
// postgres:5432 data, wal".
func rolesText(roles []string) string {
	var b strings.Builder
	last := ""
	for _, r := range roles {
		inst, role := splitRole(r)
		switch {
		case inst == last:
			b.WriteString(", ")
		case last != "":
			b.WriteString("; ")
			fallthrough
		default:
			b.WriteString(inst + " ")
		}
		b.WriteString(role)
		last = inst
	}
	return b.String()
}

func shortKey(d SettingDiff) string { return strings.TrimPrefix(d.Key, d.Kind+"/") }

// writeOneSideCounts counts settings seen on one side only, per kind and
// side, and per database or device where the key names one.
func writeOneSideCounts(tw *tabwriter.Writer, list []SettingDiff) {
	type group struct{ kind, subject, in string }
	n := map[group]int{}
	var order []group
	for _, d := range list {
		g := group{d.Kind, Subject(d.Key), "a"}
		if d.A == nil {
			g.in = "b"
		}
		if n[g] == 0 {
			order = append(order, g)
		}
		n[g]++
	}
	for _, g := range order {
		what := g.kind + "/"
		if g.subject != "" {
			what += cell(g.subject) + "/"
		}
		fmt.Fprintf(tw, "  only in %s\t%d\t%s*\n", g.in, n[g], what)
	}
}
