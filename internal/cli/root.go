package cli

import (
	"context"
	"fmt"
	"strings"

	"github.com/spf13/cobra"
)

// app is one run of dbhost: its streams and the exit status its command
// set. The command tree is built for each run (cheap, and nothing is
// shared between the runs of parallel tests).
type app struct {
	env  Env
	code int
}

// do adapts a command's body to cobra: the body returns the exit status.
func (a *app) do(body func(ctx context.Context, args []string) int) func(*cobra.Command, []string) {
	return func(c *cobra.Command, args []string) { a.code = body(c.Context(), args) }
}

// run runs dbhost's command line (without the program name) and returns
// the exit status. Flag and argument errors are exit 2 with the command
// named on stderr.
func run(ctx context.Context, env Env, args []string) int {
	if env.Version == "" {
		env.Version = devVersion
	}
	a := &app{env: env}
	return a.execute(ctx, a.rootFor(args), args)
}

// execute runs args on the tree root and returns the exit status.
func (a *app) execute(ctx context.Context, root *cobra.Command, args []string) int {
	env := a.env
	root.SetArgs(compatArgs(root, args))
	cmd, err := root.ExecuteContextC(ctx)
	if err != nil {
		path := root.Name()
		if cmd != nil {
			path = cmd.CommandPath()
		}
		fmt.Fprintf(env.Stderr, "%s: %v\nRun '%s --help' for usage.\n", path, err, path)
		return ExitError
	}
	return a.code
}

// root builds the whole command tree, with its flags' completions.
func (a *app) root() *cobra.Command { return a.tree(nil, true) }

// rootFor builds the command tree a run with args needs. Building every
// command's flags is most of a short command's start-up, so when args
// name a top-level command plainly (lazyCommand), the root holds that
// command alone: what it runs and prints does not depend on its siblings.
// Anything else (help, completion, man pages, an unknown command) gets
// the whole tree; the flags' completions only a shell's completion
// request (cobra's __complete) reads.
func (a *app) rootFor(args []string) *cobra.Command {
	return a.tree(lazyCommand(a, args), len(args) > 0 && strings.HasPrefix(args[0], cobra.ShellCompRequestCmd))
}

// tree builds the root with the one command build makes, or with every
// command when build is nil.
func (a *app) tree(build func() *cobra.Command, completions bool) *cobra.Command {
	root := &cobra.Command{
		Use:                   "dbhost COMMAND",
		Short:                 "makes Linux hosts run databases well",
		Long:                  "dbhost makes Linux hosts run databases well.",
		DisableFlagsInUseLine: true,
		SilenceErrors:         true,
		SilenceUsage:          true,
		CompletionOptions:     cobra.CompletionOptions{DisableDefaultCmd: true},
		Args:                  cobra.ArbitraryArgs,
	}
	version := root.Flags().Bool("version", false, "print the version")
	root.Example = `  sudo dbhost audit                 # this host and every database on it
  sudo dbhost collect -o db1.tar.gz # a snapshot, audited anywhere with --from
  dbhost fix --out ./fixes          # the files that fix the findings
  sudo dbhost serve                 # the Prometheus exporter
  dbhost help audit`
	setExits(root, map[int]string{
		ExitOK:          "Success.",
		ExitFindings:    "The command found what it looks for: failing findings (audit), warnings (contention), differences (diff), pending changes (fix --plan), unreadable snapshots (fleet report). Each command's page says.",
		ExitError:       "It could not run; also no command, or an unknown one.",
		ExitInterrupted: "An experiment was interrupted (the host was put back).",
	})
	root.Run = a.do(func(_ context.Context, args []string) int {
		switch {
		case *version:
			return runVersion(a.env)
		case len(args) == 0:
			showHelp(root, a.env.Stderr)
			return ExitError
		}
		fmt.Fprintf(a.env.Stderr, "dbhost: unknown command %q%s\n\n", args[0], suggest(root, args[0]))
		showHelp(root, a.env.Stderr)
		return ExitError
	})
	root.SetOut(a.env.Stdout)
	root.SetErr(a.env.Stderr)
	root.SetHelpFunc(func(c *cobra.Command, _ []string) { showHelp(c, c.OutOrStdout()) })
	root.SetUsageFunc(func(c *cobra.Command) error { writeUsage(c.ErrOrStderr(), c); return nil })
	root.SetHelpCommand(a.helpCmd(root))
	if build != nil {
		root.AddCommand(build())
		root.InitDefaultHelpCmd()
		return root
	}
	root.AddCommand(
		a.auditCmd(), a.collectCmd(), a.checksCmd(), a.fixCmd(), a.memCmd(), a.contentionCmd(),
		a.experimentCmd(), a.resultsCmd(), a.serveCmd(), a.diffCmd(), a.fleetCmd(),
		a.labCmd(),
		a.completionCmd(root), a.manCmd(root), a.versionCmd(),
		a.galeraCmd(),
	)
	root.InitDefaultHelpCmd() // now, so that compatArgs finds 'help'
	if completions {
		registerCompletions(root)
	}
	return root
}

