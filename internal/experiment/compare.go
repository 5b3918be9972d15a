package experiment

import (
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/dbhost/dbhost/internal/stats"
)

// Compared is two experiments side by side: for every arm (by name) and
// client count both ran, the second experiment's trials against the
// first's. It answers "did this host (or the database) change between the
// two runs?" — the same setting, measured twice.
type Compared struct {
	IDs      [2]string        `json:"ids"`
	Names    [2]string        `json:"names"`
	Verdicts [2]stats.Verdict `json:"verdicts"`
	Metric   string           `json:"metric"`
	Arms     []ArmComparison  `json:"arms"`
	Notes    []string         `json:"notes,omitempty"`
}

// ArmComparison is one arm at one client count in both experiments.
type ArmComparison struct {
	Arm     string      `json:"arm"`
	Clients int         `json:"clients"`
	Knobs   [2][]string `json:"knobs"`
	N       [2]int      `json:"n"`
	Median  [2]float64  `json:"median"`
	// Decision judges the second experiment's trials against the first's
	// with one exact rank test (no sequential looks: both are finished);
	// nil with fewer than 4 trials on a side.
	Decision *stats.Decision `json:"decision,omitempty"`
	Note     string          `json:"note,omitempty"`
}

// Compare compares the arms two experiments have in common.
func Compare(a, b *Stored) (*Compared, error) {
	c := &Compared{IDs: [2]string{a.Experiment.ID, b.Experiment.ID}, Names: [2]string{a.Experiment.Name, b.Experiment.Name},
		Metric: a.Plan.Protocol.Metric}
	if c.Metric == "" {
		c.Metric = "throughput"
	}
	if m := b.Plan.Protocol.Metric; m != "" && m != c.Metric {
		return nil, fmt.Errorf("the experiments judge different metrics (%s, %s)", c.Metric, m)
	}
	for i, s := range []*Stored{a, b} {
		if sum, err := s.Best(); err == nil {
			c.Verdicts[i] = sum.Verdict
		}
	}
	pa := &Plan{Protocol: Protocol{Metric: c.Metric}}
	for ia, arm := range a.Plan.Arms {
		ib := slices.IndexFunc(b.Plan.Arms, func(x Arm) bool { return x.Name == arm.Name })
		if ib < 0 {
			continue
		}
		for _, cl := range a.Plan.Workload.Clients {
			if !slices.Contains(b.Plan.Workload.Clients, cl) {
				continue
			}
			ac, err := compareArm(pa, a, b, ia, ib, cl)
			if err != nil {
				return nil, err
			}
			c.Arms = append(c.Arms, ac)
		}
	}
	if len(c.Arms) == 0 {
		c.Notes = append(c.Notes, "no arm name and client count in common")
	}
	return c, nil
}

// compareArm judges arm ib of b against arm ia of a at cl clients; pa
// holds the metric.
func compareArm(pa *Plan, a, b *Stored, ia, ib, cl int) (ArmComparison, error) {
	arm := a.Plan.Arms[ia]
	jd := &judge{plan: pa}
	xa, xb := jd.samples(a.Trials, ia, cl), jd.samples(b.Trials, ib, cl)
	ac := ArmComparison{Arm: arm.Name, Clients: cl, Knobs: [2][]string{arm.Knobs(), b.Plan.Arms[ib].Knobs()},
		N: [2]int{len(xa), len(xb)}}
	if len(xa) > 0 {
		ac.Median[0] = stats.Median(xa)
	}
	if len(xb) > 0 {
		ac.Median[1] = stats.Median(xb)
	}
	if !slices.Equal(ac.Knobs[0], ac.Knobs[1]) {
		ac.Note = "the arm's settings differ between the experiments"
	}
	if n := min(len(xa), len(xb)); n >= stats.MinPerArm {
		sp := pa.statsPlan(min(max(len(xa), len(xb)), stats.MaxExactPerArm), 1)
		sp.Equivalence = float64(a.Plan.Protocol.Equivalence)
		sp.FirstLook = sp.MaxPerArm
		d, err := sp.Decide(xa, xb, 1)
		if err != nil {
			return ac, fmt.Errorf("arm %s: %w", arm.Name, err)
		}
		ac.Decision = &d
	} else {
		ac.Note = strings.TrimPrefix(ac.Note+"; fewer than 4 counting trials on a side: no test", "; ")
	}
	return ac, nil
}

// WriteComparison prints a comparison for people.
func WriteComparison(w io.Writer, c *Compared) {
	fmt.Fprintf(w, "%s (%s, %s) → %s (%s, %s)\n", c.IDs[0], c.Names[0], c.Verdicts[0], c.IDs[1], c.Names[1], c.Verdicts[1])
	for _, a := range c.Arms {
		fmt.Fprintf(w, "  %s at %d clients: median %s → %s (%d and %d trials)\n", a.Arm, a.Clients,
			fmtMetric(c.Metric, a.Median[0]), fmtMetric(c.Metric, a.Median[1]), a.N[0], a.N[1])
		if a.Decision != nil {
			fmt.Fprintf(w, "    second vs first: %s\n", a.Decision.Reason)
		}
		if a.Note != "" {
			fmt.Fprintf(w, "    note: %s\n", a.Note)
		}
	}
	for _, n := range c.Notes {
		fmt.Fprintf(w, "  note: %s\n", n)
	}
}
