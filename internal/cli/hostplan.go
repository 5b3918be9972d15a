package cli

import (
	"fmt"
	"io"

	"github.com/dbhost/dbhost/internal/plan"
	"github.com/dbhost/dbhost/internal/termsafe"
)

// hostPlanNotes are the lines a host plan adds to what `fix` shows: the
// settings left out for a conflict, what only a reboot or a person
// completes, what the model could not show, and why a plan is refused.
func hostPlanNotes(hp *plan.HostPlan) []string {
	var out []string
	for _, r := range hp.Refusals {
		out = append(out, "REFUSED: "+termsafe.Line(r.String()))
	}
	for _, c := range hp.Conflicts {
		out = append(out, "Conflict: "+termsafe.Line(c.String()))
	}
	for _, u := range hp.Unsettled {
		out = append(out, "Not yet passing after the plan: "+termsafe.Line(u))
	}
	for _, d := range hp.Dropped {
		out = append(out, "Not planned: "+termsafe.Line(d))
	}
	for _, n := range hp.Notes {
		out = append(out, "Not judged on the planned host: "+termsafe.Line(n))
	}
	return out
}

// printHostPlan says how the plan was decided and whether it is safe.
func printHostPlan(w io.Writer, hp *plan.HostPlan) {
	switch {
	case hp.Refused():
		fmt.Fprintf(w, "REFUSED: the planned host, judged after %d rounds, fails %d checks; nothing will be changed:\n", hp.Rounds, len(hp.Refusals))
		for _, r := range hp.Refusals {
			fmt.Fprintf(w, "  - %s\n", termsafe.Line(r.String()))
		}
	case hp.Changes():
		fmt.Fprintf(w, "Host plan: %d fixes decided together (%d rounds); every check they fix passes on the planned host and no passing check fails.\n", len(hp.Items), hp.Rounds)
	}
	if len(hp.Conflicts) > 0 {
		fmt.Fprintln(w, "Settings wanted with different values:")
		for _, c := range hp.Conflicts {
			fmt.Fprintf(w, "  - %s\n", termsafe.Line(c.String()))
		}
	}
	for _, u := range hp.Unsettled {
		fmt.Fprintf(w, "  not yet passing after the plan: %s\n", termsafe.Line(u))
	}
	for _, d := range hp.Dropped {
		fmt.Fprintf(w, "  not planned: %s\n", termsafe.Line(d))
	}
	for _, n := range hp.Notes {
		fmt.Fprintf(w, "  not judged on the planned host: %s\n", termsafe.Line(n))
	}
}
