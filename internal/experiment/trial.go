package experiment

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/dbhost/dbhost/internal/knob"
	"github.com/dbhost/dbhost/internal/results"
	"github.com/dbhost/dbhost/internal/workload"
)

// trial runs one trial: apply the arm, settle the server, fingerprint,
// run the workload, judge what it measured, store. Errors end the
// experiment: a knob that cannot be applied, too many failed runs in a
// row, a cancelled context.
func (r *run) trial(ctx context.Context, arm, clients, block int, calibration bool) (*results.Trial, error) {
	p := r.plan
	a := p.Arms[arm]
	label := r.trialLabel(a, clients, calibration)
	t := results.Trial{Seq: r.meas.seq, Block: block, Arm: arm, Clients: clients, Started: time.Now()}
	r.out.bar.startTrial(label, r.out.planned-r.meas.seq, p.trialWall(r.meas.restartAll || p.Protocol.Restart))
	restarted, err := r.applyArm(ctx, a)
	if err != nil {
		return nil, fmt.Errorf("%s: arm %s: %w", label, a.Name, err)
	}
	if err := r.settle(ctx, restarted); err != nil {
		return nil, fmt.Errorf("%s: %w", label, err)
	}
	fp, drift, err := r.fingerprint(ctx, arm, &t)
	if err != nil {
		return nil, err
	}
	res, steal, runErr := r.measure(ctx, clients, fp, &t)
	if runErr != nil && ctx.Err() != nil {
		return nil, ctx.Err()
	}
	if runErr != nil {
		r.meas.failures++
		t.Excluded = "failed: " + runErr.Error()
	} else {
		r.meas.failures = 0
		recordResult(&t, res, drift, steal)
	}
	if calibration {
		t.Excluded = strings.TrimSuffix(calibrationNote+"; "+t.Excluded, "; ")
	}
	if err := r.store(ctx, &t, label); err != nil {
		return nil, err
	}
	if r.meas.failures >= maxConsecutiveFailure {
		return nil, fmt.Errorf("%d trials in a row failed; the last: %v", r.meas.failures, runErr)
	}
	return &t, nil
}

// trialLabel names a trial on the progress line: its number, arm and,
// where it tells trials apart, the client count.
func (r *run) trialLabel(a Arm, clients int, calibration bool) string {
	label := fmt.Sprintf("trial %d/%d %s", r.meas.seq+1, r.out.planned, a.Name)
	if len(r.plan.Workload.Clients) > 1 || calibration {
		label += fmt.Sprintf(" %dc", clients)
	}
	if calibration {
		label += " (A/A)"
	}
	return label
}

// applyArm sets every knob of the arm and reports whether the server was
// restarted. Once an arm needs a restart, every later trial restarts too,
// so that no arm runs on a warmer server.
func (r *run) applyArm(ctx context.Context, a Arm) (restarted bool, err error) {
	force := r.plan.Protocol.Restart || r.meas.restartAll
	applied, err := r.db.ap.Apply(ctx, a.Set, force)
	if err != nil {
		return false, err
	}
	if applied.Restarted && !force {
		r.meas.restartAll = true
		r.note("arm %s needs a server restart: from now on every trial starts after a restart, so that no arm runs on a warmer server", a.Name)
	}
	return applied.Restarted, nil
}

// settle starts every trial on the throwaway cluster alike: no dirty
// buffers left by the trial before, and, after a restart, the data set
// back in shared_buffers. A user's server is left as it is.
func (r *run) settle(ctx context.Context, restarted bool) error {
	c := r.db.srv.cluster
	if c == nil {
		return nil
	}
	if restarted {
		if err := c.Prewarm(ctx); err != nil {
			return err
		}
	}
	return c.Checkpoint(ctx)
}

// fingerprint reads the knobs' state before the run and compares it with
// the arm's first complete one. A fingerprint that cannot be read in full
// excludes the trial (it is not an error unless ctx was cancelled).
func (r *run) fingerprint(ctx context.Context, arm int, t *results.Trial) (fp knob.Fingerprint, drift []string, err error) {
	fp, err = r.db.ap.Fingerprint(ctx, r.db.names)
	if err != nil {
		if ctx.Err() != nil {
			return nil, nil, ctx.Err()
		}
		if fp == nil {
			fp = knob.Fingerprint{}
		}
		t.Excluded = "incomplete fingerprint: " + err.Error()
	}
	ref, haveRef := r.meas.first[arm]
	if !haveRef && t.Excluded == "" {
		r.meas.first[arm] = fp
	}
	if haveRef {
		drift = knob.Drift(ref, fp)
	}
	return fp, drift, nil
}

