package experiment

import (
	"fmt"

	"github.com/dbhost/dbhost/internal/results"
	"github.com/dbhost/dbhost/internal/stats"
)

// judge holds the statistical side of a run: one stats.Sequence per client
// count, each comparing every treatment arm with the base arm (Holm's
// correction across treatments). With a client sweep of K counts each
// sequence gets Alpha/K (Bonferroni), so the chance of any false "better"
// or "worse" over the whole experiment stays at most Alpha; the verdict is
// given per client count, because an effect may exist at some loads only
// (the published huge page gains grew with the number of clients).
//
// Looks come after every block from the second on (a block adds two
// trials per arm; the first look is at four), for the live run and,
// identically, when a stored experiment is recomputed.
type judge struct {
	plan      *Plan
	perArm    int
	clients   []int
	seqs      map[int]*stats.Sequence
	blocks    map[int]int
	decisions map[int][]stats.Decision
	active    map[int][]int
	// errs records looks that could not be made (e.g. an arm without any
	// counting trial), per client count.
	errs map[int]string
	// replaced counts, per client count, the trials per arm run in place
	// of excluded ones (two per extra block); extra counts the trials of
	// those blocks over all arms. spent records, per client count, why a
	// look went on with trials missing: the replacement budget ran out.
	replaced map[int]int
	extra    map[int]int
	spent    map[int]string
}

func newJudge(p *Plan, perArm int) (*judge, error) {
	jd := &judge{plan: p, perArm: perArm, clients: append([]int(nil), p.Workload.Clients...),
		seqs: map[int]*stats.Sequence{}, blocks: map[int]int{}, decisions: map[int][]stats.Decision{},
		active: map[int][]int{}, errs: map[int]string{}, replaced: map[int]int{}, extra: map[int]int{}, spent: map[int]string{}}
	sp := p.statsPlan(perArm, len(jd.clients))
	for _, c := range jd.clients {
		s, err := sp.NewSequence(len(p.Arms) - 1)
		if err != nil {
			return nil, err
		}
		jd.seqs[c] = s
		for i := range p.Arms {
			jd.active[c] = append(jd.active[c], i)
		}
	}
	return jd, nil
}

// running lists the client counts whose sequence is not done.
func (jd *judge) running() []int {
	var out []int
	for _, c := range jd.clients {
		if !jd.seqs[c].Done() {
			out = append(out, c)
		}
	}
	return out
}

func (jd *judge) done() bool { return len(jd.running()) == 0 }

// sample is the trial's value of the plan's metric.
func sample(metric string, t results.Trial) float64 {
	switch metric {
	case "p50":
		return t.P50.Seconds()
	case "p95":
		return t.P95.Seconds()
	case "p99":
		return t.P99.Seconds()
	}
	return t.OpsPerSec
}

// samples returns the counting samples of one arm at one client count.
func (jd *judge) samples(trials []results.Trial, arm, clients int) []float64 {
	var out []float64
	for _, t := range trials {
		if t.Arm == arm && t.Clients == clients && t.Excluded == "" && t.Block >= 0 {
			if v := sample(jd.plan.Protocol.Metric, t); v > 0 {
				out = append(out, v)
			}
		}
	}
	return out
}

