// Package plan decides every fix of one run together: one value per
// setting, derived values computed from the planned ones, and the host as
// it would be after the plan judged by the same checks before anything
// changes.
package plan
