// Package plan decides the fixes of one run together, from one model of the
// host after the plan.
//
// Model (model.go) is that model: it takes the observed facts and the fixes
// of a plan and returns a copy of the facts with every planned value where
// the checks read it: kernel parameters at runtime and in the next boot's
// sysctl.d order, the huge page pools and the commit limit the kernel
// derives from them, /sys knobs and their boot settings, block queue
// attributes, mount options, kernel command line arguments, process limits
// and unit settings, and the database settings, with the servers whose
// changed settings need a restart taken as restarted (PostgreSQL's shared
// memory mapped again, from the planned pool or not at all). What it cannot
// model is named in its notes, never dropped silently.
//
// Judging the planned host is then check.Run on the model: a check a fix
// was meant to repair that still fails there, or one that passed and fails
// there, shows what the plan would break before anything is written.
package plan
