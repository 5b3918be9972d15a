package cli

import (
	"context"
	"errors"
	"io/fs"

	"github.com/dbhost/dbhost/internal/facts"
	"github.com/dbhost/dbhost/internal/results"
)

// findingExperiments reads, from the results database at path, the last
// verdict of an experiment on each check's finding on the audited host
// (by hostname), for the audit to show next to the finding. It opens the
// database read-only, asks one query and never fails the audit: without a
// database there is nothing to show, and a database it cannot read is a
// note.
func findingExperiments(ctx context.Context, path string, f *facts.Facts) map[string]results.FindingVerdict {
	if path == "" || f.System.Hostname == "" {
		return nil
	}
	st, err := results.OpenReadOnly(path)
	switch {
	case errors.Is(err, results.ErrNoDatabase), errors.Is(err, fs.ErrPermission):
		return nil // no experiment yet, or not ours to read (not root)
	case err != nil:
		f.Notes = append(f.Notes, "experiment results not shown: "+err.Error())
		return nil
	}
	defer st.Close()
	v, err := st.LastFindingVerdicts(ctx, f.System.Hostname)
	if err != nil {
		f.Notes = append(f.Notes, "experiment results not shown: "+err.Error())
		return nil
	}
	return v
}
