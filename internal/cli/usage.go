package cli

import (
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// flagGroup is the annotation that puts a flag under a heading in the
// help (cobra has no flag groups of its own); flags without one are
// listed under "Flags".
const flagGroup = "dbhost_group"

// setGroup puts the named flags of fs under the heading group.
func setGroup(fs *pflag.FlagSet, group string, names ...string) {
	for _, n := range names {
		if err := fs.SetAnnotation(n, flagGroup, []string{group}); err != nil {
			panic(err) // a flag name misspelt here
		}
	}
}

// showHelp writes a command's description and usage.
func showHelp(c *cobra.Command, w io.Writer) {
	desc := c.Long
	if desc == "" {
		desc = c.Short
	}
	fmt.Fprintf(w, "%s\n\n", strings.TrimSpace(desc))
	writeUsage(w, c)
	if c.Example != "" {
		fmt.Fprintf(w, "\nExamples:\n%s\n", strings.TrimRight(c.Example, "\n"))
	}
}

// writeUsage writes how to call a command, its subcommands and its flags,
// grouped under their headings in the order the groups are first met.
func writeUsage(w io.Writer, c *cobra.Command) {
	fmt.Fprintf(w, "Usage: %s\n", c.UseLine())
	if c.HasAvailableSubCommands() {
		var subs []*cobra.Command
		width := 0
		for _, s := range c.Commands() {
			if s.IsAvailableCommand() || s.Name() == "help" {
				subs = append(subs, s)
				width = max(width, len(s.NameAndAliases()))
			}
		}
		fmt.Fprintln(w, "\nCommands:")
		for _, s := range subs {
			fmt.Fprintf(w, "  %-*s  %s\n", width, s.NameAndAliases(), s.Short)
		}
	}
	for _, g := range flagGroups(c) {
		fs := pflag.NewFlagSet(g.title, pflag.ContinueOnError)
		fs.SortFlags = false
		for _, f := range g.flags {
			fs.AddFlag(f)
		}
		fmt.Fprintf(w, "\n%s:\n%s", g.title, fs.FlagUsages())
	}
	if c.HasAvailableSubCommands() {
		fmt.Fprintf(w, "\nRun 'dbhost help %s' for a command's flags.\n", strings.TrimPrefix(c.CommandPath()+" COMMAND", "dbhost "))
	}
}

// flagSection is a heading of the flags and the flags under it.
type flagSection struct {
	title string
	flags []*pflag.Flag
}

// flagGroups is a command's flags under their headings, in the order the
// headings are first met; the flags without one last, under "Flags" (or
// "Other flags" after headings).
func flagGroups(c *cobra.Command) []flagSection {
	var out []flagSection
	var other []*pflag.Flag
	at := map[string]int{}
	c.LocalFlags().VisitAll(func(f *pflag.Flag) {
		switch g := f.Annotations[flagGroup]; {
		case f.Hidden:
		case len(g) == 0:
			other = append(other, f)
		default:
			i, ok := at[g[0]]
			if !ok {
				i = len(out)
				at[g[0]] = i
				out = append(out, flagSection{title: g[0]})
			}
			out[i].flags = append(out[i].flags, f)
		}
	})
	switch {
	case len(other) == 0:
	case len(out) == 0:
		out = append(out, flagSection{"Flags", other})
	default:
		out = append(out, flagSection{"Other flags", other})
	}
	return out
}
