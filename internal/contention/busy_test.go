package contention

import (
	"testing"

	"github.com/prometheus/procfs"
)

// TestBusyPercentNeverAboveAll: a CPU's iowait counter that steps back
// between two samples (the kernel allows it) must not make the CPU more
// than 100 % busy; the steps that move forward are counted as they are.
func TestBusyPercentNeverAboveAll(t *testing.T) {
	a := procfs.CPUStat{User: 100, System: 50, Idle: 1000, Iowait: 40}
	for _, c := range []struct {
		name string
		b    procfs.CPUStat
		want float64
	}{
		{"busy half", procfs.CPUStat{User: 150, System: 50, Idle: 1050, Iowait: 40}, 50},
		{"iowait backwards", procfs.CPUStat{User: 200, System: 50, Idle: 1000, Iowait: 39.5}, 100},
		{"iowait backwards, some idle", procfs.CPUStat{User: 200, System: 50, Idle: 1100, Iowait: 30}, 50},
		{"nothing moved", a, 0},
	} {
		if got := busyPercent(a, c.b); got != c.want {
			t.Errorf("%s: busyPercent = %v, want %v", c.name, got, c.want)
		}
	}
}
