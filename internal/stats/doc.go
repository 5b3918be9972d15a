// Package stats decides whether a setting changes a database's
// performance, from as few benchmark trials as the data allow, with
// stated error rates. It is the statistics of `dbhost experiment`.
//
// # What goes in
//
// An experiment runs short trials (for example 60 s of pgbench) in
// randomised interleaved blocks — ABBA for a base setting A and a
// treatment B — and keeps one number per trial: its throughput, or its
// latency. Interleaving spreads slow drift (caches warming, a neighbour's
// backup) over both arms. Samples must be positive: a zero or a NaN is a
// failed trial and is refused with an error.
//
// # What comes out
//
// After each block, Plan.Decide (one treatment) or Sequence.Next (several)
// returns a Decision with a verdict:
//
//   - better / worse: the change moves the metric, in the direction the
//     Plan says is good (higher throughput, lower latency);
//   - equivalent: whatever the change does is within ±Equivalence (2%
//     by default) — it is safe to ignore;
//   - inconclusive: not shown yet; run more trials, or, at the last look,
//     the budget was too small for this noise.
//
// It also gives the change as a ratio (1.07x = 7% more) with an interval,
// the p-value, and one sentence a person can read: "throughput 1.07x (95%
// CI 1.03–1.11), p=0.004 at look 3 of 7, 8 trials per arm: better".
//
// # Method
//
// The test is the exact Mann-Whitney rank test (Wilcoxon rank-sum): it
// asks only whether the treatment's trials tend to rank above the base's,
// so a trial disturbed by a checkpoint shifts one rank, not the average,
// and no bell curve is assumed. The ratio is the Hodges–Lehmann estimate —
// the median of all treatment/base ratios over pairs of trials — and its
// interval comes from inverting the same rank test, so the interval
// excludes 1 exactly when the test rejects. Both work on log(samples):
// the assumption is that a setting multiplies the metric by a factor.
// The plain ratio of the two medians is reported beside it.
//
// # Error rates
//
// Looking at the data after every block and stopping when it looks good
// is how ordinary tests produce false discoveries: a test at 5% repeated
// at 7 looks declares a change that is not there in 13–15% of
// experiments (this package's simulations show it). A Plan instead gives each
// look its own small level, fixed in advance, and the levels add up to at
// most Alpha (5%). So, whatever the noise looks like:
//
//   - if the setting does nothing, the experiment ends with "better" or
//     "worse" in at most 5% of experiments — over all looks together
//     (3.7–4.3% in the simulations, 7 looks up to 16 trials per arm);
//   - if the change is bigger than ±Equivalence, it is called
//     "equivalent" in at most 5% of experiments;
//   - the interval printed at the end contains the true ratio in at
//     least 95% of experiments, also when the experiment stopped early;
//   - with several treatments, Holm's correction keeps these rates for
//     the whole experiment, not per treatment.
//
// No verdict rests on fewer than 4 trials per arm, and verdicts on fewer
// than 6 carry a warning. With 4 trials per arm only a complete
// separation (every treatment trial beyond every base trial) is evidence
// enough (p = 2/70); a large change, such as 10% with 3% noise, is
// declared there in 87% of experiments, and by 8 trials in 99.8%. The
// price of being able to stop that early is about half the error budget:
// a change as large as the noise (3% with 3% noise, 20 trials per arm)
// is found in 59% of experiments, against 70% with a first look at 6
// trials (FirstLook: 6) and 85% with a single test at the end.
//
// The test assumes the trials of each arm are alike apart from noise.
// Interleaving protects against slow drift; it cannot help when a
// neighbour's load changes the spread of one arm only, so look at the
// trials when the warnings say they vary a lot.
//
// Calibrate turns an A/A run (the same setting in every trial) into the
// noise of the host and the smallest change the budget can detect.
package stats
