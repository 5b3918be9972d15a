package change

import "github.com/dbhost/dbhost/internal/journal"

// Kinds of version 1 journals (what earlier releases wrote) whose name
// differs from today's. Their undos are today's: the data did not change.
// A kernel value written with journal.Set (kind "", Path and Old) is put
// back by the journal itself. The file, db-setting and rlimit kinds kept
// their names; knob's kinds are in legacy_knob.go.
const legacyWorkDir = "experiment.workdir"

func legacyKinds(Config) journal.Kinds {
	return journal.Kinds{legacyWorkDir: undoWorkDir}
}
