package stats

import (
	"fmt"
	"time"
)

// MaxPerArmForTrials turns a total trial budget (--trials N) into trials
// per arm for arms arms (base plus treatments), rounded down to whole
// blocks of two trials per arm (ABBA) and capped at MaxExactPerArm.
func MaxPerArmForTrials(total, arms int) (int, error) {
	if arms < 2 {
		return 0, fmt.Errorf("budget: %d arms, need a base and at least one treatment", arms)
	}
	if total < 0 {
		return 0, fmt.Errorf("budget: %d trials", total)
	}
	n := total / arms
	n -= n % 2
	if n < MinPerArm {
		return 0, fmt.Errorf("budget: %d trials over %d arms is %d per arm; at least %d per arm (%d trials) are needed for any verdict",
			total, arms, n, MinPerArm, MinPerArm*arms)
	}
	return min(n, MaxExactPerArm), nil
}

// MaxPerArmForTime turns a time budget (--time D) into trials per arm,
// given the wall-clock time of one trial including its set-up (restart,
// warm-up), like MaxPerArmForTrials.
func MaxPerArmForTime(budget, trial time.Duration, arms int) (int, error) {
	if trial <= 0 {
		return 0, fmt.Errorf("budget: trial duration %v must be positive", trial)
	}
	if budget < 0 {
		return 0, fmt.Errorf("budget: time %v must not be negative", budget)
	}
	n, err := MaxPerArmForTrials(int(budget/trial), arms)
	if err != nil {
		return 0, fmt.Errorf("%w (%v per trial within %v)", err, trial, budget)
	}
	return n, nil
}

// Duration is the wall-clock time of perArm trials in each of arms arms.
func Duration(perArm float64, arms int, trial time.Duration) time.Duration {
	return time.Duration(perArm * float64(arms) * float64(trial))
}
