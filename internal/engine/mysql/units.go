package mysql

import (
	"strconv"
	"strings"

	"github.com/dbhost/dbhost/internal/engine"
)

// Bytes returns a size setting of an instance in bytes. Live values are
// plain byte counts; file values may carry K, M, G, T suffixes (MySQL's
// option syntax, case-insensitive).
func Bytes(in *engine.Instance, name string) (uint64, bool) {
	s, ok := in.Setting(name)
	if !ok {
		return 0, false
	}
	return ParseSize(s.Value)
}

// ParseSize parses "134217728", "128M", "1G", "512k".
func ParseSize(v string) (uint64, bool) {
	v = strings.Trim(strings.TrimSpace(v), `'"`)
	if v == "" {
		return 0, false
	}
	mult := uint64(1)
	switch v[len(v)-1] {
	case 'k', 'K':
		mult = 1 << 10
	case 'm', 'M':
		mult = 1 << 20
	case 'g', 'G':
		mult = 1 << 30
	case 't', 'T':
		mult = 1 << 40
	}
	if mult > 1 {
		v = v[:len(v)-1]
	}
	n, err := strconv.ParseUint(v, 10, 64)
	if err != nil {
		return 0, false
	}
	return n * mult, true
}
