// Package report renders audit results: text for people, JSON for programs,
// Prometheus textfile format for node_exporter. Renderers register by name.
package report

import (
	"fmt"
	"io"
	"sort"
	"strings"
	"time"

	"github.com/dbhost/dbhost/internal/check"
	"github.com/dbhost/dbhost/internal/facts"
)

// Audit is what a renderer presents: the findings and the host they judge.
type Audit struct {
	Facts    *facts.Facts
	Findings []check.Finding
	// Checks is the number of checks that ran.
	Checks int
	// Duration is how long gathering and judging took.
	Duration time.Duration
}

// Options tune rendering.
type Options struct {
	Verbose bool // show passes and evidence
	Color   bool
}

// Renderer writes an audit in one format.
type Renderer func(w io.Writer, a *Audit, o Options) error

var renderers = map[string]Renderer{}

// Register adds a renderer by format name.
func Register(name string, r Renderer) { renderers[name] = r }

// Formats lists the registered format names.
func Formats() []string {
	out := make([]string, 0, len(renderers))
	for n := range renderers {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

// Render writes the audit in the named format.
func Render(w io.Writer, format string, a *Audit, o Options) error {
	r, ok := renderers[format]
	if !ok {
		return UnknownFormat(format, Formats()...)
	}
	return r(w, a, o)
}

// UnknownFormat is the one error every command gives for a --format it
// does not have: unknown format "yaml" (want text, json or markdown).
func UnknownFormat(got string, have ...string) error {
	want := strings.Join(have, ", ")
	if n := len(have); n > 1 {
		want = strings.Join(have[:n-1], ", ") + " or " + have[n-1]
	}
	return fmt.Errorf("unknown format %q (want %s)", got, want)
}

// Summary counts findings by status and, for failures, by severity.
type Summary struct {
	Pass     int            `json:"pass"`
	Fail     int            `json:"fail"`
	Unknown  int            `json:"unknown"`
	BySev    map[string]int `json:"fail_by_severity"`
	Checks   int            `json:"checks"`
	Subjects int            `json:"subjects"`
}

// Summarize counts the findings.
func Summarize(a *Audit) Summary {
	s := Summary{BySev: map[string]int{"critical": 0, "warning": 0, "info": 0}, Checks: a.Checks}
	subj := map[string]bool{}
	for _, f := range a.Findings {
		subj[f.Subject] = true
		switch f.Status {
		case check.Pass:
			s.Pass++
		case check.Fail:
			s.Fail++
			s.BySev[f.Severity.String()]++
		case check.Unknown:
			s.Unknown++
		}
	}
	s.Subjects = len(subj)
	return s
}
