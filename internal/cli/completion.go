package cli

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/spf13/cobra"

	"github.com/dbhost/dbhost/internal/check"
	"github.com/dbhost/dbhost/internal/experiment"
	"github.com/dbhost/dbhost/internal/report"
	"github.com/dbhost/dbhost/internal/termsafe"
)

// completionCmd prints the shell completion script cobra generates from
// the command tree. The script is dbhost's own text: it is written raw.
func (a *app) completionCmd(root *cobra.Command) *cobra.Command {
	c := newCmd("completion bash|zsh|fish", "print the shell completion script")
	c.Example = `  dbhost completion bash > /etc/bash_completion.d/dbhost`
	c.Long = `Print the shell completion script for bash, zsh or fish. The Debian package installs
them; otherwise, for example:

  dbhost completion bash > /etc/bash_completion.d/dbhost
  dbhost completion zsh > "${fpath[1]}/_dbhost"
  dbhost completion fish > ~/.config/fish/completions/dbhost.fish`
	c.ValidArgs = []string{"bash", "zsh", "fish"}
	c.Args = argCount(1, 1, "one shell: bash, zsh or fish")
	c.Run = a.do(func(_ context.Context, args []string) int {
		w := termsafe.Raw(a.env.Stdout)
		var err error
		switch args[0] {
		case "bash":
			err = root.GenBashCompletionV2(w, true)
		case "zsh":
			err = root.GenZshCompletion(w)
		case "fish":
			err = root.GenFishCompletion(w, true)
		default:
			fmt.Fprintf(a.env.Stderr, "dbhost completion: unknown shell %q (want bash, zsh or fish)\n", args[0])
			return ExitError
		}
		if err != nil {
			fmt.Fprintln(a.env.Stderr, "dbhost completion:", err)
			return ExitError
		}
		return ExitOK
	})
	return c
}

// registerCompletions gives the built tree its value completions: check
// IDs and domains for the arguments of 'checks' and for --only, --skip and
// --finding, and each command's own --format values. They are attached
// here, per tree, so that nothing is shared between runs; the catalog is
// read only when a shell asks.
func registerCompletions(root *cobra.Command) {
	formats := formatNames()
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		fs := c.LocalNonPersistentFlags()
		for _, name := range []string{"only", "skip"} {
			if fs.Lookup(name) != nil {
				c.RegisterFlagCompletionFunc(name, completeCheckList(true))
			}
		}
		if fs.Lookup("finding") != nil {
			c.RegisterFlagCompletionFunc("finding", completeCheckList(false))
		}
		if fs.Lookup("preset") != nil && c.Name() == "experiment" {
			c.RegisterFlagCompletionFunc("preset", completeValues(experiment.PresetNames()))
		}
		if names, ok := formats[c.CommandPath()]; ok && fs.Lookup("format") != nil {
			c.RegisterFlagCompletionFunc("format", completeValues(names))
		}
		for _, s := range c.Commands() {
			walk(s)
		}
	}
	walk(root)
}

// completeValues completes one of a fixed set of values.
func completeValues(names []string) cobra.CompletionFunc {
	return func(_ *cobra.Command, _ []string, toComplete string) ([]cobra.Completion, cobra.ShellCompDirective) {
		var out []cobra.Completion
		for _, n := range names {
			if strings.HasPrefix(n, toComplete) {
				out = append(out, n)
			}
		}
		return out, cobra.ShellCompDirectiveNoFileComp
	}
}

// formatNames are the --format values of each command, by command path:
// the names of the set the command renders with.
func formatNames() map[string][]string {
	return map[string][]string{
		"dbhost audit":           report.AuditFormats.Names(),
		"dbhost checks":          catalogFormats.Names(),
		"dbhost mem":             memFormats.Names(),
		"dbhost fix":             fixFormats,
		"dbhost contention":      contentionFormats.Names(),
		"dbhost experiment":      summaryFormats.Names(),
		"dbhost diff":            diffFormats.Names(),
		"dbhost fleet report":    fleetFormats.Names(),
		"dbhost lab galera":      labProveFormats,
		"dbhost results list":    listFormats.Names(),
		"dbhost results show":    showFormats.Names(),
		"dbhost results compare": compareFormats.Names(),
		"dbhost results report":  reportFormats.Names(),

		"dbhost galera tolerance": galeraFormats.Names(),
	}
}

// completeCheckArgs completes the operands of 'dbhost checks': IDs and
// domains not given yet.
func completeCheckArgs(_ *cobra.Command, args []string, toComplete string) ([]cobra.Completion, cobra.ShellCompDirective) {
	return checkCompletions("", toComplete, args, true), cobra.ShellCompDirectiveNoFileComp
}

// completeCheckList completes a comma-separated list of check IDs (and,
// with domains, of prefixes such as mem or storage.zfs): the last element
// of what is typed, after the ones already listed.
func completeCheckList(domains bool) cobra.CompletionFunc {
	return func(_ *cobra.Command, _ []string, toComplete string) ([]cobra.Completion, cobra.ShellCompDirective) {
		head, last := "", toComplete
		if i := strings.LastIndexByte(toComplete, ','); i >= 0 {
			head, last = toComplete[:i+1], toComplete[i+1:]
		}
		return checkCompletions(head, last, strings.Split(head, ","), domains), cobra.ShellCompDirectiveNoFileComp | cobra.ShellCompDirectiveNoSpace
	}
}

// checkCompletions lists the IDs (and domains) that start with prefix and
// are not in given, each after head and with its title (or its size).
func checkCompletions(head, prefix string, given []string, domains bool) []cobra.Completion {
	var out []cobra.Completion
	count := map[string]int{}
	var order []string
	for _, c := range check.All() {
		if domains {
			parts := strings.Split(c.ID, ".")
			for i := 1; i < len(parts); i++ {
				d := strings.Join(parts[:i], ".")
				if count[d] == 0 {
					order = append(order, d)
				}
				count[d]++
			}
		}
		order = append(order, c.ID)
	}
	for _, name := range order {
		if !strings.HasPrefix(name, prefix) || slices.Contains(given, name) {
			continue
		}
		if n := count[name]; n > 0 {
			out = append(out, cobra.CompletionWithDesc(head+name, fmt.Sprintf("%d checks", n)))
		} else if c, ok := check.Lookup(name); ok {
			out = append(out, cobra.CompletionWithDesc(head+name, c.Title))
		}
	}
	return out
}
