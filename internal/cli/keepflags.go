package cli

import (
	"fmt"
	"slices"

	"github.com/spf13/pflag"

	"github.com/dbhost/dbhost/internal/check"
)

// keepFlags are the user's answers to sysctl.drift: which side of a kernel
// parameter whose running value differs from the next boot's to keep.
type keepFlags struct{ running, file listFlag }

// register adds --keep-running and --keep-file (fix and audit, so that
// audit shows the findings fix acts on).
func (k *keepFlags) register(fs *pflag.FlagSet) {
	fs.Var(&k.running, "keep-running", "sysctl.drift: persist the running value of these kernel parameters (NAME[,NAME...])")
	fs.Var(&k.file, "keep-file", "sysctl.drift: set these kernel parameters back to the value the next boot sets, now, persisting nothing (NAME[,NAME...])")
}

// values checks the answers (for facts.Facts.SysctlKeep): a name given to
// both flags, or that is no kernel parameter dbhost compares, is an error.
func (k *keepFlags) values() (map[string]string, error) {
	if len(k.running)+len(k.file) == 0 {
		return nil, nil
	}
	known := check.Sysctls()
	keep := map[string]string{}
	for _, side := range []struct {
		how   string
		names listFlag
	}{{"running", k.running}, {"file", k.file}} {
		how := side.how
		for _, n := range side.names {
			if _, ok := slices.BinarySearch(known, n); !ok {
				return nil, fmt.Errorf("--keep-%s %s: not a kernel parameter dbhost compares (sysctl.drift names them, e.g. vm.swappiness)", how, n)
			}
			if other, dup := keep[n]; dup && other != how {
				return nil, fmt.Errorf("%s is given to both --keep-running and --keep-file: keep one side", n)
			}
			keep[n] = how
		}
	}
	return keep, nil
}
