// Package report renders audit results: text for people, JSON for programs,
// Prometheus textfile format for node_exporter. Renderers register by name.
// It also holds Formats, the set of --format values one command has: every
// command renders through one.
package report

import (
	"io"
	"time"

	"github.com/dbhost/dbhost/internal/check"
	"github.com/dbhost/dbhost/internal/facts"
	"github.com/dbhost/dbhost/internal/results"
	"github.com/dbhost/dbhost/internal/waiver"
)

// Audit is what a renderer presents: the findings and the host they judge.
type Audit struct {
	Facts    *facts.Facts
	Findings []check.Finding
	// Checks is the number of checks that ran.
	Checks int
	// Duration is how long gathering and judging took.
	Duration time.Duration
	// Experiments holds, by check ID, the last stored verdict of an
	// experiment on that check's finding on this host (dbhost experiment
	// --finding); nil when there is none or no results database.
	Experiments map[string]results.FindingVerdict
	// Waivers is what the waiver file did (internal/waiver); nil when no
	// file was read. The waived findings carry check.Finding.Waiver.
	Waivers *waiver.Outcome
}

// experiment returns the stored verdict on a finding's check, if any.
func (a *Audit) experiment(id string) *results.FindingVerdict {
	if v, ok := a.Experiments[id]; ok {
		return &v
	}
	return nil
}

// Options tune rendering.
type Options struct {
	Verbose bool // show passes and evidence
	Color   bool
	// Version is the program's version, for dbhost_build_info (prom).
	Version string
}

// Renderer writes an audit in one format.
type Renderer func(w io.Writer, a *Audit, o Options) error

// Rendering is what an audit format renders: the audit and how to show it.
type Rendering struct {
	Audit   *Audit
	Options Options
}

// AuditFormats are the formats of 'dbhost audit'; Register adds to them.
var AuditFormats Formats[Rendering]

// The renderers are registered here rather than in each file's init so
// that the order UnknownFormat lists them in does not hang on file names.
func init() {
	Register("json", renderJSON)
	Register("prom", renderProm)
	Register("text", renderText)
}

// Register adds an audit renderer by format name.
func Register(name string, r Renderer) {
	AuditFormats.Add(name, func(w io.Writer, v Rendering) error { return r(w, v.Audit, v.Options) })
}

// Render writes the audit in the named format.
func Render(w io.Writer, format string, a *Audit, o Options) error {
	return AuditFormats.Render(w, format, Rendering{Audit: a, Options: o})
}

// Summary counts findings by status and, for failures, by severity. A
// waived failure counts in Waived, not in Fail or BySev.
type Summary struct {
	Pass     int            `json:"pass"`
	Fail     int            `json:"fail"`
	Waived   int            `json:"waived,omitempty"`
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
			if f.Waiver != nil {
				s.Waived++
				continue
			}
			s.Fail++
			s.BySev[f.Severity.String()]++
		case check.Unknown:
			s.Unknown++
		}
	}
	s.Subjects = len(subj)
	return s
}
