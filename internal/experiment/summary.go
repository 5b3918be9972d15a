package experiment

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/dbhost/dbhost/internal/expreport"
	"github.com/dbhost/dbhost/internal/results"
	"github.com/dbhost/dbhost/internal/stats"
)

// Summary is an experiment's outcome: what `--format json` prints and what
// the results database keeps as the experiment's decision.
//
// The top-level verdict, ratio and interval are the headline comparison:
// the first treatment arm against the base arm (at the largest client
// count in a sweep). Every comparison is in Comparisons and, per arm, in
// Arms.
type Summary struct {
	ID       string         `json:"id"`
	Name     string         `json:"name"`
	Status   string         `json:"status"`
	Verdict  stats.Verdict  `json:"verdict"`
	Ratio    float64        `json:"ratio"`
	Interval stats.Interval `json:"interval"`
	Reason   string         `json:"reason"`
	// Headline names the comparison the verdict is about.
	Headline string `json:"headline"`
	Metric   string `json:"metric"`
	Target   string `json:"target,omitempty"`

	Arms        []ArmSummary `json:"arms"`
	Comparisons []Comparison `json:"comparisons"`
	// Decisions are the headline decisions, one per treatment arm
	// (Decisions[i] judges arm i+1), as the report takes them.
	Decisions   []stats.Decision   `json:"decisions"`
	Calibration *stats.Calibration `json:"calibration,omitempty"`

	Trials   int `json:"trials"`
	Excluded int `json:"excluded"`
	// Replacement says why trials were excluded and how many ran in their
	// place.
	Replacement *Replacement `json:"replacement,omitempty"`
	MaxPerArm   int          `json:"max_per_arm"`
	Clients     []int        `json:"clients"`
	Seed        uint64       `json:"seed"`
	Wall        Duration     `json:"wall"`
	Restored    bool         `json:"restored"`
	Notes       []string     `json:"notes,omitempty"`
	Error       string       `json:"error,omitempty"`
}

// ArmSummary is one arm: its settings, trials and (for treatments) the
// headline comparison with the base.
type ArmSummary struct {
	Index    int      `json:"index"`
	Name     string   `json:"name"`
	Knobs    []string `json:"knobs"`
	Trials   int      `json:"trials"`
	Excluded int      `json:"excluded"`
	// Median of the metric over the arm's counting trials at the headline
	// client count.
	Median   float64         `json:"median"`
	Verdict  stats.Verdict   `json:"verdict,omitempty"`
	Ratio    float64         `json:"ratio,omitempty"`
	Interval *stats.Interval `json:"interval,omitempty"`
	P        float64         `json:"p,omitempty"`
}

// Comparison is the final decision for one treatment arm at one client
// count.
type Comparison struct {
	Arm      int            `json:"arm"`
	Name     string         `json:"name"`
	Clients  int            `json:"clients"`
	Decision stats.Decision `json:"decision"`
}

// buildSummary assembles the summary from the trials and the judge's last
// decisions.
func buildSummary(p *Plan, exp *results.Experiment, trials []results.Trial, jd *judge, cal *stats.Calibration) *Summary {
	s := &Summary{ID: exp.ID, Name: exp.Name, Status: exp.Status, Verdict: stats.Inconclusive, Metric: p.Protocol.Metric,
		Target: p.Target.Where, MaxPerArm: p.Protocol.MaxPerArm, Clients: p.Workload.Clients, Seed: p.Protocol.Seed, Calibration: cal}
	head := 0
	if len(p.Workload.Clients) > 0 {
		head = slices.Max(p.Workload.Clients)
	}
	for _, t := range trials {
		if t.Block < 0 {
			continue
		}
		s.Trials++
		if t.Excluded != "" {
			s.Excluded++
		}
	}
	for i, a := range p.Arms {
		s.Arms = append(s.Arms, armSummary(p, i, a, trials, head))
	}
	if jd != nil {
		s.addComparisons(p, jd, head)
	}
	s.Replacement = replacement(p, jd, trials)
	if len(p.Arms) > 1 {
		s.Headline = p.Arms[1].Name + " vs " + p.Arms[0].Name
		if len(p.Workload.Clients) > 1 {
			s.Headline += fmt.Sprintf(" at %d clients", head)
		}
	}
	for _, c := range s.Comparisons {
		if c.Clients == head {
			s.Decisions = append(s.Decisions, c.Decision)
		}
		if c.Arm == 1 && c.Clients == head {
			s.Verdict, s.Ratio, s.Interval, s.Reason = c.Decision.Verdict, c.Decision.Ratio, c.Decision.Interval, c.Decision.Reason
		}
	}
	if s.Reason == "" {
		s.Reason = "no look was made: fewer than two blocks of trials completed"
		s.Interval = stats.Interval{0, math.Inf(1)}
	}
	return s
}

