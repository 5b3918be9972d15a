package check

import (
	"fmt"
	"strings"

	"github.com/dbhost/dbhost/internal/facts"
	"github.com/dbhost/dbhost/internal/fix"
)

// sysctlFix proposes kernel parameter values. In a container the fix belongs
// on the host: vm.* and most kernel.* parameters are not namespaced.
func sysctlFix(f *facts.Facts, summary string, kv ...string) *fix.Fix {
	fx := &fix.Fix{Summary: summary, HostOnly: f.System.Container != ""}
	for i := 0; i+1 < len(kv); i += 2 {
		fx.Sysctl = append(fx.Sysctl, fix.KV{Key: kv[i], Value: kv[i+1]})
	}
	return fx
}

// humanBytes prints a byte count in binary units.
func humanBytes(b uint64) string {
	const unit = 1024
	if b < unit {
		return fmt.Sprintf("%d B", b)
	}
	div, exp := uint64(unit), 0
	for n := b / unit; n >= unit; n /= unit {
		div *= unit
		exp++
	}
	return fmt.Sprintf("%.1f %ciB", float64(b)/float64(div), "KMGTPE"[exp])
}

// joinOr joins words as "a, b or c".
func joinOr(ws []string) string {
	switch len(ws) {
	case 0:
		return ""
	case 1:
		return ws[0]
	}
	return strings.Join(ws[:len(ws)-1], ", ") + " or " + ws[len(ws)-1]
}

// firstNonEmpty returns the first non-empty string, or "".
func firstNonEmpty(s ...string) string {
	for _, v := range s {
		if v != "" {
			return v
		}
	}
	return ""
}
