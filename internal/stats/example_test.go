package stats_test

import (
	"fmt"
	"time"

	"github.com/dbhost/dbhost/internal/stats"
)

// An experiment loop: after each ABBA block (two more trials per arm),
// look at all samples so far and stop on a verdict.
func ExamplePlan_Decide() {
	plan := stats.Plan{MaxPerArm: 12, Metric: "throughput", Direction: stats.HigherIsBetter}
	looks, _ := plan.Looks()
	fmt.Println("looks at", looks, "trials per arm")

	// tps of each trial, in run order (here: a setting that helps by ~4%).
	base := []float64{1012, 998, 1005, 990, 1003, 1009, 995, 1001}
	treatment := []float64{1046, 1041, 1052, 1035, 1022, 1049, 1047, 1038}
	for k, n := range looks {
		d, err := plan.Decide(base[:n], treatment[:n], k+1)
		if err != nil {
			fmt.Println(err)
			return
		}
		fmt.Println(d.Reason)
		if d.Stop {
			break
		}
	}
	// Output:
	// looks at [4 6 8 10 12] trials per arm
	// throughput 1.04x (95% CI 1.02–1.06), p=0.029 at look 1 of 5, 4 trials per arm: better
}

// Several settings against one base: Holm's correction keeps the chance
// of any false verdict at Alpha for the whole experiment.
func ExampleSequence() {
	plan := stats.Plan{MaxPerArm: 8, Metric: "p99 latency", Direction: stats.LowerIsBetter}
	seq, _ := plan.NewSequence(2)
	base := []float64{12.1, 11.8, 12.4, 12.0, 11.9, 12.2, 12.3, 12.0}
	hugepages := []float64{10.9, 11.0, 10.7, 11.1, 10.8, 11.0, 10.9, 10.6}
	noatime := []float64{12.0, 12.2, 11.9, 12.1, 12.3, 11.8, 12.0, 12.2}
	for _, n := range seq.Looks() {
		ds, _ := seq.Next(base[:n], hugepages[:n], noatime[:n])
		if seq.Done() {
			for _, d := range ds {
				fmt.Println(d.Verdict)
			}
			break
		}
	}
	// Output:
	// better
	// inconclusive
}

// Calibrate from an A/A run: how small a change can 16 trials per arm of
// 3 minutes each detect on this host?
func ExampleCalibrate() {
	aa := []float64{5120, 4980, 5060, 5010, 4890, 5150, 5030, 4950, 5080, 5000}
	c, err := stats.Calibrate(aa, 3*time.Minute, stats.Plan{MaxPerArm: 16})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Printf("noise ±%.1f%%, detects +%.1f%% with 80%% power, at most %v\n", 100*c.NoiseCV, 100*c.MDE, c.Max)
	// Output:
	// noise ±1.5%, detects +2.1% with 80% power, at most 1h36m0s
}