// armSummary counts arm i's trials (calibration trials left out) and
// takes the median of its counting ones at the headline client count.
func armSummary(p *Plan, i int, a Arm, trials []results.Trial, head int) ArmSummary {
	as := ArmSummary{Index: i, Name: a.Name, Knobs: a.Knobs()}
	var xs []float64
	for _, t := range trials {
		if t.Arm != i || t.Block < 0 {
			continue
		}
		as.Trials++
		if t.Excluded != "" {
			as.Excluded++
		} else if v := sample(p.Protocol.Metric, t); t.Clients == head && v > 0 {
			xs = append(xs, v)
		}
	}
	if len(xs) > 0 {
		as.Median = stats.Median(xs)
	}
	return as
}

// addComparisons adds the judge's decisions for every treatment and
// client count; those at the headline client count go to the arms too.
func (s *Summary) addComparisons(p *Plan, jd *judge, head int) {
	for _, c := range p.Workload.Clients {
		for i, d := range jd.decisions[c] {
			s.Comparisons = append(s.Comparisons, Comparison{Arm: i + 1, Name: p.Arms[i+1].Name, Clients: c, Decision: d})
			if c == head {
				as := &s.Arms[i+1]
				iv := d.Interval
				as.Verdict, as.Ratio, as.Interval, as.P = d.Verdict, d.Ratio, &iv, d.P
			}
		}
	}
}

// Stored is an experiment loaded from the results database.
type Stored struct {
	Experiment *results.Experiment
	Trials     []results.Trial
	Plan       *Plan
	// Summary is the stored one; nil when the run ended before storing
	// one (killed).
	Summary *Summary
}

// Load reads an experiment and decodes its plan and summary.
func Load(ctx context.Context, st *results.Store, ref string) (*Stored, error) {
	e, trials, err := st.Get(ctx, ref)
	if err != nil {
		return nil, err
	}
	s := &Stored{Experiment: e, Trials: trials, Plan: &Plan{}}
	if len(e.Plan) > 0 {
		if err := json.Unmarshal(e.Plan, s.Plan); err != nil {
			return nil, fmt.Errorf("experiment %s: plan: %w", e.ID, err)
		}
	}
	if len(e.Decision) > 0 {
		var sum Summary
		if err := json.Unmarshal(e.Decision, &sum); err != nil {
			return nil, fmt.Errorf("experiment %s: decision: %w", e.ID, err)
		}
		s.Summary = &sum
	}
	return s, nil
}

// Recompute replays the stored trials through the same looks as the run
// and returns the summary they give: equal to the stored one for a
// finished experiment, and a summary for one that was killed.
func (s *Stored) Recompute() (*Summary, error) {
	p := s.Plan
	if len(p.Arms) < 2 || len(p.Workload.Clients) == 0 || p.Protocol.MaxPerArm == 0 {
		return nil, fmt.Errorf("experiment %s: the stored plan is incomplete (it failed before its first trial)", s.Experiment.ID)
	}
	jd, err := replay(p, p.Protocol.MaxPerArm, s.Trials)
	if err != nil {
		return nil, err
	}
	var cal *stats.Calibration
	if s.Summary != nil {
		cal = s.Summary.Calibration
	}
	sum := buildSummary(p, s.Experiment, s.Trials, jd, cal)
	sum.Status = s.Experiment.Status
	if s.Summary != nil {
		sum.Wall, sum.Restored, sum.Notes, sum.Error = s.Summary.Wall, s.Summary.Restored, s.Summary.Notes, s.Summary.Error
		return sum, nil
	}
	// Killed: the time up to its last trial; restored once marked
	// interrupted (that happens only after the journal was restored).
	if n := len(s.Trials); n > 0 {
		sum.Wall = Duration(s.Trials[n-1].Finished.Sub(s.Experiment.Created).Round(time.Second))
	}
	sum.Restored = s.Experiment.Status == results.Interrupted
	if s.Experiment.Note != "" {
		sum.Notes = append(sum.Notes, s.Experiment.Note)
	}
	return sum, nil
}

// Best returns the stored summary, or a recomputed one when none was
// stored.
func (s *Stored) Best() (*Summary, error) {
	if s.Summary != nil {
		return s.Summary, nil
	}
	return s.Recompute()
}

