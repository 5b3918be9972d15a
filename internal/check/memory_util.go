package check

import (
	"fmt"
	"math"
	"strconv"
	"strings"

	"github.com/dbhost/dbhost/internal/facts"
	"github.com/dbhost/dbhost/internal/fix"
	"github.com/dbhost/dbhost/internal/host"
)

// Helpers shared by the memory and NUMA checks.

const (
	bKiB = uint64(1) << 10
	bMiB = uint64(1) << 20
	bGiB = uint64(1) << 30
)

// memTotal returns RAM in bytes with its evidence, or why it is unknown.
func memTotal(f *facts.Facts) (uint64, Evidence, string) {
	ram, ok := f.Memory.MemTotal()
	if !ok {
		return 0, Ev("MemTotal", "unreadable: "+memOr(f.Memory.MeminfoErr, "no MemTotal line"), "/proc/meminfo"), "cannot read MemTotal: " + memOr(f.Memory.MeminfoErr, "no MemTotal line in /proc/meminfo")
	}
	return ram, Ev("MemTotal", humanBytes(ram), "/proc/meminfo"), ""
}

// meminfoKB returns a /proc/meminfo field in bytes.
func meminfoBytes(v *uint64) (uint64, bool) {
	if v == nil {
		return 0, false
	}
	return *v << 10, true
}

// memSysctlCount reads a non-negative integer kernel parameter with its
// evidence, or says why it has none (unreadable, empty, not a number,
// negative).
func memSysctlCount(f *facts.Facts, name string) (int64, Evidence, string) {
	r := f.SysctlReading(name)
	v, why := r.Count()
	return v, EvReading(name, r), why
}

// memSysctlUint reads an unsigned kernel parameter (shmmax is beyond int64).
func memSysctlUint(f *facts.Facts, name string) (uint64, Evidence, bool) {
	r := f.SysctlReading(name)
	ev := EvReading(name, r)
	if !r.OK() || len(r.Fields()) == 0 {
		return 0, ev, false
	}
	v, err := strconv.ParseUint(r.Fields()[0], 10, 64)
	return v, ev, err == nil
}

func memOr(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

// memInstDesc names an instance for reasons: "PostgreSQL 15.6 (postgres:5432, PID 812)".
func memInstDesc(in *facts.Instance) string {
	name := in.Flavor
	if name == "" {
		name = string(in.Engine)
	}
	if in.Version != "" {
		name += " " + in.Version
	}
	return fmt.Sprintf("%s (%s, PID %d)", name, in.Name(), in.PID)
}

// memSettingEv is the evidence for an instance setting, or its absence.
func memSettingEv(in *facts.Instance, name, def string) (string, Evidence) {
	if s, ok := in.Setting(name); ok {
		return s.Value, Ev(name, s.Value, memOr(s.Source, in.SettingsSource))
	}
	return def, Ev(name, def+" (default)", "not set; "+string(in.Engine)+" default")
}

// memOnOff normalises boolean setting values ("ON", "1", "true", "yes").
func memOnOff(v string) (bool, bool) {
	switch strings.ToLower(strings.Trim(strings.TrimSpace(v), `'"`)) {
	case "on", "1", "true", "yes", "force":
		return true, true
	case "off", "0", "false", "no":
		return false, true
	}
	return false, false
}

// memCeilDiv divides rounding up.
func memCeilDiv(a, b uint64) uint64 {
	if b == 0 {
		return 0
	}
	return (a + b - 1) / b
}

// memPct is a as a percentage of b.
func memPct(a, b uint64) float64 {
	if b == 0 {
		return 0
	}
	return 100 * float64(a) / float64(b)
}

// memHostOnly marks kernel fixes that must be made on a container's host.
func memHostOnly(f *facts.Facts, fx *fix.Fix) *fix.Fix {
	fx.HostOnly = f.System.Container != ""
	return fx
}

// memReadingErr returns the reason a reading failed, as text.
func memReadingErr(r host.Reading) string { return memOr(r.Err, "no value") }

// memNotPresent reports whether a reading failed because the file does not
// exist (a kernel without the feature), as opposed to being unreadable.
func memNotPresent(r host.Reading) bool { return strings.Contains(r.Err, "not present on this host") }

// memIsqrt is the integer square root.
func memIsqrt(n uint64) uint64 { return uint64(math.Sqrt(float64(n))) }

// memPoolName is "2 MiB" for a pool of 2048 kB.
func memPoolName(kb int) string { return memHumanSize(uint64(kb) << 10) }

// memHumanSize prints whole binary units without decimals where exact
// ("2 MiB", "1 GiB"), else humanBytes.
func memHumanSize(b uint64) string {
	for _, u := range []struct {
		n    uint64
		name string
	}{{bGiB, "GiB"}, {bMiB, "MiB"}, {bKiB, "KiB"}} {
		if b >= u.n && b%u.n == 0 {
			return fmt.Sprintf("%d %s", b/u.n, u.name)
		}
	}
	return humanBytes(b)
}
