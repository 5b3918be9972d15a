// Package galeraprove proves the quorum model (internal/galera) on a live
// lab cluster (internal/galeralab): for every scenario it brings the lab
// back to a healthy baseline, makes members fail as the scenario says (kill
// -9 at once, kill -9 one by one, a network partition, a clean shutdown),
// watches what every running data node reports until the cluster has
// reacted, and compares that with the model's prediction, node by node.
//
// A prediction the cluster contradicts is a result (Match false, with what
// each node showed), not an error: that is what a proof is for. An error is
// a lab that cannot be brought back or made to fail, and names the step.
package galeraprove

import (
	"context"
	"fmt"
	"io"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/dbhost/dbhost/internal/engine"
	"github.com/dbhost/dbhost/internal/galera"
	"github.com/dbhost/dbhost/internal/galeralab"
)

// Schema names the JSON form of a Report.
const Schema = "dbhost.galera_proof/1"

// Options tune a proof.
type Options struct {
	// Scenarios to run, in order (nil: galera.Scenarios of the lab's layout).
	Scenarios []galera.Scenario
	// Log receives a progress line per step (nil: none).
	Log io.Writer
	// Deadline bounds the wait for the cluster to react to a scenario
	// (0: DefaultDeadline of the lab's suspect timeout).
	Deadline time.Duration

	// poll is the interval between two looks at the nodes (0: 200 ms).
	poll time.Duration
}

// DefaultDeadline is how long a proof waits for the nodes to settle after a
// failure: a dead member is declared gone after evs.suspect_timeout when
// the others agree, and unconditionally after evs.inactive_timeout (three
// suspect timeouts by Galera's defaults, 5 s and 15 s); a new component
// then takes a round of messages to install. Four suspect timeouts and a
// margin of 5 s cover both.
func DefaultDeadline(suspect time.Duration) time.Duration {
	if suspect <= 0 {
		suspect = 5 * time.Second // Galera's default
	}
	return 4*suspect + 5*time.Second
}

// Millis is a duration that JSON shows in whole milliseconds.
type Millis time.Duration

// MarshalJSON writes the milliseconds.
func (m Millis) MarshalJSON() ([]byte, error) {
	return strconv.AppendInt(nil, time.Duration(m).Milliseconds(), 10), nil
}

// UnmarshalJSON reads milliseconds.
func (m *Millis) UnmarshalJSON(b []byte) error {
	f, err := strconv.ParseFloat(string(b), 64)
	if err != nil {
		return fmt.Errorf("milliseconds: %w", err)
	}
	*m = Millis(time.Duration(f * float64(time.Millisecond)))
	return nil
}

// String is the duration in seconds with one decimal ("2.4 s").
func (m Millis) String() string {
	return strconv.FormatFloat(time.Duration(m).Seconds(), 'f', 1, 64) + " s"
}

// Report is a whole proof.
type Report struct {
	Schema string  `json:"schema"`
	Lab    LabInfo `json:"lab"`
	// Tolerance is the model's verdict on the lab's layout (it holds the
	// layout).
	Tolerance galera.Tolerance `json:"tolerance"`
	Results   []Result         `json:"results"`
	// Matched of Total scenarios behaved as predicted.
	Matched int       `json:"matched"`
	Total   int       `json:"total"`
	Started time.Time `json:"started"`
	Elapsed Millis    `json:"elapsed_ms"`
	// Error says why the proof stopped before its last scenario.
	Error string `json:"error,omitempty"`
	// Reruns are the void attempts (a member stopped on its own) that were
	// run again; the results above hold the second attempts.
	Reruns []Result `json:"reruns,omitempty"`
}

// AllMatched reports a proof that ran every scenario, each as predicted.
func (r *Report) AllMatched() bool {
	return r.Error == "" && r.Total > 0 && r.Matched == r.Total
}

// LabInfo is the lab the proof ran on.
type LabInfo struct {
	// Name is the lab's name (the caller sets it; the lab does not say).
	Name  string           `json:"name,omitempty"`
	Nodes []galeralab.Node `json:"nodes"`
	// SuspectTimeout is the lab's evs.suspect_timeout; Deadline the wait
	// for a reaction derived from it.
	SuspectTimeout Millis `json:"suspect_timeout_ms"`
	Deadline       Millis `json:"deadline_ms"`
	// Start and Stop are how long the lab took to start and to stop
	// (zero until it stopped).
	Start Millis `json:"start_ms"`
	Stop  Millis `json:"stop_ms"`
}

