package experiment

import (
	"math/rand/v2"
)

// Schedule draws the order of trials. Every block runs each active arm
// twice: in a random order, then in the reverse order (ABBA or BAAB for
// two arms; for more, e.g. CAB BAC). The mirror makes each arm's mean
// position in the block the same, so a linear drift (caches warming, a
// neighbour's job starting) adds the same to every arm; the random order
// keeps any other pattern from lining up with an arm. A client sweep
// draws the order of client counts afresh for every round.
//
// The draw depends only on the seed and on which arms are still active,
// so a stored experiment's order can be reproduced.
type Schedule struct {
	Seed uint64
	rng  *rand.Rand
}

// NewSchedule starts a schedule from seed.
func NewSchedule(seed uint64) *Schedule {
	return &Schedule{Seed: seed, rng: rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))}
}

// Block returns the order of one block over the active arms (their
// indexes): a random permutation followed by its reverse.
func (s *Schedule) Block(active []int) []int {
	perm := append([]int(nil), active...)
	s.rng.Shuffle(len(perm), func(i, j int) { perm[i], perm[j] = perm[j], perm[i] })
	out := make([]int, 0, 2*len(perm))
	out = append(out, perm...)
	for i := len(perm) - 1; i >= 0; i-- {
		out = append(out, perm[i])
	}
	return out
}

// Round returns a random order of the client counts still running.
func (s *Schedule) Round(clients []int) []int {
	out := append([]int(nil), clients...)
	s.rng.Shuffle(len(out), func(i, j int) { out[i], out[j] = out[j], out[i] })
	return out
}

// newSeed draws a seed when the plan gives none.
func newSeed() uint64 {
	for {
		if s := rand.Uint64() >> 11; s != 0 { // exact in JSON numbers (53 bits)
			return s
		}
	}
}
