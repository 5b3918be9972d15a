package cli

import (
	"strings"
	"testing"

	"github.com/dbhost/dbhost/internal/fixture"
)

// TestUnknownFormatOneMessage: every command that takes --format refuses an
// unknown one with the same message, naming what it has.
func TestUnknownFormatOneMessage(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"audit", "--from", fixture.Path("baseline"), "--format", "yaml"}, `unknown format "yaml" (want `},
		{[]string{"checks", "--format", "yaml"}, `unknown format "yaml" (want text, json or markdown)`},
		{[]string{"mem", "--format", "yaml"}, `unknown format "yaml" (want text or json)`},
		{[]string{"contention", "--format", "yaml"}, `unknown format "yaml" (want text or json)`},
		{[]string{"experiment", "--preset", "swappiness", "--format", "yaml"}, `unknown format "yaml" (want text, json or markdown)`},
	} {
		code, _, stderr := runCLI(t, c.args...)
		if code != ExitError || !strings.Contains(stderr, c.want) {
			t.Errorf("%s: exit %d, stderr %q; want %d and %q", strings.Join(c.args, " "), code, stderr, ExitError, c.want)
		}
	}
}