// Result is one scenario: what was predicted, what the nodes showed.
type Result struct {
	Scenario   galera.Scenario   `json:"scenario"`
	Prediction galera.Prediction `json:"prediction"`
	// Nodes are the data nodes still running, each with its prediction
	// and its last view.
	Nodes []NodeResult `json:"nodes"`
	// Survived: some data node was in a Primary component at the end.
	Survived bool `json:"survived"`
	// Settled: every node's view showed the failure within the deadline
	// and held (otherwise the last views are reported as they were).
	Settled bool `json:"settled"`
	// Match: settled, every node as predicted, and the cluster survived
	// exactly when predicted.
	Match bool `json:"match"`
	// Void: a member the scenario did not touch stopped during it, so the
	// lab ran another scenario than the one predicted; the proof runs it
	// once more (Report.Reruns keeps the void attempt).
	Void bool `json:"void,omitempty"`
	// Notes say what got in the way (a node not read, a step that did
	// not settle).
	Notes []string `json:"notes,omitempty"`
	// Steps are what happened, at offsets from the scenario's start.
	Steps []Step `json:"steps"`
	// Recover is the time to the healthy baseline; Failed when the last
	// failure was made (from the scenario's start); React from then to
	// the settled views; Elapsed the whole scenario.
	Recover Millis `json:"recover_ms"`
	Failed  Millis `json:"failed_at_ms"`
	React   Millis `json:"react_ms"`
	Elapsed Millis `json:"elapsed_ms"`
}

// NodeResult is one running data node at the end of a scenario.
type NodeResult struct {
	Name string `json:"name"`
	// Predicted: the model says it is in a Primary component.
	Predicted bool `json:"predicted_primary"`
	// Reach is the number of running members it can still reach: the size
	// of the component it must report once it has reacted.
	Reach int `json:"reach"`
	// What it reported last (empty with Error when it could not be read).
	ClusterStatus string `json:"cluster_status,omitempty"`
	ClusterSize   int    `json:"cluster_size"`
	LocalState    string `json:"local_state,omitempty"`
	Error         string `json:"error,omitempty"`
	// Settled: its view showed the failure (size == Reach) at the end.
	Settled bool `json:"settled"`
	// Match: it is Primary exactly when predicted.
	Match bool `json:"match"`
}

// Primary reports the node's last view as a Primary component.
func (n NodeResult) Primary() bool { return n.ClusterStatus == "Primary" }

// Step is one thing done or seen during a scenario.
type Step struct {
	At   Millis `json:"at_ms"`
	What string `json:"what"`
}

// lab is what a proof needs of galeralab.Lab (tests give a stand-in).
type lab interface {
	Nodes() []galeralab.Node
	Layout() galera.Layout
	SuspectTimeout() time.Duration
	Running(name string) bool
	Kill(names ...string) error
	Shutdown(ctx context.Context, names ...string) error
	Partition(sides ...[]string) error
	Heal() error
	Status(ctx context.Context, name string) (*engine.GaleraStatus, error)
	Recover(ctx context.Context) error
	Times() (start, stop time.Duration)
	LogTail(name string, lines int) string
}

// Run proves the scenarios on the lab. The report holds what ran also when
// the error is not nil (then Report.Error says it too).
func Run(ctx context.Context, l *galeralab.Lab, o Options) (*Report, error) {
	return run(ctx, l, o)
}

func run(ctx context.Context, l lab, o Options) (*Report, error) {
	layout := l.Layout()
	start, stop := l.Times()
	r := &Report{
		Schema:    Schema,
		Tolerance: galera.Analyze(layout),
		Started:   time.Now(),
		Lab: LabInfo{Nodes: l.Nodes(), SuspectTimeout: Millis(l.SuspectTimeout()),
			Start: Millis(start), Stop: Millis(stop)},
	}
	if o.Deadline <= 0 {
		o.Deadline = DefaultDeadline(l.SuspectTimeout())
	}
	if o.poll <= 0 {
		o.poll = 200 * time.Millisecond
	}
	r.Lab.Deadline = Millis(o.Deadline)
	scenarios := o.Scenarios
	if scenarios == nil {
		scenarios = galera.Scenarios(layout)
	}
	p := &prover{lab: l, o: o, layout: layout}
	for _, m := range layout.Members {
		if !m.Arbitrator {
			p.data = append(p.data, m.Name)
		}
	}
	defer func() { r.Elapsed = Millis(time.Since(r.Started)) }()
	// Every scenario is checked before the lab is touched.
	for _, s := range scenarios {
		if err := checkScenario(layout, s); err != nil {
			r.Error = err.Error()
			return r, err
		}
	}
	for i, s := range scenarios {
		p.logf("scenario %d/%d: %s", i+1, len(scenarios), describe(s))
		res, err := p.scenario(ctx, s)
		if err == nil && res.Void {
			// Once: a second void attempt is reported as it is.
			p.logf("  void (%s): running it again", strings.Join(res.Notes, "; "))
			r.Reruns = append(r.Reruns, *res)
			res, err = p.scenario(ctx, s)
		}
		if err != nil {
			// A scenario cut short proves nothing: the error says
			// where it stopped, the report keeps the ones done.
			err = fmt.Errorf("scenario %q: %w", s.Name, err)
			r.Error = err.Error()
			return r, err
		}
		r.Results = append(r.Results, *res)
		r.Total++
		if res.Match {
			r.Matched++
		}
		p.logf("  %s: predicted %s, observed %s (%s after the failure)", verdict(res.Match),
			outcome(res.Prediction.Survives), outcome(res.Survived), res.React)
	}
	return r, nil
}

