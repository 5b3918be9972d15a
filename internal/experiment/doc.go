// Package experiment runs `dbhost experiment`: it proves whether a tuning
// change (a kernel knob, huge pages, a database parameter) changes a
// database's performance, with a real benchmark and stated error rates,
// and always puts the host back.
//
// An experiment is a Plan: two or more arms (the settings under test, the
// first is the base), a workload (internal/workload), a target (the
// user's PostgreSQL or MySQL, or a throwaway PostgreSQL cluster) and a
// protocol (budget, calibration, restarts, error rates). Run executes it:
//
//  1. Every knob any arm names is read first, and arms that do not name a
//     knob get its original value, so that each arm describes the whole
//     state and the order of trials does not matter.
//  2. Optionally, an A/A calibration runs the base arm a few times and
//     prints this host's noise, the smallest change the budget can detect
//     and the expected time, before the real run starts.
//  3. Trials run in randomised interleaved blocks (Schedule): each block
//     runs every arm twice, in a random order and then in its reverse —
//     ABBA or BAAB for two arms — so slow drift falls on every arm alike.
//     The order is drawn from a recorded seed.
//  4. Each trial applies its arm (journaled first, read back after), is
//     fingerprinted and compared with the first trial of its arm; a
//     drifted trial is stored with the reason and does not count.
//  5. After every block, internal/stats looks at the trials (a
//     group-sequential rank test with Holm's correction) and the run stops
//     as soon as every treatment arm has a verdict, or at the budget.
//  6. Every change goes to one journal (/var/lib/dbhost/experiment.journal)
//     before it is made. The host is restored at the end, on error, on
//     Ctrl-C/SIGTERM/SIGHUP and on panic; Recover restores after kill -9.
//
// Everything measured goes to the results database (internal/results):
// one sample per trial (its throughput), the per-second samples, the
// fingerprint and the decision, so that a verdict can be recomputed.
package experiment
