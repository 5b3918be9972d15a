package stats

import (
	"fmt"
	"math"
	"time"
)

// Calibration is what an A/A run (the same setting in every trial) says
// about the experiments this host can support.
type Calibration struct {
	// Samples is the number of A/A trials measured; Median their median.
	Samples int     `json:"samples"`
	Median  float64 `json:"median"`
	// NoiseCV is the robust trial-to-trial noise (0.03 = ±3%), see RobustCV.
	NoiseCV float64 `json:"noise_cv"`
	// Power is the chance asked for of declaring a real change (0.8).
	Power float64 `json:"power"`
	// MDE is the smallest improvement (0.05 = 5%: throughput ×1.05, or
	// latency ÷1.05) that the plan declares "better" with probability
	// Power within its budget, with noise like NoiseCV.
	MDE float64 `json:"mde"`
	// MaxPerArm is the plan's budget of trials per arm; Max its duration.
	MaxPerArm int           `json:"max_per_arm"`
	Max       time.Duration `json:"max"`
	// TrialsPerArm is the expected number of trials per arm until the
	// experiment stops when the true change is MDE; Expected its duration
	// for all arms.
	TrialsPerArm float64       `json:"trials_per_arm"`
	Expected     time.Duration `json:"expected"`
	// TrialsPerArmNoChange and ExpectedNoChange are the same when the
	// change does nothing (the experiment may still stop early on
	// "equivalent").
	TrialsPerArmNoChange float64       `json:"trials_per_arm_no_change"`
	ExpectedNoChange     time.Duration `json:"expected_no_change"`
	// Method says how the numbers were computed.
	Method   string   `json:"method"`
	Warnings []string `json:"warnings,omitempty"`
}

// Calibration settings: fixed, so that the same A/A samples always give
// the same answer.
const (
	calibrationPower = 0.8
	calibrationRuns  = 400
	calibrationSeed  = 20240601
)

// Calibrate estimates from A/A samples (one sample per trial of an
// unchanged setting; both arms of an A/A experiment may be passed
// together) how small a change the plan can detect and how long it
// takes. trial is the wall-clock time of one trial including set-up.
//
// The noise is the robust CV of the samples (RobustCV). The power comes
// from simulation, not from a formula: calibrationRuns experiments per
// candidate change, with lognormal noise of that CV, run through the
// plan's own sequential rule (Simulate) with a fixed seed; the smallest
// change reaching 80% "better" is found by bisection to 0.1%. A heavy
// tail (occasional stalls) that the robust CV does not count makes the
// real MDE larger; look at the A/A samples for outliers.
func Calibrate(samples []float64, trial time.Duration, plan Plan) (Calibration, error) {
	plan, err := plan.withDefaults()
	if err != nil {
		return Calibration{}, err
	}
	if trial <= 0 {
		return Calibration{}, fmt.Errorf("calibrate: trial duration %v must be positive", trial)
	}
	cv, err := RobustCV(samples)
	if err != nil {
		return Calibration{}, fmt.Errorf("calibrate: %w", err)
	}
	if cv == 0 {
		return Calibration{}, fmt.Errorf("calibrate: at least half of the %d samples are equal (%g): no noise to measure; is the metric rounded or the load rate-limited?", len(samples), Median(samples))
	}
	c := Calibration{
		Samples:   len(samples),
		Median:    Median(samples),
		NoiseCV:   cv,
		Power:     calibrationPower,
		MaxPerArm: plan.MaxPerArm,
		Max:       Duration(float64(plan.MaxPerArm), 2, trial),
		Method: fmt.Sprintf("simulated %d experiments per candidate change, lognormal noise with CV %.2f%%, seed %d",
			calibrationRuns, 100*cv, calibrationSeed),
	}
	if cv > 0.2 {
		c.Warnings = append(c.Warnings, fmt.Sprintf("trials vary by ±%.0f%%: only large changes can be told apart; find the cause first (other load on the host, trials too short, no warm-up)", 100*cv))
	}
	if len(samples) < 8 {
		c.Warnings = append(c.Warnings, fmt.Sprintf("noise estimated from only %d trials: run at least 8 for a dependable estimate", len(samples)))
	}
	// An improvement is a higher metric or a lower one, by Direction.
	sim := func(change float64) (SimResult, error) {
		if plan.Direction == LowerIsBetter {
			change = 1/(1+change) - 1
		}
		return Simulate(plan, Scenario{CV: cv, Change: change, Runs: calibrationRuns, Seed: calibrationSeed})
	}
	power := func(r SimResult) float64 { return r.Rate(r.Better) }

	lo, hi := 0.0, 1.0
	top, err := sim(hi)
	if err != nil {
		return Calibration{}, err
	}
	if power(top) < calibrationPower {
		c.MDE = hi
		c.Warnings = append(c.Warnings, "even a doubling is not detected reliably within this budget: the noise is too large or the budget too small")
	} else {
		for hi-lo > 0.001 {
			mid := (lo + hi) / 2
			r, err := sim(mid)
			if err != nil {
				return Calibration{}, err
			}
			if power(r) >= calibrationPower {
				hi = mid
			} else {
				lo = mid
			}
		}
		c.MDE = math.Ceil(hi*1000) / 1000
	}
	atMDE, err := sim(c.MDE)
	if err != nil {
		return Calibration{}, err
	}
	none, err := sim(0)
	if err != nil {
		return Calibration{}, err
	}
	c.TrialsPerArm = atMDE.MeanPerArm
	c.Expected = Duration(atMDE.MeanPerArm, 2, trial)
	c.TrialsPerArmNoChange = none.MeanPerArm
	c.ExpectedNoChange = Duration(none.MeanPerArm, 2, trial)
	return c, nil
}
