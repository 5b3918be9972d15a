package knob

import "github.com/dbhost/dbhost/internal/journal"

// Kinds are the undos of what an Applier journals besides kernel values;
// whoever opens or recovers an experiment's journal passes them in.
func Kinds() journal.Kinds {
	return journal.Kinds{
		KindPGAutoconf:      undoPGAutoconf,
		KindMySQLGlobal:     undoMySQLGlobal,
		KindMySQLOptionFile: undoMySQLOptionFile,
	}
}
