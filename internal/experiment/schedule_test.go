package experiment

import (
	"slices"
	"testing"
)

// Two arms: every block is ABBA or BAAB, both occur about equally often,
// and over many blocks each arm runs first as often as the other.
func TestScheduleABBA(t *testing.T) {
	s := NewSchedule(42)
	counts := map[string]int{}
	first := [2]int{}
	for range 400 {
		b := s.Block([]int{0, 1})
		key := ""
		for _, a := range b {
			key += string(rune('A' + a))
		}
		counts[key]++
		first[b[0]]++
	}
	if len(counts) != 2 || counts["ABBA"]+counts["BAAB"] != 400 {
		t.Fatalf("blocks %v: want only ABBA and BAAB", counts)
	}
	// 400 fair coin flips: outside 160..240 happens with p < 1e-4.
	if counts["ABBA"] < 160 || counts["ABBA"] > 240 {
		t.Errorf("ABBA %d times of 400: not random", counts["ABBA"])
	}
	if first[0] != counts["ABBA"] {
		t.Errorf("first arm counts %v disagree with %v", first, counts)
	}
}

// More arms: each block runs every active arm twice, as a permutation
// and its mirror, so every arm's mean position in the block is the same
// (a linear drift adds equally to each); orders vary between blocks.
func TestScheduleBlocksBalanced(t *testing.T) {
	s := NewSchedule(7)
	arms := []int{0, 1, 2, 3}
	seen := map[string]bool{}
	for range 200 {
		b := s.Block(arms)
		if len(b) != 2*len(arms) {
			t.Fatalf("block %v: want %d trials", b, 2*len(arms))
		}
		pos := map[int]int{}
		for i, a := range b {
			pos[a] += i
			if b[len(b)-1-i] != a {
				t.Fatalf("block %v is not a permutation followed by its reverse", b)
			}
		}
		for _, a := range arms {
			if pos[a] != len(b)-1 { // i + (n-1-i)
				t.Fatalf("block %v: arm %d has position sum %d, want %d", b, a, pos[a], len(b)-1)
			}
		}
		seen[fmtInts(b)] = true
	}
	// 24 permutations of 4 arms: 200 draws see nearly all of them.
	if len(seen) < 20 {
		t.Errorf("only %d different block orders in 200 blocks", len(seen))
	}
	// Dropped arms are not scheduled.
	b := s.Block([]int{0, 2})
	if slices.Contains(b, 1) || slices.Contains(b, 3) || len(b) != 4 {
		t.Errorf("block over arms 0 and 2: %v", b)
	}
}

// The order is a function of the seed: the same seed (stored with the
// experiment) reproduces it, another seed gives another.
func TestScheduleSeeded(t *testing.T) {
	draw := func(seed uint64) []int {
		s := NewSchedule(seed)
		var out []int
		for range 10 {
			out = append(out, s.Round([]int{1, 2, 4, 8})...)
			out = append(out, s.Block([]int{0, 1, 2})...)
		}
		return out
	}
	a, b, c := draw(123), draw(123), draw(124)
	if !slices.Equal(a, b) {
		t.Fatalf("same seed, different orders:\n%v\n%v", a, b)
	}
	if slices.Equal(a, c) {
		t.Fatalf("seeds 123 and 124 give the same order %v", a)
	}
	for range 100 {
		if s := newSeed(); s == 0 || s >= 1<<53 {
			t.Fatalf("seed %d: must be non-zero and exact in JSON", s)
		}
	}
}

func fmtInts(xs []int) string {
	b := make([]byte, len(xs))
	for i, x := range xs {
		b[i] = byte('0' + x)
	}
	return string(b)
}
