package cli

import (
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// compatArgs keeps the command lines of dbhost before pflag working: the
// standard flag package took long flags after one dash (-from x,
// -format=json) and one-letter flags after two (--o x). It finds the
// command the leading words name, then rewrites such flags of that
// command to pflag's spelling: --from x, --format=json, -o x. It leaves
// alone what follows "--", flag values (--note -from, --top -1), operands
// and whatever is no flag of the command (a negative number, an error
// pflag reports).
func compatArgs(root *cobra.Command, args []string) []string {
	out := make([]string, 0, len(args)) // never nil: cobra would read os.Args
	c, i := root, 0
	if len(args) > 0 && strings.HasPrefix(args[0], cobra.ShellCompRequestCmd) {
		return append(out, args...) // shell completion: cobra's own protocol
	}
	for ; i < len(args); i++ {
		sub := subcommand(c, args[i])
		if sub == nil {
			break
		}
		c = sub
		out = append(out, args[i])
	}
	c.InitDefaultHelpFlag() // -help, as the flag package had
	fs := c.Flags()
	for ; i < len(args); i++ {
		a := args[i]
		switch {
		case a == "--":
			return append(out, args[i:]...)
		case len(a) < 2 || a[0] != '-':
			out = append(out, a) // an operand, or "-" for standard input
			continue
		}
		dashes := 1
		if a[1] == '-' {
			dashes = 2
		}
		name, _, hasValue := strings.Cut(a[dashes:], "=")
		var f *pflag.Flag
		switch {
		case len(name) > 1:
			if f = fs.Lookup(name); f != nil {
				a = "--" + a[dashes:]
			}
		case len(name) == 1 && dashes == 2:
			if f = fs.ShorthandLookup(name); f != nil {
				a = "-" + a[dashes:]
			}
		}
		out = append(out, a)
		if f == nil && dashes == 1 {
			f, hasValue = shorthandValue(fs, a[1:])
		}
		if f != nil && !hasValue && f.NoOptDefVal == "" && i+1 < len(args) {
			i++
			out = append(out, args[i]) // the flag's value, whatever it looks like
		}
	}
	return out
}

// subcommand is c's subcommand called name, or nil.
func subcommand(c *cobra.Command, name string) *cobra.Command {
	for _, s := range c.Commands() {
		if s.Name() == name || s.HasAlias(name) {
			return s
		}
	}
	return nil
}

// shorthandValue reads a cluster of one-letter flags (-vo FILE) as pflag
// does: it returns the flag that takes a value, and whether the value is
// in the cluster itself (-oFILE, -o=FILE); nil when none takes one.
func shorthandValue(fs *pflag.FlagSet, cluster string) (*pflag.Flag, bool) {
	for j := 0; j < len(cluster); j++ {
		f := fs.ShorthandLookup(cluster[j : j+1])
		if f == nil {
			return nil, false // not a flag: pflag says so
		}
		if f.NoOptDefVal == "" {
			return f, j+1 < len(cluster)
		}
	}
	return nil, false
}