// ReportInput is what internal/expreport renders.
func (s *Stored) ReportInput() (expreport.Input, error) {
	in := expreport.Input{Experiment: s.Experiment, Trials: s.Trials}
	sum, err := s.Best()
	if err != nil {
		return in, err
	}
	in.Decisions = sum.Decisions
	in.Calibration = sum.Calibration
	in.Replacement = sum.Replacement.String()
	return in, nil
}

// WriteText prints a summary for people.
func WriteText(w io.Writer, s *Summary) error {
	fmt.Fprintf(w, "%s (%s): %s\n", s.Name, s.ID, strings.ToUpper(string(s.Verdict)))
	if s.Headline != "" {
		fmt.Fprintf(w, "  %s: %s\n", s.Headline, s.Reason)
	}
	if s.Target != "" {
		fmt.Fprintf(w, "  target: %s\n", s.Target)
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "\n  arm\ttrials\texcluded\tmedian %s\tverdict\tratio\tinterval\tknobs\n", metricUnit(s.Metric))
	for _, a := range s.Arms {
		v, ratio, iv := "base", "", ""
		if a.Index > 0 {
			v = string(a.Verdict)
			if a.Interval != nil {
				ratio = fmt.Sprintf("%.3f", a.Ratio)
				iv = fmtInterval(*a.Interval)
			}
		}
		fmt.Fprintf(tw, "  %s\t%d\t%d\t%s\t%s\t%s\t%s\t%s\n", a.Name, a.Trials, a.Excluded, fmtMetric(s.Metric, a.Median), v, ratio, iv, strings.Join(a.Knobs, " "))
	}
	tw.Flush()
	base := "base"
	if len(s.Arms) > 0 {
		base = s.Arms[0].Name
	}
	if len(s.Clients) > 1 {
		fmt.Fprintln(w, "\n  per client count:")
		for _, c := range s.Comparisons {
			fmt.Fprintf(w, "    %3d clients  %s vs %s: %s\n", c.Clients, c.Name, base, c.Decision.Reason)
		}
	} else if len(s.Comparisons) > 1 {
		fmt.Fprintln(w)
		for _, c := range s.Comparisons {
			fmt.Fprintf(w, "  %s vs %s: %s\n", c.Name, base, c.Decision.Reason)
		}
	}
	if c := s.Calibration; c != nil {
		fmt.Fprintf(w, "\n  A/A calibration: noise ±%.1f%%, smallest detectable change %.1f%% within %d trials per arm\n", 100*c.NoiseCV, 100*c.MDE, c.MaxPerArm)
	}
	fmt.Fprintf(w, "\n  %d trials (%d excluded), budget %d per arm, wall time %s, seed %d, status %s\n",
		s.Trials, s.Excluded, s.MaxPerArm, time.Duration(s.Wall), s.Seed, s.Status)
	if r := s.Replacement.String(); r != "" {
		fmt.Fprintf(w, "  excluded: %s\n", r)
	}
	for _, n := range s.Notes {
		fmt.Fprintf(w, "  note: %s\n", n)
	}
	if s.Error != "" {
		fmt.Fprintf(w, "  error: %s\n", s.Error)
	}
	if s.Restored {
		fmt.Fprintln(w, "  host restored: every change was undone")
	} else {
		fmt.Fprintln(w, "  host NOT fully restored: run 'dbhost experiment recover'")
	}
	return nil
}

func fmtInterval(iv stats.Interval) string {
	lo, hi := "0", "∞"
	if iv.Lo() > 0 {
		lo = fmt.Sprintf("%.3f", iv.Lo())
	}
	if !math.IsInf(iv.Hi(), 1) {
		hi = fmt.Sprintf("%.3f", iv.Hi())
	}
	return "[" + lo + ", " + hi + "]"
}

func metricUnit(m string) string {
	if m == "" || m == "throughput" {
		return "ops/s"
	}
	return m
}

func fmtMetric(m string, v float64) string {
	if v <= 0 || math.IsNaN(v) {
		return "-"
	}
	if m == "" || m == "throughput" {
		return fmt.Sprintf("%.1f", v)
	}
	return fmtLatency(time.Duration(v * float64(time.Second)))
}

// WriteMarkdown writes the Markdown summary (internal/expreport).
func (s *Stored) WriteMarkdown(w io.Writer) error {
	in, err := s.ReportInput()
	if err != nil {
		return err
	}
	return expreport.Markdown(w, in)
}

// WriteHTML writes the self-contained HTML report (internal/expreport).
func (s *Stored) WriteHTML(w io.Writer) error {
	in, err := s.ReportInput()
	if err != nil {
		return err
	}
	return expreport.HTML(w, in)
}
