package cli

import (
	"context"
	"fmt"

	"github.com/dbhost/dbhost/internal/galeralab"
)

// runGaleraProve is 'dbhost lab galera --prove': a stand-in until the
// proof is built.
func runGaleraProve(_ context.Context, a *app, _ galeralab.Config, _, _ string) int {
	fmt.Fprintln(a.env.Stderr, "dbhost lab galera --prove: not built")
	return ExitError
}
