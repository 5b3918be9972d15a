package expreport

import (
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"strconv"
	"testing"
	"time"

	"github.com/dbhost/dbhost/internal/results"
	"github.com/dbhost/dbhost/internal/stats"
)

// scenario describes a synthetic experiment shaped like a real pgbench
// run on a small VM: trials of Seconds per-second samples around a
// throughput that each arm multiplies by its Effect, with lognormal
// trial-to-trial noise and per-second jitter with checkpoint dips.
type scenario struct {
	Name    string
	Arms    []results.Arm
	Effects []float64 // per arm, multiplies BaseOps
	PerArm  int       // trials per arm (per client count in a sweep)
	Clients []int     // nil: 8 clients, no sweep
	Seconds int       // per-second samples per trial (0: none stored)
	BaseOps float64
	Noise   float64            // trial-to-trial CV
	Exclude map[int]string     // seq → reason; the trial's fingerprint drifts
	Seed    uint64             //
	AA      int                // A/A calibration trials of arm 0 first (Block -1)
	Plan    *stats.Plan        // nil: MaxPerArm = PerArm
	Cal     *stats.Calibration // optional
}

func twoArms() []results.Arm {
	return []results.Arm{
		{Index: 0, Name: "4k", Knobs: []string{"vm.nr_hugepages=0", "pg.huge_pages=off"}},
		{Index: 1, Name: "2M", Knobs: []string{"hugepages.2M=600", "pg.huge_pages=on"}},
	}
}

// order returns the arm of each trial in one block: ABBA and BAAB
// alternating for two arms, a fresh random order for more.
func order(rng *rand.Rand, arms, block int) []int {
	if arms == 2 {
		if block%2 == 0 {
			return []int{0, 1, 1, 0}
		}
		return []int{1, 0, 0, 1}
	}
	p := rng.Perm(arms)
	return p
}

