package fleet

import (
	"bytes"
	"crypto/sha256"
	_ "embed"
	"encoding/base64"
	"fmt"
	"html/template"
	"io"
	"strconv"
	"sync"

	"github.com/dbhost/dbhost/internal/check"
	"github.com/dbhost/dbhost/internal/termsafe"
)

//go:embed fleet.html.tmpl
var pageText string

// pageScript filters and sorts the page's tables in place. It reads the
// page (textContent) and writes only text and visibility, never markup.
//
//go:embed fleet.js
var pageScript string

// page is parsed on first use: every dbhost command would pay for it at
// start-up otherwise.
var page = sync.OnceValue(func() *template.Template {
	return template.Must(template.New("fleet").Parse(pageText))
})

// pageCSP allows the page nothing but its inline styles and the one inline
// script, by its hash: nothing is fetched, and no other script runs, should
// a snapshot's text ever reach the page as markup.
var pageCSP = sync.OnceValue(func() string {
	sum := sha256.Sum256([]byte(pageScript))
	return "default-src 'none'; style-src 'unsafe-inline'; script-src 'sha256-" + base64.StdEncoding.EncodeToString(sum[:]) + "'"
})

// maxInlineHosts is how many hosts a setting's value lists before the rest
// fold into a <details> element.
const maxInlineHosts = 2

// rankRows is how many rows of the two rankings the page shows before
// "show all": what fits beside each other on a laptop screen.
const rankRows = 12

// oddShown is how many of a host's rare settings and failures its row in
// the ranking shows before the rest fold.
const oddShown = 2

// WriteHTML writes the report as one self-contained HTML page: inline
// styles and one inline script (allowed by its hash), nothing fetched.
// Every text from a snapshot goes through html/template, which escapes it
// for where it appears, and through termsafe.Escape first: control
// characters and the Unicode characters that reorder text are shown as
// escapes, so that a page cat to a terminal cannot drive it and a host
// name cannot display reversed.
func WriteHTML(w io.Writer, r *Report) error {
	var buf bytes.Buffer
	if err := page().Execute(&buf, newView(r)); err != nil {
		return fmt.Errorf("fleet report: %w", err)
	}
	_, err := w.Write(buf.Bytes())
	return err
}

type view struct {
	Title          string
	CSP            string
	Script         template.JS
	Summary        Summary
	Collected      string
	Errors         []LoadError
	FleetWide      []column
	Outliers       []outlierRow
	RankRows       int
	Columns        []column // the matrix: separating checks, then fleet-wide ones
	Separating     int      // how many of Columns are not fleet-wide
	PassEverywhere []CheckSummary
	Rows           []row
	Settings       []settingRow
	Hosts          []hostView
	SettingsKinds  []kindCount
}

type column struct {
	ID, Title, Problem, Severity string
	Fail, Unknown, Pass          int
	Judged                       int
	FleetWide                    bool
	Separation                   string
	severity                     check.Severity
}

// outlierRow is a host in the ranking by distance from the majority.
type outlierRow struct {
	Rank                   int
	Anchor, Hostname, File string
	Distance               string
	Failing, Critical      int
	Odd, More              []oddItem
}

// oddItem is one rare thing about a host: a setting value (Key, Value,
// Majority) or a failure where most hosts pass (Check).
type oddItem struct {
	Key, Value, Majority, Check, Title string
	Holders, Observed                  int
	Rarity                             string
}

type row struct {
	Anchor, Hostname, File, Distance string
	Failing, Off                     int
	Cells                            []matrixCell
}

// matrixCell is one host's worst verdict on one check.
type matrixCell struct {
	Class, Symbol string
	FleetWide     bool
}

type settingRow struct {
	Key, Kind, Majority string
	Tie                 bool
	MajorityCount       int
	Observed, Off       int
	Rarity              string
	Values              []valueView
}

type valueView struct {
	Value  string
	Count  int
	Shown  []hostLink
	Folded []hostLink
}