// measure runs the workload (warm-up included) and closes the trial's
// interval: the end time, the steal time over the run (-1 when unknown)
// and the fingerprint with the interval's figures added.
func (r *run) measure(ctx context.Context, clients int, fp knob.Fingerprint, t *results.Trial) (*workload.Result, float64, error) {
	cpu0, cpuErr := r.db.ap.CPUTimes()
	spec := r.plan.Workload.Spec(clients)
	spec.WorkDir = r.undo.work
	spec.Progress = r.out.bar.second
	// A trial that overruns its time by far is stuck (a client waiting
	// on something that never comes): it is stopped and counts as failed.
	limit := 2*(spec.Duration+spec.Warmup) + trialGrace
	tctx, cancel := context.WithTimeout(ctx, limit)
	res, runErr := workload.Run(tctx, r.db.srv.wt, spec)
	cancel()
	if runErr != nil && ctx.Err() == nil && tctx.Err() != nil {
		runErr = fmt.Errorf("stopped after %s, twice its planned time and a minute: %w", limit, runErr)
	}
	t.Finished = time.Now()
	steal := -1.0
	if cpuErr == nil && r.db.ap.Interval(fp, cpu0) == nil {
		steal, _ = strconv.ParseFloat(fp["interval.steal_percent"], 64)
	}
	if b, err := json.Marshal(fp); err == nil {
		t.Fingerprint = b
	}
	return res, steal, runErr
}

// recordResult copies a successful run's figures into the trial and
// excludes it, unless already excluded, when the knobs drifted or the
// hypervisor took too much of the CPU.
func recordResult(t *results.Trial, res *workload.Result, drift []string, steal float64) {
	t.OpsPerSec, t.Transactions, t.Errors = res.OpsPerSec, res.Ops, res.Errors
	t.P50, t.P95, t.P99 = res.Latency.P50, res.Latency.P95, res.Latency.P99
	t.Output = tail(res.Output, 2000)
	for _, s := range res.PerSecond {
		if !s.Warmup {
			t.Seconds = append(t.Seconds, results.Second{At: s.At.Seconds(), Ops: s.Ops, Errors: int64(math.Round(s.Errors))})
		}
	}
	switch {
	case t.Excluded != "":
	case len(drift) > 0:
		t.Excluded = "fingerprint drift: " + strings.Join(drift, "; ")
	case steal > maxStealPercent:
		t.Excluded = fmt.Sprintf("steal time %.0f%% during the trial: the hypervisor gave the CPU to others", steal)
	}
}

// store adds the trial to the results database and to the run's trials.
// It is stored even when ctx was cancelled meanwhile: the trial ran.
func (r *run) store(ctx context.Context, t *results.Trial, label string) error {
	if err := r.opts.Store.AddTrial(context.WithoutCancel(ctx), r.meas.exp.ID, t); err != nil {
		return err
	}
	r.meas.trials = append(r.meas.trials, *t)
	r.meas.seq++
	r.out.bar.endTrial(trialLine(r.plan, t, label))
	return nil
}

func trialLine(p *Plan, t *results.Trial, label string) string {
	s := fmt.Sprintf("%-28s %10.1f %s  p99 %s", label, t.OpsPerSec, opsUnit(p), fmtLatency(t.P99))
	if t.Excluded != "" {
		s += "  [excluded: " + t.Excluded + "]"
	}
	return s
}

func opsUnit(p *Plan) string {
	if p.Workload.Kind == string(workload.PGBench) {
		return "tps"
	}
	return "ops/s"
}

func fmtLatency(d time.Duration) string {
	if d <= 0 {
		return "-"
	}
	switch {
	case d < time.Millisecond:
		return fmt.Sprintf("%.0fµs", float64(d)/1e3)
	case d < time.Second:
		return fmt.Sprintf("%.2fms", float64(d)/1e6)
	}
	return d.Round(time.Millisecond).String()
}

func tail(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[len(s)-n:]
}
