package facts_test

import (
	"context"
	"reflect"
	"strings"
	"testing"

	"github.com/dbhost/dbhost/internal/facts"
	"github.com/dbhost/dbhost/internal/fixture"
	"github.com/dbhost/dbhost/internal/host"
)

// TestGatherHost: the domains asked for are what a full Gather finds on the
// same recorded host; the others, the processes and instances are left out.
func TestGatherHost(t *testing.T) {
	full := fixture.Facts(t, "mem-hugepages-pg-on")
	h, err := host.OpenSnapshot(fixture.Path("mem-hugepages-pg-on"))
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	f := facts.GatherHost(context.Background(), h, facts.Options{Sysctls: full.SysctlNames()}, facts.DomainMemory, facts.DomainSysctl, facts.DomainSystem)
	if !reflect.DeepEqual(f.Memory, full.Memory) {
		t.Errorf("memory differs from Gather's:\n%+v\n%+v", f.Memory, full.Memory)
	}
	if !reflect.DeepEqual(f.System, full.System) || !reflect.DeepEqual(f.Sysctl, full.Sysctl) {
		t.Errorf("system or sysctls differ from Gather's")
	}
	if len(f.Memory.HugePages) == 0 || len(f.Sysctl) == 0 || f.System.Kernel.Value == "" {
		t.Errorf("nothing gathered: %d pools, %d sysctls, kernel %+v", len(f.Memory.HugePages), len(f.Sysctl), f.System.Kernel)
	}
	if f.Source != full.Source || !reflect.DeepEqual(f.Manifest, full.Manifest) || f.AsRoot != full.AsRoot {
		t.Errorf("source %q manifest %+v, want %q %+v", f.Source, f.Manifest, full.Source, full.Manifest)
	}
	if !reflect.DeepEqual(f.Storage, facts.Storage{}) || !reflect.DeepEqual(f.Time, facts.Time{}) || !reflect.DeepEqual(f.Persist, facts.Persist{}) ||
		!reflect.DeepEqual(f.Security, facts.Security{}) || !reflect.DeepEqual(f.Tuned, facts.Tuned{}) || f.Processes != nil || f.Instances != nil {
		t.Errorf("gathered domains not asked for: %+v", f)
	}
	if full.Instances == nil || full.Storage.Mounts == nil {
		t.Error("the recorded host has no instances or mounts: the test shows nothing")
	}

	defer func() {
		if p := recover(); p == nil || !strings.Contains(p.(string), `"nosuch"`) {
			t.Errorf("unknown domain: panic %v", p)
		}
	}()
	facts.GatherHost(context.Background(), h, facts.Options{}, facts.DomainMemory, "nosuch")
}

func TestOnlineCPUs(t *testing.T) {
	for in, want := range map[string]int{"0-3": 4, "0": 1, "0-1,4,6-7": 5, "x": 0, "3-1": 0, "": 0, "0-": 0} {
		s := facts.System{CPUsOnline: host.Reading{Value: in}}
		if got := s.OnlineCPUs(); got != want {
			t.Errorf("OnlineCPUs(%q) = %d, want %d", in, got, want)
		}
	}
	if n := (facts.System{CPUsOnline: host.Missing("/sys/devices/system/cpu/online", "not present")}).OnlineCPUs(); n != 0 {
		t.Errorf("unreadable list: %d CPUs", n)
	}
}

// BenchmarkGatherHost times, on the machine running it (read-only), the
// domains an experiment gathers, and those a trial fingerprint would need
// (memory, system) were knob to take them from facts: compare with knob's
// BenchmarkFingerprint/live.
func BenchmarkGatherHost(b *testing.B) {
	for _, c := range []struct {
		name    string
		domains []string
	}{
		{"experiment", []string{facts.DomainMemory, facts.DomainSysctl, facts.DomainSystem}},
		{"memory+system", []string{facts.DomainMemory, facts.DomainSystem}},
	} {
		b.Run(c.name, func(b *testing.B) {
			h, err := host.Open("/")
			if err != nil {
				b.Fatal(err)
			}
			for b.Loop() {
				facts.GatherHost(context.Background(), h, facts.Options{Sysctls: []string{"vm.dirty_bytes", "vm.dirty_background_bytes"}}, c.domains...)
			}
		})
	}
}