type hostLink struct{ Anchor, Name string }

type hostView struct {
	Anchor, Hostname, File, When, Kernel string
	AsRoot                               bool
	Instances                            []string
	Failing, Critical, Unknown           int
	Distance                             string
	Failures                             []HostFinding
	Off                                  []OffSetting
}

type kindCount struct {
	Kind, Title string
	N           int
}

func anchor(i int) string { return "h" + strconv.Itoa(i+1) }

// num shows a rarity or distance with at most two decimals.
func num(f float64) string { return strconv.FormatFloat(f, 'f', -1, 64) }

func newView(r *Report) view {
	v := view{Title: "dbhost fleet report", CSP: pageCSP(), Script: template.JS(pageScript), Summary: r.Summary, RankRows: rankRows}
	for _, e := range r.Errors {
		v.Errors = append(v.Errors, LoadError{File: esc(e.File), Error: esc(e.Error)})
	}
	anchors := map[string]string{}
	names := map[string]string{}
	hostnames := map[string]int{}
	for _, h := range r.Hosts {
		hostnames[h.Hostname]++
	}
	var first, last string
	for i, h := range r.Hosts {
		anchors[h.ID] = anchor(i)
		// A link names the host; the file too when the name is not
		// enough to tell it apart.
		names[h.ID] = esc(h.Hostname)
		if h.Hostname == "" || hostnames[h.Hostname] > 1 {
			names[h.ID] = esc(h.Hostname + " (" + base(h.ID) + ")")
		}
		if h.CollectedAt != "" {
			if first == "" || h.CollectedAt < first {
				first = h.CollectedAt
			}
			if h.CollectedAt > last {
				last = h.CollectedAt
			}
		}
	}
	switch {
	case first == "":
	case first == last:
		v.Collected = first
	default:
		v.Collected = first + " to " + last
	}
	problems := map[string]string{}
	var fleetWide []column
	for _, c := range r.Checks {
		problems[c.ID] = c.Problem
		col := column{ID: c.ID, Title: c.Title, Problem: c.Problem, Severity: c.Severity.String(), Fail: c.Fail, Unknown: c.Unknown, Pass: c.Pass,
			Judged: c.Fail + c.Unknown + c.Pass, FleetWide: c.FleetWide, Separation: num(c.Separation), severity: c.Severity}
		switch {
		case c.FleetWide:
			fleetWide = append(fleetWide, col)
		case c.Fail+c.Unknown == 0:
			v.PassEverywhere = append(v.PassEverywhere, c)
		default:
			v.Columns = append(v.Columns, col)
		}
	}
	v.Separating = len(v.Columns)
	v.FleetWide = fleetWide
	v.Columns = append(v.Columns, fleetWide...)
	for i, h := range r.Hosts {
		o := outlierRow{Rank: i + 1, Anchor: anchor(i), Hostname: esc(h.Hostname), File: esc(base(h.ID)), Distance: num(h.Distance),
			Failing: h.Failing, Critical: h.Critical}
		for _, it := range oddItems(h, problems) {
			if len(o.Odd) < oddShown {
				o.Odd = append(o.Odd, it)
			} else {
				o.More = append(o.More, it)
			}
		}
		v.Outliers = append(v.Outliers, o)

		rw := row{Anchor: anchor(i), Hostname: esc(h.Hostname), File: esc(base(h.ID)), Distance: num(h.Distance),
			Failing: h.Failing, Off: len(h.OffMajority)}
		for _, c := range v.Columns {
			f, ok := h.worstOf(c.ID)
			if st, judged := h.Checks[c.ID]; !ok && judged {
				// A report not made by Build (read back from its JSON)
				// has each check's worst status, not the finding.
				f = Finding{Status: st, Severity: c.severity}
			}
			cell := cellOf(f)
			cell.FleetWide = c.FleetWide
			rw.Cells = append(rw.Cells, cell)
		}
		v.Rows = append(v.Rows, rw)

		hv := hostView{Anchor: anchor(i), Hostname: esc(h.Hostname), File: esc(h.ID), When: esc(h.CollectedAt),
			Kernel: esc(h.Kernel), AsRoot: h.AsRoot, Failing: h.Failing, Critical: h.Critical, Unknown: h.Unknown, Distance: num(h.Distance)}
		for _, n := range h.Instances {
			hv.Instances = append(hv.Instances, esc(n))
		}
		for _, f := range h.Failures {
			hv.Failures = append(hv.Failures, HostFinding{ID: esc(f.ID), Problem: f.Problem, Subject: esc(f.Subject), Severity: f.Severity})
		}
		for _, o := range h.OffMajority {
			hv.Off = append(hv.Off, OffSetting{Key: esc(o.Key), Value: esc(o.Value), Majority: esc(o.Majority),
				Holders: o.Holders, Observed: o.Observed, Rarity: o.Rarity})
		}
		v.Hosts = append(v.Hosts, hv)
	}
	kinds := map[string]int{}
	for _, s := range r.Settings {
		sr := settingRow{Key: esc(s.Key), Kind: s.Kind, Majority: esc(s.Majority), Tie: s.Tie, Observed: s.Observed, Off: s.Off, Rarity: num(s.Rarity)}
		kinds[s.Kind]++
		for _, val := range s.Values {
			if !s.Tie && val.Value == s.Majority {
				sr.MajorityCount = val.Count
				continue
			}
			vv := valueView{Value: esc(val.Value), Count: val.Count}
			for j, id := range val.Hosts {
				l := hostLink{Anchor: anchors[id], Name: names[id]}
				if j < maxInlineHosts {
					vv.Shown = append(vv.Shown, l)
				} else {
					vv.Folded = append(vv.Folded, l)
				}
			}
			sr.Values = append(sr.Values, vv)
		}
		v.Settings = append(v.Settings, sr)
	}
	for _, k := range Kinds {
		if kinds[k] > 0 {
			v.SettingsKinds = append(v.SettingsKinds, kindCount{Kind: k, Title: KindTitle(k), N: kinds[k]})
		}
	}
	return v
}

