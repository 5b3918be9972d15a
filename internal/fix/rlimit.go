package fix

import (
	"fmt"
	"math"
	"strconv"
)

// Unlimited is an Rlimit value without a limit (RLIM_INFINITY).
const Unlimited = math.MaxUint64

// Rlimit sets one resource limit of a running process, as
// `prlimit --pid PID --ITEM=SOFT:HARD` does.
type Rlimit struct {
	PID  int    `json:"pid"`
	Item string `json:"item"` // nofile, nproc, memlock
	Soft uint64 `json:"soft"` // Unlimited for none
	Hard uint64 `json:"hard"`
}

// Command is the prlimit command line for people.
func (r Rlimit) Command() string {
	return fmt.Sprintf("prlimit --pid %d --%s=%s:%s", r.PID, r.Item, FormatRlimit(r.Soft), FormatRlimit(r.Hard))
}

// FormatRlimit prints a limit value as prlimit and /proc/PID/limits do.
func FormatRlimit(v uint64) string {
	if v == Unlimited {
		return "unlimited"
	}
	return strconv.FormatUint(v, 10)
}
