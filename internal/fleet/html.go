package fleet

import (
	"bytes"
	_ "embed"
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

// page is parsed on first use: every dbhost command would pay for it at
// start-up otherwise.
var page = sync.OnceValue(func() *template.Template {
	return template.Must(template.New("fleet").Parse(pageText))
})

// maxInlineHosts is how many hosts a setting's value lists before the rest
// fold into a <details> element.
const maxInlineHosts = 12

// WriteHTML writes the report as one self-contained HTML page: inline
// styles, no scripts, nothing fetched. Every text from a snapshot goes
// through html/template, which escapes it for where it appears, and
// through termsafe.Escape first: control characters and the Unicode
// characters that reorder text are shown as escapes, so that a page cat
// to a terminal cannot drive it and a host name cannot display reversed.
func WriteHTML(w io.Writer, r *Report) error {
	var buf bytes.Buffer
	if err := page().Execute(&buf, newView(r)); err != nil {
		return fmt.Errorf("fleet report: %w", err)
	}
	_, err := w.Write(buf.Bytes())
	return err
}

type view struct {
	Title           string
	Summary         Summary
	Collected       string
	Errors          []LoadError
	Columns         []column
	PassEverywhere  []CheckSummary
	Rows            []row
	Settings        []settingRow
	Hosts           []hostView
	MaxInlineHosts  int
	SettingsPerKind []kindCount
}

type column struct {
	ID, Title, Severity string
	Fail, Unknown, Pass int
	severity            check.Severity
}

type row struct {
	Anchor, Hostname, File, When string
	Failing, Critical, Off       int
	Cells                        []matrixCell
}

// matrixCell is one host's worst verdict on one check.
type matrixCell struct {
	Class, Symbol string
}

type settingRow struct {
	Key, Kind, Majority string
	Tie                 bool
	Observed, Off       int
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
	Failures                             []HostFinding
	Off                                  []OffSetting
}

type kindCount struct {
	Kind, Title string
	N           int
}

func anchor(i int) string { return "h" + strconv.Itoa(i+1) }

func newView(r *Report) view {
	v := view{Title: "dbhost fleet report", Summary: r.Summary, MaxInlineHosts: maxInlineHosts}
	for _, e := range r.Errors {
		v.Errors = append(v.Errors, LoadError{File: esc(e.File), Error: esc(e.Error)})
	}
	anchors := map[string]string{}
	names := map[string]string{}
	var first, last string
	for i, h := range r.Hosts {
		anchors[h.ID] = anchor(i)
		names[h.ID] = esc(h.Hostname + " (" + base(h.ID) + ")")
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
	for _, c := range r.Checks {
		if c.Fail+c.Unknown == 0 {
			v.PassEverywhere = append(v.PassEverywhere, c)
			continue
		}
		v.Columns = append(v.Columns, column{ID: c.ID, Title: c.Title, Severity: c.Severity.String(), Fail: c.Fail, Unknown: c.Unknown, Pass: c.Pass, severity: c.Severity})
	}
	for i, h := range r.Hosts {
		rw := row{Anchor: anchor(i), Hostname: esc(h.Hostname), File: esc(base(h.ID)), When: esc(h.CollectedAt),
			Failing: h.Failing, Critical: h.Critical, Off: len(h.OffMajority)}
		for _, c := range v.Columns {
			f, ok := h.worst[c.ID]
			if st, judged := h.Checks[c.ID]; !ok && judged {
				// A report not made by Build (read back from its JSON)
				// has each check's worst status, not the finding.
				f = Finding{Status: st, Severity: c.severity}
			}
			rw.Cells = append(rw.Cells, cellOf(f))
		}
		v.Rows = append(v.Rows, rw)
		hv := hostView{Anchor: anchor(i), Hostname: esc(h.Hostname), File: esc(h.ID), When: esc(h.CollectedAt),
			Kernel: esc(h.Kernel), AsRoot: h.AsRoot, Failing: h.Failing, Critical: h.Critical, Unknown: h.Unknown}
		for _, n := range h.Instances {
			hv.Instances = append(hv.Instances, esc(n))
		}
		for _, f := range h.Failures {
			hv.Failures = append(hv.Failures, HostFinding{ID: esc(f.ID), Title: f.Title, Subject: esc(f.Subject), Severity: f.Severity})
		}
		for _, o := range h.OffMajority {
			hv.Off = append(hv.Off, OffSetting{Key: esc(o.Key), Value: esc(o.Value), Majority: esc(o.Majority)})
		}
		v.Hosts = append(v.Hosts, hv)
	}
	kinds := map[string]int{}
	for _, s := range r.Settings {
		sr := settingRow{Key: esc(s.Key), Kind: s.Kind, Majority: esc(s.Majority), Tie: s.Tie, Observed: s.Observed, Off: s.Off}
		kinds[s.Kind]++
		for _, val := range s.Values {
			if !s.Tie && val.Value == s.Majority {
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
			v.SettingsPerKind = append(v.SettingsPerKind, kindCount{Kind: k, Title: KindTitle(k), N: kinds[k]})
		}
	}
	return v
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