// endBlock records that a block at this client count has finished and,
// from the second block on, makes the sequence's next look. It returns
// whether a look was made.
func (jd *judge) endBlock(clients int, trials []results.Trial) (bool, error) {
	s := jd.seqs[clients]
	if s == nil {
		return false, fmt.Errorf("no sequence for %d clients", clients)
	}
	jd.blocks[clients]++
	// A block with an excluded trial (steal time, drift, a failed run) is
	// made up by another before the look, within the plan's replacement
	// budget: a look then sees as many counting trials as it was planned
	// with, instead of too few for a verdict on a host whose hypervisor
	// was busy for a while. Whole blocks keep every arm's mean position
	// in time alike.
	missing := jd.missing(clients, trials)
	if missing == 0 {
		delete(jd.spent, clients)
	} else if !s.Done() {
		if jd.replaced[clients]+2 <= jd.plan.Protocol.MaxReplace {
			jd.blocks[clients]--
			jd.replaced[clients] += 2
			jd.extra[clients] += 2 * len(jd.active[clients])
			return false, nil
		}
		jd.spent[clients] = jd.shortNote(missing, 2*jd.blocks[clients])
	}
	if 2*jd.blocks[clients] < stats.MinPerArm || s.Done() {
		return false, nil
	}
	base := jd.samples(trials, 0, clients)
	treats := make([][]float64, len(jd.plan.Arms)-1)
	undecided := 0
	for i := range treats {
		if prev := jd.decisions[clients]; prev != nil && prev[i].Verdict != stats.Inconclusive {
			continue // decided: its trials have stopped
		}
		treats[i] = jd.samples(trials, i+1, clients)
		if len(treats[i]) == 0 {
			jd.errs[clients] = fmt.Sprintf("look skipped after block %d: arm %s has no counting trial", jd.blocks[clients], jd.plan.Arms[i+1].Name)
			return false, nil
		}
		undecided++
	}
	if len(base) == 0 {
		jd.errs[clients] = fmt.Sprintf("look skipped after block %d: the base arm has no counting trial", jd.blocks[clients])
		return false, nil
	}
	ds, err := s.Next(base, treats...)
	if err != nil {
		return false, err
	}
	if why := jd.spent[clients]; why != "" && missing > 0 {
		for i := range ds {
			// A verdict reached anyway keeps its reason: the sequence
			// hands decided arms back unchanged at later looks.
			if ds[i].Look == s.Look() && ds[i].Verdict == stats.Inconclusive {
				ds[i].Reason += "; " + why
			}
		}
	}
	jd.decisions[clients] = ds
	active := []int{0}
	for i, d := range ds {
		if d.Verdict == stats.Inconclusive && !d.Stop {
			active = append(active, i+1)
		}
	}
	jd.active[clients] = active
	return true, nil
}

// shortNote says why a look goes on with trials missing.
func (jd *judge) shortNote(missing, planned int) string {
	budget := "no trials may run in place of excluded ones (replace: -1)"
	if n := jd.plan.Protocol.MaxReplace; n > 0 {
		budget = fmt.Sprintf("the replacement budget of %d more per arm is spent", n)
	}
	return fmt.Sprintf("excluded trials left %d per arm short of the %d planned at this look, and %s", missing, planned, budget)
}

// missing is how many counting trials the active arm furthest behind
// lacks at this client count: each block should have given it two.
func (jd *judge) missing(clients int, trials []results.Trial) int {
	most := 0
	for _, arm := range jd.active[clients] {
		most = max(most, 2*jd.blocks[clients]-len(jd.samples(trials, arm, clients)))
	}
	return most
}

// activeArms are the arms that still run at this client count: the base
// and the treatments without a verdict.
func (jd *judge) activeArms(clients int) []int { return jd.active[clients] }

// replay recomputes the decisions of a stored experiment from its trials,
// block by block, exactly as the run made them.
func replay(p *Plan, perArm int, trials []results.Trial) (*judge, error) {
	jd, err := newJudge(p, perArm)
	if err != nil {
		return nil, err
	}
	// A block is complete when the next block starts (or when it holds
	// every active arm twice: the run's last block).
	type blockInfo struct {
		clients int
		n       int
	}
	var order []int
	info := map[int]*blockInfo{}
	for _, t := range trials {
		if t.Block < 0 {
			continue
		}
		bi, ok := info[t.Block]
		if !ok {
			bi = &blockInfo{clients: t.Clients}
			info[t.Block] = bi
			order = append(order, t.Block)
		}
		bi.n++
	}
	var sofar []results.Trial
	for _, b := range order {
		for _, t := range trials {
			if t.Block == b {
				sofar = append(sofar, t)
			}
		}
		bi := info[b]
		if bi.n < 2*len(jd.activeArms(bi.clients)) {
			break // interrupted mid-block: the run made no look here
		}
		if _, err := jd.endBlock(bi.clients, sofar); err != nil {
			return nil, err
		}
	}
	return jd, nil
}
