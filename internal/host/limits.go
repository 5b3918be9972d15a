package host

import (
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"

	"github.com/dbhost/dbhost/internal/textio"
)

// Unlimited is the value of an rlimit reported as "unlimited".
const Unlimited = math.MaxUint64

// Rlimit is one soft/hard pair of /proc/PID/limits.
type Rlimit struct {
	Soft uint64 `json:"soft"`
	Hard uint64 `json:"hard"`
	Unit string `json:"unit,omitempty"`
}

// Limits maps the kernel's limit names ("Max open files") to their values.
// procfs only exposes soft limits; the hard ones matter because a service can
// raise its soft limit up to the hard one by itself (MySQL does).
type Limits map[string]Rlimit

// Well-known names in /proc/PID/limits.
const (
	LimitNofile  = "Max open files"
	LimitNproc   = "Max processes"
	LimitMemlock = "Max locked memory"
	LimitCore    = "Max core file size"
	LimitAS      = "Max address space"
)

var limitsSep = textio.LazyRegexp(`\s{2,}`)

// ParseLimits parses the text of /proc/PID/limits.
func ParseLimits(b []byte) (Limits, error) {
	lines := strings.Split(string(b), "\n")
	if len(lines) == 0 || !strings.HasPrefix(lines[0], "Limit") {
		return nil, errors.New("limits: missing header line")
	}
	out := Limits{}
	for i, ln := range lines[1:] {
		if strings.TrimSpace(ln) == "" {
			continue
		}
		f := limitsSep.Split(strings.TrimSpace(ln), -1)
		if len(f) < 3 {
			return nil, fmt.Errorf("limits: line %d: want name, soft and hard: %q", i+2, ln)
		}
		soft, err := parseRlimit(f[1])
		if err != nil {
			return nil, fmt.Errorf("limits: line %d: %w", i+2, err)
		}
		hard, err := parseRlimit(f[2])
		if err != nil {
			return nil, fmt.Errorf("limits: line %d: %w", i+2, err)
		}
		r := Rlimit{Soft: soft, Hard: hard}
		if len(f) > 3 {
			r.Unit = f[3]
		}
		out[f[0]] = r
	}
	return out, nil
}

func parseRlimit(s string) (uint64, error) {
	if s == "unlimited" {
		return Unlimited, nil
	}
	v, err := strconv.ParseUint(s, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("bad limit value %q", s)
	}
	return v, nil
}

// Limits reads /proc/PID/limits, soft and hard.
func (h *Host) Limits(pid int) (Limits, error) {
	b, err := h.plain().ReadFile(procPath(pid, "limits"))
	if err != nil {
		return nil, err
	}
	return ParseLimits(b)
}

// FormatLimit prints a limit value the way the kernel does.
func FormatLimit(v uint64) string {
	if v == Unlimited {
		return "unlimited"
	}
	return strconv.FormatUint(v, 10)
}
