package postgres

import (
	"strconv"
	"strings"

	"github.com/dbhost/dbhost/internal/engine"
)

// baseUnit is the unit PostgreSQL assumes for a memory setting written
// without one (shared_buffers = 16384 means 16384 blocks of 8 kB).
var baseUnit = map[string]string{
	"shared_buffers": "8kB", "effective_cache_size": "8kB", "wal_buffers": "8kB", "temp_buffers": "8kB",
	"work_mem": "kB", "maintenance_work_mem": "kB", "autovacuum_work_mem": "kB", "logical_decoding_work_mem": "kB",
	"huge_page_size": "kB", "max_wal_size": "MB", "min_wal_size": "MB", "wal_keep_size": "MB",
	"shared_memory_size": "MB", "max_stack_depth": "kB", "hash_mem_multiplier": "",
}

var unitBytes = map[string]uint64{
	"B": 1, "kB": 1 << 10, "MB": 1 << 20, "GB": 1 << 30, "TB": 1 << 40, "8kB": 8 << 10, "16MB": 16 << 20,
}

// Bytes returns a memory setting of an instance in bytes, whether it was
// read live (value in the setting's unit, e.g. "16384" with unit "8kB") or
// from a file ("128MB", or a bare number in the setting's base unit).
func Bytes(in *engine.Instance, name string) (uint64, bool) {
	s, ok := in.Setting(name)
	if !ok {
		return 0, false
	}
	return SettingBytes(name, s)
}

// SettingBytes converts one setting to bytes. -1 (disabled) is not a size.
func SettingBytes(name string, s engine.Setting) (uint64, bool) {
	v := strings.Trim(strings.TrimSpace(s.Value), `'"`)
	unit := s.Unit
	num := v
	for _, u := range []string{"kB", "MB", "GB", "TB", "B"} {
		if strings.HasSuffix(v, u) {
			num, unit = strings.TrimSpace(strings.TrimSuffix(v, u)), u
			break
		}
	}
	if unit == "" {
		unit = baseUnit[engine.NormalizeName(name)]
	}
	mult, ok := unitBytes[unit]
	if !ok {
		return 0, false
	}
	n, err := strconv.ParseFloat(num, 64)
	if err != nil || n < 0 {
		return 0, false
	}
	return uint64(n * float64(mult)), true
}
