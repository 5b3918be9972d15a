package cli

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/spf13/pflag"

	"github.com/dbhost/dbhost/internal/budget"
	"github.com/dbhost/dbhost/internal/facts"
	"github.com/dbhost/dbhost/internal/host"
)

// defaultFile is the serve unit's environment file, which may hold
// DBHOST_BUDGET for commands run by hand too.
const defaultFile = "/etc/default/dbhost"

// budgetFlag is --budget: the user's memory shares of the databases.
type budgetFlag struct {
	spec string
	set  bool
}

func (b *budgetFlag) register(fs *pflag.FlagSet) {
	fs.Var(b, "budget", "memory shares of the databases, NAME=SIZE or NAME=PERCENT%, comma-separated (e.g. redis:6379=4GiB,postgres:5432=40%); default: DBHOST_BUDGET from the environment or "+defaultFile+" (docs/fix.md, \"The memory budget\")")
}

func (b *budgetFlag) String() string { return b.spec }
func (b *budgetFlag) Type() string   { return "shares" }
func (b *budgetFlag) Set(v string) error {
	if _, err := budget.Parse(v); err != nil {
		return err
	}
	b.spec, b.set = v, true
	return nil
}

// resolve returns the shares and where they come from: the flag, else
// DBHOST_BUDGET in the environment, else (for a live host) the variable in
// /etc/default/dbhost when only root can change that file.
func (b *budgetFlag) resolve(root string, live bool) (string, string, error) {
	if b.set {
		return b.spec, "--budget", nil
	}
	if v, ok := os.LookupEnv(budget.EnvVar); ok {
		return v, budget.EnvVar + " (environment)", nil
	}
	if !live {
		return "", "", nil
	}
	h, err := host.Open(root)
	if err != nil {
		return "", "", nil
	}
	defer h.Close()
	if _, err := h.Lstat(defaultFile); err != nil {
		return "", "", nil // no file: no shares
	}
	if err := h.CheckTrusted(defaultFile); err != nil {
		return "", "", fmt.Errorf("%s is not read for %s: %v", defaultFile, budget.EnvVar, err)
	}
	data, err := h.ReadFile(defaultFile)
	if err != nil {
		return "", "", err
	}
	v, _ := budget.FromEnvFile(string(data))
	return v, filepath.Clean(defaultFile), nil
}

// apply puts the shares on the facts; strict refuses shares that do not
// name the host's instances (the commands run by hand), otherwise
// mem.db_budget reports them.
func (b *budgetFlag) apply(f *facts.Facts, root string, live, strict bool) error {
	spec, source, err := b.resolve(root, live)
	if err != nil || spec == "" {
		return err
	}
	sh, err := budget.Parse(spec)
	if err != nil {
		return fmt.Errorf("%s: %w", source, err)
	}
	f.Budget = budget.Shares{Shares: sh, Source: source}
	if !strict {
		return nil
	}
	var names []string
	for _, in := range f.Instances {
		names = append(names, in.Name())
	}
	if _, err := budget.Match(sh, names); err != nil {
		return fmt.Errorf("%s: %w", source, err)
	}
	return nil
}