// build makes the Input the experiment command would store for sc, with
// decisions computed by internal/stats look by look.
func (sc scenario) build(t testing.TB) Input {
	t.Helper()
	rng := rand.New(rand.NewPCG(sc.Seed, 7))
	if sc.BaseOps == 0 {
		sc.BaseOps = 2400
	}
	if sc.Noise == 0 {
		sc.Noise = 0.03
	}
	clients := sc.Clients
	if clients == nil {
		clients = []int{0}
	}
	created := time.Date(2026, 11, 21, 9, 30, 0, 0, time.UTC)
	e := &results.Experiment{ID: "20261121-093000-a1b2c3", Name: sc.Name, Created: created, Status: results.Done, Arms: sc.Arms}
	plan := stats.Plan{MaxPerArm: max(sc.PerArm, stats.MinPerArm), Metric: "throughput"}
	if sc.Plan != nil {
		plan = *sc.Plan
	}
	planJSON, _ := json.Marshal(map[string]any{"workload": map[string]any{"kind": "pgbench", "clients": clients, "duration": "60s", "warmup": "10s"},
		"protocol": "abba", "stats": plan})
	e.Plan = planJSON
	e.Host = json.RawMessage(`{"hostname":"db-test-1","kernel":"6.18.44","cpus":2,"memory_bytes":4113563648,"virtualization":"kvm","storage":{"device":"vda","scheduler":"none"}}`)

	var trials []results.Trial
	now := created.Add(2 * time.Minute)
	seq := 0
	for range sc.AA {
		level := sc.BaseOps * math.Exp(rng.NormFloat64()*sc.Noise)
		tr := results.Trial{Seq: seq, Block: -1, Arm: 0, Clients: clients[len(clients)-1], Started: now, Finished: now.Add(70 * time.Second),
			OpsPerSec: level, Excluded: "A/A calibration: not part of the comparison"}
		for s := 1; s <= sc.Seconds; s++ {
			tr.Seconds = append(tr.Seconds, results.Second{At: float64(s), Ops: level})
		}
		trials = append(trials, tr)
		seq++
		now = tr.Finished.Add(15 * time.Second)
	}
	for _, cl := range clients {
		perArm := map[int]int{}
		for block := 0; ; block++ {
			done := true
			for _, a := range sc.Arms {
				if perArm[a.Index] < sc.PerArm {
					done = false
				}
			}
			if done {
				break
			}
			ord := order(rng, len(sc.Arms), block)
			for _, ai := range ord {
				a := sc.Arms[ai]
				if perArm[a.Index] >= sc.PerArm {
					continue
				}
				perArm[a.Index]++
				level := sc.BaseOps * sc.Effects[ai] * math.Exp(rng.NormFloat64()*sc.Noise)
				if cl > 0 {
					// Throughput grows with clients, then flattens on 2 CPUs.
					level *= 1.6 * float64(cl) / (float64(cl) + 3)
				}
				tr := results.Trial{Seq: seq, Block: block, Arm: a.Index, Clients: cl, Started: now}
				var sum float64
				for s := 1; s <= sc.Seconds; s++ {
					v := level * (1 + 0.04*rng.NormFloat64())
					if s%30 == 17 { // checkpoint
						v *= 0.7
					}
					v = max(v, 0)
					sum += v
					tr.Seconds = append(tr.Seconds, results.Second{At: float64(s), Ops: math.Round(v*10) / 10})
				}
				tr.OpsPerSec = level
				if sc.Seconds > 0 {
					tr.OpsPerSec = sum / float64(sc.Seconds)
				}
				dur := time.Duration(max(sc.Seconds, 60)) * time.Second
				tr.Finished = now.Add(dur + 10*time.Second)
				tr.Transactions = int64(tr.OpsPerSec * dur.Seconds())
				c := float64(max(cl, 8))
				lat := time.Duration(c / tr.OpsPerSec * float64(time.Second))
				tr.P50, tr.P95, tr.P99 = lat, lat*21/10, lat*34/10
				thp := "never"
				if reason, ok := sc.Exclude[seq]; ok {
					tr.Excluded = reason
					thp = "always"
				}
				fp := map[string]string{
					"thp.enabled": thp, "governor": "none", "disk.vda.scheduler": "none",
					"hugepages.2M.total": strconv.Itoa(600 * a.Index), "hugepages.2M.free": strconv.Itoa(max(0, 600*a.Index-seq%7)),
					"load1": fmt.Sprintf("%.2f", 0.4+0.1*float64(seq%5)), "pg.shared_buffers": "128MB",
				}
				tr.Fingerprint, _ = json.Marshal(fp)
				trials = append(trials, tr)
				seq++
				now = tr.Finished.Add(15 * time.Second)
			}
		}
	}
	e.Finished = now
	in := Input{Experiment: e, Trials: trials, Calibration: sc.Cal}
	in.Decisions = decide(t, plan, sc.Arms, trials, clients[len(clients)-1])
	// Stored like the experiment package does: headline decisions, and
	// in a sweep every client count's comparison.
	var comps []comparison
	if len(clients) > 1 {
		for _, cl := range clients {
			for i, d := range decide(t, plan, sc.Arms, trials, cl) {
				comps = append(comps, comparison{Arm: i + 1, Clients: cl, Decision: d})
			}
		}
	}
	e.Decision, _ = json.Marshal(map[string]any{"verdict": "x", "decisions": in.Decisions, "comparisons": comps})
	return in
}

// decide runs the plan's looks over the counted trials (of one client
// count), as the experiment loop does, and returns the last decisions.
func decide(t testing.TB, plan stats.Plan, arms []results.Arm, trials []results.Trial, clients int) []stats.Decision {
	t.Helper()
	if len(arms) < 2 {
		return nil
	}
	samples := make([][]float64, len(arms))
	for _, tr := range trials {
		if tr.Excluded == "" && tr.Clients == clients && tr.Block >= 0 {
			samples[tr.Arm] = append(samples[tr.Arm], tr.OpsPerSec)
		}
	}
	seq, err := plan.NewSequence(len(arms) - 1)
	if err != nil {
		t.Fatal(err)
	}
	var ds []stats.Decision
	for _, n := range seq.Looks() {
		// The run ends (time budget) before a look it has no trials for.
		args := make([][]float64, len(arms))
		for i := range arms {
			if len(samples[i]) < n {
				return ds
			}
			args[i] = samples[i][:n]
		}
		ds, err = seq.Next(args[0], args[1:]...)
		if err != nil {
			t.Fatal(err)
		}
		if seq.Done() {
			break
		}
	}
	return ds
}