// oddItems merges a host's rare setting values and rare failures, the
// rarest first (settings before failures as rare: a failure usually
// follows from a setting).
func oddItems(h HostReport, problems map[string]string) []oddItem {
	out := make([]oddItem, 0, len(h.OffMajority)+len(h.RareFailures))
	i, j := 0, 0
	for i < len(h.OffMajority) || j < len(h.RareFailures) {
		if j == len(h.RareFailures) || (i < len(h.OffMajority) && h.OffMajority[i].Rarity >= h.RareFailures[j].Rarity) {
			o := h.OffMajority[i]
			out = append(out, oddItem{Key: esc(o.Key), Value: esc(o.Value), Majority: esc(o.Majority), Holders: o.Holders, Observed: o.Observed, Rarity: num(o.Rarity)})
			i++
			continue
		}
		f := h.RareFailures[j]
		out = append(out, oddItem{Check: esc(f.ID), Title: problems[f.ID], Holders: f.Failing, Observed: f.Judged, Rarity: num(f.Rarity)})
		j++
	}
	return out
}

// esc shows the characters that could drive a terminal or reorder text as
// escapes (termsafe); html/template then escapes the result for HTML.
func esc(s string) string { return termsafe.Escape(s) }

func cellOf(f Finding) matrixCell {
	switch f.Status {
	case check.Fail:
		return matrixCell{Class: "f-" + f.Severity.String(), Symbol: "✗"}
	case check.Unknown:
		return matrixCell{Class: "u", Symbol: "?"}
	case check.Pass:
		return matrixCell{Class: "p", Symbol: "✓"}
	}
	return matrixCell{Class: "na", Symbol: ""}
}
