package stats

import (
	"math"
	"testing"
)

// Worked by hand: sorted 0.005, 0.01, 0.03, 0.04 times 4, 3, 2, 1 gives
// 0.02, 0.03, 0.06, 0.04; made non-decreasing the last becomes 0.06.
func TestHolmByHand(t *testing.T) {
	got, err := Holm([]float64{0.01, 0.04, 0.03, 0.005})
	if err != nil {
		t.Fatal(err)
	}
	want := []float64{0.03, 0.06, 0.06, 0.02}
	for i := range want {
		if !near(got[i], want[i], 1e-12) {
			t.Fatalf("Holm = %v, want %v", got, want)
		}
	}
	// Capped at 1; a single test is unchanged.
	got, _ = Holm([]float64{0.6, 0.5})
	if got[0] != 1 || got[1] != 1 {
		t.Errorf("Holm(0.6, 0.5) = %v, want [1 1]", got)
	}
	got, _ = Holm([]float64{0.2})
	if got[0] != 0.2 {
		t.Errorf("Holm(0.2) = %v", got)
	}
	for _, bad := range []float64{math.NaN(), -0.1, 1.5} {
		if _, err := Holm([]float64{0.1, bad}); err == nil {
			t.Errorf("Holm accepted %v", bad)
		}
	}
}