// lazyCommands are the top-level commands a run may build alone. Not
// here: help, completion and man, which read the whole tree.
func lazyCommands(a *app) map[string]func() *cobra.Command {
	return map[string]func() *cobra.Command{
		"audit": a.auditCmd, "collect": a.collectCmd, "checks": a.checksCmd, "fix": a.fixCmd,
		"mem": a.memCmd, "contention": a.contentionCmd, "experiment": a.experimentCmd,
		"results": a.resultsCmd, "serve": a.serveCmd, "diff": a.diffCmd, "fleet": a.fleetCmd,
		"lab": a.labCmd, "version": a.versionCmd, "galera": a.galeraCmd,
	}
}

// lazyCommand returns the builder of the one command args run, or nil when
// the run needs the whole tree: no command, one not in lazyCommands
// (shell completion's __complete, an alias, a typo), or what may ask for
// help anywhere (-h, --help, -help, a flag cluster with h: help output
// and cobra's help flag are the whole tree's business).
func lazyCommand(a *app, args []string) func() *cobra.Command {
	if len(args) == 0 {
		return nil
	}
	for _, arg := range args {
		if strings.HasPrefix(arg, "-") && strings.Contains(arg, "h") {
			return nil
		}
	}
	return lazyCommands(a)[args[0]]
}

// newCmd is a command that takes no operands unless told otherwise.
func newCmd(use, short string) *cobra.Command {
	return &cobra.Command{Use: use, Short: short, Args: noArgs}
}

// noArgs refuses operands, as each command did before it had any.
func noArgs(_ *cobra.Command, args []string) error {
	if len(args) > 0 {
		return fmt.Errorf("unexpected argument %q", args[0])
	}
	return nil
}

// argCount wants between min and max operands, described by what.
func argCount(min, max int, what string) cobra.PositionalArgs {
	return func(_ *cobra.Command, args []string) error {
		if len(args) < min || len(args) > max {
			return fmt.Errorf("want %s", what)
		}
		return nil
	}
}

// suggest names the commands close to a mistyped one.
func suggest(c *cobra.Command, name string) string {
	c.SuggestionsMinimumDistance = 2 // cobra's default, which only its own error sets
	if s := c.SuggestionsFor(name); len(s) > 0 {
		return " (did you mean " + strings.Join(s, " or ") + "?)"
	}
	return ""
}

// groupCmd is a command that only holds subcommands: without one, or with
// an unknown one, it shows its usage on stderr and fails.
func (a *app) groupCmd(use, short, long string, subs ...*cobra.Command) *cobra.Command {
	c := &cobra.Command{Use: use, Short: short, Long: long, Args: cobra.ArbitraryArgs, DisableFlagsInUseLine: true}
	setExits(c, map[int]string{ExitError: "No subcommand, or an unknown one: the usage is shown. Each subcommand's page gives its own."})
	c.Run = a.do(func(_ context.Context, args []string) int {
		if len(args) > 0 {
			fmt.Fprintf(a.env.Stderr, "%s: unknown subcommand %q%s\n\n", c.CommandPath(), args[0], suggest(c, args[0]))
		}
		showHelp(c, a.env.Stderr)
		return ExitError
	})
	c.AddCommand(subs...)
	return c
}

// helpCmd is 'dbhost help [COMMAND...]': the command's help on stdout; an
// unknown command is an error.
func (a *app) helpCmd(root *cobra.Command) *cobra.Command {
	c := &cobra.Command{
		Use:   "help [COMMAND [SUBCOMMAND]]",
		Short: "show a command's usage and flags",
		Args:  cobra.ArbitraryArgs,
		ValidArgsFunction: func(_ *cobra.Command, args []string, toComplete string) ([]cobra.Completion, cobra.ShellCompDirective) {
			parent, rest, err := root.Find(args)
			if err != nil || len(rest) > 0 {
				return nil, cobra.ShellCompDirectiveNoFileComp
			}
			var names []cobra.Completion
			for _, s := range parent.Commands() {
				if s.IsAvailableCommand() && strings.HasPrefix(s.Name(), toComplete) {
					names = append(names, cobra.CompletionWithDesc(s.Name(), s.Short))
				}
			}
			return names, cobra.ShellCompDirectiveNoFileComp
		},
	}
	c.Run = a.do(func(_ context.Context, args []string) int {
		target, rest, err := root.Find(args)
		if err != nil || len(rest) > 0 {
			fmt.Fprintf(a.env.Stderr, "dbhost help: unknown command %q\n", strings.Join(args, " "))
			return ExitError
		}
		target.InitDefaultHelpFlag() // list -h among the flags, as 'CMD -h' does
		showHelp(target, a.env.Stdout)
		return ExitOK
	})
	return c
}

func (a *app) versionCmd() *cobra.Command {
	c := newCmd("version", "print the version")
	c.Example = `  dbhost version`
	c.Run = a.do(func(context.Context, []string) int { return runVersion(a.env) })
	return c
}

func runVersion(env Env) int {
	fmt.Fprintln(env.Stdout, "dbhost", env.Version)
	return ExitOK
}