// checkScenario refuses a scenario that names a member the lab does not
// have, or a partition that does not place every member on one side.
func checkScenario(l galera.Layout, s galera.Scenario) error {
	known := map[string]bool{}
	for _, m := range l.Members {
		known[m.Name] = true
	}
	switch s.Kind {
	case galera.KillAtOnce, galera.KillOneByOne, galera.Shutdown:
		if len(s.Members) == 0 {
			return fmt.Errorf("scenario %q: no members to %s", s.Name, s.Kind)
		}
		seen := map[string]bool{}
		for _, m := range s.Members {
			if !known[m] {
				return fmt.Errorf("scenario %q: the lab has no member %q", s.Name, m)
			}
			if seen[m] {
				return fmt.Errorf("scenario %q: member %q named twice", s.Name, m)
			}
			seen[m] = true
		}
	case galera.Partition:
		placed := map[string]bool{}
		for _, side := range s.Sides {
			for _, m := range side {
				if !known[m] {
					return fmt.Errorf("scenario %q: the lab has no member %q", s.Name, m)
				}
				if placed[m] {
					return fmt.Errorf("scenario %q: member %q on two sides", s.Name, m)
				}
				placed[m] = true
			}
		}
		if len(s.Sides) < 2 || len(placed) != len(known) {
			return fmt.Errorf("scenario %q: a partition needs every member on one of at least two sides", s.Name)
		}
	default:
		return fmt.Errorf("scenario %q: unknown kind %q", s.Name, s.Kind)
	}
	return nil
}

type prover struct {
	lab    lab
	o      Options
	layout galera.Layout
	data   []string // data nodes, in layout order
}

func (p *prover) logf(format string, args ...any) {
	if p.o.Log != nil {
		fmt.Fprintf(p.o.Log, format+"\n", args...)
	}
}

// scenario runs one scenario from a healthy baseline.
func (p *prover) scenario(ctx context.Context, s galera.Scenario) (*Result, error) {
	t0 := time.Now()
	res := &Result{Scenario: s, Prediction: p.layout.Predict(s)}
	step := func(format string, args ...any) {
		res.Steps = append(res.Steps, Step{At: Millis(time.Since(t0)), What: fmt.Sprintf(format, args...)})
	}
	if err := p.baseline(ctx); err != nil {
		return nil, err
	}
	res.Recover = Millis(time.Since(t0))
	step("healthy: %d members, every data node Synced in one Primary component", len(p.layout.Members))
	var last time.Time
	var obs observation
	switch s.Kind {
	case galera.KillAtOnce:
		if err := p.lab.Kill(s.Members...); err != nil {
			return res, fmt.Errorf("kill %s: %w", strings.Join(s.Members, ", "), err)
		}
		last = time.Now()
		step("killed %s at once", strings.Join(s.Members, ", "))
	case galera.Partition:
		if err := p.lab.Partition(s.Sides...); err != nil {
			return res, fmt.Errorf("partition %s: %w", sides(s.Sides), err)
		}
		last = time.Now()
		step("cut the network: %s", sides(s.Sides))
	case galera.KillOneByOne, galera.Shutdown:
		// One member at a time, each once the others have taken in the
		// previous one's loss. Kills no sooner than a suspect timeout
		// apart. Clean shutdowns one at a time too: a member that leaves
		// while the others are still installing the component without
		// the previous one is counted as partitioned, not as left (seen
		// here: two of three data nodes stopped in the same instant left
		// the third non-Primary in 4 of 12 tries).
		for i, m := range s.Members {
			if i > 0 {
				obs = p.observe(ctx, s, p.o.Deadline)
				if ctx.Err() != nil {
					return res, ctx.Err()
				}
				if !obs.settled {
					res.Notes = append(res.Notes, fmt.Sprintf("the others had not taken in %s's loss within %s when %s went",
						s.Members[i-1], Millis(p.o.Deadline), m))
				} else {
					step("the others reacted: %s", obs.summary())
				}
				if wait := p.lab.SuspectTimeout() - time.Since(last); s.Kind == galera.KillOneByOne && wait > 0 {
					if err := sleep(ctx, wait); err != nil {
						return res, err
					}
				}
			}
			if s.Kind == galera.Shutdown {
				began := time.Now()
				if err := p.lab.Shutdown(ctx, m); err != nil {
					return res, fmt.Errorf("shut down %s: %w", m, err)
				}
				// The leave is announced: the others' views change
				// while it stops, so the reaction counts from its end.
				last = time.Now()
				step("shut down %s cleanly in %s", m, Millis(last.Sub(began)))
				continue
			}
			if err := p.lab.Kill(m); err != nil {
				return res, fmt.Errorf("kill %s: %w", m, err)
			}
			last = time.Now()
			step("killed %s", m)
		}
	}
	obs = p.observe(ctx, s, p.o.Deadline)
	if ctx.Err() != nil {
		return res, ctx.Err()
	}
	res.Failed, res.React = Millis(last.Sub(t0)), Millis(obs.at.Sub(last))
	if obs.settled {
		step("settled: %s", obs.summary())
	} else {
		step("not settled within %s: %s", Millis(p.o.Deadline), obs.summary())
		res.Notes = append(res.Notes, fmt.Sprintf("the nodes' views did not settle within %s", Millis(p.o.Deadline)))
	}
	judge(res, obs, p.data)
	// A member that stopped without the scenario stopping it makes the
	// scenario another one: the prediction was for this one.
	for _, m := range p.layout.Members {
		if !contains(s.Members, m.Name) && !p.lab.Running(m.Name) {
			res.Notes = append(res.Notes, fmt.Sprintf("%s stopped during the scenario without being made to; its log ends:\n%s",
				m.Name, p.lab.LogTail(m.Name, 8)))
			res.Match, res.Void = false, true
		}
	}
	if s.Kind == galera.Partition {
		if err := p.lab.Heal(); err != nil {
			return res, fmt.Errorf("heal the partition: %w", err)
		}
		step("healed the network")
	}
	res.Elapsed = Millis(time.Since(t0))
	return res, nil
}

// baseline recovers the lab and checks what Recover promises: every member
// running, every data node Synced in one Primary component of them all.
func (p *prover) baseline(ctx context.Context) error {
	if err := p.lab.Recover(ctx); err != nil {
		return fmt.Errorf("recover the lab: %w", err)
	}
	want := len(p.layout.Members)
	for _, m := range p.layout.Members {
		if !p.lab.Running(m.Name) {
			return fmt.Errorf("recover the lab: %s is not running after recovery", m.Name)
		}
	}
	for _, n := range p.data {
		st, err := p.status(ctx, n)
		if err != nil {
			return fmt.Errorf("recover the lab: read %s: %w", n, err)
		}
		if st.ClusterStatus != "Primary" || st.LocalState != "Synced" || st.ClusterSize != want {
			return fmt.Errorf("recover the lab: %s reports %s, %s, size %d after recovery (want Primary, Synced, size %d)",
				n, st.ClusterStatus, st.LocalState, st.ClusterSize, want)
		}
	}
	return nil
}

func (p *prover) status(ctx context.Context, name string) (*engine.GaleraStatus, error) {
	ctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	return p.lab.Status(ctx, name)
}

func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// describe is a scenario in a few words.
func describe(s galera.Scenario) string {
	switch s.Kind {
	case galera.KillAtOnce:
		return "kill " + strings.Join(s.Members, "+") + " at once"
	case galera.KillOneByOne:
		return "kill " + strings.Join(s.Members, ", then ") + " one by one"
	case galera.Partition:
		return "partition " + sides(s.Sides)
	case galera.Shutdown:
		return "shut down " + strings.Join(s.Members, ", then ") + " cleanly"
	}
	return string(s.Kind)
}

func sides(ss [][]string) string {
	parts := make([]string, len(ss))
	for i, s := range ss {
		parts[i] = strings.Join(s, ",")
	}
	return strings.Join(parts, " | ")
}

func outcome(primary bool) string {
	if primary {
		return "Primary"
	}
	return "no Primary"
}

func verdict(match bool) string {
	if match {
		return "match"
	}
	return "MISMATCH"
}

// sortedNames returns a map's keys in order.
func sortedNames[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
